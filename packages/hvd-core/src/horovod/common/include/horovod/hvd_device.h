/*
 * hvd_device.h: the versioned C interface of a device (an accelerator's runtime) as the hvd engine
 * and device-capable backends use it: streams, events, asynchronous copies and allocations.
 *
 * hvd-core carries two implementations: CUDA, which loads libcudart at run time (nothing of CUDA is
 * needed to build or import hvd), and a simulated device for tests, which runs each stream's work
 * in order on a thread of its own and keeps its device memory unreadable by host code outside those
 * threads, so that a missing wait fails a test instead of passing by luck. Both serve
 * HVD_DEVICE_CUDA tensors; HOROVOD_DEVICE=simulated selects the second. A backend reaches the
 * engine's table through hvd_comm_config_v1 (hvd_backend.h) and must use it for every stream and
 * event call, so the same backend code runs on either.
 *
 * Conventions
 *  - Every function returning int returns HVD_OK (0) or an hvd_status code; the message of the
 *    calling thread's most recent failure is last_error().
 *  - Streams and events are the runtime's own handles (cudaStream_t, cudaEvent_t for CUDA), so a
 *    framework's stream can be passed as it is. NULL is the device's default stream.
 *  - Work queued on one stream runs in order; work on different streams is ordered only through
 *    events: stream_wait_event makes the stream's later work wait for the event's recorded work.
 *  - Calls are made with the device `device_id` current (set_device), from any thread.
 *
 * Compatibility rule: version 1 is frozen; members are only ever appended in a new version.
 */
#ifndef HVD_DEVICE_H_
#define HVD_DEVICE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HVD_DEVICE_ABI_VERSION 1

typedef void* hvd_stream_t;
typedef void* hvd_event_t;

typedef enum hvd_copy_kind {
  HVD_COPY_HOST_TO_DEVICE = 1,
  HVD_COPY_DEVICE_TO_HOST = 2,
  HVD_COPY_DEVICE_TO_DEVICE = 3
} hvd_copy_kind;

/* Work run on a stream's thread of execution (the host function of cudaLaunchHostFunc). It must
 * not call into the device. */
typedef void (*hvd_host_fn)(void* user_data);

typedef struct hvd_device_v1 {
  uint32_t abi_version; /* HVD_DEVICE_ABI_VERSION */
  uint32_t struct_size; /* sizeof(hvd_device_v1) */
  const char* name;     /* "cuda" or "simulated" */
  uint32_t device_kind; /* HVD_DEVICE_CUDA */
  uint32_t reserved;

  /* The message of this thread's most recent failure; valid until its next call. */
  const char* (*last_error)(void);
  int (*device_count)(int32_t* count);
  int (*set_device)(int32_t device_id);

  int (*stream_create)(int32_t device_id, hvd_stream_t* out);
  int (*stream_destroy)(hvd_stream_t stream);
  /* Returns once everything queued on the stream so far has run. */
  int (*stream_synchronize)(hvd_stream_t stream);
  int (*stream_wait_event)(hvd_stream_t stream, hvd_event_t event);

  int (*event_create)(int32_t device_id, hvd_event_t* out);
  int (*event_destroy)(hvd_event_t event);
  /* The event completes when the work queued on `stream` before it has run. */
  int (*event_record)(hvd_event_t event, hvd_stream_t stream);
  /* *done = 1 when the recorded work has run (or nothing was recorded), else 0; never blocks. */
  int (*event_query)(hvd_event_t event, int* done);
  int (*event_synchronize)(hvd_event_t event);

  /* Queued on `stream`; host memory taking part should be pinned (host_alloc). */
  int (*memcpy_async)(void* dst, const void* src, size_t bytes, hvd_copy_kind kind,
                      hvd_stream_t stream);
  int (*memset_async)(void* dst, int value, size_t bytes, hvd_stream_t stream);
  int (*launch_host_fn)(hvd_stream_t stream, hvd_host_fn fn, void* user_data);

  int (*device_alloc)(int32_t device_id, size_t bytes, void** out);
  int (*device_free)(void* ptr);
  /* Page-locked host memory, which asynchronous copies need to be asynchronous. */
  int (*host_alloc)(size_t bytes, void** out);
  int (*host_free)(void* ptr);
} hvd_device_v1;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HVD_DEVICE_H_ */
