// The TCP store: a single-threaded poll server (in the process that passed
// is_server) and a client per process. Waiting GETs are parked on the server
// with their own deadline, so a client never has to poll.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "store.h"

namespace braze::comm {

namespace {
enum : uint8_t { kSet = 0, kGet = 1, kAdd = 2 };
enum : uint8_t { kReplyOk = 0, kReplyTimeout = 1, kReplyNotCounter = 2 };


void AppendU32(std::string& out, uint32_t v) { out.append((const char*)&v, 4); }
void AppendU64(std::string& out, uint64_t v) { out.append((const char*)&v, 8); }

// Request: cmd u8 | key_len u32 | value_len u64 | timeout_ms u64 | key | value
constexpr size_t kRequestHeader = 1 + 4 + 8 + 8;
}  // namespace

class TcpStoreServer {
 public:
  Status Start(const std::string& host, int port) {
    BRAZE_RETURN_IF_ERROR(Listen(host, port, &listen_fd_, &port_));
    if (pipe2(wake_, O_CLOEXEC) != 0) return SysError("pipe");
    thread_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }
  ~TcpStoreServer() {
    if (thread_.joinable()) {
      char c = 0;
      (void)!write(wake_[1], &c, 1);
      thread_.join();
    }
    for (auto& c : clients_) close(c.fd);
    CloseFd(listen_fd_);
    CloseFd(wake_[0]);
    CloseFd(wake_[1]);
  }
  int port() const { return port_; }

 private:
  struct Client {
    int fd;
    std::string in;
  };
  struct Waiter {
    int fd;
    std::string key;
    Clock::time_point deadline;
  };

  void Reply(int fd, uint8_t code, const std::string& payload) {
    std::string out(1, (char)code);
    AppendU64(out, payload.size());
    out += payload;
    // Replies are small; a client that stopped reading is a dead client.
    (void)SendAll(fd, out.data(), out.size(), DeadlineAfter(5.0));
  }

  void Handle(Client& c) {
    while (c.in.size() >= kRequestHeader) {
      uint8_t cmd = c.in[0];
      uint32_t klen;
      uint64_t vlen, timeout_ms;
      memcpy(&klen, &c.in[1], 4);
      memcpy(&vlen, &c.in[5], 8);
      memcpy(&timeout_ms, &c.in[13], 8);
      if (c.in.size() < kRequestHeader + klen + vlen) return;
      std::string key = c.in.substr(kRequestHeader, klen);
      std::string value = c.in.substr(kRequestHeader + klen, vlen);
      c.in.erase(0, kRequestHeader + klen + vlen);
      if (cmd == kSet) {
        data_[key] = value;
        Reply(c.fd, kReplyOk, "");
        WakeWaiters(key);
      } else if (cmd == kAdd) {
        int64_t delta;
        memcpy(&delta, value.data(), 8);
        auto it = data_.find(key);
        int64_t old = 0;
        if (it != data_.end() && !ParseCounter(it->second, &old)) {
          Reply(c.fd, kReplyNotCounter, "");
          continue;
        }
        data_[key] = std::to_string(old + delta);
        Reply(c.fd, kReplyOk, data_[key]);
        WakeWaiters(key);
      } else {
        auto it = data_.find(key);
        if (it != data_.end()) {
          Reply(c.fd, kReplyOk, it->second);
        } else {
          waiters_.push_back({c.fd, key, Clock::now() + std::chrono::milliseconds(timeout_ms)});
        }
      }
    }
  }

  void WakeWaiters(const std::string& key) {
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->key == key) {
        Reply(it->fd, kReplyOk, data_[key]);
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void ExpireWaiters() {
    auto now = Clock::now();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->deadline <= now) {
        Reply(it->fd, kReplyTimeout, "");
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void DropClient(int fd) {
    close(fd);
    for (auto it = waiters_.begin(); it != waiters_.end();)
      it = it->fd == fd ? waiters_.erase(it) : it + 1;
  }

  void Loop() {
    for (;;) {
      std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      for (auto& c : clients_) fds.push_back({c.fd, POLLIN, 0});
      int timeout_ms = 1000;
      for (auto& w : waiters_) timeout_ms = std::min(timeout_ms, MillisLeft(w.deadline) + 1);
      int rc = poll(fds.data(), fds.size(), timeout_ms);
      if (rc < 0 && errno != EINTR) return;
      if (fds[0].revents) return;  // shutdown
      ExpireWaiters();
      if (fds[1].revents & POLLIN) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          SetNoDelay(fd);
          clients_.push_back({fd, {}});
        }
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        Client& c = clients_[i - 2];
        char buf[65536];
        ssize_t r = recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (r > 0) {
          c.in.append(buf, r);
          Handle(c);
        } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
          DropClient(c.fd);
          c.fd = -1;
        }
      }
      std::vector<Client> alive;
      for (auto& c : clients_)
        if (c.fd >= 0) alive.push_back(std::move(c));
      clients_.swap(alive);
    }
  }

