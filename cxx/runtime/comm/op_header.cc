// Cross-rank agreement checks shared by every backend.
#include "reduce.h"
#include "transport.h"

namespace braze::comm {

OpHeader OpContext::Header() const {
  OpHeader h;
  h.op = desc.op;
  h.dtype = desc.dtype;
  h.reduce_op = desc.reduce_op;
  h.peer = desc.peer;
  h.seq = seq;
  h.in_count = desc.in_count;
  h.out_count = desc.out_count;
  return h;
}

size_t OpContext::ElementSize() const { return DtypeSize(desc.dtype); }

namespace {
std::string Describe(const OpHeader& h) {
  std::string s = std::string(braze_op_name((braze_op_kind_t)h.op)) + " seq " +
                  std::to_string(h.seq) + " with " + std::to_string(h.in_count) + " " +
                  DtypeName((braze_dtype_t)h.dtype) + " elements";
  if (h.op == BRAZE_OP_ALL_REDUCE || h.op == BRAZE_OP_REDUCE_SCATTER)
    s += std::string(", op ") + ReduceOpName((braze_reduce_op_t)h.reduce_op);
  if (h.op == BRAZE_OP_BROADCAST) s += ", root " + std::to_string(h.peer);
  return s;
}
}  // namespace

Status CheckHeader(const OpContext& ctx, const OpHeader& mine, const OpHeader& theirs,
                   int my_rank, int their_rank) {
  if (theirs.magic != mine.magic)
    return Error(BRAZE_INTERNAL, ctx.label + ": corrupt header from rank " + std::to_string(their_rank));
  bool same = theirs.dtype == mine.dtype && theirs.seq == mine.seq;
  bool p2p = mine.op == BRAZE_OP_SEND || mine.op == BRAZE_OP_RECV;
  if (p2p) {
    int expected = mine.op == BRAZE_OP_SEND ? BRAZE_OP_RECV : BRAZE_OP_SEND;
    same = theirs.op == expected && theirs.dtype == mine.dtype && theirs.peer == my_rank &&
           theirs.in_count == mine.in_count;
  } else {
    same = same && theirs.op == mine.op;
    if (same && mine.op != BRAZE_OP_BARRIER && mine.op != BRAZE_OP_ALL_TO_ALL)
      same = theirs.in_count == mine.in_count;
    if (same && (mine.op == BRAZE_OP_ALL_REDUCE || mine.op == BRAZE_OP_REDUCE_SCATTER))
      same = theirs.reduce_op == mine.reduce_op;
    if (same && mine.op == BRAZE_OP_BROADCAST) same = theirs.peer == mine.peer;
  }
  if (same) return Status::Ok();
  return Error(BRAZE_MISMATCH, ctx.label + ": ranks disagree: rank " + std::to_string(my_rank) +
                                   " issued " + Describe(mine) + " but rank " +
                                   std::to_string(their_rank) + " issued " + Describe(theirs),
               {their_rank});
}

Status CheckSplits(const OpContext& ctx, const std::vector<std::vector<uint64_t>>& in_splits,
                   const std::vector<std::vector<uint64_t>>& out_splits) {
  size_t n = in_splits.size();
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (in_splits[i][j] != out_splits[j][i])
        return Error(BRAZE_MISMATCH,
                     ctx.label + ": rank " + std::to_string(i) + " sends " +
                         std::to_string(in_splits[i][j]) + " elements to rank " +
                         std::to_string(j) + ", which expects " +
                         std::to_string(out_splits[j][i]) + " (in_splits/out_splits disagree)",
                     {(int32_t)i, (int32_t)j});
  return Status::Ok();
}

Status TransportBase::Run(const OpContext& ctx) {
  if (aborted_.load()) return Aborted(ctx);
  switch (ctx.desc.op) {
    case BRAZE_OP_ALL_REDUCE: return AllReduce(ctx);
    case BRAZE_OP_ALL_GATHER: return AllGather(ctx);
    case BRAZE_OP_REDUCE_SCATTER: return ReduceScatter(ctx);
    case BRAZE_OP_BROADCAST: return Broadcast(ctx);
    case BRAZE_OP_ALL_TO_ALL: return AllToAll(ctx);
    case BRAZE_OP_SEND: return Send(ctx);
    case BRAZE_OP_RECV: return Recv(ctx);
    case BRAZE_OP_BARRIER: return RunBarrier(ctx);
  }
  return Error(BRAZE_INVALID_ARGUMENT, ctx.label + ": unknown op");
}

namespace {
std::string SetupFailedKey(const TransportConfig& config) { return config.prefix + "/setup_failed"; }
}  // namespace

// The record: "<rank> <status code> <blamed ranks, comma-separated, or ->",
// a newline, then the message.
void ReportSetupFailure(const TransportConfig& config, const Status& why) {
  if (!PeerSetupFailure(config).ok()) return;  // this rank failed because of that report
  std::string blamed;
  for (int32_t r : why.missing_ranks) blamed += (blamed.empty() ? "" : ",") + std::to_string(r);
  std::string record = std::to_string(config.rank) + " " + std::to_string((int)why.code) + " " +
                       (blamed.empty() ? "-" : blamed) + "\n" + why.message;
  (void)config.store->Set(SetupFailedKey(config), record);  // best effort: the peers still time out
}

Status PeerSetupFailure(const TransportConfig& config) {
  std::string record;
  if (!config.store->Get(SetupFailedKey(config), 0.001, &record).ok()) return Status::Ok();
  // Parsed defensively: a malformed record still fails the setup, naming nobody.
  size_t newline = record.find('\n');
  std::string message = newline == std::string::npos ? "" : record.substr(newline + 1);
  std::vector<std::string> fields;
  for (size_t at = 0; fields.size() < 3;) {
    size_t end = std::min(record.find_first_of(" \n", at), newline);
    fields.push_back(record.substr(at, end - at));
    if (end >= newline) break;
    at = end + 1;
  }
  int64_t rank = -1, code = -1;
  std::vector<int32_t> blamed;
  if (fields.size() == 3 && ParseCounter(fields[0], &rank) && rank >= 0 && rank < config.world &&
      ParseCounter(fields[1], &code)) {
    for (size_t at = 0; fields[2] != "-" && at <= fields[2].size();) {
      size_t comma = std::min(fields[2].find(',', at), fields[2].size());
      int64_t r = -1;
      if (ParseCounter(fields[2].substr(at, comma - at), &r) && r >= 0 && r < config.world)
        blamed.push_back((int32_t)r);
      at = comma + 1;
    }
  } else {
    rank = -1;
  }
  // The peers blame whom the reporter blamed. One that blamed nobody is the
  // one that left when its own part failed (it could not bind, map, ...),
  // but not when it merely timed out waiting.
  bool waited = code == BRAZE_TIMEOUT || code == BRAZE_RANK_FAILED;
  if (rank >= 0 && blamed.empty() && !waited) blamed = {(int32_t)rank};
  return Error(waited ? (braze_status_code_t)code : BRAZE_RANK_FAILED,
               (rank >= 0 ? "rank " + std::to_string(rank) : std::string("a rank")) +
                   " gave up on the group's setup (" + message + ")",
               blamed);
}

Status CheckSetupFinished(const TransportConfig& config, Status init) {
  double late = SecondsPast(config.deadline);
  if (late > kStalledSeconds)
    return Error(BRAZE_TIMEOUT, "this rank stalled in the group's setup: it ran again " + std::to_string(late) +
                                    " s after the setup's deadline (stopped, or starved of CPU), so its peers "
                                    "gave up on it" + (init.ok() ? "" : " (" + init.message + ")"),
                 {(int32_t)config.rank});
  if (!init.ok()) return init;
  return PeerSetupFailure(config);  // all or nothing: a peer gave up just as this rank finished
}

TransportFactory FindTransport(const std::string& backend) {
  if (backend == "shm") return CreateShmTransport;
  if (backend == "tcp") return CreateTcpTransport;
  return nullptr;
}

}  // namespace braze::comm
