// One-sided windows. Every rank serves its window from a background thread,
// so put/get/signal complete without the target calling anything. Requests
// travel over loopback or LAN sockets whatever the collective backend is.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <map>

#include "auth.h"
#include "communicator.h"

namespace braze::comm {
namespace {

enum : uint8_t { kPut = 0, kGet = 1, kSignal = 2 };
struct Request {
  uint8_t type;
  int32_t from;
  uint64_t offset, nbytes;
};
constexpr double kRequestTimeout = 10.0;

}  // namespace

class Window {
 public:
  Status Init(Communicator& comm, void* base, uint64_t nbytes) {
    rank_ = comm.rank();
    base_ = static_cast<char*>(base);
    nbytes_ = nbytes;
    timeout_ = comm.timeout();
    signals_.assign(comm.world(), 0);
    consumed_.assign(comm.world(), 0);
    peers_.assign(comm.world(), Peer{});
    std::string key = comm.prefix() + "/win/" + std::to_string(comm.NextObjectId()) + "/";
    int port = 0;
    Store& store = comm.store();
    secret_ = store.secret();
    std::string address = DataAddress(store);
    WarnIfExposed(address, secret_);
    BRAZE_RETURN_IF_ERROR(Listen(address, 0, &listen_fd_, &port));
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    thread_ = std::thread([this] { Serve(); });
    BRAZE_RETURN_IF_ERROR(store.Set(key + std::to_string(rank_),
                                    address + " " + std::to_string(port) + " " + std::to_string(nbytes)));
    for (int j = 0; j < comm.world(); ++j) {
      std::string rec;
      BRAZE_RETURN_IF_ERROR(store.Get(key + std::to_string(j), timeout_, &rec));
      char host[128];
      unsigned long long size = 0;
      if (sscanf(rec.c_str(), "%127s %d %llu", host, &peers_[j].port, &size) != 3)
        return Error(BRAZE_INTERNAL, "bad window record '" + rec + "'");
      peers_[j].host = host;
      peers_[j].size = size;
    }
    return store.Barrier(key + "ready", rank_, comm.world(), timeout_);
  }

  ~Window() {
    if (thread_.joinable()) {
      uint64_t one = 1;
      (void)!write(wake_fd_, &one, 8);
      thread_.join();
    }
    for (auto& p : peers_) CloseFd(p.fd);
    for (auto& c : clients_) CloseFd(c.fd);
    CloseFd(listen_fd_);
    CloseFd(wake_fd_);
  }

  uint64_t Size(int rank) const { return rank >= 0 && rank < (int)peers_.size() ? peers_[rank].size : 0; }

  Status Access(uint8_t type, int rank, void* data, uint64_t nbytes, uint64_t offset) {
    const char* what = type == kPut ? "window put" : "window get";
    BRAZE_RETURN_IF_ERROR(CheckRank(what, rank));
    if (offset > peers_[rank].size || nbytes > peers_[rank].size - offset)
      return Error(BRAZE_INVALID_ARGUMENT, std::string(what) + ": bytes [" + std::to_string(offset) + ", " +
                                               std::to_string(offset + nbytes) + ") are past the end of rank " +
                                               std::to_string(rank) + "'s window (" +
                                               std::to_string(peers_[rank].size) + " bytes)");
    if (rank == rank_) {
      if (type == kPut) memcpy(base_ + offset, data, nbytes);
      else memcpy(data, base_ + offset, nbytes);
      return Status::Ok();
    }
    return Call({type, rank_, offset, nbytes}, rank, type == kPut ? data : nullptr, type == kGet ? data : nullptr);
  }

  Status Signal(int rank) {
    BRAZE_RETURN_IF_ERROR(CheckRank("window signal", rank));
    if (rank == rank_) {
      Deliver(rank_);
      return Status::Ok();
    }
    return Call({kSignal, rank_, 0, 0}, rank, nullptr, nullptr);
  }

  Status WaitSignal(int rank, double timeout) {
    BRAZE_RETURN_IF_ERROR(CheckRank("window wait_signal", rank));
    std::unique_lock<std::mutex> lock(signal_mu_);
    if (!signal_cv_.wait_until(lock, DeadlineAfter(timeout > 0 ? timeout : timeout_),
                               [&] { return signals_[rank] > consumed_[rank]; }))
      return Error(BRAZE_TIMEOUT, "window wait_signal: no signal from rank " + std::to_string(rank) + " within " +
                                      std::to_string(timeout > 0 ? timeout : timeout_) + " s",
                   {rank});
    ++consumed_[rank];
    return Status::Ok();
  }

 private:
  struct Peer {
    std::string host;
    int port = 0;
    uint64_t size = 0;
    int fd = -1;
  };

  Status CheckRank(const char* what, int rank) const {
    if (rank < 0 || rank >= (int)peers_.size())
      return Error(BRAZE_INVALID_ARGUMENT, std::string(what) + ": rank " + std::to_string(rank) +
                                               " is out of range [0, " + std::to_string(peers_.size()) + ")");
    return Status::Ok();
  }

  void Deliver(int from) {
    {
      std::lock_guard<std::mutex> lock(signal_mu_);
      ++signals_[from];
    }
    signal_cv_.notify_all();
  }

