#include "shm/region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>

namespace hvd_shm {

void* CreateRegion(const std::string& prefix, size_t bytes, std::string* name) {
  uint64_t random = 0;
  try {
    std::random_device entropy;
    random = ((uint64_t)entropy() << 32) | entropy();
  } catch (const std::exception&) {  // no entropy source: the clock and an address still make it unique here
    random = (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count() ^ (uint64_t)(uintptr_t)&random;
  }
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, "-%d-%016llx", (int)getpid(), (unsigned long long)random);
  const std::string path = "/" + prefix + suffix;
  int fd = shm_open(path.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return nullptr;
  void* base = MAP_FAILED;
  if (posix_fallocate(fd, 0, (off_t)bytes) == 0) {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(path.c_str());
    return nullptr;
  }
  *name = path;
  return base;
}

void* OpenRegion(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return nullptr;
  struct stat st{};
  void* base = MAP_FAILED;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size == bytes) {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  return base == MAP_FAILED ? nullptr : base;
}

void RegionName::Remove() {
  if (!name.empty()) shm_unlink(name.c_str());
  name.clear();
}

}  // namespace hvd_shm
