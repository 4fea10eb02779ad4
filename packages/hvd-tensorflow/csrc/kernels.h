// The asynchronous kernels of hvd's TensorFlow ops (op_definitions.cc registers them): reading an
// op's attributes when TensorFlow creates a kernel, and starting a CollectiveCall for each run.
#pragma once

#include "tf_c_api.h"

namespace hvdtf {

// create_func of each op: the kernel's attributes, or nullptr after reporting a failure.
void* CreateAllreduce(TF_OpKernelConstruction* ctx);
void* CreateAllgather(TF_OpKernelConstruction* ctx);
void* CreateBroadcast(TF_OpKernelConstruction* ctx);
void* CreateReducescatter(TF_OpKernelConstruction* ctx);
void* CreateAlltoall(TF_OpKernelConstruction* ctx);
void* CreateJoin(TF_OpKernelConstruction* ctx);
void* CreateBarrier(TF_OpKernelConstruction* ctx);

// compute_async_func: every input tensor as one operation of the engine (allreduce, allgather,
// broadcast, reducescatter); an alltoall of input 0 with the splits of input 1; join; barrier.
void ComputeTensors(void* attrs, TF_OpKernelContext* ctx, TF_AsyncOpKernelDoneCallback* done);
void ComputeAlltoall(void* attrs, TF_OpKernelContext* ctx, TF_AsyncOpKernelDoneCallback* done);
void ComputeTensorFree(void* attrs, TF_OpKernelContext* ctx, TF_AsyncOpKernelDoneCallback* done);

void DeleteAttrs(void* attrs);

}  // namespace hvdtf
