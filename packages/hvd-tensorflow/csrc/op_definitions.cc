// hvd's TensorFlow ops, registered with TensorFlow when it loads this library
// (tf.load_op_library, which also generates their Python wrappers; horovod/tensorflow/native.py).
//
// The collectives are stateless: TensorFlow orders them only by their inputs, so a tf.function's
// collectives are all in flight together, and its automatic control dependencies (which chain
// stateful ops in program order, each waiting for the one before to finish) do not serialise
// them. No order can deadlock two ranks, as no kernel holds a thread while it waits. Join and
// barrier, which have no inputs, are stateful, so that they run each time and in program order.
#include <cstdio>

#include "kernels.h"
#include "tf_c_api.h"

namespace hvdtf {

namespace {

// Horovod's dtypes on the CPU (tests/test_native_kernels.py checks each one end to end).
#define HVD_TF_TYPES "{uint8, int8, int16, int32, int64, half, bfloat16, float, double, bool}"

// Every output's shape is left to the Python wrappers, which know them statically where they can
// be known (TensorFlow's C API gets and sets the shape of input and output 0 only: its index check
// refuses every other index, in TF 2.21).
void UnknownShapes(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  TF_ShapeInferenceContextSetUnknownShape(ctx, status);
}

struct OpSpec {
  const char* name;
  const char* inputs[2];
  const char* outputs[2];
  const char* attrs[8];
  bool stateful;
  void (*shape_fn)(TF_ShapeInferenceContext*, TF_Status*);
  void* (*create)(TF_OpKernelConstruction*);
  void (*compute)(void*, TF_OpKernelContext*, TF_AsyncOpKernelDoneCallback*);
};

const OpSpec kOps[] = {
    {"HvdAllreduce",
     {"tensors: T"},
     {"outputs: T"},
     {"T: list(" HVD_TF_TYPES ") >= 1", "names: list(string)", "reduce_op: int", "prescale: float = 1.0",
      "postscale: float = 1.0", "process_set: int = 0", "group_id: int = -1"},
     false, UnknownShapes, CreateAllreduce, ComputeTensors},
    {"HvdAllgather",
     {"tensors: T"},
     {"outputs: T"},
     {"T: list(" HVD_TF_TYPES ") >= 1", "names: list(string)", "process_set: int = 0", "group_id: int = -1"},
     false, UnknownShapes, CreateAllgather, ComputeTensors},
    {"HvdBroadcast",
     {"tensors: T"},
     {"outputs: T"},
     {"T: list(" HVD_TF_TYPES ") >= 1", "names: list(string)", "root_rank: int", "process_set: int = 0"},
     false, UnknownShapes, CreateBroadcast, ComputeTensors},
    {"HvdReducescatter",
     {"tensors: T"},
     {"outputs: T"},
     {"T: list(" HVD_TF_TYPES ") >= 1", "names: list(string)", "reduce_op: int", "prescale: float = 1.0",
      "postscale: float = 1.0", "process_set: int = 0", "group_id: int = -1"},
     false, UnknownShapes, CreateReducescatter, ComputeTensors},
    {"HvdAlltoall",
     {"tensor: T", "splits: int32"},
     {"received: T", "received_splits: int32"},
     {"T: " HVD_TF_TYPES, "names: list(string)", "process_set: int = 0"},
     false, UnknownShapes, CreateAlltoall, ComputeAlltoall},
    {"HvdJoin", {}, {"last_joined: int32"}, {}, true, UnknownShapes, CreateJoin, ComputeTensorFree},
    {"HvdBarrier", {}, {"done: int32"}, {"process_set: int = 0"}, true, UnknownShapes, CreateBarrier,
     ComputeTensorFree},
};

bool Register(const OpSpec& spec, TF_Status* status) {
  TF_OpDefinitionBuilder* op = TF_NewOpDefinitionBuilder(spec.name);
  for (const char* input : spec.inputs)
    if (input) TF_OpDefinitionBuilderAddInput(op, input);
  for (const char* output : spec.outputs)
    if (output) TF_OpDefinitionBuilderAddOutput(op, output);
  for (const char* attr : spec.attrs)
    if (attr) TF_OpDefinitionBuilderAddAttr(op, attr);
  // Only ever called to make an op stateful: TensorFlow's C API ignores the flag's value and makes
  // the op stateful whatever it is (TF 2.21), which would chain a tf.function's collectives.
  if (spec.stateful) TF_OpDefinitionBuilderSetIsStateful(op, true);
  TF_OpDefinitionBuilderSetShapeInferenceFunction(op, spec.shape_fn);
  TF_RegisterOpDefinition(op, status);  // takes the builder
  if (TF_GetCode(status) != TSL_OK) return false;
  TF_KernelBuilder* kernel = TF_NewAsyncKernelBuilder(spec.name, "CPU", spec.create, spec.compute, DeleteAttrs);
  TF_RegisterKernelBuilder(spec.name, kernel, status);  // takes the builder
  return TF_GetCode(status) == TSL_OK;
}

// Runs when TensorFlow opens the library.
const bool kRegistered = [] {
  TF_Status* status = TF_NewStatus();
  bool ok = true;
  for (const OpSpec& spec : kOps) {
    if (!Register(spec, status)) {
      std::fprintf(stderr, "hvd-tensorflow: registering %s failed: %s\n", spec.name, TF_Message(status));
      ok = false;
      break;
    }
  }
  TF_DeleteStatus(status);
  return ok;
}();

}  // namespace

}  // namespace hvdtf
