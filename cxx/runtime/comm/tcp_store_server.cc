#include "tcp_store_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "store.h"
#include "tcp_store_protocol.h"

namespace braze::comm {

using namespace store_wire;

namespace {
// More connections than any job needs; beyond it strangers could exhaust
// the process's descriptors.
constexpr size_t kMaxClients = 4096;
constexpr const char* kWhere = "TCP store";
}  // namespace

Status TcpStoreServer::Start(const std::string& host, int port) {
  WarnIfExposed(host, secret_);
  BRAZE_RETURN_IF_ERROR(Listen(host, port, &listen_fd_, &port_));
  if (pipe2(wake_, O_CLOEXEC) != 0) return SysError("pipe");
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

TcpStoreServer::~TcpStoreServer() {
  if (thread_.joinable()) {
    char c = 0;
    (void)!write(wake_[1], &c, 1);
    thread_.join();
  }
  for (auto& c : clients_) CloseFd(c.fd);
  CloseFd(listen_fd_);
  CloseFd(wake_[0]);
  CloseFd(wake_[1]);
}

void TcpStoreServer::Reply(int fd, uint8_t code, const std::string& payload) {
  std::string out(1, (char)code);
  AppendU64(out, payload.size());
  out += payload;
  // Replies are small; a client that stopped reading is a dead client.
  (void)SendAll(fd, out.data(), out.size(), DeadlineAfter(5.0));
}

void TcpStoreServer::AcceptOne() {
  int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  std::string peer = PeerAddress(fd);
  if (clients_.size() >= kMaxClients) {
    ReportRejected(kWhere, peer, "too many connections");
    close(fd);
    return;
  }
  SetNoDelay(fd);
  Client c;
  c.fd = fd;
  c.peer = peer;
  c.auth = std::make_unique<PendingAuth>(secret_);
  if (!c.auth->Begin(fd)) {
    close(fd);
    return;
  }
  clients_.push_back(std::move(c));
}

bool TcpStoreServer::HandleRequests(Client& c) {
  while (c.in.size() >= kRequestHeader) {
    RequestHeader h;
    std::string bad = ParseRequestHeader(c.in.data(), &h);
    if (!bad.empty()) {
      ReportRejected(kWhere, c.peer, "malformed request: " + bad);
      return false;
    }
    if (c.in.size() < kRequestHeader + h.key_len + h.value_len) return true;
    std::string key = c.in.substr(kRequestHeader, h.key_len);
    std::string value = c.in.substr(kRequestHeader + h.key_len, h.value_len);
    c.in.erase(0, kRequestHeader + h.key_len + h.value_len);
    if (h.cmd == kSet) {
      data_[key] = value;
      Reply(c.fd, kReplyOk, "");
      WakeWaiters(key);
    } else if (h.cmd == kAdd) {
      int64_t delta;
      memcpy(&delta, value.data(), 8);
      auto it = data_.find(key);
      int64_t old = 0;
      if (it != data_.end() && !ParseCounter(it->second, &old)) {
        Reply(c.fd, kReplyNotCounter, "");
        continue;
      }
      // Wrapping arithmetic: a hostile delta must not be undefined behaviour.
      data_[key] = std::to_string((int64_t)((uint64_t)old + (uint64_t)delta));
      Reply(c.fd, kReplyOk, data_[key]);
      WakeWaiters(key);
    } else {
      auto it = data_.find(key);
      if (it != data_.end()) {
        Reply(c.fd, kReplyOk, it->second);
      } else {
        waiters_.push_back({c.fd, key, Clock::now() + std::chrono::milliseconds(h.timeout_ms)});
      }
    }
  }
  return true;
}

bool TcpStoreServer::Serve(Client& c) {
  if (c.auth) {
    std::string why;
    PendingAuth::State state = c.auth->OnReadable(c.fd, &why);
    if (state == PendingAuth::kFailed) ReportRejected(kWhere, c.peer, why);
    if (state == PendingAuth::kPassed) c.auth.reset();
    return state != PendingAuth::kFailed;
  }
  char buf[65536];
  ssize_t r = recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (r <= 0) return false;
  c.in.append(buf, r);
  return HandleRequests(c);
}

void TcpStoreServer::WakeWaiters(const std::string& key) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->key == key) {
      Reply(it->fd, kReplyOk, data_[key]);
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void TcpStoreServer::ExpireWaiters() {
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

void TcpStoreServer::ExpireHandshakes() {
  for (auto& c : clients_) {
    if (c.fd >= 0 && c.auth && c.auth->Expired()) {
      ReportRejected(kWhere, c.peer, "no answer to the authentication challenge");
      Drop(c);
    }
  }
}

void TcpStoreServer::Drop(Client& c) {
  for (auto it = waiters_.begin(); it != waiters_.end();) it = it->fd == c.fd ? waiters_.erase(it) : it + 1;
  CloseFd(c.fd);
}

void TcpStoreServer::Loop() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign({{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}});
    for (auto& c : clients_) fds.push_back({c.fd, POLLIN, 0});
    int timeout_ms = 1000;
    for (auto& w : waiters_) timeout_ms = std::min(timeout_ms, MillisLeft(w.deadline) + 1);
    int rc = poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0 && errno != EINTR) return;
    if (fds[0].revents) return;  // shutdown
    ExpireWaiters();
    for (size_t i = 2; i < fds.size(); ++i) {
      Client& c = clients_[i - 2];
      if (fds[i].revents && !Serve(c)) Drop(c);
    }
    ExpireHandshakes();
    std::vector<Client> alive;
    for (auto& c : clients_)
      if (c.fd >= 0) alive.push_back(std::move(c));
    clients_.swap(alive);
    if (fds[1].revents & POLLIN) AcceptOne();
  }
}

}  // namespace braze::comm
