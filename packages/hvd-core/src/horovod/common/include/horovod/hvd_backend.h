/*
 * hvd_backend.h: the versioned C ABI between the hvd engine and a collective backend.
 *
 * A backend is a shared library exporting one function, HVD_BACKEND_V1_ENTRY, which returns a
 * pointer to a static hvd_backend_v1 table (and, optionally, HVD_BACKEND_EXT_V1_ENTRY: see the end
 * of this file). The engine opens the library RTLD_LOCAL, checks abi_version and struct_size, and
 * refuses anything it does not know. The interface is plain C so
 * that separately built and separately versioned packages never share C++ ABI.
 *
 * Conventions
 *  - Every function returning int returns HVD_OK (0) on success or an hvd_status code; the detail
 *    of the most recent failure on a communicator is available from last_error(comm).
 *  - Buffers passed for a CPU communicator are host memory. Counts are in elements of `dtype`.
 *  - A device communicator (config device_kind HVD_DEVICE_CUDA, offered by a backend whose
 *    device_kinds has that bit) gets device memory, and queues each collective on the stream its
 *    config names, through the config's device table: a call returns once the work is queued
 *    (HVD_OK) and the engine records an event after it. Failures that surface later are reported
 *    by hvd_backend_ext_v1's async_error.
 *  - A send buffer may equal the receive buffer (in-place) for allreduce; for the other
 *    collectives the engine never passes overlapping send and receive buffers.
 *  - Members of a communicator share byte order (data is exchanged in native order).
 *  - Calls on one communicator are made from one thread at a time; different communicators may be
 *    driven from the same engine thread in any interleaving consistent across ranks.
 *  - Reductions of HVD_DTYPE_BOOL use MIN as logical AND, MAX as logical OR and PRODUCT as AND.
 *
 * Compatibility rule: version 1 is frozen. New members are only ever appended in a new version
 * (hvd_backend_v2 ...), never renamed or reordered in place.
 */
#ifndef HVD_BACKEND_H_
#define HVD_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "horovod/hvd_device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HVD_BACKEND_ABI_VERSION 1
/* Name of the exported entry point: `const hvd_backend_v1* hvd_backend_v1_get(void);` */
#define HVD_BACKEND_V1_ENTRY "hvd_backend_v1_get"

#if defined(_WIN32)
#define HVD_BACKEND_EXPORT __declspec(dllexport)
#else
#define HVD_BACKEND_EXPORT __attribute__((visibility("default")))
#endif

typedef enum hvd_status {
  HVD_OK = 0,
  HVD_ERR_INVALID_ARGUMENT = 1, /* a bad count, dtype, root or config */
  HVD_ERR_UNSUPPORTED = 2,      /* the backend cannot do this (dtype, op, device) */
  HVD_ERR_TIMEOUT = 3,          /* a peer did not arrive in time */
  HVD_ERR_PEER_LOST = 4,        /* a peer closed its connection or died */
  HVD_ERR_INTERNAL = 5          /* anything else */
} hvd_status;

/* In C++, the enums a caller passes through the ABI get C's underlying type (unsigned int, as GCC
 * and Clang give C enums without negative values; the layout is unchanged): a C caller may pass any
 * value, and loading an out-of-range value into an enum without a fixed type is undefined in C++,
 * before a backend could refuse it. */
#ifdef __cplusplus
#define HVD_ENUM_BASE : unsigned int
#else
#define HVD_ENUM_BASE
#endif

typedef enum hvd_dtype HVD_ENUM_BASE {
  HVD_DTYPE_UINT8 = 0,
  HVD_DTYPE_INT8 = 1,
  HVD_DTYPE_INT16 = 2,
  HVD_DTYPE_INT32 = 3,
  HVD_DTYPE_INT64 = 4,
  HVD_DTYPE_FLOAT16 = 5,
  HVD_DTYPE_BFLOAT16 = 6,
  HVD_DTYPE_FLOAT32 = 7,
  HVD_DTYPE_FLOAT64 = 8,
  HVD_DTYPE_BOOL = 9
} hvd_dtype;
#define HVD_DTYPE_COUNT 10

/* Average is not a backend op: the engine sums and scales. Adasum is an engine algorithm. */
typedef enum hvd_reduce_op HVD_ENUM_BASE {
  HVD_REDUCE_SUM = 0,
  HVD_REDUCE_MIN = 1,
  HVD_REDUCE_MAX = 2,
  HVD_REDUCE_PRODUCT = 3
} hvd_reduce_op;

/* Device kinds, as bit flags in hvd_backend_v1.device_kinds. */
#define HVD_DEVICE_CPU (1u << 0)
#define HVD_DEVICE_CUDA (1u << 1)

