#include "tcp_store_protocol.h"

#include <cstring>

namespace braze::comm::store_wire {

std::string ParseRequestHeader(const char* bytes, RequestHeader* h) {
  h->cmd = static_cast<uint8_t>(bytes[0]);
  memcpy(&h->key_len, bytes + 1, 4);
  memcpy(&h->value_len, bytes + 5, 8);
  memcpy(&h->timeout_ms, bytes + 13, 8);
  if (h->cmd > kAdd) return "unknown command " + std::to_string(h->cmd);
  if (h->key_len > kMaxKeyBytes)
    return "key of " + std::to_string(h->key_len) + " bytes (limit " + std::to_string(kMaxKeyBytes) + ")";
  if (h->value_len > kMaxValueBytes)
    return "value of " + std::to_string(h->value_len) + " bytes (limit " + std::to_string(kMaxValueBytes) + ")";
  if (h->cmd == kAdd && h->value_len != 8) return "ADD with a " + std::to_string(h->value_len) + "-byte delta";
  if (h->cmd == kGet && h->value_len != 0) return "GET with a value";
  if (h->timeout_ms > kMaxWaitMs) h->timeout_ms = kMaxWaitMs;
  return "";
}

}  // namespace braze::comm::store_wire
