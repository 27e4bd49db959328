// The shared-memory backend: ranks on one host share one segment holding a
// control block per rank, two staging slots per rank (double buffering, so a
// chunk's copy-in overlaps the peers' copy-out of the previous chunk), and a
// channel per ordered pair for send/recv.
//
// Every collective is a sequence of steps. A step uses the next slot parity,
// publishes (first step only) this rank's OpHeader, and ends at a barrier;
// after the first barrier every rank checks every header, so all ranks see
// the same mismatch and fail together without touching peers' data. Reusing
// a parity two steps later is safe because every rank has passed the barrier
// in between, which it reaches only after reading the older step's data.
#include <sched.h>
#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <thread>

#include "reduce.h"
#include "shm_segment.h"
#include "shm_sync.h"
#include "transport.h"

namespace braze::comm {
namespace {

constexpr int kMaxRanks = 64;
constexpr size_t kSmallAllReduce = 64 << 10;  // one-shot below this many bytes

struct alignas(64) RankControl {
  WaitWord arrive;  // barrier generation this rank reached
  int32_t pid = 0;
  std::atomic<uint32_t> aborted;  // set by Abort(): this rank takes part in nothing more
  OpHeader header[2];  // by parity of the op's first step
  uint64_t in_splits[2][kMaxRanks];
  uint64_t out_splits[2][kMaxRanks];
};

struct alignas(64) Channel {  // src -> dst
  WaitWord header_posted;  // sender: headers written
  WaitWord header_acked;   // receiver: headers checked
  WaitWord posted;         // sender: data chunks written
  WaitWord consumed;       // receiver: data chunks read
  OpHeader header;         // the sender's
  OpHeader reply;          // the receiver's, read by the sender on mismatch
  uint32_t verdict = 0;    // 0 ok, else BRAZE_MISMATCH
};

struct Layout {
  size_t slot_bytes, p2p_bytes, ranks_off, channels_off, slots_off, p2p_off, total;
  Layout(int world, size_t slot, size_t p2p) : slot_bytes(slot), p2p_bytes(p2p) {
    ranks_off = 64;
    channels_off = ranks_off + sizeof(RankControl) * world;
    slots_off = (channels_off + sizeof(Channel) * world * world + 4095) & ~size_t(4095);
    p2p_off = slots_off + slot_bytes * 2 * world;
    total = p2p_off + p2p_bytes * world * world;
  }
};

// A size from the environment; unset or unparsable means `fallback`.
size_t EnvBytes(const char* name, size_t fallback) {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long long n = strtoull(v, &end, 10);
  return *end == '\0' ? (size_t)n : fallback;
}

bool ProcessAlive(int pid) {
  if (pid <= 0) return true;  // not yet known
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A killed child stays a zombie until reaped; it is dead all the same.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  char state = line[close + 2];
  return state != 'Z' && state != 'X';
}

class ShmTransport final : public TransportBase {
 public:
  explicit ShmTransport(const TransportConfig& config) : cfg_(config) {}

