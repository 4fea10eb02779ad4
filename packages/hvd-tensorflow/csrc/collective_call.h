// One run of an hvd kernel: its tensors submitted to the engine, each completing on the engine's
// thread, and TensorFlow told once the last one has (with the first error, if any). No thread
// waits meanwhile, so every collective of a step can be in flight together, and the engine fuses
// what it finds there.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "async_done.h"
#include "engine_link.h"
#include "tf_c_api.h"

namespace hvdtf {

// What an op's attributes say, read once when TensorFlow creates the kernel.
struct CollectiveAttrs {
  hvd_fw_op op = HVD_FW_ALLREDUCE;
  std::vector<std::string> names;  // one per input tensor
  int64_t reduce_op = 1;           // Horovod's numbering: Average 0, Sum 1, ...
  float prescale = 1.0f, postscale = 1.0f;
  int64_t root_rank = -1;
  int64_t process_set = 0;
  int64_t group_id = -1;  // >= 0: the tensors are one group, negotiated together
};

class CollectiveCall {
 public:
  // Starts a run; call Release() once every tensor has been submitted.
  CollectiveCall(const CollectiveAttrs& attrs, TF_OpKernelContext* ctx, TF_AsyncOpKernelDoneCallback* done,
                 int num_tensors);

  // Submits input `index` (its result goes to output `index`).
  void SubmitTensor(int index);
  // Submits `request` (no input tensor: barrier, join), whose result sets output 0.
  void SubmitOperation(hvd_fw_request request);
  // The compute function's own hold on the run: TensorFlow is told when the last hold goes.
  void Release();
  // Records a failure (the first one is what TensorFlow raises).
  void Fail(TF_Code code, const std::string& message);

 private:
  struct Slot {  // what one engine callback needs
    CollectiveCall* call;
    int index;
    TF_DataType dtype;
  };
  static void OnEngineDone(void* slot, const hvd_fw_result* result);
  void Completed(const Slot& slot, const hvd_fw_result& result);
  void Submit(const hvd_fw_request& request, Slot* slot);
  void SetOutput(int index, TF_DataType dtype, const int64_t* shape, int ndim, const void* data, size_t bytes);
  void Finish();

  const CollectiveAttrs& attrs_;
  TF_OpKernelContext* ctx_;
  AsyncDone done_;
  std::vector<Slot> slots_;           // sized up front: the engine holds their addresses
  std::vector<TF_Tensor*> held_;      // inputs and outputs taken from TensorFlow, released at the end
  std::atomic<int> holds_{1};
  std::mutex mu_;                     // guards held_ and the failure
  TF_Code failure_code_ = TSL_OK;
  std::string failure_;
};

}  // namespace hvdtf
