// The POSIX shared-memory region a group maps: created by member 0, opened by the others, and its
// name removed once every member has mapped it.
#pragma once

#include <cstddef>
#include <string>

namespace hvd_shm {

// Creates a region of `bytes` (mode 0600, named "/<prefix>-<pid>-<random>") and maps it, its memory
// reserved up front, so that a full /dev/shm is found out here rather than by SIGBUS in a
// collective. Null, and `name` untouched, on failure.
void* CreateRegion(const std::string& prefix, size_t bytes, std::string* name);

// Maps the region `name`, which must be `bytes` long. Null on failure.
void* OpenRegion(const std::string& name, size_t bytes);

// Member 0's region name until it is removed: removed however set-up ends (a store call may throw
// while peers map it), so that nothing is ever left in /dev/shm.
struct RegionName {
  std::string name;
  ~RegionName() { Remove(); }
  void Remove();
};

}  // namespace hvd_shm
