// The file store: one file per key in a directory. Writes go to a temporary
// file and are renamed into place, so a reader never sees half a value;
// counters are updated under an flock.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

#include "store.h"

namespace braze::comm {

Status WriteFileAtomically(const std::string& path, const std::string& value) {
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." +
                    std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return SysError("cannot write " + tmp);
    f.write(value.data(), value.size());
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) return SysError("rename to " + path);
  return Status::Ok();
}

namespace {
bool ReadFile(const std::string& path, std::string* value) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *value = ss.str();
  return true;
}
}  // namespace

Status FileStore::Create(const std::string& dir, const std::string& secret, std::shared_ptr<Store>* out) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return SysError("file store: cannot create directory " + dir);
  auto store = std::shared_ptr<FileStore>(new FileStore());
  store->dir_ = dir;
  store->secret_ = secret;  // a file store has no sockets; its transports do
  *out = store;
  return Status::Ok();
}

std::string FileStore::PathOf(const std::string& key) const {
  std::string name;
  for (char c : key) name += (c == '/' ? '%' : c);  // keys are flat file names
  return dir_ + "/" + name;
}

Status FileStore::Set(const std::string& key, const std::string& value) {
  return WriteFileAtomically(PathOf(key), value);
}

Status FileStore::Get(const std::string& key, double timeout, std::string* value) {
  auto deadline = DeadlineAfter(timeout);
  int sleep_us = 50;
  while (!ReadFile(PathOf(key), value)) {
    if (Clock::now() >= deadline)
      return Error(BRAZE_TIMEOUT, "file store: waiting for key '" + key + "' timed out after " +
                                      std::to_string(timeout) + " s");
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, 5000);
  }
  return Status::Ok();
}

Status FileStore::Add(const std::string& key, int64_t delta, int64_t* result) {
  std::string lock_path = dir_ + "/.lock";
  int fd = open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return SysError("file store: open " + lock_path);
  flock(fd, LOCK_EX);
  std::string text;
  int64_t old = 0;
  Status s = Status::Ok();
  if (ReadFile(PathOf(key), &text) && !ParseCounter(text, &old))
    s = Error(BRAZE_INVALID_ARGUMENT, "file store: key '" + key + "' does not hold a counter");
  if (s.ok()) s = WriteFileAtomically(PathOf(key), std::to_string(old + delta));
  flock(fd, LOCK_UN);
  close(fd);
  *result = old + delta;
  return s;
}

std::string FileStore::HostAddress() {
  // A file store is shared by hosts on one file system; loopback is only
  // right when they are all this host, which is the file store's common use.
  return "127.0.0.1";
}

}  // namespace braze::comm
