// Broadcast over TCP: a binomial tree rooted at the root (Gloo's and MPI's shape), each edge one
// direct transfer (links.h) from the parent's buffer straight into the child's.
//
// Not gloo::broadcast: the same tree, but each message goes through Gloo's event-loop thread on
// both sides, a hand-off that made large broadcasts between hosts 1.5 times slower
// (benchmarks/results/run-29-direct-transfers.md).
#include "tcp/tcp_transport.h"

namespace hvd_gloo {
namespace {

// Members are placed on the tree by their distance from the root ("virtual rank").
int32_t Virtual(int32_t rank, int32_t root, int32_t n) { return (rank - root + n) % n; }
int32_t Actual(int32_t vrank, int32_t root, int32_t n) { return (vrank + root) % n; }

}  // namespace

void TcpTransport::Broadcast(void* buf, size_t count, size_t element_size, int32_t root) {
  const int32_t n = comm_->size;
  const size_t bytes = count * element_size;
  const int32_t me = Virtual(comm_->rank, root, n);
  Links& links = direct_;
  const auto deadline = links.Deadline();
  // A member's parent is itself with its lowest set bit cleared; it receives the whole buffer
  // from there, then passes it on to its children: itself plus each smaller power of two.
  const int32_t lowest = me ? me & -me : n;  // the root's children span every power of two below n
  if (me) {
    const int32_t parent = Actual(me - lowest, root, n);
    comm_->waiting_on = {parent};
    links.PostReceive(kDirect, parent, buf, bytes);
    links.WaitReceived(kDirect, parent, deadline);
  }
  std::vector<int32_t> children;
  for (int32_t step = 1; step < lowest && me + step < n; step <<= 1) children.push_back(Actual(me + step, root, n));
  // The largest subtree first: its members wait longest for the data to reach them.
  for (auto child = children.rbegin(); child != children.rend(); ++child) links.Send(kDirect, *child, buf, bytes);
  for (auto child = children.rbegin(); child != children.rend(); ++child) {
    comm_->waiting_on = {*child};
    links.WaitSent(kDirect, *child, deadline);
  }
  comm_->waiting_on.clear();
}

}  // namespace hvd_gloo
