#include "collective_call.h"

#include "horovod/hvd_reduce.hpp"  // hvd::dtype_size

#include <cstring>
#include <string>

namespace hvdtf {

namespace {

// TensorFlow's status objects, owned here.
struct Status {
  TF_Status* s = TF_NewStatus();
  ~Status() { TF_DeleteStatus(s); }
  bool ok() const { return TF_GetCode(s) == TSL_OK; }
  std::string message() const { return TF_Message(s); }
};

bool ResultIsAllocatedByEngine(hvd_fw_op op) {
  return op == HVD_FW_ALLGATHER || op == HVD_FW_ALLTOALL || op == HVD_FW_REDUCESCATTER;
}

}  // namespace

CollectiveCall::CollectiveCall(const CollectiveAttrs& attrs, TF_OpKernelContext* ctx,
                               TF_AsyncOpKernelDoneCallback* done, int num_tensors)
    : attrs_(attrs), ctx_(ctx), done_(done), slots_((size_t)num_tensors) {}

void CollectiveCall::SubmitTensor(int index) {
  Slot* slot = &slots_[(size_t)index];
  *slot = Slot{this, index, TF_FLOAT};
  const std::string& name = attrs_.names[(size_t)index];
  Status st;
  TF_Tensor* input = nullptr;
  TF_GetInput(ctx_, index, &input, st.s);
  if (!st.ok()) return Fail(TSL_INTERNAL, "tensor '" + name + "': " + st.message());
  {
    std::lock_guard<std::mutex> lk(mu_);
    held_.push_back(input);
  }
  slot->dtype = TF_TensorType(input);
  hvd_dtype dtype;
  if (!EngineDtype(slot->dtype, &dtype))
    return Fail(TSL_INVALID_ARGUMENT, "tensor '" + name + "': its dtype (TensorFlow's code " +
                                          std::to_string((int)slot->dtype) + ") has no Horovod collective");
  std::vector<int64_t> shape((size_t)TF_NumDims(input));
  for (size_t d = 0; d < shape.size(); ++d) shape[d] = TF_Dim(input, (int)d);

  hvd_fw_request r{};
  r.op = attrs_.op;
  r.name = name.c_str();
  r.process_set_id = (int32_t)attrs_.process_set;
  r.dtype = dtype;
  r.ndim = (int32_t)shape.size();
  r.shape = shape.data();
  r.input = TF_TensorData(input);
  r.reduce_op = (uint32_t)attrs_.reduce_op;
  r.root_rank = (int32_t)attrs_.root_rank;
  r.prescale = attrs_.prescale;
  r.postscale = attrs_.postscale;
  r.group_id = attrs_.group_id;
  r.group_size = attrs_.group_id >= 0 ? (int32_t)slots_.size() : 0;
  r.device_kind = HVD_DEVICE_CPU;

  std::vector<int64_t> splits;
  if (attrs_.op == HVD_FW_ALLTOALL) {  // input 1: rows for each member; empty for an even split
    TF_Tensor* split_tensor = nullptr;
    TF_GetInput(ctx_, 1, &split_tensor, st.s);
    if (!st.ok()) return Fail(TSL_INTERNAL, "tensor '" + name + "': " + st.message());
    const auto* values = static_cast<const int32_t*>(TF_TensorData(split_tensor));
    splits.assign(values, values + TF_TensorByteSize(split_tensor) / sizeof(int32_t));
    TF_DeleteTensor(split_tensor);
    if (!splits.empty()) {
      r.splits = splits.data();
      r.num_splits = (int32_t)splits.size();
    }
  }
  if (!ResultIsAllocatedByEngine(attrs_.op)) {
    // Allreduce and broadcast write into their output, which is the input itself when TensorFlow
    // can forward it (nothing else reads it): in place, as Horovod's kernels do.
    TF_Tensor* output =
        TF_ForwardInputOrAllocateOutput(ctx_, &index, 1, index, shape.data(), (int)shape.size(), nullptr, st.s);
    if (!st.ok()) return Fail(TSL_INTERNAL, "tensor '" + name + "': " + st.message());
    {
      std::lock_guard<std::mutex> lk(mu_);
      held_.push_back(output);
    }
    r.output = TF_TensorData(output);
  }
  Submit(r, slot);
}

void CollectiveCall::SubmitOperation(hvd_fw_request request) {
  slots_[0] = Slot{this, 0, TF_INT32};
  Submit(request, &slots_[0]);
}

void CollectiveCall::Submit(const hvd_fw_request& request, Slot* slot) {
  const hvd_framework_v1* engine = Engine();
  if (!engine) {
    return Fail(TSL_FAILED_PRECONDITION,
                "hvd's TensorFlow kernels are not attached to the engine: import horovod.tensorflow");
  }
  holds_.fetch_add(1, std::memory_order_relaxed);  // the engine's, released when it reports back
  char error[1024];
  uint32_t rc = engine->submit(&request, &CollectiveCall::OnEngineDone, slot, error, sizeof error);
  if (rc != HVD_FW_OK) {  // refused: the engine will not report back
    Fail(TfCode(rc), error);
    Release();
  }
}

void CollectiveCall::OnEngineDone(void* slot, const hvd_fw_result* result) {
  auto* s = static_cast<Slot*>(slot);
  s->call->Completed(*s, *result);
}

void CollectiveCall::Completed(const Slot& slot, const hvd_fw_result& result) {
  if (result.status != HVD_FW_OK) {
    Fail(TfCode(result.status), result.message);
  } else if (attrs_.op == HVD_FW_JOIN || attrs_.op == HVD_FW_BARRIER) {
    int32_t value = attrs_.op == HVD_FW_JOIN ? (int32_t)result.value : 0;
    SetOutput(0, TF_INT32, nullptr, 0, &value, sizeof value);
  } else if (ResultIsAllocatedByEngine(attrs_.op)) {
    hvd_dtype dtype;
    EngineDtype(slot.dtype, &dtype);
    size_t bytes = hvd::dtype_size(dtype);
    for (int d = 0; d < result.output_ndim; ++d) bytes *= (size_t)result.output_shape[d];
    SetOutput(slot.index, slot.dtype, result.output_shape, result.output_ndim, result.output, bytes);
    if (attrs_.op == HVD_FW_ALLTOALL) {
      std::vector<int32_t> received(result.received_splits, result.received_splits + result.num_received_splits);
      int64_t count = (int64_t)received.size();
      SetOutput(1, TF_INT32, &count, 1, received.data(), received.size() * sizeof(int32_t));
    }
  }
  Release();
}

void CollectiveCall::SetOutput(int index, TF_DataType dtype, const int64_t* shape, int ndim, const void* data,
                               size_t bytes) {
  Status st;
  TF_Tensor* output = TF_AllocateOutput(ctx_, index, dtype, shape, ndim, bytes, st.s);
  if (!st.ok()) return Fail(TSL_INTERNAL, "output " + std::to_string(index) + ": " + st.message());
  if (bytes) std::memcpy(TF_TensorData(output), data, bytes);
  TF_DeleteTensor(output);
}

void CollectiveCall::Fail(TF_Code code, const std::string& message) {
  std::lock_guard<std::mutex> lk(mu_);
  if (failure_code_ == TSL_OK) {
    failure_code_ = code;
    failure_ = message;
  }
}

void CollectiveCall::Release() {
  if (holds_.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
}

void CollectiveCall::Finish() {
  for (TF_Tensor* t : held_) TF_DeleteTensor(t);
  if (failure_code_ != TSL_OK) {
    Status st;
    TF_SetStatus(st.s, failure_code_, failure_.c_str());
    TF_OpKernelContext_Failure(ctx_, st.s);
  }
  AsyncDone done = std::move(done_);
  delete this;  // before TensorFlow hears of it: it may tear the kernel (and attrs_) down at once
  done.Run();
}

}  // namespace hvdtf
