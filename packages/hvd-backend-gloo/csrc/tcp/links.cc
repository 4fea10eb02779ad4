// Connections of this backend's own: eager messages and direct transfers (links.h).
#include "tcp/links.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <gloo/allgather.h>

#include "comm.h"
#include "errors.h"

namespace hvd_gloo {
namespace {

using Clock = Links::Clock;

constexpr uint32_t kHelloMagic = 0x48564445;  // "HVDE": a connection of this backend's own

// While a message has at least twice this much left to arrive, poll() reports its connection
// readable only once this much is there (SO_RCVLOWAT), not for every segment: each wake-up is a
// poll() and a recv() on a 2-core machine shared with the sender.
constexpr size_t kWakeBytes = 256 << 10;
// How long a wait in poll() trusts such a mark before it reads anyway.
constexpr int kLowWaterRecheckMs = 20;

// What a member publishes: where it listens.
struct Listener {
  sockaddr_storage addr;
  socklen_t len;
};

// What a connecting member says first: who it is and which channel the connection carries.
struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t channel;
};

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

Failure LinkFailure(int status, const std::string& message, int32_t peer = -1) { return {status, message, peer}; }

// The address Gloo's device listens on ("... addr=[10.0.0.1]"): the interface the launcher chose
// (HOROVOD_GLOO_IFACE) or the one the host name resolves to.
sockaddr_storage DeviceAddress(const hvd_comm* comm, socklen_t* len) {
  const std::string described = comm->device->str();
  const size_t at = described.find("addr=[");
  const size_t end = at == std::string::npos ? at : described.find(']', at);
  if (end == std::string::npos) {
    throw LinkFailure(HVD_ERR_INTERNAL, "cannot tell the address Gloo listens on from \"" + described + "\"");
  }
  const std::string host = described.substr(at + 6, end - at - 6);
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found) {
    throw LinkFailure(HVD_ERR_INTERNAL, "Gloo listens on \"" + host + "\", which is no numeric address");
  }
  sockaddr_storage addr{};
  std::memcpy(&addr, found->ai_addr, found->ai_addrlen);
  *len = found->ai_addrlen;
  freeaddrinfo(found);
  return addr;
}

void SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags == -1 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1) throw LinkFailure(HVD_ERR_INTERNAL, Errno("fcntl"));
}

void SetNoDelay(int fd) {
  int on = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) == -1) {
    throw LinkFailure(HVD_ERR_INTERNAL, Errno("setsockopt(TCP_NODELAY)"));
  }
}

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return (int)std::max<int64_t>(0, std::min<int64_t>(left, 1 << 30));
}

// Waits for `events` on `fd` until `deadline`; false on timeout.
bool AwaitFd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, MillisLeft(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throw LinkFailure(HVD_ERR_INTERNAL, Errno("poll"));
  }
}

// Writes or reads all of a small buffer on a non-blocking socket before `deadline` (connection
// set-up only).
void WriteAll(int fd, const void* buf, size_t bytes, Clock::time_point deadline) {
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = send(fd, static_cast<const uint8_t*>(buf) + done, bytes - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += (size_t)n;
    } else if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!AwaitFd(fd, POLLOUT, deadline)) throw LinkFailure(HVD_ERR_TIMEOUT, "timed out sending a greeting");
    } else {
      throw LinkFailure(HVD_ERR_PEER_LOST, Errno("send"));
    }
  }
}

void ReadAll(int fd, void* buf, size_t bytes, Clock::time_point deadline) {
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = recv(fd, static_cast<uint8_t*>(buf) + done, bytes - done, 0);
    if (n > 0) {
      done += (size_t)n;
    } else if (n == 0) {
      throw LinkFailure(HVD_ERR_PEER_LOST, "the connection closed before its greeting");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!AwaitFd(fd, POLLIN, deadline)) throw LinkFailure(HVD_ERR_TIMEOUT, "timed out waiting for a greeting");
    } else {
      throw LinkFailure(HVD_ERR_PEER_LOST, Errno("recv"));
    }
  }
}

}  // namespace

