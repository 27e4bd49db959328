#include "status.h"

#include <cerrno>
#include <cstring>

namespace braze::comm {

Status Error(braze_status_code_t code, std::string message,
             std::vector<int32_t> missing) {
  Status s;
  s.code = code;
  s.message = std::move(message);
  s.missing_ranks = std::move(missing);
  return s;
}

Status SysError(const std::string& what) {
  return Error(BRAZE_UNAVAILABLE, what + ": " + std::strerror(errno));
}

braze_status_t ToC(Status status) {
  if (status.ok()) return nullptr;
  return new braze_status_s{std::move(status)};
}

std::string FormatRanks(const std::vector<int32_t>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ranks[i]);
  }
  return out + "]";
}

}  // namespace braze::comm

extern "C" {

braze_status_code_t braze_status_code(braze_status_t status) {
  return status ? status->status.code : BRAZE_OK;
}

const char* braze_status_message(braze_status_t status) {
  return status ? status->status.message.c_str() : "";
}

size_t braze_status_missing_ranks(braze_status_t status, const int32_t** ranks) {
  if (!status) return 0;
  *ranks = status->status.missing_ranks.data();
  return status->status.missing_ranks.size();
}

void braze_status_free(braze_status_t status) { delete status; }

}  // extern "C"
