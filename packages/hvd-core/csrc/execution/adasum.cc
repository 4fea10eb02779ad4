#include "execution/adasum.h"

#include <algorithm>

#include "execution/adasum_math.h"
#include "horovod/hvd_reduce.hpp"

namespace hvdcore {
namespace {

// Elements [lo, hi) of the fused buffer.
struct Segment {
  size_t lo = 0, hi = 0;
  size_t size() const { return hi - lo; }
};

class Adasum {
 public:
  Adasum(Comm& comm, uint8_t* buffer, const std::vector<size_t>& counts, hvd_dtype dtype, uint8_t* other)
      : comm_(comm),
        buffer_(buffer),
        other_(other),
        dtype_(dtype),
        esize_(hvd::dtype_size(dtype)),
        n_(comm.size()),
        me_(comm.rank()),
        tree_(LargestPowerOfTwo(comm.size())) {
    size_t offset = 0;
    for (size_t c : counts) {
      tensors_.push_back({offset, offset + c});
      offset += c;
    }
    total_ = offset;
  }

  Status Run() {
    const int32_t extra = n_ - tree_;
    // Members past the tree hand their vectors to their partners in it, and wait.
    const int32_t partner = me_ >= tree_ ? me_ - tree_ : me_ < extra ? me_ + tree_ : -1;
    Status st = Exchange(me_ >= tree_ ? partner : -1, {0, total_}, me_ < extra ? partner : -1, {0, total_}, other_);
    if (!st.ok()) return st;
    if (me_ < extra) CombineWhole();
    st = Tree();
    if (!st.ok()) return st;
    return Exchange(me_ < extra ? partner : -1, {0, total_}, me_ >= tree_ ? partner : -1, {0, total_}, buffer_);
  }

 private:
  static int32_t LargestPowerOfTwo(int32_t n) {
    int32_t p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
  }

  uint8_t* at(uint8_t* base, size_t element) const { return base + element * esize_; }

  // One alltoallv of every member: this one sends `send` of its buffer to `to` and receives `recv`
  // from `from` into the same elements of `into` (-1: none).
  Status Exchange(int32_t to, Segment send, int32_t from, Segment recv, uint8_t* into) {
    std::vector<size_t> send_counts(n_, 0), recv_counts(n_, 0);
    if (to >= 0) send_counts[to] = send.size();
    if (from >= 0) recv_counts[from] = recv.size();
    return comm_.Alltoallv(at(buffer_, send.lo), send_counts, at(into, recv.lo), recv_counts, dtype_);
  }

  // A member of the tree with an extra partner: its vectors (a) and the partner's (b), whole.
  void CombineWhole() {
    for (const Segment& t : tensors_) {
      const DotAndNorms d = PartialDotAndNorms(dtype_, at(buffer_, t.lo), at(other_, t.lo), t.size());
      ScaledAdd(dtype_, at(buffer_, t.lo), AdasumCoefficient(d.dot, d.a_norm_sq), at(other_, t.lo),
                AdasumCoefficient(d.dot, d.b_norm_sq), t.size());
    }
  }

  Status Tree() {
    const bool in_tree = me_ < tree_;
    Segment held{0, total_};
    std::vector<Segment> before;  // what was held before each level's halving
    for (int32_t level = 1; level < tree_; level *= 2) {
      const bool lower = (me_ & level) == 0;
      const int32_t peer = in_tree ? me_ ^ level : -1;
      const size_t mid = held.lo + held.size() / 2;
      const Segment kept = lower ? Segment{held.lo, mid} : Segment{mid, held.hi};
      const Segment given = lower ? Segment{mid, held.hi} : Segment{held.lo, mid};
      Status st = Exchange(peer, given, peer, kept, other_);
      if (!st.ok()) return st;
      before.push_back(held);
      held = kept;
      st = CombineLevel(level, held, lower, in_tree);
      if (!st.ok()) return st;
    }
    for (int32_t level = tree_ / 2; level >= 1; level /= 2) {
      const Segment whole = before.back();
      before.pop_back();
      const bool lower = (me_ & level) == 0;
      const int32_t peer = in_tree ? me_ ^ level : -1;
      const Segment theirs = lower ? Segment{held.hi, whole.hi} : Segment{whole.lo, held.lo};
      Status st = Exchange(peer, held, peer, theirs, buffer_);
      if (!st.ok()) return st;
      held = whole;
    }
    return Status::Ok();
  }

  // Level `level` of the tree: this member holds `held` of its vectors and, in other_, its peer's.
  // Each tensor's dot product and norms are sums over the 2 * level members whose pieces make up
  // the two vectors, found by one allreduce of every group's sums (zeros but for this member's).
  Status CombineLevel(int32_t level, Segment held, bool lower, bool in_tree) {
    const size_t per_group = tensors_.size() * 3;
    const int32_t groups = tree_ / (2 * level);
    std::vector<double> sums((size_t)groups * per_group, 0.0);
    double* mine = in_tree ? sums.data() + (size_t)(me_ / (2 * level)) * per_group : nullptr;
    for (size_t i = 0; mine && i < tensors_.size(); ++i) {
      const Segment part = Within(held, tensors_[i]);
      if (!part.size()) continue;
      const DotAndNorms d = PartialDotAndNorms(dtype_, at(buffer_, part.lo), at(other_, part.lo), part.size());
      // [dot, |lower member's vector|^2, |upper member's vector|^2]
      mine[3 * i] = d.dot;
      mine[3 * i + 1] = lower ? d.a_norm_sq : d.b_norm_sq;
      mine[3 * i + 2] = lower ? d.b_norm_sq : d.a_norm_sq;
    }
    Status st = comm_.Allreduce(sums.data(), sums.data(), sums.size(), HVD_DTYPE_FLOAT64, HVD_REDUCE_SUM);
    if (!st.ok() || !mine) return st;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Segment part = Within(held, tensors_[i]);
      if (!part.size()) continue;
      const double dot = mine[3 * i];
      const double own = lower ? mine[3 * i + 1] : mine[3 * i + 2];
      const double theirs = lower ? mine[3 * i + 2] : mine[3 * i + 1];
      ScaledAdd(dtype_, at(buffer_, part.lo), AdasumCoefficient(dot, own), at(other_, part.lo),
                AdasumCoefficient(dot, theirs), part.size());
    }
    return Status::Ok();
  }

  static Segment Within(Segment held, Segment tensor) {
    const size_t lo = std::max(held.lo, tensor.lo), hi = std::min(held.hi, tensor.hi);
    return lo < hi ? Segment{lo, hi} : Segment{lo, lo};
  }

  Comm& comm_;
  uint8_t* buffer_;
  uint8_t* other_;
  hvd_dtype dtype_;
  size_t esize_;
  int32_t n_, me_, tree_;
  std::vector<Segment> tensors_;
  size_t total_ = 0;
};

}  // namespace

Status AdasumAllreduce(Comm& comm, uint8_t* buffer, const std::vector<size_t>& counts, hvd_dtype dtype,
                       std::vector<uint8_t>& scratch) {
  if (!AdasumDtype(dtype)) {
    return Status::InvalidArgument(std::string("op=Adasum combines floating-point tensors only, got ") +
                                   hvd::dtype_name(dtype));
  }
  if (comm.size() == 1) return Status::Ok();
  size_t total = 0;
  for (size_t c : counts) total += c;
  if (scratch.size() < total * hvd::dtype_size(dtype)) scratch.resize(total * hvd::dtype_size(dtype));
  return Adasum(comm, buffer, counts, dtype, scratch.data()).Run();
}

}  // namespace hvdcore