Links::Links(hvd_comm* comm, const std::vector<size_t>& bytes)
    : comm_(comm), size_(comm->size), bytes_(bytes), links_(bytes.size() * (size_t)comm->size) {
  try {
    Connect(bytes);
  } catch (...) {
    for (Link& l : links_)
      if (l.fd != -1) close(l.fd);
    throw;
  }
}

Links::~Links() {
  for (Link& l : links_)
    if (l.fd != -1) close(l.fd);
}

void Links::Connect(const std::vector<size_t>& bytes) {
  const int32_t me = comm_->rank, n = size_;
  const int32_t channels = (int32_t)bytes.size();
  const auto deadline = Clock::now() + comm_->timeout;
  for (int32_t c = 0; c < channels; ++c) {
    for (int32_t p = 0; p < n; ++p) {
      Link& l = link(c, p);
      l.channel = c;
      l.peer = p;
      if (p == me || bytes[c] == 0) continue;
      // Not value-initialised: the pages are only committed once a message lands in them.
      for (auto& s : l.space) s.reset(new uint8_t[bytes[c]]);
    }
  }

  // Listen where Gloo's device listens, on a port of the system's choosing.
  Listener mine{};
  mine.addr = DeviceAddress(comm_, &mine.len);
  if (mine.addr.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&mine.addr)->sin6_port = 0;
  } else {
    reinterpret_cast<sockaddr_in*>(&mine.addr)->sin_port = 0;
  }
  int listener = socket(mine.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener == -1) throw LinkFailure(HVD_ERR_INTERNAL, Errno("socket"));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } close_listener{listener};
  if (bind(listener, reinterpret_cast<sockaddr*>(&mine.addr), mine.len) == -1 || listen(listener, SOMAXCONN) == -1 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&mine.addr), &mine.len) == -1) {
    throw LinkFailure(HVD_ERR_INTERNAL,
                      Errno("listening for the connections of " + Purpose() + " on " + comm_->device_description));
  }
  SetNonBlocking(listener);
  std::vector<Listener> everyone(n);
  gloo::AllgatherOptions exchange(comm_->context);
  exchange.setInput(reinterpret_cast<uint8_t*>(&mine), sizeof mine);
  exchange.setOutput(reinterpret_cast<uint8_t*>(everyone.data()), sizeof mine * (size_t)n);
  gloo::allgather(exchange);

  // Each member connects to the members above it and accepts those below, a connection per channel.
  for (int32_t p = me + 1; p < n; ++p) {
    for (int32_t c = 0; c < channels; ++c) {
      Link& l = link(c, p);
      l.fd = socket(everyone[p].addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (l.fd == -1) throw LinkFailure(HVD_ERR_INTERNAL, Errno("socket"));
      SetNonBlocking(l.fd);
      if (connect(l.fd, reinterpret_cast<const sockaddr*>(&everyone[p].addr), everyone[p].len) == -1 &&
          errno != EINPROGRESS) {
        throw LinkFailure(HVD_ERR_PEER_LOST, Errno("connecting for " + Purpose()), p);
      }
      if (!AwaitFd(l.fd, POLLOUT, deadline)) {
        throw LinkFailure(HVD_ERR_TIMEOUT, "timed out connecting for " + Purpose(), p);
      }
      int error = 0;
      socklen_t len = sizeof error;
      getsockopt(l.fd, SOL_SOCKET, SO_ERROR, &error, &len);
      if (error) {
        errno = error;
        throw LinkFailure(HVD_ERR_PEER_LOST, Errno("connecting for " + Purpose()), p);
      }
      Hello hello{kHelloMagic, me, c};
      WriteAll(l.fd, &hello, sizeof hello, deadline);
    }
  }
  for (int32_t accepted = 0; accepted < me * channels;) {
    int fd = -1;
    while ((fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)) == -1) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        throw LinkFailure(HVD_ERR_INTERNAL, Errno("accept"));
      if (!AwaitFd(listener, POLLIN, deadline)) {
        std::string missing;
        int32_t first = -1;
        for (int32_t p = 0; p < me; ++p) {
          for (int32_t c = 0; c < channels; ++c) {
            if (link(c, p).fd != -1) continue;
            if (first < 0) first = p;
            missing += (missing.empty() ? "" : ", ") + RankName(comm_, p) + " (channel " + std::to_string(c) + ")";
          }
        }
        throw LinkFailure(HVD_ERR_TIMEOUT, "timed out waiting for the connections of " + Purpose() + " from " + missing,
                          first);
      }
    }
    Hello hello{};
    try {
      ReadAll(fd, &hello, sizeof hello, deadline);
    } catch (...) {
      close(fd);
      throw;
    }
    const bool known = hello.magic == kHelloMagic && hello.rank >= 0 && hello.rank < me && hello.channel >= 0 &&
                       hello.channel < channels && link(hello.channel, hello.rank).fd == -1;
    if (!known) {  // not a member's (a port scan, say): it does not count
      close(fd);
      continue;
    }
    link(hello.channel, hello.rank).fd = fd;
    ++accepted;
  }
  for (Link& l : links_) {
    if (l.fd != -1) SetNoDelay(l.fd);
  }
}