/* Capability flags in hvd_backend_v1.capabilities. */
#define HVD_CAP_SEND_RECV (1ull << 0)       /* send and recv are implemented */
#define HVD_CAP_IN_PROCESS_ONLY (1ull << 1) /* all ranks live in one process (test backends) */
#define HVD_CAP_LOW_PRECISION (1ull << 2)   /* reduces float16 and bfloat16 natively */

/*
 * Key-value store provided by the engine (backed by the launcher's rendezvous server, or an
 * in-memory map in tests). Keys are NUL-terminated; values are arbitrary bytes.
 *  - set copies `value` before returning; setting an existing key replaces its value.
 *  - get of a zero-length value succeeds with *len == 0 and a non-NULL *value to release.
 *  - timeout_ms is always positive (the engine passes its configured timeout).
 *  - There is no delete: the store is meant for connection set-up (addresses, ids), not for data.
 *    A backend that moves data through it (the example backend) grows it for the job's lifetime.
 */
typedef struct hvd_store_v1 {
  void* ctx;
  int (*set)(void* ctx, const char* key, const void* value, size_t len);
  /* Blocks until `key` exists or timeout_ms elapses (HVD_ERR_TIMEOUT). On success *value is a
   * buffer owned by the caller, to be released with release(). */
  int (*get)(void* ctx, const char* key, void** value, size_t* len, int64_t timeout_ms);
  void (*release)(void* ctx, void* value);
} hvd_store_v1;

typedef struct hvd_comm_config_v1 {
  size_t struct_size;         /* sizeof(hvd_comm_config_v1), for forward compatibility */
  int32_t rank;               /* this member's rank in the communicator, 0..size-1 */
  int32_t size;               /* number of members */
  const int32_t* job_ranks;   /* job-level rank of each member, indexed by communicator rank */
  const char* key_prefix;     /* unique per communicator in a job; all store keys must use it */
  int64_t timeout_ms;         /* > 0: bound for connection set-up and for each collective */
  uint32_t device_kind;       /* one HVD_DEVICE_* bit */
  int32_t device_id;          /* device ordinal for accelerators, -1 for CPU */
  /* Appended in hvd-core 0.2 (read only when struct_size covers them): for a device communicator,
   * the engine's device table and the stream its collectives are queued on; NULL for CPU. */
  const hvd_device_v1* device;
  hvd_stream_t stream;
} hvd_comm_config_v1;

typedef struct hvd_comm hvd_comm; /* opaque, owned by the backend */

typedef struct hvd_backend_v1 {
  uint32_t abi_version; /* HVD_BACKEND_ABI_VERSION */
  uint32_t struct_size; /* sizeof(hvd_backend_v1) */
  const char* name; /* short name, e.g. "gloo" */
  const char* version; /* the backend's own version string */
  uint32_t device_kinds;
  uint32_t reserved;
  uint64_t capabilities;

  /* Collective over all members; on failure writes a message into error[error_len]. */
  int (*comm_create)(const hvd_comm_config_v1* config, const hvd_store_v1* store, hvd_comm** out,
                     char* error, size_t error_len);
  void (*comm_destroy)(hvd_comm* comm);
  /* Message of the last failure on `comm`; valid until the next call on it. */
  const char* (*last_error)(const hvd_comm* comm);

  int (*allreduce)(hvd_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                   hvd_dtype dtype, hvd_reduce_op op);
  /* recvcounts[i] elements come from member i; this member sends recvcounts[rank]. */
  int (*allgatherv)(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                    hvd_dtype dtype);
  int (*broadcast)(hvd_comm* comm, void* buf, size_t count, hvd_dtype dtype, int32_t root);
  /* sendcounts[i] elements go to member i; recvcounts[i] elements arrive from member i. */
  int (*alltoallv)(hvd_comm* comm, const void* sendbuf, const size_t* sendcounts, void* recvbuf,
                   const size_t* recvcounts, hvd_dtype dtype);
  /* sendbuf holds sum(recvcounts) elements; member i receives the reduction of its block. */
  int (*reducescatter)(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                       hvd_dtype dtype, hvd_reduce_op op);
  int (*barrier)(hvd_comm* comm);

  /* Optional (HVD_CAP_SEND_RECV); NULL otherwise. A send may block until the peer posts the
   * matching recv (as Gloo's does): callers order sends and receives so that they pair up. */
  int (*send)(hvd_comm* comm, const void* buf, size_t bytes, int32_t peer, int32_t tag);
  int (*recv)(hvd_comm* comm, void* buf, size_t bytes, int32_t peer, int32_t tag);
} hvd_backend_v1;

typedef const hvd_backend_v1* (*hvd_backend_v1_get_fn)(void);

/*
 * Optional extensions (hvd-core 0.2 and later). Beside HVD_BACKEND_V1_ENTRY, a backend may export
 * `const hvd_backend_ext_v1* hvd_backend_ext_v1_get(void);`. An hvd-core that predates it never
 * looks for it; this one uses each function that is not NULL and does without the others, so a
 * backend and an hvd-core of either age work together. Members are only ever appended: check
 * struct_size before reading one.
 */
