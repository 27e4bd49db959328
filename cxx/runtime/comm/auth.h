// Connection authentication: every store, transport and window connection
// starts with a mutual challenge-response over fresh nonces, keyed by the
// job secret (HMAC-SHA256, OpenSSL's libcrypto), before any other byte is
// read. It proves both ends hold the secret; it does not encrypt or protect
// the bytes that follow (see docs/comm.md, "Security").
//
//   acceptor  -> connector : tag "brzauth1" | nonce_a (32)
//   connector -> acceptor  : nonce_c (32) | HMAC(K, "connect" | nonce_a | nonce_c)
//   acceptor  -> connector : HMAC(K, "accept" | nonce_a | nonce_c)
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "socket_util.h"
#include "status.h"

namespace braze::comm {

constexpr size_t kNonceBytes = 32, kMacBytes = 32, kAuthTagBytes = 8;
constexpr size_t kChallengeBytes = kAuthTagBytes + kNonceBytes;
constexpr size_t kResponseBytes = kNonceBytes + kMacBytes;
// How long a peer may take to answer the challenge. Legitimate peers answer
// in microseconds; a stranger that connects and stays silent is dropped.
constexpr double kHandshakeSeconds = 5.0;

// HMAC-SHA256 of `data` under `key`.
std::array<uint8_t, kMacBytes> HmacSha256(const std::string& key, const std::string& data);

// The acceptor's side as a small state machine, so that poll-driven servers
// (the store, the window service) authenticate without blocking on a client.
class AcceptorHandshake {
 public:
  explicit AcceptorHandshake(const std::string& secret);
  // The first message, to send as soon as the connection is accepted.
  const std::string& Challenge() const { return challenge_; }
  // Checks the connector's kResponseBytes; on success `proof` is the reply
  // that proves this side's knowledge of the secret.
  bool Verify(const char* response, std::string* proof) const;

 private:
  std::string secret_, nonce_, challenge_;
};

// An accepted connection on a poll-driven server (the store, the window
// service) until it has proven the secret; never blocks on the client.
class PendingAuth {
 public:
  enum State { kWaiting, kPassed, kFailed };
  explicit PendingAuth(const std::string& secret)
      : handshake_(secret), deadline_(DeadlineAfter(kHandshakeSeconds)) {}
  // Sends the challenge; false if the connection is already unusable.
  bool Begin(int fd);
  // Call when fd is readable: reads no more than the response. On kPassed
  // the proof has been sent and the connection may be trusted; on kFailed
  // `why` says what went wrong.
  State OnReadable(int fd, std::string* why);
  bool Expired() const { return Clock::now() >= deadline_; }

 private:
  AcceptorHandshake handshake_;
  Clock::time_point deadline_;
  std::string in_;
};

// Blocking handshakes for sockets owned by one thread. `peer` names the other
// end in errors ("rank 2 at 10.0.0.3:4512").
Status AuthenticateAccepted(int fd, const std::string& secret, Clock::time_point deadline, const std::string& peer);
Status AuthenticateConnected(int fd, const std::string& secret, Clock::time_point deadline, const std::string& peer);

// A rejected connection: counted (braze_comm_rejected_connections) and
// logged to stderr with the peer's address (rate-limited).
void ReportRejected(const std::string& where, const std::string& peer, const std::string& why);
uint64_t RejectedConnections();

// Once per process: listening on a non-loopback address without a secret
// lets anyone who can reach the port join the job.
void WarnIfExposed(const std::string& bind_host, const std::string& secret);

}  // namespace braze::comm