  Status Init() {
    if (cfg_.world > kMaxRanks)
      return Error(BRAZE_INVALID_ARGUMENT, "shm backend supports at most " +
                                               std::to_string(kMaxRanks) + " ranks");
    unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    bool oversubscribed = (unsigned)cfg_.world > cpus;
    // Spin a few tens of microseconds (a peer that is running arrives well
    // within that), then yield: on a machine busy with other work the peer
    // may be waiting for this very core, and a long spin (it was ~0.7 ms)
    // made every small op cost that much under load.
    spin_iters_ = oversubscribed ? 64 : 2000;
    yield_us_ = (int64_t)EnvBytes("BRAZE_SHM_YIELD_US", 2000);
    std::string key = cfg_.prefix + "/shm/segment";
    if (cfg_.rank == 0) {
      // world^2 send/recv channels: shrink them for big groups (tmpfs only
      // backs the pages that are touched, but the segment must fit /dev/shm).
      size_t p2p_default = std::clamp<size_t>((size_t(32) << 20) / (cfg_.world * cfg_.world), 8 << 10, 256 << 10);
      Layout layout(cfg_.world, EnvBytes("BRAZE_SHM_SLOT_BYTES", 1 << 20),
                    EnvBytes("BRAZE_SHM_P2P_BYTES", p2p_default & ~size_t(4095)));
      if (layout.slot_bytes < 4096 * (size_t)cfg_.world || layout.p2p_bytes < 8192)
        return Error(BRAZE_INVALID_ARGUMENT, "BRAZE_SHM_SLOT_BYTES / BRAZE_SHM_P2P_BYTES too small");
      BRAZE_RETURN_IF_ERROR(segment_.Create("comm", layout.total));
      std::string meta = segment_.name() + " " + std::to_string(layout.slot_bytes) + " " +
                         std::to_string(layout.p2p_bytes);
      BRAZE_RETURN_IF_ERROR(cfg_.store->Set(key, meta));
      slot_bytes_ = layout.slot_bytes;
      p2p_bytes_ = layout.p2p_bytes;
    } else {
      std::string meta;
      Status s = cfg_.store->GetOrGiveUp(key, cfg_.SecondsLeft(), SetupGiveUp(cfg_), &meta);
      if (!s.ok()) {
        s.message = "shm backend: waiting for rank 0's segment: " + s.message;
        if (s.missing_ranks.empty()) s.missing_ranks = {0};  // else a peer's report names whom to blame
        return s;
      }
      char name[256];
      unsigned long long slot = 0, p2p = 0;
      if (sscanf(meta.c_str(), "%255s %llu %llu", name, &slot, &p2p) != 3)
        return Error(BRAZE_INTERNAL, "bad shm segment record '" + meta + "'");
      BRAZE_RETURN_IF_ERROR(segment_.Open(name));
      slot_bytes_ = slot;
      p2p_bytes_ = p2p;
    }
    Layout layout(cfg_.world, slot_bytes_, p2p_bytes_);
    if (segment_.size() < layout.total)
      return Error(BRAZE_INTERNAL, "shm segment smaller than its layout");
    ranks_ = reinterpret_cast<RankControl*>(segment_.data() + layout.ranks_off);
    channels_ = reinterpret_cast<Channel*>(segment_.data() + layout.channels_off);
    slots_ = segment_.data() + layout.slots_off;
    p2p_ = segment_.data() + layout.p2p_off;
    ranks_[cfg_.rank].pid = getpid();
    // Once every rank has mapped it, the name can go: nothing leaks on a crash.
    Status s = cfg_.store->Barrier(cfg_.prefix + "/shm/mapped", cfg_.rank, cfg_.world, cfg_.SecondsLeft(),
                                   SetupGiveUp(cfg_));
    segment_.Unlink();
    return s;
  }


  // The peers that wait for this rank learn at once (not at their timeout)
  // that it will not come: they poll the flag with its liveness.
  void Abort() override {
    TransportBase::Abort();
    if (ranks_) ranks_[cfg_.rank].aborted.store(1, std::memory_order_release);
  }

 private:
  Status RunBarrier(const OpContext& ctx) override { return Step(ctx, true, nullptr); }
  int n() const { return cfg_.world; }
  int me() const { return cfg_.rank; }
  char* Slot(int rank, int parity) { return slots_ + slot_bytes_ * (2 * rank + parity); }
  Channel& Chan(int src, int dst) { return channels_[src * n() + dst]; }
  char* P2pBuffer(int src, int dst) { return p2p_ + p2p_bytes_ * (src * n() + dst); }


  // Waits until ready(); `missing` lists who we wait for (for errors and the
  // watchdog), `word` is what they will publish.
  template <typename Ready>
  Status WaitFor(const OpContext& ctx, Ready ready, WaitWord& word,
                 const std::vector<int32_t>& missing) {
    for (unsigned i = 0; i < spin_iters_; ++i) {
      if (ready()) return Status::Ok();
      CpuRelax();
    }
    SetMissing(missing);
    auto last_liveness = Clock::now();
    // With more ranks than cores the rank we wait for may need this core:
    // yield it for a while before paying for a futex sleep and wake-up.
    const auto yield_until = Clock::now() + std::chrono::microseconds(yield_us_);
    while (Clock::now() < yield_until) {
      if (ready()) return Status::Ok();
      sched_yield();
    }
    for (;;) {
      uint32_t observed = word.value.load();
      if (ready()) return Status::Ok();
      if (aborted_.load()) return Aborted(ctx);
      auto now = Clock::now();
      if (now >= ctx.deadline)
        return Error(BRAZE_TIMEOUT,
                     ctx.label + " timed out after " + std::to_string(ctx.timeout) +
                         " s; ranks " + FormatRanks(missing) + " had not arrived",
                     missing);
      if (now - last_liveness > std::chrono::milliseconds(5)) {
        last_liveness = now;
        for (int32_t r : missing) {
          if (ranks_[r].aborted.load(std::memory_order_acquire))
            return Error(BRAZE_RANK_FAILED, ctx.label + ": rank " + std::to_string(r) + " aborted", {r});
          if (!ProcessAlive(ranks_[r].pid))
            return Error(BRAZE_RANK_FAILED,
                         ctx.label + ": rank " + std::to_string(r) + " (pid " +
                             std::to_string(ranks_[r].pid) + ") died",
                         {r});
        }
      }
      SleepOn(word, observed, 1000);
    }
  }

