#include "negotiation/message.h"

#include <cstring>

namespace hvdcore {
namespace {

// The magic numbers name both the message and the version of its layout: they change whenever the
// layout does, so that ranks built from different versions refuse each other's messages (with an
// error saying so) instead of misreading them. Version 2 added Request::splits and
// Response::tensor_sizes; requests' version 3, Request::refusal.
constexpr uint32_t kRequestMagic = 0x48565133;   // "HVQ3"
constexpr uint32_t kResponseMagic = 0x48565332;  // "HVS2"

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(out) {}
  template <typename T>
  void Pod(T v) {
    size_t n = out_->size();
    out_->resize(n + sizeof(T));
    std::memcpy(out_->data() + n, &v, sizeof(T));
  }
  void Str(const std::string& s) {
    Pod<uint32_t>((uint32_t)s.size());
    out_->insert(out_->end(), s.begin(), s.end());
  }
  template <typename T>
  void Vec(const std::vector<T>& v) {
    Pod<uint32_t>((uint32_t)v.size());
    for (const T& x : v) Pod<T>(x);
  }

 private:
  std::vector<uint8_t>* out_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  bool failed() const { return failed_; }
  const std::string& error() const { return error_; }
  bool at_end() const { return p_ == end_; }

  template <typename T>
  T Pod(const char* what) {
    T v{};
    if (!Need(sizeof(T), what)) return v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  std::string Str(uint32_t max, const char* what) {
    uint32_t n = Pod<uint32_t>(what);
    if (failed_) return {};
    if (n > max) return Fail(what, "length exceeds bound"), std::string();
    if (!Need(n, what)) return {};
    std::string s((const char*)p_, n);
    p_ += n;
    return s;
  }
  template <typename T>
  std::vector<T> Vec(uint32_t max, const char* what) {
    uint32_t n = Pod<uint32_t>(what);
    if (failed_) return {};
    if (n > max) return Fail(what, "count exceeds bound"), std::vector<T>();
    // Check the bytes exist before allocating, so a forged count cannot allocate gigabytes.
    if (!Need((size_t)n * sizeof(T), what)) return {};
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), p_, (size_t)n * sizeof(T));
    p_ += (size_t)n * sizeof(T);
    return v;
  }
  uint32_t Count(uint32_t max, size_t min_item_bytes, const char* what) {
    uint32_t n = Pod<uint32_t>(what);
    if (failed_) return 0;
    if (n > max || (size_t)n * min_item_bytes > (size_t)(end_ - p_)) {
      Fail(what, "count exceeds the message");
      return 0;
    }
    return n;
  }
  void Fail(const char* what, const char* why) {
    if (!failed_) error_ = std::string("malformed negotiation message: ") + what + ": " + why;
    failed_ = true;
    p_ = end_;
  }

 private:
  bool Need(size_t n, const char* what) {
    if (failed_) return false;
    if ((size_t)(end_ - p_) < n) {
      Fail(what, "truncated");
      return false;
    }
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool failed_ = false;
  std::string error_;
};

bool ValidDtype(uint8_t d) { return d < HVD_DTYPE_COUNT; }

}  // namespace

void EncodeRequests(const std::vector<Request>& requests, std::vector<uint8_t>* out) {
  out->clear();
  Writer w(out);
  w.Pod<uint32_t>(kRequestMagic);
  w.Pod<uint32_t>((uint32_t)requests.size());
  for (const Request& r : requests) {
    w.Pod<int32_t>(r.rank);
    w.Pod<uint8_t>((uint8_t)r.type);
    w.Pod<uint8_t>((uint8_t)r.dtype);
    w.Pod<uint8_t>((uint8_t)r.op);
    w.Pod<uint8_t>(r.invalidates_cache ? 1 : 0);
    w.Pod<int32_t>(r.root);
    w.Pod<uint32_t>(r.device_kind);
    w.Pod<double>(r.prescale);
    w.Pod<double>(r.postscale);
    w.Str(r.name);
    w.Vec(r.shape);
    w.Pod<int64_t>(r.group_id);
    w.Pod<int32_t>(r.group_size);
    w.Vec(r.ranks);
    w.Vec(r.splits);
    w.Str(r.refusal);
  }
}

Status DecodeRequests(const uint8_t* data, size_t size, std::vector<Request>* out) {
  out->clear();
  Reader rd(data, size);
  if (rd.Pod<uint32_t>("magic") != kRequestMagic && !rd.failed())
    rd.Fail("magic", "not a request list of this version of hvd-core");
  // The smallest encoded request is 64 bytes; bounding the count by it stops forged counts.
  uint32_t n = rd.Count(kMaxListItems, 64, "request count");
  for (uint32_t i = 0; i < n && !rd.failed(); ++i) {
    Request r;
    r.rank = rd.Pod<int32_t>("rank");
    uint8_t type = rd.Pod<uint8_t>("type"), dtype = rd.Pod<uint8_t>("dtype"), op = rd.Pod<uint8_t>("op");
    r.invalidates_cache = rd.Pod<uint8_t>("flags") != 0;
    if (type >= kOpTypeCount) rd.Fail("type", "unknown op type");
    if (!ValidDtype(dtype)) rd.Fail("dtype", "unknown dtype");
    if (op >= kReduceOpCount) rd.Fail("op", "unknown reduce op");
    r.type = (OpType)type;
    if (ValidDtype(dtype)) r.dtype = (hvd_dtype)dtype;  // a C enum: no other value may be stored in it
    r.op = (ReduceOp)op;
    r.root = rd.Pod<int32_t>("root");
    r.device_kind = rd.Pod<uint32_t>("device");
    r.prescale = rd.Pod<double>("prescale");
    r.postscale = rd.Pod<double>("postscale");
    r.name = rd.Str(kMaxNameBytes, "name");
    r.shape = rd.Vec<int64_t>(kMaxDims, "shape");
    for (int64_t d : r.shape)
      if (d < 0) rd.Fail("shape", "negative dimension");
    r.group_id = rd.Pod<int64_t>("group id");
    r.group_size = rd.Pod<int32_t>("group size");
    r.ranks = rd.Vec<int32_t>(kMaxListItems, "ranks");
    r.splits = rd.Vec<int64_t>(kMaxListItems, "splits");
    for (int64_t x : r.splits)
      if (x < 0) rd.Fail("splits", "negative split");
    r.refusal = rd.Str(kMaxNameBytes, "refusal");
    out->push_back(std::move(r));
  }
  if (!rd.failed() && !rd.at_end()) rd.Fail("request list", "trailing bytes");
  if (rd.failed()) {
    out->clear();
    return Status::Aborted(rd.error());
  }
  return Status::Ok();
}