std::string Links::Purpose() const {
  const bool all_direct = std::all_of(bytes_.begin(), bytes_.end(), [](size_t b) { return b == 0; });
  return all_direct ? "direct transfers" : "eager messages";
}

Links::Clock::time_point Links::Deadline() const { return Clock::now() + comm_->timeout; }

void Links::Send(int32_t channel, int32_t peer, const void* buf, size_t bytes) {
  Link& l = link(channel, peer);
  l.send_unwaited = true;
  l.send_active = true;
  l.send_header = bytes;
  l.send_buf = static_cast<const uint8_t*>(buf);
  l.send_bytes = bytes;
  l.send_done = 0;
  WriteSome(l);
}

void Links::WaitSent(int32_t channel, int32_t peer, Clock::time_point deadline) {
  Link& l = link(channel, peer);
  Progress(l, "send", deadline, [&] { return !l.send_active; });
  l.send_unwaited = false;
}

void Links::PostReceive(int32_t channel, int32_t peer, void* dst, size_t bytes) {
  Link& l = link(channel, peer);
  l.recv_dst = static_cast<uint8_t*>(dst);
  l.recv_bytes = bytes;
  l.recv_posted = true;
  // What is already in the socket lands now; the rest as the waits (this member's any) go on.
  Service(l);
}

void Links::WaitReceived(int32_t channel, int32_t peer, Clock::time_point deadline) {
  Link& l = link(channel, peer);
  Progress(l, "receive", deadline, [&] { return !l.recv_posted; });
}

bool Links::Sent(int32_t channel, int32_t peer) {
  Link& l = link(channel, peer);
  if (l.send_active) return false;
  l.send_unwaited = false;
  return true;
}

void Links::WaitUntil(int32_t channel, int32_t peer, const char* op, Clock::time_point deadline,
                      const std::function<bool()>& step) {
  Progress(link(channel, peer), op, deadline, step);
}

const uint8_t* Links::Receive(int32_t channel, int32_t peer) {
  Link& l = link(channel, peer);
  if (!l.held) {
    Progress(l, "receive", Deadline(), [&] { return l.filled > 0; });
    l.held = true;
  }
  return l.space[l.oldest].get();
}

