// The TCP backend: a full mesh of sockets bootstrapped through the store.
// Small all_reduce uses binomial trees (latency), large ones a ring
// (bandwidth); all_gather and reduce_scatter are rings, broadcast a binomial
// tree, all_to_all one concurrent exchange with every peer. Before any data
// moves every participant sends its OpHeader (with all_to_all splits) to
// every other, so all of them see a mismatch and fail together with the
// streams still in step.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "auth.h"
#include "reduce.h"
#include "transport.h"

namespace braze::comm {
namespace {

constexpr size_t kTreeAllReduceBytes = 64 << 10;

struct Io {
  int peer;
  bool send;
  char* buf;
  size_t n;
  size_t done = 0;
};

class TcpTransport final : public TransportBase {
 public:
  explicit TcpTransport(const TransportConfig& config) : cfg_(config), fds_(config.world, -1) {}
  ~TcpTransport() override {
    for (int& fd : fds_) CloseFd(fd);
    CloseFd(abort_fd_);
  }

  Status Init() {
    abort_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (abort_fd_ < 0) return SysError("eventfd");
    int listen_fd = -1, port = 0;
    std::string address = DataAddress(*cfg_.store);
    WarnIfExposed(address, cfg_.store->secret());
    BRAZE_RETURN_IF_ERROR(Listen(address, 0, &listen_fd, &port));
    Status s = Connect(listen_fd, address + ":" + std::to_string(port));
    CloseFd(listen_fd);
    BRAZE_RETURN_IF_ERROR(s);
    for (int j = 0; j < n(); ++j) {
      if (j == me()) continue;
      SetNonBlocking(fds_[j], true);
      int size = 4 << 20;
      setsockopt(fds_[j], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
      setsockopt(fds_[j], SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    }
    return Status::Ok();
  }

  void Abort() override {
    aborted_.store(true);
    uint64_t one = 1;
    (void)!write(abort_fd_, &one, 8);
    // The peers that wait for this rank see its connections end at once
    // (after the data already sent), not at their timeout.
    for (int fd : fds_)
      if (fd >= 0) shutdown(fd, SHUT_RDWR);
  }


 private:
  int n() const { return cfg_.world; }
  int me() const { return cfg_.rank; }
  int Right() const { return (me() + 1) % n(); }
  int Left() const { return (me() + n() - 1) % n(); }


  // Lower ranks accept, higher ranks connect. Every connection first passes
  // the secret handshake, then a hello carries the connector's rank.
  Status Connect(int listen_fd, const std::string& my_address) {
    auto deadline = cfg_.deadline;
    const std::string& secret = cfg_.store->secret();
    BRAZE_RETURN_IF_ERROR(cfg_.store->Set(cfg_.prefix + "/tcp/" + std::to_string(me()), my_address));
    for (int j = 0; j < me(); ++j) {
      Status s = ConnectTo(j, secret, deadline);
      if (!s.ok()) {
        if (s.missing_ranks.empty()) s.missing_ranks = {j};  // else a peer's report names whom to blame
        return s;
      }
    }
    for (int accepted = 0; accepted < n() - me() - 1;) {
      int fd = -1;
      Status s = InSlices(deadline, Store::kGiveUpPollSeconds,
                          [&](Clock::time_point until) { return Accept(listen_fd, until, &fd); },
                          SetupGiveUp(cfg_));
      if (!s.ok()) {
        s.message = "tcp backend: waiting for higher ranks to connect: " + s.message;
        if (s.missing_ranks.empty())  // else a peer's report names whom to blame
          for (int k = me() + 1; k < n(); ++k)
            if (fds_[k] < 0) s.missing_ranks.push_back(k);
        return s;
      }
      std::string why = AdmitPeer(fd, deadline);
      if (why.empty()) {
        ++accepted;
        continue;
      }
      ReportRejected("tcp backend (rank " + std::to_string(me()) + ")", PeerAddress(fd), why);
      close(fd);  // a stranger or a stale connection: keep waiting for the real peers
    }
    return Status::Ok();
  }

  // Connects to lower rank j: its address from the store, the handshake, the hello.
  Status ConnectTo(int j, const std::string& secret, Clock::time_point deadline) {
    std::string addr;
    BRAZE_RETURN_IF_ERROR(
        cfg_.store->GetOrGiveUp(cfg_.prefix + "/tcp/" + std::to_string(j), cfg_.SecondsLeft(), SetupGiveUp(cfg_), &addr));
    size_t colon = addr.rfind(':');
    int64_t peer_port = 0;
    if (colon == std::string::npos || !ParseCounter(addr.substr(colon + 1), &peer_port) || peer_port <= 0 ||
        peer_port > 65535)
      return Error(BRAZE_INTERNAL, "tcp backend: bad address record '" + addr + "' for rank " + std::to_string(j));
    std::string peer = "rank " + std::to_string(j) + " at " + addr;
    BRAZE_RETURN_IF_ERROR(InSlices(deadline, Store::kGiveUpPollSeconds, [&](Clock::time_point until) {
      return braze::comm::Connect(addr.substr(0, colon), (int)peer_port, until, &fds_[j]);
    }, SetupGiveUp(cfg_)));
    BRAZE_RETURN_IF_ERROR(AuthenticateConnected(fds_[j], secret, deadline, peer));
    int32_t hello = me();
    return SendAll(fds_[j], &hello, 4, deadline);
  }

  // Authenticates an accepted connection and reads its hello; "" when it is
  // a higher rank not yet connected, else why it was refused.
  std::string AdmitPeer(int fd, Clock::time_point deadline) {
    auto handshake_deadline = std::min(deadline, DeadlineAfter(kHandshakeSeconds));
    Status s = AuthenticateAccepted(fd, cfg_.store->secret(), handshake_deadline, PeerAddress(fd));
    int32_t hello = -1;
    if (s.ok()) s = RecvAll(fd, &hello, 4, handshake_deadline);
    if (!s.ok()) return s.message;
    if (hello <= me() || hello >= n() || fds_[hello] >= 0)
      return "unexpected hello from rank " + std::to_string(hello);
    fds_[hello] = fd;
    return "";
  }

  // Drives every io to completion concurrently (so rings cannot deadlock on
  // full socket buffers), honouring abort, the deadline and peer failure.
  Status Exchange(const OpContext& ctx, std::vector<Io>& ios) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (;;) {
      fds.clear();
      which.clear();
      fds.push_back({abort_fd_, POLLIN, 0});
      for (size_t i = 0; i < ios.size(); ++i) {
        if (ios[i].done == ios[i].n) continue;
        fds.push_back({fds_[ios[i].peer], (short)(ios[i].send ? POLLOUT : POLLIN), 0});
        which.push_back(i);
      }
      if (which.empty()) return Status::Ok();
      if (aborted_.load()) return Aborted(ctx);
      if (Clock::now() >= ctx.deadline) {
        std::vector<int32_t> missing = Pending(ios);
        return Error(BRAZE_TIMEOUT, ctx.label + " timed out after " + std::to_string(ctx.timeout) +
                                        " s; ranks " + FormatRanks(missing) + " had not arrived",
                     missing);
      }
      SetMissing(Pending(ios));
      int rc = poll(fds.data(), fds.size(), std::min(MillisLeft(ctx.deadline) + 1, 100));
      if (rc < 0 && errno != EINTR) return SysError(ctx.label + ": poll");
      if (fds[0].revents) return Aborted(ctx);
      for (size_t k = 1; k < fds.size(); ++k) {
        if (!fds[k].revents) continue;
        Io& io = ios[which[k - 1]];
        ssize_t r = io.send ? send(fds[k].fd, io.buf + io.done, io.n - io.done, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : recv(fds[k].fd, io.buf + io.done, io.n - io.done, MSG_DONTWAIT);
        if (r > 0) {
          io.done += (size_t)r;
        } else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          return Error(BRAZE_RANK_FAILED, ctx.label + ": lost the connection to rank " +
                                              std::to_string(io.peer) + " (the rank died or aborted)",
                       {io.peer});
        }
      }
    }
  }

  std::vector<int32_t> Pending(const std::vector<Io>& ios) {
    std::vector<int32_t> out;
    for (auto& io : ios)
      if (io.done < io.n && std::find(out.begin(), out.end(), io.peer) == out.end()) out.push_back(io.peer);
    std::sort(out.begin(), out.end());
    return out;
  }

  Status SendRecv(const OpContext& ctx, int to, const void* sbuf, size_t sn, int from, void* rbuf, size_t rn) {
    std::vector<Io> ios;
    if (to >= 0) ios.push_back({to, true, (char*)sbuf, sn});
    if (from >= 0) ios.push_back({from, false, (char*)rbuf, rn});
    return Exchange(ctx, ios);
  }

  // Header (+ splits) to and from every participant.
  Status ExchangeHeaders(const OpContext& ctx) {
    const bool p2p = ctx.desc.op == BRAZE_OP_SEND || ctx.desc.op == BRAZE_OP_RECV;
    const size_t msg = sizeof(OpHeader) + 2 * n() * sizeof(uint64_t);
    std::vector<char> mine(msg, 0), theirs(msg * n(), 0);
    OpHeader h = ctx.Header();
    memcpy(mine.data(), &h, sizeof(h));
    if (ctx.desc.op == BRAZE_OP_ALL_TO_ALL) {
      memcpy(mine.data() + sizeof(h), ctx.in_splits.data(), n() * 8);
      memcpy(mine.data() + sizeof(h) + n() * 8, ctx.out_splits.data(), n() * 8);
    }
    std::vector<Io> ios;
    for (int j = 0; j < n(); ++j) {
      if (j == me() || (p2p && j != ctx.desc.peer)) continue;
      ios.push_back({j, true, mine.data(), msg});
      ios.push_back({j, false, theirs.data() + j * msg, msg});
    }
    BRAZE_RETURN_IF_ERROR(Exchange(ctx, ios));
    memcpy(theirs.data() + me() * msg, mine.data(), msg);
    for (auto& io : ios) {
      if (io.send) continue;
      OpHeader other;
      memcpy(&other, theirs.data() + io.peer * msg, sizeof(other));
      BRAZE_RETURN_IF_ERROR(CheckHeader(ctx, h, other, me(), io.peer));
    }
    if (ctx.desc.op != BRAZE_OP_ALL_TO_ALL) return Status::Ok();
    std::vector<std::vector<uint64_t>> ins(n(), std::vector<uint64_t>(n())), outs = ins;
    for (int j = 0; j < n(); ++j) {
      memcpy(ins[j].data(), theirs.data() + j * msg + sizeof(OpHeader), n() * 8);
      memcpy(outs[j].data(), theirs.data() + j * msg + sizeof(OpHeader) + n() * 8, n() * 8);
    }
    return CheckSplits(ctx, ins, outs);
  }

  void Reduce(const OpContext& ctx, char* dst, const char* other, size_t count) {
    const void* srcs[2] = {dst, other};
    ReduceInto(dst, srcs, 2, count, ctx.desc.dtype, ctx.desc.reduce_op);
  }

  // Block j of `buf` is [bounds[j], bounds[j+1]) elements. Afterwards block
  // `me` holds the reduction over all ranks.
  Status RingReduceScatter(const OpContext& ctx, char* buf, const std::vector<size_t>& bounds) {
    const size_t esz = ctx.ElementSize();
    size_t max_block = 0;
    for (int j = 0; j < n(); ++j) max_block = std::max(max_block, bounds[j + 1] - bounds[j]);
    tmp_.resize(max_block * esz);
    for (int s = 0; s < n() - 1; ++s) {
      int send_block = (me() - s - 1 + 2 * n()) % n(), recv_block = (me() - s - 2 + 2 * n()) % n();
      size_t rcount = bounds[recv_block + 1] - bounds[recv_block];
      BRAZE_RETURN_IF_ERROR(SendRecv(ctx, Right(), buf + bounds[send_block] * esz,
                                     (bounds[send_block + 1] - bounds[send_block]) * esz, Left(),
                                     tmp_.data(), rcount * esz));
      Reduce(ctx, buf + bounds[recv_block] * esz, tmp_.data(), rcount);
    }
    if (ctx.desc.reduce_op == BRAZE_REDUCE_AVG)
      FinishAverage(buf + bounds[me()] * esz, bounds[me() + 1] - bounds[me()], ctx.desc.dtype, n());
    return Status::Ok();
  }

  // Block `me` of `buf` is filled; afterwards every block is.
  Status RingAllGather(const OpContext& ctx, char* buf, const std::vector<size_t>& bounds) {
    const size_t esz = ctx.ElementSize();
    for (int s = 0; s < n() - 1; ++s) {
      int send_block = (me() - s + n()) % n(), recv_block = (me() - s - 1 + n()) % n();
      BRAZE_RETURN_IF_ERROR(SendRecv(ctx, Right(), buf + bounds[send_block] * esz,
                                     (bounds[send_block + 1] - bounds[send_block]) * esz, Left(),
                                     buf + bounds[recv_block] * esz,
                                     (bounds[recv_block + 1] - bounds[recv_block]) * esz));
    }
    return Status::Ok();
  }

  std::vector<size_t> EvenBounds(size_t count) {
    std::vector<size_t> bounds(n() + 1);
    size_t per = (count + n() - 1) / n();
    for (int j = 0; j <= n(); ++j) bounds[j] = std::min(count, per * j);
    return bounds;
  }

  Status AllReduce(const OpContext& ctx) override {
    BRAZE_RETURN_IF_ERROR(ExchangeHeaders(ctx));
    const size_t esz = ctx.ElementSize(), count = ctx.desc.in_count;
    char* out = static_cast<char*>(ctx.desc.out);
    if (ctx.desc.in != out) memcpy(out, ctx.desc.in, count * esz);
    if (count * esz > kTreeAllReduceBytes) {
      auto bounds = EvenBounds(count);
      BRAZE_RETURN_IF_ERROR(RingReduceScatter(ctx, out, bounds));
      return RingAllGather(ctx, out, bounds);
    }
    // Binomial reduce to rank 0, then binomial broadcast.
    tmp_.resize(count * esz);
    for (int mask = 1; mask < n(); mask <<= 1) {
      if (me() & mask) {
        BRAZE_RETURN_IF_ERROR(SendRecv(ctx, me() - mask, out, count * esz, -1, nullptr, 0));
        break;
      }
      if (me() + mask < n()) {
        BRAZE_RETURN_IF_ERROR(SendRecv(ctx, -1, nullptr, 0, me() + mask, tmp_.data(), count * esz));
        Reduce(ctx, out, tmp_.data(), count);
      }
    }
    if (me() == 0 && ctx.desc.reduce_op == BRAZE_REDUCE_AVG) FinishAverage(out, count, ctx.desc.dtype, n());
    return TreeBroadcast(ctx, 0, out, count * esz);
  }

  Status TreeBroadcast(const OpContext& ctx, int root, char* buf, size_t bytes) {
    int vr = (me() - root + n()) % n();
    int mask = 1;
    while (mask < n()) {
      if (vr & mask) {
        BRAZE_RETURN_IF_ERROR(SendRecv(ctx, -1, nullptr, 0, ((vr - mask) + root) % n(), buf, bytes));
        break;
      }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (vr + mask < n())
        BRAZE_RETURN_IF_ERROR(SendRecv(ctx, (vr + mask + root) % n(), buf, bytes, -1, nullptr, 0));
    return Status::Ok();
  }

  Status Broadcast(const OpContext& ctx) override {
    BRAZE_RETURN_IF_ERROR(ExchangeHeaders(ctx));
    size_t bytes = ctx.desc.in_count * ctx.ElementSize();
    char* out = static_cast<char*>(ctx.desc.out);
    if (me() == ctx.desc.peer && ctx.desc.in != out) memcpy(out, ctx.desc.in, bytes);
    return TreeBroadcast(ctx, ctx.desc.peer, out, bytes);
  }

  Status AllGather(const OpContext& ctx) override {
    BRAZE_RETURN_IF_ERROR(ExchangeHeaders(ctx));
    const size_t m = ctx.desc.in_count, esz = ctx.ElementSize();
    char* out = static_cast<char*>(ctx.desc.out);
    std::vector<size_t> bounds(n() + 1);
    for (int j = 0; j <= n(); ++j) bounds[j] = m * j;
    memcpy(out + m * me() * esz, ctx.desc.in, m * esz);
    return RingAllGather(ctx, out, bounds);
  }

  Status ReduceScatter(const OpContext& ctx) override {
    BRAZE_RETURN_IF_ERROR(ExchangeHeaders(ctx));
    const size_t m = ctx.desc.out_count, esz = ctx.ElementSize();
    work_.assign(static_cast<const char*>(ctx.desc.in), static_cast<const char*>(ctx.desc.in) + m * n() * esz);
    std::vector<size_t> bounds(n() + 1);
    for (int j = 0; j <= n(); ++j) bounds[j] = m * j;
    BRAZE_RETURN_IF_ERROR(RingReduceScatter(ctx, work_.data(), bounds));
    memcpy(ctx.desc.out, work_.data() + m * me() * esz, m * esz);
    return Status::Ok();
  }

  Status AllToAll(const OpContext& ctx) override {
    BRAZE_RETURN_IF_ERROR(ExchangeHeaders(ctx));
    const size_t esz = ctx.ElementSize();
    const char* in = static_cast<const char*>(ctx.desc.in);
    char* out = static_cast<char*>(ctx.desc.out);
    std::vector<Io> ios;
    size_t in_off = 0, out_off = 0;
    for (int j = 0; j < n(); ++j) {
      size_t sb = ctx.in_splits[j] * esz, rb = ctx.out_splits[j] * esz;
      if (j == me()) {
        memcpy(out + out_off, in + in_off, sb);
      } else {
        if (sb) ios.push_back({j, true, (char*)in + in_off, sb});
        if (rb) ios.push_back({j, false, out + out_off, rb});
      }
      in_off += sb;
      out_off += rb;
    }
    return Exchange(ctx, ios);
  }

  Status RunBarrier(const OpContext& ctx) override { return ExchangeHeaders(ctx); }
  Status Send(const OpContext& ctx) override { return PointToPoint(ctx); }
  Status Recv(const OpContext& ctx) override { return PointToPoint(ctx); }

  Status PointToPoint(const OpContext& ctx) {
    BRAZE_RETURN_IF_ERROR(ExchangeHeaders(ctx));
    size_t bytes = ctx.desc.in_count * ctx.ElementSize();
    if (ctx.desc.op == BRAZE_OP_SEND) return SendRecv(ctx, ctx.desc.peer, ctx.desc.in, bytes, -1, nullptr, 0);
    return SendRecv(ctx, -1, nullptr, 0, ctx.desc.peer, ctx.desc.out, bytes);
  }

  TransportConfig cfg_;
  std::vector<int> fds_;
  int abort_fd_ = -1;
  std::vector<char> tmp_, work_;
};

}  // namespace

Status CreateTcpTransport(const TransportConfig& config, std::unique_ptr<Transport>* out) {
  return MakeTransport<TcpTransport>(config, out);
}

}  // namespace braze::comm
