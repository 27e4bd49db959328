#include "shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

namespace braze::comm {

ShmSegment::~ShmSegment() {
  Unlink();
  Unmap();
}

Status ShmSegment::Create(const std::string& tag, size_t size) {
  static std::atomic<uint64_t> counter{0};
  auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  name_ = "/braze-" + tag + "-" + std::to_string(getpid()) + "-" +
          std::to_string(counter++) + "-" + std::to_string(now % 1000000007);
  int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return SysError("shm_open(" + name_ + ")");
  owner_ = true;
  if (ftruncate(fd, (off_t)size) != 0) {
    Status s = SysError("ftruncate(" + name_ + ", " + std::to_string(size) + ")");
    close(fd);
    Unlink();
    return s;
  }
  base_ = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    Status s = SysError("mmap(" + name_ + ")");
    Unlink();
    return s;
  }
  size_ = size;
  return Status::Ok();
}

Status ShmSegment::Open(const std::string& name) {
  name_ = name;
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return SysError("shm_open(" + name + ") (is every rank on one host?)");
  struct stat st {};
  fstat(fd, &st);
  base_ = mmap(nullptr, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    return SysError("mmap(" + name + ")");
  }
  size_ = (size_t)st.st_size;
  return Status::Ok();
}

void ShmSegment::Unlink() {
  if (owner_ && !name_.empty()) shm_unlink(name_.c_str());
  owner_ = false;
}

void ShmSegment::Unmap() {
  if (base_) munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

}  // namespace braze::comm
