#include "shm/proc.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

namespace hvd_shm {
namespace {

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string Link(const char* path) {
  char buf[128];
  ssize_t n = readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, (size_t)n) : std::string();
}

}  // namespace

std::string HostIdentity(size_t slot_bytes) {
  std::string boot = ReadFirstLine("/proc/sys/kernel/random/boot_id");
  // The network namespace too: processes in different ones are different hosts to the job (a
  // cluster of namespaces on one machine), whose traffic between them must go over the network.
  std::string pid_ns = Link("/proc/self/ns/pid"), mnt_ns = Link("/proc/self/ns/mnt"),
              ipc_ns = Link("/proc/self/ns/ipc"), net_ns = Link("/proc/self/ns/net");
  if (boot.empty() || pid_ns.empty() || mnt_ns.empty()) return "";
  return boot + "|" + pid_ns + "|" + mnt_ns + "|" + ipc_ns + "|" + net_ns + "|uid " + std::to_string(getuid()) +
         "|slot " + std::to_string(slot_bytes);
}

ProcessState ReadProcessState(int32_t pid) {
  ProcessState out;
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.gone = errno == ENOENT || errno == ESRCH;
    return out;
  }
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return out;
  std::string stat(buf, (size_t)n);
  size_t close_paren = stat.rfind(')');  // the command name, in parentheses, may hold anything
  if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) return out;
  std::istringstream fields(stat.substr(close_paren + 2));
  std::string skipped;
  fields >> out.state;
  for (int field = 4; field <= 21 && fields >> skipped; ++field) {
  }
  if (!(fields >> out.start_time)) out.start_time = 0;
  return out;
}

}  // namespace hvd_shm
