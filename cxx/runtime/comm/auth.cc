#include "auth.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace braze::comm {
namespace {

constexpr char kAuthTag[kAuthTagBytes + 1] = "brzauth1";

std::string FreshNonce() {
  std::string nonce(kNonceBytes, '\0');
  size_t got = 0;
  while (got < nonce.size()) {
    ssize_t r = getrandom(nonce.data() + got, nonce.size() - got, 0);
    if (r > 0) got += (size_t)r;
  }
  return nonce;
}

std::string Mac(const std::string& secret, const char* role, const std::string& nonce_a, const char* nonce_c) {
  auto mac = HmacSha256(secret, role + nonce_a + std::string(nonce_c, kNonceBytes));
  return std::string(reinterpret_cast<const char*>(mac.data()), mac.size());
}

bool SameMac(const std::string& a, const char* b) { return CRYPTO_memcmp(a.data(), b, kMacBytes) == 0; }

std::atomic<uint64_t> rejected{0};

}  // namespace

std::array<uint8_t, kMacBytes> HmacSha256(const std::string& key, const std::string& data) {
  std::array<uint8_t, kMacBytes> out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), (int)key.size(), reinterpret_cast<const unsigned char*>(data.data()), data.size(),
       out.data(), &len);
  return out;
}

AcceptorHandshake::AcceptorHandshake(const std::string& secret)
    : secret_(secret), nonce_(FreshNonce()), challenge_(kAuthTag + nonce_) {}

bool AcceptorHandshake::Verify(const char* response, std::string* proof) const {
  if (!SameMac(Mac(secret_, "connect", nonce_, response), response + kNonceBytes)) return false;
  *proof = Mac(secret_, "accept", nonce_, response);
  return true;
}

bool PendingAuth::Begin(int fd) {
  return SendAll(fd, handshake_.Challenge().data(), kChallengeBytes, DeadlineAfter(1.0)).ok();
}

PendingAuth::State PendingAuth::OnReadable(int fd, std::string* why) {
  char buf[kResponseBytes];
  ssize_t r = recv(fd, buf, kResponseBytes - in_.size(), MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return kWaiting;
  if (r <= 0) {
    *why = "closed before answering the authentication challenge";
    return kFailed;
  }
  in_.append(buf, r);
  if (in_.size() < kResponseBytes) return kWaiting;
  std::string proof;
  if (!handshake_.Verify(in_.data(), &proof)) {
    *why = "failed authentication (wrong or missing BRAZE_COMM_SECRET)";
    return kFailed;
  }
  if (!SendAll(fd, proof.data(), proof.size(), DeadlineAfter(1.0)).ok()) {
    *why = "closed during authentication";
    return kFailed;
  }
  return kPassed;
}

Status AuthenticateAccepted(int fd, const std::string& secret, Clock::time_point deadline, const std::string& peer) {
  AcceptorHandshake handshake(secret);
  char response[kResponseBytes];
  std::string proof;
  Status s = SendAll(fd, handshake.Challenge().data(), kChallengeBytes, deadline);
  if (s.ok()) s = RecvAll(fd, response, kResponseBytes, deadline);
  if (s.ok() && !handshake.Verify(response, &proof))
    s = Error(BRAZE_UNAVAILABLE, "wrong secret (BRAZE_COMM_SECRET differs or is missing)");
  if (s.ok()) s = SendAll(fd, proof.data(), kMacBytes, deadline);
  if (!s.ok()) s.message = "authenticating " + peer + ": " + s.message;
  return s;
}

Status AuthenticateConnected(int fd, const std::string& secret, Clock::time_point deadline, const std::string& peer) {
  char challenge[kChallengeBytes], proof[kMacBytes];
  std::string nonce_c = FreshNonce();
  Status s = RecvAll(fd, challenge, kChallengeBytes, deadline);
  if (s.ok() && memcmp(challenge, kAuthTag, kAuthTagBytes) != 0)
    s = Error(BRAZE_UNAVAILABLE, "not a braze endpoint, or a braze of another protocol version");
  std::string nonce_a(challenge + kAuthTagBytes, kNonceBytes);
  if (s.ok()) {
    std::string response = nonce_c + Mac(secret, "connect", nonce_a, nonce_c.data());
    s = SendAll(fd, response.data(), response.size(), deadline);
  }
  if (s.ok()) s = RecvAll(fd, proof, kMacBytes, deadline);
  if (s.ok() && !SameMac(Mac(secret, "accept", nonce_a, nonce_c.data()), proof))
    s = Error(BRAZE_UNAVAILABLE, "it does not hold this job's secret");
  if (!s.ok()) {
    if (s.code == BRAZE_RANK_FAILED) s.message += " (it rejected this process's secret?)";
    s.code = BRAZE_UNAVAILABLE;
    s.message = "authenticating to " + peer + ": " + s.message;
  }
  return s;
}

void ReportRejected(const std::string& where, const std::string& peer, const std::string& why) {
  // Log the first few in full, then every 1000th: a flood of strangers
  // must not turn into a flood of log lines.
  uint64_t n = ++rejected;
  if (n <= 10 || n % 1000 == 0)
    fprintf(stderr, "braze.comm: %s rejected a connection from %s: %s (%llu rejected so far)\n", where.c_str(),
            peer.c_str(), why.c_str(), (unsigned long long)n);
}

uint64_t RejectedConnections() { return rejected.load(); }

void WarnIfExposed(const std::string& bind_host, const std::string& secret) {
  if (!secret.empty()) return;
  in_addr addr{};
  bool loopback = inet_pton(AF_INET, bind_host.c_str(), &addr) == 1 && (ntohl(addr.s_addr) >> 24) == 127;
  if (loopback || bind_host == "localhost") return;
  static std::once_flag once;
  std::call_once(once, [&] {
    fprintf(stderr,
            "braze.comm: WARNING: listening on %s without a job secret; anyone who can reach this port can "
            "join the job. Set BRAZE_COMM_SECRET (the same value on every rank) to require authentication.\n",
            bind_host.empty() ? "all interfaces" : bind_host.c_str());
  });
}

}  // namespace braze::comm
