#include "kernels.h"

#include <memory>
#include <string>
#include <vector>

#include "collective_call.h"

namespace hvdtf {

namespace {

// Reads attributes, keeping the first failure; Result() reports it to TensorFlow.
class AttrReader {
 public:
  explicit AttrReader(TF_OpKernelConstruction* ctx) : ctx_(ctx), status_(TF_NewStatus()) {}
  ~AttrReader() { TF_DeleteStatus(status_); }

  void Int(const char* name, int64_t* value) {
    if (ok()) TF_OpKernelConstruction_GetAttrInt64(ctx_, name, value, status_);
  }
  void Float(const char* name, float* value) {
    if (ok()) TF_OpKernelConstruction_GetAttrFloat(ctx_, name, value, status_);
  }
  void Strings(const char* name, std::vector<std::string>* values) {
    int32_t count = 0, total = 0;
    if (ok()) TF_OpKernelConstruction_GetAttrSize(ctx_, name, &count, &total, status_);
    if (!ok()) return;
    std::vector<char*> starts((size_t)count);
    std::vector<size_t> lengths((size_t)count);
    std::vector<char> storage((size_t)total + 1);
    TF_OpKernelConstruction_GetAttrStringList(ctx_, name, starts.data(), lengths.data(), count, storage.data(),
                                              storage.size(), status_);
    if (!ok()) return;
    for (int32_t i = 0; i < count; ++i) values->emplace_back(starts[(size_t)i], lengths[(size_t)i]);
  }
  // The attributes, or nullptr after telling TensorFlow what failed.
  void* Result(std::unique_ptr<CollectiveAttrs> attrs) {
    if (ok()) return attrs.release();
    TF_OpKernelConstruction_Failure(ctx_, status_);
    return nullptr;
  }

 private:
  bool ok() const { return TF_GetCode(status_) == TSL_OK; }
  TF_OpKernelConstruction* ctx_;
  TF_Status* status_;
};

std::unique_ptr<CollectiveAttrs> Attrs(hvd_fw_op op) {
  auto attrs = std::make_unique<CollectiveAttrs>();
  attrs->op = op;
  return attrs;
}

void* CreateReducing(TF_OpKernelConstruction* ctx, hvd_fw_op op) {
  auto attrs = Attrs(op);
  AttrReader read(ctx);
  read.Strings("names", &attrs->names);
  read.Int("reduce_op", &attrs->reduce_op);
  read.Float("prescale", &attrs->prescale);
  read.Float("postscale", &attrs->postscale);
  read.Int("process_set", &attrs->process_set);
  read.Int("group_id", &attrs->group_id);
  return read.Result(std::move(attrs));
}

}  // namespace

void* CreateAllreduce(TF_OpKernelConstruction* ctx) { return CreateReducing(ctx, HVD_FW_ALLREDUCE); }
void* CreateReducescatter(TF_OpKernelConstruction* ctx) { return CreateReducing(ctx, HVD_FW_REDUCESCATTER); }

void* CreateAllgather(TF_OpKernelConstruction* ctx) {
  auto attrs = Attrs(HVD_FW_ALLGATHER);
  AttrReader read(ctx);
  read.Strings("names", &attrs->names);
  read.Int("process_set", &attrs->process_set);
  read.Int("group_id", &attrs->group_id);
  return read.Result(std::move(attrs));
}

void* CreateBroadcast(TF_OpKernelConstruction* ctx) {
  auto attrs = Attrs(HVD_FW_BROADCAST);
  AttrReader read(ctx);
  read.Strings("names", &attrs->names);
  read.Int("root_rank", &attrs->root_rank);
  read.Int("process_set", &attrs->process_set);
  return read.Result(std::move(attrs));
}

void* CreateAlltoall(TF_OpKernelConstruction* ctx) {
  auto attrs = Attrs(HVD_FW_ALLTOALL);
  AttrReader read(ctx);
  read.Strings("names", &attrs->names);
  read.Int("process_set", &attrs->process_set);
  return read.Result(std::move(attrs));
}

void* CreateJoin(TF_OpKernelConstruction* ctx) {
  auto attrs = Attrs(HVD_FW_JOIN);
  attrs->names = {"join"};
  return AttrReader(ctx).Result(std::move(attrs));
}

void* CreateBarrier(TF_OpKernelConstruction* ctx) {
  auto attrs = Attrs(HVD_FW_BARRIER);
  attrs->names = {"barrier"};
  AttrReader read(ctx);
  read.Int("process_set", &attrs->process_set);
  return read.Result(std::move(attrs));
}

void ComputeTensors(void* kernel, TF_OpKernelContext* ctx, TF_AsyncOpKernelDoneCallback* done) {
  const auto& attrs = *static_cast<const CollectiveAttrs*>(kernel);
  int n = TF_NumInputs(ctx);
  auto* call = new CollectiveCall(attrs, ctx, done, n);
  if ((size_t)n != attrs.names.size()) {
    call->Fail(TSL_INVALID_ARGUMENT, std::to_string(n) + " tensors but " + std::to_string(attrs.names.size()) +
                                         " names: give one name per tensor");
  } else {
    for (int i = 0; i < n; ++i) call->SubmitTensor(i);
  }
  call->Release();
}

void ComputeAlltoall(void* kernel, TF_OpKernelContext* ctx, TF_AsyncOpKernelDoneCallback* done) {
  const auto& attrs = *static_cast<const CollectiveAttrs*>(kernel);
  auto* call = new CollectiveCall(attrs, ctx, done, 1);
  call->SubmitTensor(0);
  call->Release();
}

void ComputeTensorFree(void* kernel, TF_OpKernelContext* ctx, TF_AsyncOpKernelDoneCallback* done) {
  const auto& attrs = *static_cast<const CollectiveAttrs*>(kernel);
  auto* call = new CollectiveCall(attrs, ctx, done, 1);
  hvd_fw_request r{};
  r.op = attrs.op;
  r.name = attrs.names[0].c_str();
  r.process_set_id = (int32_t)attrs.process_set;
  r.group_id = -1;
  r.device_kind = HVD_DEVICE_CPU;
  call->SubmitOperation(r);
  call->Release();
}

void DeleteAttrs(void* attrs) { delete static_cast<CollectiveAttrs*>(attrs); }

}  // namespace hvdtf
