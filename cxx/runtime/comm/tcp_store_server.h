// The TCP store's server: a single-threaded poll loop in the process that
// passed is_server. Waiting GETs are parked with their own deadline, so a
// client never has to poll. Every connection must pass the job-secret
// handshake (auth.h) before a request is read, and every request is checked
// against the wire bounds (tcp_store_protocol.h); a client that fails either
// is dropped, counted and logged, and the server goes on serving the others.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "auth.h"
#include "socket_util.h"
#include "status.h"

namespace braze::comm {

class TcpStoreServer {
 public:
  explicit TcpStoreServer(std::string secret) : secret_(std::move(secret)) {}
  ~TcpStoreServer();
  Status Start(const std::string& host, int port);
  int port() const { return port_; }

 private:
  struct Client {
    int fd = -1;
    std::string peer;  // "ip:port" for logs
    std::string in;
    std::unique_ptr<PendingAuth> auth;  // until the client proved the secret
  };
  struct Waiter {
    int fd;
    std::string key;
    Clock::time_point deadline;
  };

  void Loop();
  void AcceptOne();
  // Consumes what the client sent; false drops it.
  bool Serve(Client& c);
  bool HandleRequests(Client& c);
  void Reply(int fd, uint8_t code, const std::string& payload);
  void WakeWaiters(const std::string& key);
  void ExpireWaiters();
  void ExpireHandshakes();
  void Drop(Client& c);

  std::string secret_;
  int listen_fd_ = -1, port_ = -1;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  std::vector<Client> clients_;
  std::vector<Waiter> waiters_;
  std::map<std::string, std::string> data_;
};

}  // namespace braze::comm
