// POSIX shared-memory segments. Every segment braze creates is named
// "/braze-..." and is unlinked as soon as all ranks have mapped it, so a
// crash cannot leave it behind in /dev/shm.
#pragma once

#include <string>

#include "status.h"

namespace braze::comm {

class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  // A fresh, zero-filled segment with a unique name built from `tag`.
  Status Create(const std::string& tag, size_t size);
  Status Open(const std::string& name);
  // Removes the name (the mapping stays valid); safe to call twice.
  void Unlink();
  void Unmap();

  char* data() const { return static_cast<char*>(base_); }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool owner_ = false;
};

}  // namespace braze::comm
