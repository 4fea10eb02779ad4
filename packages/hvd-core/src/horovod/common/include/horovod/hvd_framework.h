/*
 * hvd_framework.h: the versioned C entry point through which native framework code (for example
 * hvd-tensorflow's TensorFlow kernels) submits collectives to the running hvd engine, without
 * Python on the way.
 *
 * hvd-core hands out one static hvd_framework_v1 table, in a PyCapsule named
 * HVD_FRAMEWORK_V1_CAPSULE (horovod.common.framework_api.native_entry()). A framework library takes
 * the table's address once and calls it from any thread. Calls reach the engine that
 * horovod.common's init() started in this process; between shutdown() and the next init() they
 * fail with HVD_FW_ABORTED.
 *
 * Plain C, for the same reason as the backend ABI (hvd_backend.h): separately built packages never
 * share C++ ABI. Compatibility rule: version 1 is frozen; new members only ever go into a new
 * version (hvd_framework_v2 ...), never renamed or reordered in place. Check api_version and
 * struct_size before the first call.
 */
#ifndef HVD_FRAMEWORK_H_
#define HVD_FRAMEWORK_H_

#include <stddef.h>
#include <stdint.h>

#include "horovod/hvd_backend.h" /* hvd_dtype, HVD_DEVICE_* */

#ifdef __cplusplus
extern "C" {
#endif

#define HVD_FRAMEWORK_API_VERSION 1
#define HVD_FRAMEWORK_V1_CAPSULE "horovod.hvd_framework_v1"

/* What a submission or a completed operation reports: the kinds of horovod.common's errors. */
typedef enum hvd_fw_status HVD_ENUM_BASE {
  HVD_FW_OK = 0,
  HVD_FW_INVALID_ARGUMENT = 1, /* the caller's misuse, seen locally (Python: ValueError) */
  HVD_FW_MISMATCH = 2,         /* ranks disagree about a collective (CollectiveMismatchError) */
  HVD_FW_ABORTED = 3           /* Horovod stopped, or a peer was lost (HorovodInternalError) */
} hvd_fw_status;

/* Operations, numbered as horovod.common._core's OP_* constants. */
typedef enum hvd_fw_op HVD_ENUM_BASE {
  HVD_FW_ALLREDUCE = 0,
  HVD_FW_ALLGATHER = 1,
  HVD_FW_BROADCAST = 2,
  HVD_FW_ALLTOALL = 3,
  HVD_FW_REDUCESCATTER = 4,
  HVD_FW_BARRIER = 5,
  HVD_FW_JOIN = 6
} hvd_fw_op;

/* One operation. Every pointer is read during submit() only, except `input` and `output`, whose
 * memory must stay valid until the operation completes. */
typedef struct hvd_fw_request {
  uint32_t op;             /* hvd_fw_op */
  const char* name;        /* the same on every rank; unique among operations in flight */
  int32_t process_set_id;  /* 0: the global process set */
  uint32_t dtype;          /* hvd_dtype of input (and output) */
  int32_t ndim;
  const int64_t* shape;    /* ndim entries */
  const void* input;       /* host memory, contiguous (NULL for barrier and join) */
  void* output;            /* allreduce and broadcast: shape x dtype, may equal input (in place);
                              NULL for the others, whose result the engine allocates */
  uint32_t reduce_op; /* allreduce and reducescatter: Horovod's numbering (Average = 0 ...) */
  int32_t root_rank; /* broadcast */
  double prescale; /* allreduce and reducescatter; 1.0 for none */
  double postscale;
  const int64_t* splits; /* alltoall: rows sent to each member of the set; NULL: even */
  int32_t num_splits;
  int64_t group_id; /* -1 unless the operation is one of a group negotiated together */
  int32_t group_size;
  uint32_t device_kind; /* HVD_DEVICE_CPU */
} hvd_fw_request;

/* How an operation ended. Valid only during the done callback: copy what is needed. */
typedef struct hvd_fw_result {
  uint32_t status; /* hvd_fw_status */
  const char* message; /* "" when status is HVD_FW_OK */
  const void* output; /* the engine-allocated result (allgather, alltoall,
                         reducescatter), else NULL */
  int32_t output_ndim;
  const int64_t* output_shape;
  const int64_t* received_splits; /* alltoall: rows received from each member */
  int32_t num_received_splits;
  int64_t value; /* join: the rank that joined last */
} hvd_fw_result;

/* Called exactly once per accepted operation, on the engine's thread (possibly before submit()
 * has returned); it must not block on other collectives. */
typedef void (*hvd_fw_done_fn)(void* user_data, const hvd_fw_result* result);

typedef struct hvd_framework_v1 {
  uint32_t api_version; /* HVD_FRAMEWORK_API_VERSION */
  uint32_t struct_size; /* sizeof(hvd_framework_v1) */
  /* Submits one operation. HVD_FW_OK: `done` will be called. Otherwise the request was refused
   * (the message, NUL-terminated and truncated to error_size, says why) and `done` is not called.
   */
  uint32_t (*submit)(const hvd_fw_request* request, hvd_fw_done_fn done, void* user_data,
                     char* error, size_t error_size);
  /* This process's rank in the process set, and the set's size; -1 when unknown or not running. */
  int32_t (*process_set_rank)(int32_t process_set_id);
  int32_t (*process_set_size)(int32_t process_set_id);
} hvd_framework_v1;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HVD_FRAMEWORK_H_ */