  Status Barrier(const OpContext& ctx) {
    uint32_t gen = ++barrier_gen_;
    Publish(ranks_[me()].arrive, gen);
    for (int j = 0; j < n(); ++j) {
      if (j == me()) continue;
      auto arrived = [&] { return Reached(ranks_[j].arrive.value.load(std::memory_order_acquire), gen); };
      if (arrived()) continue;
      std::vector<int32_t> missing;
      for (int k = 0; k < n(); ++k)
        if (k != me() && !Reached(ranks_[k].arrive.value.load(), gen)) missing.push_back(k);
      BRAZE_RETURN_IF_ERROR(WaitFor(ctx, arrived, ranks_[j].arrive, missing));
    }
    return Status::Ok();
  }

  // One step: `fill(slot)` writes this rank's part of the step into its slot,
  // then the barrier. The first step of an op also publishes and checks
  // headers (and all_to_all splits).
  template <typename Fill>
  Status Step(const OpContext& ctx, bool first, Fill fill, int* parity_out = nullptr) {
    int parity = use_++ & 1;
    if (parity_out) *parity_out = parity;
    fill(Slot(me(), parity));
    RankControl& mine = ranks_[me()];
    if (first) {
      mine.header[parity] = ctx.Header();
      if (ctx.desc.op == BRAZE_OP_ALL_TO_ALL) {
        std::copy(ctx.in_splits.begin(), ctx.in_splits.end(), mine.in_splits[parity]);
        std::copy(ctx.out_splits.begin(), ctx.out_splits.end(), mine.out_splits[parity]);
      }
    }
    BRAZE_RETURN_IF_ERROR(Barrier(ctx));
    if (!first) return Status::Ok();
    for (int j = 0; j < n(); ++j)
      if (j != me())
        BRAZE_RETURN_IF_ERROR(CheckHeader(ctx, mine.header[parity], ranks_[j].header[parity], me(), j));
    if (ctx.desc.op == BRAZE_OP_ALL_TO_ALL) {
      std::vector<std::vector<uint64_t>> ins(n()), outs(n());
      for (int j = 0; j < n(); ++j) {
        ins[j].assign(ranks_[j].in_splits[parity], ranks_[j].in_splits[parity] + n());
        outs[j].assign(ranks_[j].out_splits[parity], ranks_[j].out_splits[parity] + n());
      }
      BRAZE_RETURN_IF_ERROR(CheckSplits(ctx, ins, outs));
    }
    return Status::Ok();
  }
  Status Step(const OpContext& ctx, bool first, std::nullptr_t) {
    return Step(ctx, first, [](char*) {});
  }

  void FinishAvg(const OpContext& ctx, void* data, size_t count) {
    if (ctx.desc.reduce_op == BRAZE_REDUCE_AVG) FinishAverage(data, count, ctx.desc.dtype, n());
  }

  Status AllReduce(const OpContext& ctx) override {
    const size_t esz = ctx.ElementSize(), count = ctx.desc.in_count;
    const char* in = static_cast<const char*>(ctx.desc.in);
    char* out = static_cast<char*>(ctx.desc.out);
    std::vector<const void*> srcs(n());
    if (count * esz <= std::min(kSmallAllReduce, slot_bytes_)) {
      // One step: everyone reduces the whole (small) vector itself.
      int p;
      BRAZE_RETURN_IF_ERROR(Step(ctx, true, [&](char* slot) { memcpy(slot, in, count * esz); }, &p));
      srcs[0] = Slot(me(), p);
      for (int j = 0, k = 1; j < n(); ++j)
        if (j != me()) srcs[k++] = Slot(j, p);
      ReduceInto(out, srcs.data(), n(), count, ctx.desc.dtype, ctx.desc.reduce_op);
      FinishAvg(ctx, out, count);
      return Status::Ok();
    }
    // Chunked: each rank reduces its segment of the chunk in its own slot,
    // then everyone copies every segment out.
    const size_t chunk = slot_bytes_ / esz;
    for (size_t off = 0; off < count; off += chunk) {
      size_t c = std::min(chunk, count - off);
      size_t seg = ((c + n() - 1) / n() + 15) & ~size_t(15);
      int p;
      BRAZE_RETURN_IF_ERROR(Step(ctx, off == 0, [&](char* slot) { memcpy(slot, in + off * esz, c * esz); }, &p));
      size_t a = std::min(c, seg * me()), b = std::min(c, a + seg);
      if (b > a) {
        srcs[0] = Slot(me(), p) + a * esz;
        for (int j = 0, k = 1; j < n(); ++j)
          if (j != me()) srcs[k++] = Slot(j, p) + a * esz;
        ReduceInto(Slot(me(), p) + a * esz, srcs.data(), n(), b - a, ctx.desc.dtype, ctx.desc.reduce_op);
        FinishAvg(ctx, Slot(me(), p) + a * esz, b - a);
      }
      BRAZE_RETURN_IF_ERROR(Barrier(ctx));
      for (int j = 0; j < n(); ++j) {
        size_t ja = std::min(c, seg * j), jb = std::min(c, ja + seg);
        if (jb > ja) memcpy(out + (off + ja) * esz, Slot(j, p) + ja * esz, (jb - ja) * esz);
      }
    }
    return Status::Ok();
  }