void EncodeResponseList(const ResponseList& list, std::vector<uint8_t>* out) {
  out->clear();
  Writer w(out);
  w.Pod<uint32_t>(kResponseMagic);
  w.Vec(list.cache_erase);
  w.Str(list.shutdown_error);
  w.Pod<uint32_t>((uint32_t)list.responses.size());
  for (const Response& r : list.responses) {
    w.Pod<uint8_t>((uint8_t)r.kind);
    w.Pod<uint8_t>((uint8_t)r.type);
    w.Pod<uint8_t>((uint8_t)r.dtype);
    w.Pod<uint8_t>((uint8_t)r.op);
    w.Pod<uint8_t>(r.cacheable ? 1 : 0);
    w.Pod<int32_t>(r.root);
    w.Pod<uint32_t>(r.device_kind);
    w.Pod<double>(r.prescale);
    w.Pod<double>(r.postscale);
    w.Pod<uint32_t>((uint32_t)r.names.size());
    for (size_t i = 0; i < r.names.size(); ++i) {
      w.Str(r.names[i]);
      w.Vec(r.shapes[i]);
    }
    w.Str(r.error);
    w.Pod<int32_t>(r.last_joined_rank);
    w.Vec(r.ranks);
    w.Vec(r.tensor_sizes);
  }
}

Status DecodeResponseList(const uint8_t* data, size_t size, ResponseList* out) {
  *out = ResponseList();
  Reader rd(data, size);
  if (rd.Pod<uint32_t>("magic") != kResponseMagic && !rd.failed())
    rd.Fail("magic", "not a response list of this version of hvd-core");
  out->cache_erase = rd.Vec<int32_t>(kMaxListItems, "cache erase list");
  out->shutdown_error = rd.Str(kMaxNameBytes, "shutdown error");
  // The smallest encoded response is 49 bytes; bounding the count by it stops forged counts.
  uint32_t n = rd.Count(kMaxListItems, 49, "response count");
  for (uint32_t i = 0; i < n && !rd.failed(); ++i) {
    Response r;
    uint8_t kind = rd.Pod<uint8_t>("kind"), type = rd.Pod<uint8_t>("type");
    uint8_t dtype = rd.Pod<uint8_t>("dtype"), op = rd.Pod<uint8_t>("op");
    r.cacheable = rd.Pod<uint8_t>("flags") != 0;
    if (kind > 1) rd.Fail("kind", "unknown response kind");
    if (type >= kOpTypeCount) rd.Fail("type", "unknown op type");
    if (!ValidDtype(dtype)) rd.Fail("dtype", "unknown dtype");
    if (op >= kReduceOpCount) rd.Fail("op", "unknown reduce op");
    r.kind = (Response::Kind)kind;
    r.type = (OpType)type;
    if (ValidDtype(dtype)) r.dtype = (hvd_dtype)dtype;  // a C enum: no other value may be stored in it
    r.op = (ReduceOp)op;
    r.root = rd.Pod<int32_t>("root");
    r.device_kind = rd.Pod<uint32_t>("device");
    r.prescale = rd.Pod<double>("prescale");
    r.postscale = rd.Pod<double>("postscale");
    uint32_t names = rd.Count(kMaxListItems, 8, "name count");
    for (uint32_t k = 0; k < names && !rd.failed(); ++k) {
      r.names.push_back(rd.Str(kMaxNameBytes, "name"));
      r.shapes.push_back(rd.Vec<int64_t>(kMaxDims, "shape"));
    }
    r.error = rd.Str(kMaxNameBytes, "error");
    r.last_joined_rank = rd.Pod<int32_t>("last joined rank");
    r.ranks = rd.Vec<int32_t>(kMaxListItems, "ranks");
    r.tensor_sizes = rd.Vec<int64_t>(kMaxTensorSizes, "tensor sizes");
    for (int64_t x : r.tensor_sizes)
      if (x < 0) rd.Fail("tensor sizes", "negative size");
    out->responses.push_back(std::move(r));
  }
  if (!rd.failed() && !rd.at_end()) rd.Fail("response list", "trailing bytes");
  if (rd.failed()) {
    *out = ResponseList();
    return Status::Aborted(rd.error());
  }
  return Status::Ok();
}

}  // namespace hvdcore
