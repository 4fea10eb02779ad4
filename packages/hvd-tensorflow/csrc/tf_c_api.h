// The part of TensorFlow's stable C API (tensorflow/c/kernels.h, ops.h, tf_tensor.h, tf_status.h,
// tf_datatype.h) that hvd's kernels use, declared here so that building them needs no TensorFlow:
// the symbols are resolved when TensorFlow loads the library (tf.load_op_library), from the
// libtensorflow_framework.so.2 it has already loaded (made global first by native.py: 2.16 loads
// it privately).
//
// These are C functions with a compatibility promise across TensorFlow releases (unlike TF's C++
// ABI, which Horovod compiled against, and broke with each release). The declarations must agree
// with TensorFlow's own: tests/test_native_kernels.py compiles this header after the wheel's headers,
// where any difference in a prototype is a compile error. Types TensorFlow defines as enums are
// skipped here when its header has already defined them (their include guards).
#pragma once

#include <stddef.h>
#include <stdint.h>

extern "C" {

#ifndef TENSORFLOW_C_TF_DATATYPE_H_
typedef enum TF_DataType {
  TF_FLOAT = 1,
  TF_DOUBLE = 2,
  TF_INT32 = 3,
  TF_UINT8 = 4,
  TF_INT16 = 5,
  TF_INT8 = 6,
  TF_INT64 = 9,
  TF_BOOL = 10,
  TF_BFLOAT16 = 14,
  TF_HALF = 19,
} TF_DataType;
#endif

// The guard's name moved with the header (tsl/c/ in 2.16, xla/tsl/c/ in later releases).
#if !defined(XLA_TSL_C_TSL_STATUS_H_) && !defined(TENSORFLOW_TSL_C_TSL_STATUS_H_)
typedef enum TSL_Code {
  TSL_OK = 0,
  TSL_INVALID_ARGUMENT = 3,
  TSL_FAILED_PRECONDITION = 9,
  TSL_ABORTED = 10,
  TSL_INTERNAL = 13,
} TSL_Code;
#endif

typedef struct TSL_Status TF_Status;
typedef TSL_Code TF_Code;
typedef struct TF_Tensor TF_Tensor;
typedef struct TF_KernelBuilder TF_KernelBuilder;
typedef struct TF_OpKernelConstruction TF_OpKernelConstruction;
typedef struct TF_OpKernelContext TF_OpKernelContext;
typedef struct TF_AsyncOpKernelDoneCallback TF_AsyncOpKernelDoneCallback;
struct TF_OpDefinitionBuilder;
struct TF_ShapeInferenceContext;

// tf_status.h
TF_Status* TF_NewStatus(void);
void TF_DeleteStatus(TF_Status*);
void TF_SetStatus(TF_Status* s, TF_Code code, const char* msg);
TF_Code TF_GetCode(const TF_Status* s);
const char* TF_Message(const TF_Status* s);

// tf_tensor.h
void TF_DeleteTensor(TF_Tensor*);
TF_DataType TF_TensorType(const TF_Tensor*);
int TF_NumDims(const TF_Tensor*);
int64_t TF_Dim(const TF_Tensor* tensor, int dim_index);
size_t TF_TensorByteSize(const TF_Tensor*);
void* TF_TensorData(const TF_Tensor*);

// kernels.h
TF_KernelBuilder* TF_NewAsyncKernelBuilder(const char* op_name, const char* device_name,
                                           void* (*create_func)(TF_OpKernelConstruction*),
                                           void (*compute_async_func)(void*, TF_OpKernelContext*,
                                                                      TF_AsyncOpKernelDoneCallback* done),
                                           void (*delete_func)(void*));
void TF_RegisterKernelBuilder(const char* kernel_name, TF_KernelBuilder* builder, TF_Status* status);
int TF_NumInputs(TF_OpKernelContext* ctx);
void TF_GetInput(TF_OpKernelContext* ctx, int i, TF_Tensor** tensor, TF_Status* status);
void TF_OpKernelContext_Failure(TF_OpKernelContext* ctx, TF_Status* status);
void TF_OpKernelConstruction_Failure(TF_OpKernelConstruction* ctx, TF_Status* status);
void TF_OpKernelConstruction_GetAttrSize(TF_OpKernelConstruction* ctx, const char* attr_name, int32_t* list_size,
                                         int32_t* total_size, TF_Status* status);
void TF_OpKernelConstruction_GetAttrInt64(TF_OpKernelConstruction* ctx, const char* attr_name, int64_t* val,
                                          TF_Status* status);
void TF_OpKernelConstruction_GetAttrFloat(TF_OpKernelConstruction* ctx, const char* attr_name, float* val,
                                          TF_Status* status);
void TF_OpKernelConstruction_GetAttrString(TF_OpKernelConstruction* ctx, const char* attr_name, char* val,
                                           size_t max_length, TF_Status* status);
void TF_OpKernelConstruction_GetAttrStringList(TF_OpKernelConstruction* ctx, const char* attr_name, char** values,
                                               size_t* lengths, int max_values, void* storage, size_t storage_size,
                                               TF_Status* status);
TF_Tensor* TF_AllocateOutput(TF_OpKernelContext* context, int index, TF_DataType dtype, const int64_t* dims,
                             int num_dims, size_t len, TF_Status* status);
TF_Tensor* TF_ForwardInputOrAllocateOutput(TF_OpKernelContext* context, const int* candidate_input_indices,
                                           int num_candidate_input_indices, int output_index,
                                           const int64_t* output_dims, int output_num_dims, int* forwarded_input,
                                           TF_Status* status);

// ops.h
TF_OpDefinitionBuilder* TF_NewOpDefinitionBuilder(const char* op_name);
void TF_RegisterOpDefinition(TF_OpDefinitionBuilder* builder, TF_Status* status);
void TF_OpDefinitionBuilderAddAttr(TF_OpDefinitionBuilder* builder, const char* attr_spec);
void TF_OpDefinitionBuilderAddInput(TF_OpDefinitionBuilder* builder, const char* input_spec);
void TF_OpDefinitionBuilderAddOutput(TF_OpDefinitionBuilder* builder, const char* output_spec);
void TF_OpDefinitionBuilderSetIsStateful(TF_OpDefinitionBuilder* builder, bool is_stateful);
void TF_OpDefinitionBuilderSetShapeInferenceFunction(TF_OpDefinitionBuilder* builder,
                                                     void (*shape_inference_func)(TF_ShapeInferenceContext* ctx,
                                                                                  TF_Status* status));
void TF_ShapeInferenceContextSetUnknownShape(TF_ShapeInferenceContext* ctx, TF_Status* status);

}  // extern "C"