  Status AllGather(const OpContext& ctx) override {
    const size_t esz = ctx.ElementSize(), m = ctx.desc.in_count, chunk = slot_bytes_ / esz;
    const char* in = static_cast<const char*>(ctx.desc.in);
    char* out = static_cast<char*>(ctx.desc.out);
    size_t off = 0;
    do {
      size_t c = std::min(chunk, m - off);
      int p;
      BRAZE_RETURN_IF_ERROR(Step(ctx, off == 0, [&](char* slot) { memcpy(slot, in + off * esz, c * esz); }, &p));
      for (int j = 0; j < n(); ++j) memcpy(out + (j * m + off) * esz, Slot(j, p), c * esz);
      off += c;
    } while (off < m);
    return Status::Ok();
  }

  Status ReduceScatter(const OpContext& ctx) override {
    const size_t esz = ctx.ElementSize(), m = ctx.desc.out_count;
    const size_t sub = slot_bytes_ / esz / n();
    const char* in = static_cast<const char*>(ctx.desc.in);
    char* out = static_cast<char*>(ctx.desc.out);
    std::vector<const void*> srcs(n());
    size_t off = 0;
    do {
      size_t c = std::min(sub, m - off);
      int p;
      auto fill = [&](char* slot) {
        for (int j = 0; j < n(); ++j) memcpy(slot + j * sub * esz, in + (j * m + off) * esz, c * esz);
      };
      BRAZE_RETURN_IF_ERROR(Step(ctx, off == 0, fill, &p));
      srcs[0] = Slot(me(), p) + me() * sub * esz;
      for (int j = 0, k = 1; j < n(); ++j)
        if (j != me()) srcs[k++] = Slot(j, p) + me() * sub * esz;
      ReduceInto(out + off * esz, srcs.data(), n(), c, ctx.desc.dtype, ctx.desc.reduce_op);
      FinishAvg(ctx, out + off * esz, c);
      off += c;
    } while (off < m);
    return Status::Ok();
  }

  Status Broadcast(const OpContext& ctx) override {
    const size_t esz = ctx.ElementSize(), count = ctx.desc.in_count, chunk = slot_bytes_ / esz;
    const int root = ctx.desc.peer;
    const char* in = static_cast<const char*>(ctx.desc.in);
    char* out = static_cast<char*>(ctx.desc.out);
    size_t off = 0;
    do {
      size_t c = std::min(chunk, count - off);
      int p;
      auto fill = [&](char* slot) {
        if (me() == root) memcpy(slot, in + off * esz, c * esz);
      };
      BRAZE_RETURN_IF_ERROR(Step(ctx, off == 0, fill, &p));
      if (out + off * esz != Slot(root, p) && !(me() == root && in == out))
        memcpy(out + off * esz, Slot(root, p), c * esz);
      off += c;
    } while (off < count);
    return Status::Ok();
  }