void Links::ReceiveInto(int32_t channel, int32_t peer, void* dst, size_t bytes) {
  Link& l = link(channel, peer);
  if (l.filled > 0) {  // here already, whole
    if (l.lengths[l.oldest] != bytes) {
      Mismatch(l, l.lengths[l.oldest], bytes);
      Throw(l, "receive");
    }
    std::memcpy(dst, l.space[l.oldest].get(), bytes);
    l.filled -= 1;
    l.oldest ^= 1;
    return;
  }
  // On its way, or not begun: what has come moves to `dst`, the rest is read there.
  l.recv_dst = static_cast<uint8_t*>(dst);
  l.recv_bytes = bytes;
  l.recv_posted = true;
  if (!l.closed.empty()) Throw(l, "receive");
  if (l.header_got == sizeof l.header && AcceptLength(l)) std::memcpy(dst, l.space[l.oldest].get(), l.payload_got);
  Progress(l, "receive", Deadline(), [&] { return !l.recv_posted; });
}

void Links::Release(int32_t channel, int32_t peer) {
  Link& l = link(channel, peer);
  l.held = false;
  l.filled -= 1;
  l.oldest ^= 1;
}

void Links::Service(Link& l) {
  if (l.fd == -1 || !l.closed.empty()) return;
  if (l.send_active) WriteSome(l);
  ReadSome(l);
}

void Links::Fail(Link& l, int status, std::string why) {
  l.closed = std::move(why);
  l.closed_status = status;
  shutdown(l.fd, SHUT_RDWR);
}

std::string Links::Waiting(const Link& l, const char* op) const {
  if (direct(l)) return std::string(op) + " of a direct transfer";
  return "eager " + std::string(op) + " on channel " + std::to_string(l.channel);
}

bool Links::AcceptLength(Link& l) {
  // A posted receive (direct, or a message taken straight into place) knows its length.
  if (l.recv_posted ? l.header == l.recv_bytes : l.header > 0 && l.header <= bytes_[l.channel]) return true;
  if (l.recv_posted) {
    Mismatch(l, l.header, l.recv_bytes);
  } else {
    Fail(l, HVD_ERR_INVALID_ARGUMENT,
         "the peer sent a message of " + std::to_string(l.header) + " bytes, where the channel holds 1 to " +
             std::to_string(bytes_[l.channel]));
  }
  return false;
}

void Links::Mismatch(Link& l, uint64_t sent, size_t expected) {
  // The members disagree on what they exchange (a receive's length comes from the collective this
  // member was called with): a mismatch, not a lost peer.
  Fail(l, HVD_ERR_INVALID_ARGUMENT,
       "collective mismatch: the peer sent a message of " + std::to_string(sent) +
           " bytes, where this member expected " + std::to_string(expected));
}

void Links::Throw(const Link& l, const char* op) const {
  const std::string detail = Waiting(l, op) + ": " + l.closed;
  if (l.closed_status == HVD_ERR_PEER_LOST) throw PeerLost(detail, l.peer);
  throw LinkFailure(l.closed_status, detail, l.peer);
}

void Links::ReadSome(Link& l) {
  while (l.closed.empty() && ready_to_read(l)) {
    uint8_t* to;
    size_t want;
    if (l.header_got < sizeof l.header) {
      to = reinterpret_cast<uint8_t*>(&l.header) + l.header_got;
      want = sizeof l.header - l.header_got;
    } else {
      to = (l.recv_posted ? l.recv_dst : l.space[(l.oldest + l.filled) % 2].get()) + l.payload_got;
      want = l.header - l.payload_got;
    }
    ssize_t got = recv(l.fd, to, want, 0);
    if (got == -1 && errno == EINTR) continue;
    if (got == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      SetLowWater(l);  // a wait in poll() follows
      return;
    }
    if (got <= 0) {
      const bool between = l.header_got == 0;
      Fail(l, HVD_ERR_PEER_LOST,
           got == 0 ? (between ? "the peer closed the connection" : "the peer closed the connection mid-message")
                    : Errno("recv"));
      return;
    }
    if (l.header_got < sizeof l.header) {
      l.header_got += (size_t)got;
      if (l.header_got == sizeof l.header && !AcceptLength(l)) return;
      continue;
    }
    l.payload_got += (size_t)got;
    if (l.payload_got == l.header) {
      if (l.recv_posted) {
        l.recv_posted = false;  // in place: no space was used
      } else {
        l.lengths[(l.oldest + l.filled) % 2] = l.header;
        l.filled += 1;
      }
      l.header_got = l.payload_got = 0;
      SetLowWater(l);  // between messages: at once again, even if no read follows
    }
  }
}