  Status Call(const Request& req, int rank, const void* payload, void* reply) {
    std::lock_guard<std::mutex> lock(client_mu_);
    auto deadline = DeadlineAfter(kRequestTimeout);
    Peer& peer = peers_[rank];
    Status s;
    if (peer.fd < 0) {
      s = Connect(peer.host, peer.port, deadline, &peer.fd);
      if (s.ok()) s = AuthenticateConnected(peer.fd, secret_, deadline, "rank " + std::to_string(rank) + "'s window");
    }
    if (s.ok()) s = SendAll(peer.fd, &req, sizeof(req), deadline);
    if (s.ok() && payload) s = SendAll(peer.fd, payload, req.nbytes, deadline);
    uint8_t ok = 0;
    if (s.ok()) s = RecvAll(peer.fd, &ok, 1, deadline);
    if (s.ok() && ok && reply) s = RecvAll(peer.fd, reply, req.nbytes, deadline);
    if (!s.ok()) {
      CloseFd(peer.fd);
      s.message = "window request to rank " + std::to_string(rank) + " failed: " + s.message;
      s.missing_ranks = {rank};
      return s;
    }
    if (!ok) return Error(BRAZE_INVALID_ARGUMENT, "window request rejected by rank " + std::to_string(rank));
    return Status::Ok();
  }

  struct Client {
    int fd = -1;
    std::string peer;
    std::unique_ptr<PendingAuth> auth;  // until it proved the secret
  };

  std::string Where() const { return "window service (rank " + std::to_string(rank_) + ")"; }

  // Answers one request; false drops the connection (and says why).
  bool Answer(int fd, std::string* why) {
    auto deadline = DeadlineAfter(kRequestTimeout);
    Request req;
    if (!RecvAll(fd, &req, sizeof(req), deadline).ok()) return false;
    if (req.type > kSignal || (req.type == kSignal && (req.from < 0 || req.from >= (int)signals_.size()))) {
      *why = "malformed window request (type " + std::to_string(req.type) + ", from rank " +
             std::to_string(req.from) + ")";
      return false;
    }
    bool in_range = req.offset <= nbytes_ && req.nbytes <= nbytes_ - req.offset;
    if (req.type == kPut) {
      if (!in_range) {  // the client checked bounds; this one lies
        *why = "window put past the end of the window";
        return false;
      }
      if (!RecvAll(fd, base_ + req.offset, req.nbytes, deadline).ok()) return false;
    }
    if (req.type == kSignal) Deliver(req.from);
    uint8_t ok = (req.type != kGet || in_range) ? 1 : 0;
    if (!SendAll(fd, &ok, 1, deadline).ok()) return false;
    if (req.type == kGet && ok) return SendAll(fd, base_ + req.offset, req.nbytes, deadline).ok();
    return true;
  }

  // Reads from a readable client; false drops it.
  bool ServeClient(Client& c) {
    std::string why;
    bool keep;
    if (c.auth) {
      PendingAuth::State state = c.auth->OnReadable(c.fd, &why);
      if (state == PendingAuth::kPassed) c.auth.reset();
      keep = state != PendingAuth::kFailed;
    } else {
      keep = Answer(c.fd, &why);
    }
    if (!why.empty()) ReportRejected(Where(), c.peer, why);
    return keep;
  }

  void Accept() {
    Client c;
    c.fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c.fd < 0) return;
    SetNoDelay(c.fd);
    c.peer = PeerAddress(c.fd);
    c.auth = std::make_unique<PendingAuth>(secret_);
    if (c.auth->Begin(c.fd)) clients_.push_back(std::move(c));
    else CloseFd(c.fd);
  }

  void Serve() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.assign({{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}});
      for (auto& c : clients_) fds.push_back({c.fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) return;
      if (fds[0].revents) return;
      std::vector<Client> alive;
      for (size_t k = 2; k < fds.size(); ++k) {
        Client& c = clients_[k - 2];
        bool expired = c.auth && c.auth->Expired();
        if (expired) ReportRejected(Where(), c.peer, "no answer to the authentication challenge");
        if (!expired && (!fds[k].revents || ServeClient(c))) alive.push_back(std::move(c));
        else CloseFd(c.fd);
      }
      clients_.swap(alive);
      if (fds[1].revents & POLLIN) Accept();
    }
  }

  int rank_ = 0;
  char* base_ = nullptr;
  uint64_t nbytes_ = 0;
  double timeout_ = 30;
  int listen_fd_ = -1, wake_fd_ = -1;
  std::thread thread_;
  std::vector<Client> clients_;
  std::string secret_;
  std::vector<Peer> peers_;
  std::mutex client_mu_, signal_mu_;
  std::condition_variable signal_cv_;
  std::vector<uint64_t> signals_, consumed_;
};

}  // namespace braze::comm

struct braze_window_s {
  braze::comm::Window window;
};

using namespace braze::comm;

extern "C" {

braze_status_t braze_window_create(braze_comm_t* comm, void* base, uint64_t nbytes, braze_window_t** out) {
  auto* w = new braze_window_s;
  Status s = w->window.Init(*comm->comm, base, nbytes);
  if (!s.ok()) {
    delete w;
    return ToC(s);
  }
  *out = w;
  return nullptr;
}

uint64_t braze_window_size(braze_window_t* w, int32_t rank) { return w->window.Size(rank); }

braze_status_t braze_window_put(braze_window_t* w, int32_t rank, const void* data, uint64_t nbytes, uint64_t offset) {
  return ToC(w->window.Access(kPut, rank, const_cast<void*>(data), nbytes, offset));
}

braze_status_t braze_window_get(braze_window_t* w, int32_t rank, void* data, uint64_t nbytes, uint64_t offset) {
  return ToC(w->window.Access(kGet, rank, data, nbytes, offset));
}

braze_status_t braze_window_signal(braze_window_t* w, int32_t rank) { return ToC(w->window.Signal(rank)); }

braze_status_t braze_window_wait_signal(braze_window_t* w, int32_t rank, double timeout) {
  return ToC(w->window.WaitSignal(rank, timeout));
}

void braze_window_release(braze_window_t* w) { delete w; }

}  // extern "C"
