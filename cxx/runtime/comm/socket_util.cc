#include "socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace braze::comm {
namespace {

Status Resolve(const std::string& host, int port, sockaddr_storage* addr, socklen_t* len) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || !res)
    return Error(BRAZE_INVALID_ARGUMENT, "cannot resolve host '" + host + "': " + gai_strerror(rc));
  std::memcpy(addr, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return Status::Ok();
}

Status WaitFd(int fd, short events, Clock::time_point deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, MillisLeft(deadline));
    if (rc > 0) return Status::Ok();
    if (rc == 0) return Error(BRAZE_TIMEOUT, std::string("socket ") + what + " timed out");
    if (errno != EINTR) return SysError(std::string("poll during ") + what);
  }
}

}  // namespace

Status Listen(const std::string& host, int port, int* fd, int* bound_port) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  BRAZE_RETURN_IF_ERROR(Resolve(host.empty() ? "0.0.0.0" : host, port, &addr, &len));
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return SysError("socket");
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s, (sockaddr*)&addr, len) != 0) {
    Status st = SysError("bind to " + host + ":" + std::to_string(port));
    close(s);
    return st;
  }
  if (listen(s, 128) != 0) {
    Status st = SysError("listen");
    close(s);
    return st;
  }
  sockaddr_in bound{};
  socklen_t blen = sizeof(bound);
  getsockname(s, (sockaddr*)&bound, &blen);
  *bound_port = ntohs(bound.sin_port);
  *fd = s;
  return Status::Ok();
}

Status Connect(const std::string& host, int port, Clock::time_point deadline, int* fd) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  BRAZE_RETURN_IF_ERROR(Resolve(host, port, &addr, &len));
  int backoff_ms = 1;
  for (;;) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return SysError("socket");
    if (connect(s, (sockaddr*)&addr, len) == 0) {
      SetNoDelay(s);
      *fd = s;
      return Status::Ok();
    }
    int err = errno;
    close(s);
    if (Clock::now() >= deadline)
      return Error(BRAZE_TIMEOUT, "connecting to " + host + ":" + std::to_string(port) +
                                      " timed out (" + std::strerror(err) + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(backoff_ms * 2, 50);
  }
}

Status Accept(int listen_fd, Clock::time_point deadline, int* fd) {
  BRAZE_RETURN_IF_ERROR(WaitFd(listen_fd, POLLIN, deadline, "accept"));
  int s = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (s < 0) return SysError("accept");
  SetNoDelay(s);
  *fd = s;
  return Status::Ok();
}

Status SendAll(int fd, const void* data, size_t n, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      BRAZE_RETURN_IF_ERROR(WaitFd(fd, POLLOUT, deadline, "send"));
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    return Error(BRAZE_RANK_FAILED, std::string("peer connection lost on send: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status RecvAll(int fd, void* data, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= (size_t)r;
      continue;
    }
    if (r == 0) return Error(BRAZE_RANK_FAILED, "peer closed the connection");
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      BRAZE_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline, "recv"));
      continue;
    }
    if (errno == EINTR) continue;
    return Error(BRAZE_RANK_FAILED, std::string("peer connection lost on recv: ") + std::strerror(errno));
  }
  return Status::Ok();
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void SetNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

namespace {
// getsockname or getpeername of fd, as "ip" (and ":port" with `port`);
// `fallback` when the call fails.
template <typename GetName>
std::string AddressOf(int fd, GetName get_name, bool port, const char* fallback) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (get_name(fd, (sockaddr*)&addr, &len) != 0) return fallback;
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof(buf));
  return port ? std::string(buf) + ":" + std::to_string(ntohs(addr.sin_port)) : std::string(buf);
}
}  // namespace

std::string LocalAddress(int fd) { return AddressOf(fd, getsockname, false, "127.0.0.1"); }

std::string PeerAddress(int fd) { return AddressOf(fd, getpeername, true, "an unknown peer"); }

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace braze::comm
