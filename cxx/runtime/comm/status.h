// Internal error type of the comm runtime and its bridge to braze_status_t.
#pragma once

#include <string>
#include <vector>

#include "api.h"

namespace braze::comm {

// A cheap value type: OK is code == BRAZE_OK. Failures carry a message that
// names the op, its seq id and the ranks involved where known.
struct Status {
  braze_status_code_t code = BRAZE_OK;
  std::string message;
  std::vector<int32_t> missing_ranks;

  bool ok() const { return code == BRAZE_OK; }
  static Status Ok() { return {}; }
};

Status Error(braze_status_code_t code, std::string message,
             std::vector<int32_t> missing = {});
// errno-based failure of a system call.
Status SysError(const std::string& what);
// Moves a Status into a heap braze_status_t (NULL for OK).
braze_status_t ToC(Status status);
// "[1, 3]" for messages.
std::string FormatRanks(const std::vector<int32_t>& ranks);

}  // namespace braze::comm

struct braze_status_s {
  braze::comm::Status status;
};

#define BRAZE_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::braze::comm::Status _s = (expr);         \
    if (!_s.ok()) return _s;                   \
  } while (0)
