#include "store.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "api.h"
#include "auth.h"

namespace braze::comm {

bool ParseCounter(const std::string& text, int64_t* value) {
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') return false;
  *value = v;
  return true;
}

std::string DataAddress(Store& store) {
  const char* configured = getenv("BRAZE_COMM_ADDR");
  return configured && *configured ? configured : store.HostAddress();
}

Status Store::GetOrGiveUp(const std::string& key, double timeout, const GiveUp& give_up, std::string* value) {
  if (!give_up) return Get(key, timeout, value);
  Status s = InSlices(DeadlineAfter(timeout), kGiveUpPollSeconds, [&](Clock::time_point until) {
    // Never 0: a store reads a timeout of 0 as "no limit".
    return Get(key, std::max(std::chrono::duration<double>(until - Clock::now()).count(), 0.001), value);
  }, give_up);
  if (s.code == BRAZE_TIMEOUT)  // the slice's message gives the slice's length
    s.message = "store: waiting for key '" + key + "' timed out after " + std::to_string(timeout) + " s";
  return s;
}

Status Store::Barrier(const std::string& key, int rank, int world, double timeout, const GiveUp& give_up) {
  int64_t arrived = 0;
  BRAZE_RETURN_IF_ERROR(Add(key + "/count", 1, &arrived));
  // Then this rank's arrival and its place: a rank that stopped after
  // counting itself is named as surely as one that never came.
  BRAZE_RETURN_IF_ERROR(Set(key + "/" + std::to_string(rank), std::to_string(arrived)));
  if (arrived == world) return Set(key + "/done", "1");
  std::string ignored;
  Status s = GetOrGiveUp(key + "/done", timeout, give_up, &ignored);
  if (s.code != BRAZE_TIMEOUT) return s;
  // Who is missing (died, or hangs): a short look for each one's key. One
  // that came last but never published "done" is missing too.
  s.missing_ranks.clear();
  for (int j = 0; j < world; ++j) {
    std::string place;
    if (!Get(key + "/" + std::to_string(j), 0.001, &place).ok() || place == std::to_string(world))
      s.missing_ranks.push_back(j);
  }
  s.message = "store barrier '" + key + "' timed out after " + std::to_string(timeout) + " s: ranks " +
              FormatRanks(s.missing_ranks) + " never arrived or stopped inside it";
  return s;
}

}  // namespace braze::comm

using braze::comm::Error;
using braze::comm::ToC;

extern "C" {

braze_status_t braze_tcp_store_create(const char* host, int port, int is_server, double timeout,
                                      const char* secret, size_t secret_len, braze_store_t** out) {
  auto* handle = new braze_store_s;
  auto s = braze::comm::TcpStore::Create(host, port, is_server != 0, timeout, std::string(secret, secret_len),
                                         &handle->store);
  if (!s.ok()) {
    delete handle;
    return ToC(s);
  }
  *out = handle;
  return nullptr;
}

braze_status_t braze_file_store_create(const char* path, double, const char* secret, size_t secret_len,
                                       braze_store_t** out) {
  auto* handle = new braze_store_s;
  auto s = braze::comm::FileStore::Create(path, std::string(secret, secret_len), &handle->store);
  if (!s.ok()) {
    delete handle;
    return ToC(s);
  }
  *out = handle;
  return nullptr;
}

braze_status_t braze_store_set(braze_store_t* store, const char* key, const void* value, size_t n) {
  return ToC(store->store->Set(key, std::string(static_cast<const char*>(value), n)));
}

braze_status_t braze_store_get(braze_store_t* store, const char* key, double timeout,
                               void** value, size_t* n) {
  std::string v;
  auto s = store->store->Get(key, timeout, &v);
  if (!s.ok()) return ToC(s);
  *value = malloc(v.size() ? v.size() : 1);
  memcpy(*value, v.data(), v.size());
  *n = v.size();
  return nullptr;
}

braze_status_t braze_store_add(braze_store_t* store, const char* key, int64_t delta,
                               int64_t* result) {
  return ToC(store->store->Add(key, delta, result));
}

int braze_store_port(braze_store_t* store) { return store->store->Port(); }

uint64_t braze_comm_rejected_connections(void) { return braze::comm::RejectedConnections(); }

void braze_store_release(braze_store_t* store) { delete store; }

}  // extern "C"
