// Key-value stores used for rendezvous: a TCP store (one rank or a launcher
// runs the server thread) and a file store (a directory on a shared disk).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "socket_util.h"
#include "status.h"

namespace braze::comm {

class Store {
 public:
  virtual ~Store() = default;
  virtual Status Set(const std::string& key, const std::string& value) = 0;
  // Blocks until the key exists or timeout seconds pass (BRAZE_TIMEOUT).
  virtual Status Get(const std::string& key, double timeout, std::string* value) = 0;
  virtual Status Add(const std::string& key, int64_t delta, int64_t* result) = 0;
  // An address of this host that peers can reach (for the TCP backend).
  virtual std::string HostAddress() = 0;
  virtual int Port() const { return -1; }
  // The job secret every connection of this job authenticates with ("" when
  // none was configured: the handshake still runs, with an empty key).
  const std::string& secret() const { return secret_; }

  // A check a long wait runs every kGiveUpPollSeconds: its error ends the
  // wait (a peer reported that it has left what this rank waits for).
  using GiveUp = std::function<Status()>;
  static constexpr double kGiveUpPollSeconds = 0.05;
  // Get that also ends with give_up's first error.
  Status GetOrGiveUp(const std::string& key, double timeout, const GiveUp& give_up, std::string* value);

  // Every one of `world` participants (0 .. world-1; this is `rank`) calls
  // this with the same key; returns once all have. The last arrival publishes
  // a "done" key the others wait on; a timeout names who never arrived.
  Status Barrier(const std::string& key, int rank, int world, double timeout, const GiveUp& give_up = nullptr);

 protected:
  std::string secret_;
};

// The address this rank's data sockets (TCP transport, windows) bind to and
// advertise: $BRAZE_COMM_ADDR if set, else the address this host reaches the
// store from -- the rendezvous interface, never every interface.
std::string DataAddress(Store& store);

// Writes a file through a temporary and a rename: a reader (or a process
// killed while writing) never leaves half of it behind.
Status WriteFileAtomically(const std::string& path, const std::string& value);

// Parses a counter stored as decimal text; false for anything else.
bool ParseCounter(const std::string& text, int64_t* value);

class TcpStoreServer;

class TcpStore : public Store {
 public:
  static Status Create(const std::string& host, int port, bool is_server,
                       double timeout, const std::string& secret, std::shared_ptr<Store>* out);
  ~TcpStore() override;
  Status Set(const std::string& key, const std::string& value) override;
  Status Get(const std::string& key, double timeout, std::string* value) override;
  Status Add(const std::string& key, int64_t delta, int64_t* result) override;
  std::string HostAddress() override;
  int Port() const override { return port_; }

 private:
  Status Request(uint8_t cmd, const std::string& key, const std::string& value,
                 double timeout, std::string* reply);
  std::mutex mu_;
  int fd_ = -1;
  int port_ = -1;
  std::string address_;  // "host:port" of the server, for errors
  std::unique_ptr<TcpStoreServer> server_;
};

class FileStore : public Store {
 public:
  static Status Create(const std::string& dir, const std::string& secret, std::shared_ptr<Store>* out);
  Status Set(const std::string& key, const std::string& value) override;
  Status Get(const std::string& key, double timeout, std::string* value) override;
  Status Add(const std::string& key, int64_t delta, int64_t* result) override;
  std::string HostAddress() override;

 private:
  std::string PathOf(const std::string& key) const;
  std::string dir_;
};

}  // namespace braze::comm

struct braze_store_s {
  std::shared_ptr<braze::comm::Store> store;
};