#define HVD_BACKEND_EXT_V1_ENTRY "hvd_backend_ext_v1_get"

/* One tensor of a multi-buffer allreduce: `count` elements are read from `sendbuf` and their
 * results written to `recvbuf`, which may be the same buffer. The buffers of different pairs never
 * overlap, and are host memory. */
typedef struct hvd_buffer_pair {
  const void* sendbuf;
  void* recvbuf;
  size_t count;
} hvd_buffer_pair;

typedef struct hvd_backend_ext_v1 {
  uint32_t struct_size; /* sizeof(hvd_backend_ext_v1) */
  uint32_t reserved;

  /* An allreduce of `n` buffers as if they were one buffer holding them in order (every member
   * passes the same counts), each result multiplied by `postscale` before it is written, with
   * hvd::scale's arithmetic (hvd_reduce.hpp). This is what the engine does otherwise around
   * allreduce for fused tensors and averages: a copy into one buffer, the call, a scaling pass and
   * a copy back; a backend that moves data itself can read and write the tensors directly. NULL
   * when not implemented.
   *
   * A backend may implement it for some calls only: returning HVD_ERR_UNSUPPORTED hands the call
   * back to the engine, which then does the above around `allreduce`. It must decline before
   * communicating, and decide from what every member passes alike (n, the counts, dtype, op,
   * postscale), so that all members take the same path. */
  int (*allreduce_buffers)(hvd_comm* comm, const hvd_buffer_pair* buffers, size_t n,
                           hvd_dtype dtype, hvd_reduce_op op, double postscale);

  /* Eager messages (appended after allreduce_buffers: check struct_size). A member sends data to
   * a peer before the peer knows it wants it, into a receive the peer keeps posted, so that the
   * data travels while the engine negotiates, or is the negotiation. Messages go on `channels`
   * independent channels (numbered from 0), each with its own space; on each channel the engine
   * sends a peer at most two messages that peer has not yet released, each fitting the channel's
   * space. All five are set, or all NULL.
   *
   *  - eager_open: called once per communicator, by every member alike (a collective where the
   *    backend needs one), before any other eager call: keep, for each peer and channel c,
   *    receives for two messages of up to bytes[c], always posted. Returns HVD_ERR_UNSUPPORTED,
   *    on every member alike, where the communicator's transport gains nothing from it (shared
   *    memory, one member); the engine then makes no other eager call on it.
   *  - eager_send: starts sending `bytes` (at least 1, at most the channel's space) from `buf` to
   *    `peer` and returns without waiting for it; `buf` stays valid until eager_wait_sent. One
   *    send per channel and peer at a time.
   *  - eager_wait_sent: returns once the message to `peer` has left `buf`; bounded by the
   *    communicator's timeout.
   *  - eager_receive: waits (bounded by the timeout) for the oldest message from `peer` not yet
   *    released and sets *data to its first byte, valid until eager_release. The engine knows its
   *    length.
   *  - eager_release: that message is no longer needed; its space takes a later one. */
  int (*eager_open)(hvd_comm* comm, const size_t* bytes, int32_t channels);
  int (*eager_send)(hvd_comm* comm, int32_t channel, int32_t peer, const void* buf, size_t bytes);
  int (*eager_wait_sent)(hvd_comm* comm, int32_t channel, int32_t peer);
  int (*eager_receive)(hvd_comm* comm, int32_t channel, int32_t peer, const void** data);
  int (*eager_release)(hvd_comm* comm, int32_t channel, int32_t peer);

  /* Appended after eager_release (check struct_size); optional even where the five above are set
   * (NULL: the engine calls eager_receive, copies and calls eager_release instead).
   *  - eager_receive_into: as eager_receive, a copy of the message's `bytes` bytes (its whole
   *    length, at least 1) to `dst`, and eager_release, in one call: the bytes still on their way
   *    when it is called may land in `dst` directly, with no copy. Never called while a message
   *    from `peer` on `channel` is held (received and not released). */
  int (*eager_receive_into)(hvd_comm* comm, int32_t channel, int32_t peer, void* dst, size_t bytes);

  /* Appended after eager_receive_into (check struct_size); for device communicators, whose work
   * completes after the call returns. Both set or both NULL.
   *  - async_error: HVD_OK while nothing has failed, else the status of a failure found since
   *    (last_error says what); never blocks. The engine polls it while it waits for queued work.
   *  - abort: stops the communicator's queued and running work so that its stream drains, and
   *    makes every later call fail at once; the engine then destroys the communicator. */
  int (*async_error)(hvd_comm* comm);
  int (*abort)(hvd_comm* comm);
} hvd_backend_ext_v1;

typedef const hvd_backend_ext_v1* (*hvd_backend_ext_v1_get_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HVD_BACKEND_H_ */
