// The TCP store's wire format, shared by its server and its clients. Every
// field is checked against these bounds on the side that reads it, so a
// stranger's or a broken peer's bytes become an error, never a huge
// allocation or a read past a buffer.
//
//   request: cmd u8 | key_len u32 | value_len u64 | timeout_ms u64 | key | value
//   reply:   code u8 | payload_len u64 | payload
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace braze::comm::store_wire {

enum : uint8_t { kSet = 0, kGet = 1, kAdd = 2 };
enum : uint8_t { kReplyOk = 0, kReplyTimeout = 1, kReplyNotCounter = 2 };

constexpr size_t kRequestHeader = 1 + 4 + 8 + 8;
constexpr size_t kReplyHeader = 1 + 8;
// Keys are paths like "braze/uuid/tcp/3"; values are addresses and small
// records. The bounds leave users plenty of room and strangers none.
constexpr uint32_t kMaxKeyBytes = 4096;
constexpr uint64_t kMaxValueBytes = 64ull << 20;
// A GET may wait at most this long (30 days): keeps deadline arithmetic finite.
constexpr uint64_t kMaxWaitMs = 30ull * 24 * 3600 * 1000;

struct RequestHeader {
  uint8_t cmd = 0;
  uint32_t key_len = 0;
  uint64_t value_len = 0, timeout_ms = 0;
};

inline void AppendU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
inline void AppendU64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

// Decodes kRequestHeader bytes; returns "" if the header is acceptable, else
// what is wrong with it.
std::string ParseRequestHeader(const char* bytes, RequestHeader* out);

}  // namespace braze::comm::store_wire
