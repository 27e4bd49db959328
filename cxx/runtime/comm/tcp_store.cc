// The TCP store's client (one per process; the server is tcp_store_server.cc).
// Every connection authenticates with the job secret first; replies are
// checked against the wire bounds, so a rogue server cannot make a client
// allocate without limit.
#include <algorithm>
#include <cstring>

#include "auth.h"
#include "tcp_store_protocol.h"
#include "store.h"
#include "tcp_store_server.h"

namespace braze::comm {

using namespace store_wire;

Status TcpStore::Create(const std::string& host, int port, bool is_server, double timeout,
                        const std::string& secret, std::shared_ptr<Store>* out) {
  auto store = std::shared_ptr<TcpStore>(new TcpStore());
  store->secret_ = secret;
  if (is_server) {
    store->server_ = std::make_unique<TcpStoreServer>(secret);
    BRAZE_RETURN_IF_ERROR(store->server_->Start(host, port));
    port = store->server_->port();
  }
  store->port_ = port;
  std::string connect_host = host.empty() || host == "0.0.0.0" ? "127.0.0.1" : host;
  store->address_ = connect_host + ":" + std::to_string(port);
  auto deadline = DeadlineAfter(timeout);
  Status s = Connect(connect_host, port, deadline, &store->fd_);
  if (s.ok()) s = AuthenticateConnected(store->fd_, secret, deadline, "the TCP store");
  if (!s.ok()) {
    s.message = "TCP store at " + store->address_ + ": " + s.message;
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
  if (key.size() > kMaxKeyBytes || value.size() > kMaxValueBytes)
    return Error(BRAZE_INVALID_ARGUMENT, "TCP store: key or value too large (" + std::to_string(key.size()) +
                                             " and " + std::to_string(value.size()) + " bytes; limits " +
                                             std::to_string(kMaxKeyBytes) + " and " +
                                             std::to_string(kMaxValueBytes) + ")");
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return Error(BRAZE_UNAVAILABLE, "TCP store at " + address_ + ": the connection is closed");
  std::string msg(1, (char)cmd);
  AppendU32(msg, key.size());
  AppendU64(msg, value.size());
  AppendU64(msg, (uint64_t)(std::min(std::max(timeout, 0.0), 1e9) * 1000.0));
  msg += key;
  msg += value;
  // The server answers a GET by its own deadline; allow it some slack.
  auto deadline = DeadlineAfter(timeout + 5.0);
  Status s = SendAll(fd_, msg.data(), msg.size(), deadline);
  char header[kReplyHeader];
  uint64_t n = 0;
  if (s.ok()) s = RecvAll(fd_, header, kReplyHeader, deadline);
  uint8_t code = static_cast<uint8_t>(header[0]);
  if (s.ok()) {
    memcpy(&n, header + 1, 8);
    if (code > kReplyNotCounter || n > kMaxValueBytes)
      s = Error(BRAZE_UNAVAILABLE, "malformed reply (code " + std::to_string(code) + ", " + std::to_string(n) +
                                       " bytes)");
  }
  if (s.ok()) {
    reply->resize(n);
    s = RecvAll(fd_, reply->data(), n, deadline);
  }
  if (!s.ok()) {
    CloseFd(fd_);  // the stream is out of step now
    return Error(BRAZE_UNAVAILABLE, "TCP store at " + address_ + ": request for '" + key + "' failed: " + s.message);
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
