// hvd's TensorFlow ops, registered with TensorFlow when it loads this library
// (tf.load_op_library, which also generates their Python wrappers; horovod/tensorflow/native.py).
//
// Every op is stateful, as TensorFlow's own collectives are: Grappler never folds, merges or
// reorders a stateful op, whereas a stateless collective of constants was evaluated by constant
// folding while the graph was optimised, one op at a time, which deadlocked two ranks that had
// built their collectives in different orders (and would replace a collective by its first
// result). Inside a tf.function, automatic control dependencies chain stateful ops in program
// order, each waiting for the one before to finish; horovod/tensorflow/native.py exempts the
// collectives, as TensorFlow exempts its own, so that a step's collectives are in flight together.
// No order can deadlock two ranks, as no kernel holds a thread while it waits.
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
  void* (*create)(TF_OpKernelConstruction*);
  void (*compute)(void*, TF_OpKernelContext*, TF_AsyncOpKernelDoneCallback*);
};

const OpSpec kOps[] = {
    {"HvdAllreduce",
     {"tensors: T"},
     {"outputs: T"},
     {"T: list(" HVD_TF_TYPES ") >= 1", "names: list(string)", "reduce_op: int", "prescale: float = 1.0",
      "postscale: float = 1.0", "process_set: int = 0", "group_id: int = -1"},
     CreateAllreduce,
     ComputeTensors},
    {"HvdAllgather",
     {"tensors: T"},
     {"outputs: T"},
     {"T: list(" HVD_TF_TYPES ") >= 1", "names: list(string)", "process_set: int = 0", "group_id: int = -1"},
     CreateAllgather,
     ComputeTensors},
    {"HvdBroadcast",
     {"tensors: T"},
     {"outputs: T"},
     {"T: list(" HVD_TF_TYPES ") >= 1", "names: list(string)", "root_rank: int", "process_set: int = 0"},
     CreateBroadcast,
     ComputeTensors},
    {"HvdReducescatter",
     {"tensors: T"},
     {"outputs: T"},
     {"T: list(" HVD_TF_TYPES ") >= 1", "names: list(string)", "reduce_op: int", "prescale: float = 1.0",
      "postscale: float = 1.0", "process_set: int = 0", "group_id: int = -1"},
     CreateReducescatter,
     ComputeTensors},
    {"HvdAlltoall",
     {"tensor: T", "splits: int32"},
     {"received: T", "received_splits: int32"},
     {"T: " HVD_TF_TYPES, "names: list(string)", "process_set: int = 0"},
     CreateAlltoall,
     ComputeAlltoall},
    {"HvdJoin", {}, {"last_joined: int32"}, {}, CreateJoin, ComputeTensorFree},
    {"HvdBarrier", {}, {"done: int32"}, {"process_set: int = 0"}, CreateBarrier, ComputeTensorFree},
};

bool Register(const OpSpec& spec, TF_Status* status) {
  TF_OpDefinitionBuilder* op = TF_NewOpDefinitionBuilder(spec.name);
  for (const char* input : spec.inputs)
    if (input) TF_OpDefinitionBuilderAddInput(op, input);
  for (const char* output : spec.outputs)
    if (output) TF_OpDefinitionBuilderAddOutput(op, output);
  for (const char* attr : spec.attrs)
    if (attr) TF_OpDefinitionBuilderAddAttr(op, attr);
  // (TensorFlow's C API ignores the flag's value: any call makes the op stateful, in TF 2.21.)
  TF_OpDefinitionBuilderSetIsStateful(op, true);
  TF_OpDefinitionBuilderSetShapeInferenceFunction(op, UnknownShapes);
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