void Links::SetLowWater(Link& l) {
  int mark = 1;
  if (l.header_got == sizeof l.header && l.header - l.payload_got >= 2 * kWakeBytes) mark = (int)kWakeBytes;
  if (mark == l.low_water) return;
  // Not worth failing for: without it, the wait only wakes more often.
  if (setsockopt(l.fd, SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof mark) == 0) l.low_water = mark;
}

void Links::WriteSome(Link& l) {
  while (l.send_active && l.closed.empty()) {
    iovec parts[2];
    int count = 0;
    if (l.send_done < sizeof l.send_header) {
      parts[count++] = {reinterpret_cast<uint8_t*>(&l.send_header) + l.send_done, sizeof l.send_header - l.send_done};
      parts[count++] = {const_cast<uint8_t*>(l.send_buf), l.send_bytes};
    } else {
      const size_t at = l.send_done - sizeof l.send_header;
      parts[count++] = {const_cast<uint8_t*>(l.send_buf) + at, l.send_bytes - at};
    }
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = (size_t)count;
    ssize_t put = sendmsg(l.fd, &message, MSG_NOSIGNAL);
    if (put == -1 && errno == EINTR) continue;
    if (put == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (put == -1) {
      Fail(l, HVD_ERR_PEER_LOST, Errno("send"));
      return;
    }
    l.send_done += (size_t)put;
    if (l.send_done == sizeof l.send_header + l.send_bytes) l.send_active = false;
  }
}

template <typename Done>
void Links::Progress(Link& l, const char* op, Clock::time_point deadline, Done done) {
  std::vector<pollfd>& fds = poll_fds_;
  std::vector<Link*>& polled = polled_;
  for (;;) {
    Service(l);
    if (done()) return;
    if (!l.closed.empty()) Throw(l, op);
    // Everything else goes on too: a peer may be waiting for this member to read what it sends.
    fds.clear();
    polled.clear();
    bool marked = false;
    for (Link& other : links_) {
      if (other.fd == -1) continue;
      if (!other.closed.empty()) {
        // A transfer this member has under way on it can no longer finish: fail now, naming that
        // peer, instead of waiting on `l`'s (which may be waiting in turn, or not yet called).
        if (other.recv_posted || other.send_active) {
          comm_->waiting_on = {other.peer};
          Throw(other, other.recv_posted ? "receive" : "send");
        }
        continue;
      }
      const bool reads = ready_to_read(other);
      short events = (short)((reads ? POLLIN : 0) | (other.send_active ? POLLOUT : 0));
      if (!events) continue;
      marked = marked || (reads && other.low_water > 1);
      fds.push_back({other.fd, events, 0});
      polled.push_back(&other);
    }
    // A kernel that cannot queue a low-water mark's worth (before Linux 4.18, SO_RCVLOWAT did not
    // grow the receive buffer to fit it) would never report such a link readable: look anyway.
    const int left = MillisLeft(deadline);
    int ready = poll(fds.data(), fds.size(), marked ? std::min(left, kLowWaterRecheckMs) : left);
    if (ready == -1 && errno != EINTR) throw LinkFailure(HVD_ERR_INTERNAL, Errno("poll"));
    if (ready == 0 && Clock::now() >= deadline) throw TimedOut(comm_->timeout, Waiting(l, op), l.peer);
    for (size_t i = 0; i < fds.size(); ++i) {
      const bool recheck = ready == 0 && polled[i]->low_water > 1;
      if ((fds[i].revents || recheck) && polled[i] != &l) Service(*polled[i]);
    }
  }
}

}  // namespace hvd_gloo
