// What /proc tells of this member's host, and of a peer's process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hvd_shm {

// What members must share to map one region: the same running kernel (boot id), the same PID
// namespace (liveness is checked through /proc/<pid>), the same mount and IPC namespaces (the
// same /dev/shm), the same network namespace (another one is another host of the job), the same
// user (the region is 0600), and the same slot size. Empty when /proc
// does not tell.
std::string HostIdentity(size_t slot_bytes);

// What /proc/<pid>/stat says of a process: gone only when the kernel no longer knows the pid. Any
// other failure to read it (descriptors exhausted, /proc mounted with hidepid, a command name
// holding a newline) leaves the process presumed alive: a timeout, not a false report of death.
struct ProcessState {
  bool gone = false;
  char state = 0;           // field 3: R, S, D, T (stopped), t (traced), Z (zombie), X (dead); 0 if unread
  uint64_t start_time = 0;  // field 22, in clock ticks since boot; 0 if unread
};

ProcessState ReadProcessState(int32_t pid);

}  // namespace hvd_shm
