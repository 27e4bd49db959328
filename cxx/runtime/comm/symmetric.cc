// Symmetric memory: every rank of one host allocates a segment of the same
// size and maps every peer's, so `peer(r)` is plain load/store memory.
#include <unistd.h>

#include <memory>

#include "communicator.h"
#include "shm_segment.h"

namespace braze::comm {

class SymmetricMemory {
 public:
  Status Init(Communicator& comm, uint64_t nbytes) {
    nbytes_ = nbytes;
    int world = comm.world(), rank = comm.rank();
    segments_.resize(world);
    for (auto& s : segments_) s = std::make_unique<ShmSegment>();
    std::string key = comm.prefix() + "/sym/" + std::to_string(comm.NextObjectId()) + "/";
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    // A zero-size mapping is invalid; keep one byte so empty buffers work.
    BRAZE_RETURN_IF_ERROR(segments_[rank]->Create("sym", nbytes ? nbytes : 1));
    Store& store = comm.store();
    BRAZE_RETURN_IF_ERROR(store.Set(key + std::to_string(rank), std::string(host) + " " + segments_[rank]->name()));
    Status status = Status::Ok();
    for (int j = 0; j < world && status.ok(); ++j) {
      if (j == rank) continue;
      std::string rec;
      status = store.Get(key + std::to_string(j), comm.timeout(), &rec);
      if (!status.ok()) break;
      size_t space = rec.find(' ');
      if (rec.substr(0, space) != host)
        status = Error(BRAZE_INVALID_ARGUMENT, "symmetric memory needs every rank on one host: rank " +
                                                   std::to_string(j) + " is on " + rec.substr(0, space) +
                                                   ", this rank on " + host);
      else
        status = segments_[j]->Open(rec.substr(space + 1));
    }
    // Unlink only after every rank mapped every segment, whatever happened.
    Status barrier = store.Barrier(key + "mapped", rank, world, comm.timeout());
    segments_[rank]->Unlink();
    BRAZE_RETURN_IF_ERROR(status);
    return barrier;
  }

  void* Peer(int rank) const {
    return rank >= 0 && rank < (int)segments_.size() ? segments_[rank]->data() : nullptr;
  }
  uint64_t size() const { return nbytes_; }

 private:
  uint64_t nbytes_ = 0;
  std::vector<std::unique_ptr<ShmSegment>> segments_;
};

}  // namespace braze::comm

struct braze_symmetric_s {
  braze::comm::SymmetricMemory mem;
};

extern "C" {

braze_status_t braze_symmetric_create(braze_comm_t* comm, uint64_t nbytes, braze_symmetric_t** out) {
  auto* m = new braze_symmetric_s;
  braze::comm::Status s = m->mem.Init(*comm->comm, nbytes);
  if (!s.ok()) {
    delete m;
    return braze::comm::ToC(s);
  }
  *out = m;
  return nullptr;
}

void* braze_symmetric_peer(braze_symmetric_t* mem, int32_t rank) { return mem->mem.Peer(rank); }
uint64_t braze_symmetric_size(braze_symmetric_t* mem) { return mem->mem.size(); }
void braze_symmetric_release(braze_symmetric_t* mem) { delete mem; }

}  // extern "C"