  int listen_fd_ = -1, port_ = -1;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  std::vector<Client> clients_;
  std::vector<Waiter> waiters_;
  std::map<std::string, std::string> data_;
};

Status TcpStore::Create(const std::string& host, int port, bool is_server, double timeout,
                        std::shared_ptr<Store>* out) {
  auto store = std::shared_ptr<TcpStore>(new TcpStore());
  if (is_server) {
    store->server_ = std::make_unique<TcpStoreServer>();
    BRAZE_RETURN_IF_ERROR(store->server_->Start(host, port));
    port = store->server_->port();
  }
  store->port_ = port;
  std::string connect_host = host.empty() || host == "0.0.0.0" ? "127.0.0.1" : host;
  Status s = Connect(connect_host, port, DeadlineAfter(timeout), &store->fd_);
  if (!s.ok()) {
    s.message = "TCP store at " + connect_host + ":" + std::to_string(port) + ": " + s.message;
    return s;
  }
  *out = store;
  return Status::Ok();
}

TcpStore::~TcpStore() {
  CloseFd(fd_);
  server_.reset();
}

Status TcpStore::Request(uint8_t cmd, const std::string& key, const std::string& value,
                         double timeout, std::string* reply) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return Error(BRAZE_UNAVAILABLE, "TCP store connection is closed");
  std::string msg(1, (char)cmd);
  AppendU32(msg, key.size());
  AppendU64(msg, value.size());
  AppendU64(msg, (uint64_t)(timeout * 1000.0));
  msg += key;
  msg += value;
  // The server answers a GET by its own deadline; allow it some slack.
  auto deadline = DeadlineAfter(timeout + 5.0);
  Status s = SendAll(fd_, msg.data(), msg.size(), deadline);
  uint8_t code = 0;
  uint64_t n = 0;
  if (s.ok()) s = RecvAll(fd_, &code, 1, deadline);
  if (s.ok()) s = RecvAll(fd_, &n, 8, deadline);
  if (s.ok()) {
    reply->resize(n);
    s = RecvAll(fd_, reply->data(), n, deadline);
  }
  if (!s.ok()) {
    CloseFd(fd_);  // the stream is out of step now
    return Error(BRAZE_UNAVAILABLE, "TCP store request for '" + key + "' failed: " + s.message);
  }
  if (code == kReplyNotCounter)
    return Error(BRAZE_INVALID_ARGUMENT, "TCP store: key '" + key + "' does not hold a counter");
  if (code == kReplyTimeout)
    return Error(BRAZE_TIMEOUT, "TCP store: waiting for key '" + key + "' timed out after " +
                                    std::to_string(timeout) + " s");
  return Status::Ok();
}

Status TcpStore::Set(const std::string& key, const std::string& value) {
  std::string ignored;
  return Request(kSet, key, value, 30.0, &ignored);
}

Status TcpStore::Get(const std::string& key, double timeout, std::string* value) {
  return Request(kGet, key, "", timeout, value);
}

Status TcpStore::Add(const std::string& key, int64_t delta, int64_t* result) {
  std::string reply;
  BRAZE_RETURN_IF_ERROR(Request(kAdd, key, std::string((const char*)&delta, 8), 30.0, &reply));
  if (!ParseCounter(reply, result)) return Error(BRAZE_INTERNAL, "TCP store: bad counter reply");
  return Status::Ok();
}

std::string TcpStore::HostAddress() {
  std::lock_guard<std::mutex> lock(mu_);
  return LocalAddress(fd_);
}

}  // namespace braze::comm