  Status AllToAll(const OpContext& ctx) override {
    const size_t esz = ctx.ElementSize();
    const size_t sub = (slot_bytes_ / n()) & ~size_t(63);
    const char* in = static_cast<const char*>(ctx.desc.in);
    char* out = static_cast<char*>(ctx.desc.out);
    std::vector<size_t> in_off(n() + 1, 0), out_off(n() + 1, 0);
    for (int j = 0; j < n(); ++j) {
      in_off[j + 1] = in_off[j] + ctx.in_splits[j] * esz;
      out_off[j + 1] = out_off[j] + ctx.out_splits[j] * esz;
    }
    size_t rounds = 1;
    for (size_t r = 0; r < rounds; ++r) {
      auto fill = [&](char* slot) {
        for (int j = 0; j < n(); ++j) {
          size_t bytes = ctx.in_splits[j] * esz, a = std::min(bytes, r * sub), b = std::min(bytes, a + sub);
          if (b > a) memcpy(slot + j * sub, in + in_off[j] + a, b - a);
        }
      };
      int p;
      BRAZE_RETURN_IF_ERROR(Step(ctx, r == 0, fill, &p));
      if (r == 0) {  // headers are checked: every rank computes the same count
        for (int i = 0; i < n(); ++i)
          for (int j = 0; j < n(); ++j)
            rounds = std::max<size_t>(rounds, (ranks_[i].in_splits[p][j] * esz + sub - 1) / sub);
      }
      for (int i = 0; i < n(); ++i) {
        size_t bytes = ctx.out_splits[i] * esz, a = std::min(bytes, r * sub), b = std::min(bytes, a + sub);
        if (b > a) memcpy(out + out_off[i] + a, Slot(i, p) + me() * sub, b - a);
      }
    }
    return Status::Ok();
  }

  Status Send(const OpContext& ctx) override {
    const int dst = ctx.desc.peer;
    Channel& ch = Chan(me(), dst);
    ch.header = ctx.Header();
    uint32_t ticket = ch.header_posted.value.load() + 1;
    Publish(ch.header_posted, ticket);
    BRAZE_RETURN_IF_ERROR(WaitFor(
        ctx, [&] { return Reached(ch.header_acked.value.load(std::memory_order_acquire), ticket); },
        ch.header_acked, {dst}));
    if (ch.verdict != 0) return CheckHeader(ctx, ch.header, ch.reply, me(), dst);
    const size_t half = p2p_bytes_ / 2, bytes = ctx.desc.in_count * ctx.ElementSize();
    const char* in = static_cast<const char*>(ctx.desc.in);
    char* buf = P2pBuffer(me(), dst);
    for (size_t off = 0; off < bytes; off += half) {
      uint32_t posted = ch.posted.value.load();
      BRAZE_RETURN_IF_ERROR(WaitFor(
          ctx, [&] { return posted - ch.consumed.value.load(std::memory_order_acquire) < 2; },
          ch.consumed, {dst}));
      memcpy(buf + (posted & 1) * half, in + off, std::min(half, bytes - off));
      Publish(ch.posted, posted + 1);
    }
    return Status::Ok();
  }

  Status Recv(const OpContext& ctx) override {
    const int src = ctx.desc.peer;
    Channel& ch = Chan(src, me());
    uint32_t ticket = ch.header_acked.value.load() + 1;
    BRAZE_RETURN_IF_ERROR(WaitFor(
        ctx, [&] { return Reached(ch.header_posted.value.load(std::memory_order_acquire), ticket); },
        ch.header_posted, {src}));
    OpHeader mine = ctx.Header();
    Status check = CheckHeader(ctx, mine, ch.header, me(), src);
    ch.reply = mine;
    ch.verdict = check.ok() ? 0 : BRAZE_MISMATCH;
    Publish(ch.header_acked, ticket);
    BRAZE_RETURN_IF_ERROR(check);
    const size_t half = p2p_bytes_ / 2, bytes = ctx.desc.out_count * ctx.ElementSize();
    char* out = static_cast<char*>(ctx.desc.out);
    const char* buf = P2pBuffer(src, me());
    for (size_t off = 0; off < bytes; off += half) {
      uint32_t consumed = ch.consumed.value.load();
      BRAZE_RETURN_IF_ERROR(WaitFor(
          ctx, [&] { return ch.posted.value.load(std::memory_order_acquire) != consumed; },
          ch.posted, {src}));
      memcpy(out + off, buf + (consumed & 1) * half, std::min(half, bytes - off));
      Publish(ch.consumed, consumed + 1);
    }
    return Status::Ok();
  }

  TransportConfig cfg_;
  ShmSegment segment_;
  RankControl* ranks_ = nullptr;
  Channel* channels_ = nullptr;
  char* slots_ = nullptr;
  char* p2p_ = nullptr;
  size_t slot_bytes_ = 0, p2p_bytes_ = 0;
  uint32_t barrier_gen_ = 0;
  uint64_t use_ = 0;
  unsigned spin_iters_ = 0;
  int64_t yield_us_ = 0;
};

}  // namespace

Status CreateShmTransport(const TransportConfig& config, std::unique_ptr<Transport>* out) {
  return MakeTransport<ShmTransport>(config, out);
}

}  // namespace braze::comm
