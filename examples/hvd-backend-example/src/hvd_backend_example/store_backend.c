/*
 * store_backend.c: the "example" collective backend, a template for third-party backends.
 *
 * It implements hvd_backend_v1 (horovod/hvd_backend.h), and part of the optional
 * hvd_backend_ext_v1, in plain C99, and moves every byte through the key-value store that the
 * engine hands to comm_create. That makes it transport-free: it is correct for any number of ranks
 * whether they are threads in one process (the engine's in-memory store) or processes (the
 * launcher's rendezvous store). It is also slow, so it serves as a template and a test fixture,
 * never as a production backend.
 *
 * Protocol. Each collective takes the next per-communicator sequence number `seq`. A member
 * publishes its contribution under `<key_prefix>/<seq>/<rank>` (or, where each destination needs
 * a different block, `<key_prefix>/<seq>/<rank>/<dst>`), reads the contributions of the others
 * with the collective's deadline, and computes its own result locally. Members call collectives
 * in the same order, so equal sequence numbers name the same collective everywhere.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "horovod/hvd_backend.h"

#ifndef HVD_BACKEND_EXAMPLE_VERSION
#define HVD_BACKEND_EXAMPLE_VERSION "0.0.0+unknown" /* CMake passes the package version */
#endif

struct hvd_comm {
  int32_t rank;
  int32_t size;
  int32_t* job_ranks; /* our copy: the engine's array need not outlive comm_create */
  char* key_prefix;   /* our copy, for the same reason */
  int64_t timeout_ms;
  hvd_store_v1 store; /* the table is copied; its ctx stays owned by the engine */
  uint64_t seq;       /* sequence number of the next collective */
  char* key;          /* scratch buffer for store keys (one thread per comm at a time) */
  size_t key_cap;
  char error[512];
};

/* ------------------------------------------------------------------------------------------ */
/* Errors and small utilities                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* Records a message for last_error() and returns `status`, so callers can `return fail(...)`. */
static int fail(hvd_comm* comm, int status, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(comm->error, sizeof comm->error, fmt, args);
  va_end(args);
  return status;
}

/* A store may return any int; only the documented codes are passed on unchanged. */
static int as_status(int rc) {
  return (rc > HVD_OK && rc <= HVD_ERR_INTERNAL) ? rc : HVD_ERR_INTERNAL;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* timeout_ms bounds a whole collective, not each store read: reads share one deadline. */
static int64_t remaining_ms(int64_t deadline) {
  int64_t left = deadline - now_ms();
  return left > 0 ? left : 0;
}

static size_t dtype_size(hvd_dtype dtype) {
  switch (dtype) {
    case HVD_DTYPE_UINT8:
    case HVD_DTYPE_INT8:
    case HVD_DTYPE_BOOL: return 1;
    case HVD_DTYPE_INT16:
    case HVD_DTYPE_FLOAT16:
    case HVD_DTYPE_BFLOAT16: return 2;
    case HVD_DTYPE_INT32:
    case HVD_DTYPE_FLOAT32: return 4;
    case HVD_DTYPE_INT64:
    case HVD_DTYPE_FLOAT64: return 8;
  }
  return 0; /* unknown: callers validate first */
}

/* Pointers into unrelated objects are compared as integers, which is well defined. */
static int overlaps(const void* a, const void* b, size_t bytes) {
  uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
  return bytes > 0 && pa < pb + bytes && pb < pa + bytes;
}

/* memmove that tolerates the NULL buffers a zero-element call may legitimately pass. */
static void move_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) memmove(dst, src, bytes);
}

/* ------------------------------------------------------------------------------------------ */
/* Reductions                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Integers add and multiply in a wide unsigned type W: wrap-around instead of the undefined
 * behaviour of signed overflow (and of int promotion for 8- and 16-bit products). */
#define DEFINE_INTEGER_REDUCE(NAME, T, W)                                   \
  static void NAME(hvd_reduce_op op, T* acc, const T* in, size_t n) {       \
    size_t i;                                                               \
    for (i = 0; i < n; ++i) {                                               \
      switch (op) {                                                         \
        case HVD_REDUCE_SUM: acc[i] = (T)((W)acc[i] + (W)in[i]); break;     \
        case HVD_REDUCE_PRODUCT: acc[i] = (T)((W)acc[i] * (W)in[i]); break; \
        case HVD_REDUCE_MIN:                                                \
          if (in[i] < acc[i]) acc[i] = in[i];                               \
          break;                                                            \
        case HVD_REDUCE_MAX:                                                \
          if (in[i] > acc[i]) acc[i] = in[i];                               \
          break;                                                            \
      }                                                                     \
    }                                                                       \
  }
DEFINE_INTEGER_REDUCE(reduce_u8, uint8_t, uint32_t)
DEFINE_INTEGER_REDUCE(reduce_i8, int8_t, uint32_t)
DEFINE_INTEGER_REDUCE(reduce_i16, int16_t, uint32_t)
DEFINE_INTEGER_REDUCE(reduce_i32, int32_t, uint32_t)
DEFINE_INTEGER_REDUCE(reduce_i64, int64_t, uint64_t)

/* One binary operation on floating values, shared by float, double and the 16-bit types. */
#define APPLY_FLOAT_OP(op, a, b)                          \
  ((op) == HVD_REDUCE_SUM       ? (a) + (b)               \
   : (op) == HVD_REDUCE_PRODUCT ? (a) * (b)               \
   : (op) == HVD_REDUCE_MIN     ? ((b) < (a) ? (b) : (a)) \
                                : ((b) > (a) ? (b) : (a)))

static void reduce_f32(hvd_reduce_op op, float* acc, const float* in, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) acc[i] = APPLY_FLOAT_OP(op, acc[i], in[i]);
}

static void reduce_f64(hvd_reduce_op op, double* acc, const double* in, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) acc[i] = APPLY_FLOAT_OP(op, acc[i], in[i]);
}

static float bits_to_float(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint32_t float_to_bits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

/* IEEE binary16 -> float: exact (every half is a float); subnormals are normalised. */
static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (exp == 0x1F) return bits_to_float(sign | 0x7F800000u | (mant << 13)); /* inf, NaN */
  if (exp != 0) return bits_to_float(sign | ((exp + 112u) << 23) | (mant << 13));
  {
    float v = (float)mant * (1.0f / 16777216.0f); /* zero or subnormal: mant * 2^-24, exact */
    return sign ? -v : v;
  }
}

/* float -> IEEE binary16, rounding to nearest even; overflow becomes infinity. */
static uint16_t float_to_half(float f) {
  uint32_t x = float_to_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t absx = x & 0x7FFFFFFFu;
  if (absx >= 0x7F800000u) /* inf stays inf; NaN stays a (quiet) NaN */
    return (uint16_t)(sign | 0x7C00u | (absx > 0x7F800000u ? 0x200u : 0u));
  if (absx >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds past 65504 */
  if (absx < 0x38800000u) { /* below 2^-14: the result is subnormal or zero */
    uint32_t mant, shift, rest, half, q;
    if (absx < 0x33000000u) return sign; /* below half the smallest subnormal */
    mant = (absx & 0x7FFFFFu) | 0x800000u;
    shift = 126u - (absx >> 23); /* 14..24: aligns the value to units of 2^-24 */
    q = mant >> shift;
    rest = mant & ((1u << shift) - 1u);
    half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (q & 1u))) ++q;
    return (uint16_t)(sign | q);
  }
  /* normal: rebias the exponent, then add just under half an ulp plus the lowest kept bit */
  return (uint16_t)(sign | ((absx - (112u << 23) + 0xFFFu + ((absx >> 13) & 1u)) >> 13));
}

static float bfloat_to_float(uint16_t b) { return bits_to_float((uint32_t)b << 16); }

/* float -> bfloat16, rounding to nearest even (a carry into the exponent is the right result). */
static uint16_t float_to_bfloat(float f) {
  uint32_t x = float_to_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

/* 16-bit floats: widen to float, apply the op, round back (one rounding per pairwise step). */
static void reduce_half(hvd_reduce_op op, uint16_t* acc, const uint16_t* in, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) {
    float a = half_to_float(acc[i]), b = half_to_float(in[i]);
    acc[i] = float_to_half(APPLY_FLOAT_OP(op, a, b));
  }
}

static void reduce_bfloat(hvd_reduce_op op, uint16_t* acc, const uint16_t* in, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) {
    float a = bfloat_to_float(acc[i]), b = bfloat_to_float(in[i]);
    acc[i] = float_to_bfloat(APPLY_FLOAT_OP(op, a, b));
  }
}

/* bool (one byte, any non-zero is true): MIN and PRODUCT are AND, MAX and SUM are OR. */
static void reduce_bool(hvd_reduce_op op, uint8_t* acc, const uint8_t* in, size_t n) {
  int any = (op == HVD_REDUCE_MAX || op == HVD_REDUCE_SUM);
  size_t i;
  for (i = 0; i < n; ++i) acc[i] = (uint8_t)(any ? (acc[i] || in[i]) : (acc[i] && in[i]));
}

/* acc[i] = op(acc[i], in[i]); dtype and op are validated by the caller. */
static void reduce_into(hvd_dtype dtype, hvd_reduce_op op, void* acc, const void* in, size_t n) {
  switch (dtype) {
    case HVD_DTYPE_UINT8: reduce_u8(op, (uint8_t*)acc, (const uint8_t*)in, n); break;
    case HVD_DTYPE_INT8: reduce_i8(op, (int8_t*)acc, (const int8_t*)in, n); break;
    case HVD_DTYPE_INT16: reduce_i16(op, (int16_t*)acc, (const int16_t*)in, n); break;
    case HVD_DTYPE_INT32: reduce_i32(op, (int32_t*)acc, (const int32_t*)in, n); break;
    case HVD_DTYPE_INT64: reduce_i64(op, (int64_t*)acc, (const int64_t*)in, n); break;
    case HVD_DTYPE_FLOAT16: reduce_half(op, (uint16_t*)acc, (const uint16_t*)in, n); break;
    case HVD_DTYPE_BFLOAT16: reduce_bfloat(op, (uint16_t*)acc, (const uint16_t*)in, n); break;
    case HVD_DTYPE_FLOAT32: reduce_f32(op, (float*)acc, (const float*)in, n); break;
    case HVD_DTYPE_FLOAT64: reduce_f64(op, (double*)acc, (const double*)in, n); break;
    case HVD_DTYPE_BOOL: reduce_bool(op, (uint8_t*)acc, (const uint8_t*)in, n); break;
  }
}

/* ------------------------------------------------------------------------------------------ */
/* Argument checks: each names the offending argument in last_error                           */
/* ------------------------------------------------------------------------------------------ */

static int check_dtype(hvd_comm* comm, const char* what, hvd_dtype dtype) {
  if ((unsigned)dtype >= HVD_DTYPE_COUNT)
    return fail(comm, HVD_ERR_INVALID_ARGUMENT, "%s: dtype %d is not a known hvd_dtype", what,
                (int)dtype);
  return HVD_OK;
}

static int check_op(hvd_comm* comm, const char* what, hvd_reduce_op op) {
  if ((unsigned)op > HVD_REDUCE_PRODUCT)
    return fail(comm, HVD_ERR_INVALID_ARGUMENT, "%s: op %d is not a known hvd_reduce_op", what,
                (int)op);
  return HVD_OK;
}

/* A buffer of `count` elements: its byte size must not overflow, and it may be NULL only if empty.
 */
static int check_buffer(hvd_comm* comm, const char* what, const char* arg, const void* buf,
                        size_t count, size_t elem) {
  if (count > SIZE_MAX / elem)
    return fail(comm, HVD_ERR_INVALID_ARGUMENT, "%s: count %zu of %s overflows size_t", what, count,
                arg);
  if (buf == NULL && count > 0)
    return fail(comm, HVD_ERR_INVALID_ARGUMENT, "%s: %s is NULL but holds %zu elements", what, arg,
                count);
  return HVD_OK;
}

/* Sums a per-member count array into *total, rejecting NULL arrays and overflow. */
static int sum_counts(hvd_comm* comm, const char* what, const char* arg, const size_t* counts,
                      size_t elem, size_t* total) {
  int32_t i;
  if (counts == NULL) return fail(comm, HVD_ERR_INVALID_ARGUMENT, "%s: %s is NULL", what, arg);
  *total = 0;
  for (i = 0; i < comm->size; ++i) {
    if (counts[i] > SIZE_MAX / elem - *total)
      return fail(comm, HVD_ERR_INVALID_ARGUMENT, "%s: the sum of %s overflows size_t", what, arg);
    *total += counts[i];
  }
  return HVD_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Store access                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* Builds `<prefix>/<seq>/<src>` (dst < 0) or `<prefix>/<seq>/<src>/<dst>` in comm->key. */
static const char* data_key(hvd_comm* comm, uint64_t seq, int32_t src, int32_t dst) {
  if (dst < 0)
    snprintf(comm->key, comm->key_cap, "%s/%" PRIu64 "/%" PRId32, comm->key_prefix, seq, src);
  else
    snprintf(comm->key, comm->key_cap, "%s/%" PRIu64 "/%" PRId32 "/%" PRId32, comm->key_prefix, seq,
             src, dst);
  return comm->key;
}

static int publish(hvd_comm* comm, const char* what, const char* key, const void* data,
                   size_t bytes) {
  int rc;
  if (comm->size == 1) return HVD_OK; /* nobody would read it, and stores never forget keys */
  /* A zero-byte contribution may come with a NULL buffer; hand the store a valid pointer. */
  rc = comm->store.set(comm->store.ctx, key, bytes ? data : (const void*)"", bytes);
  if (rc != HVD_OK)
    return fail(comm, as_status(rc), "%s: store set of key '%s' failed with status %d", what, key,
                rc);
  return HVD_OK;
}

/* Reads what member `src` published under `key`, insisting on exactly `expected` bytes. On
 * success the caller owns *value and gives it back with release_value(). */
static int fetch(hvd_comm* comm, const char* what, const char* key, int32_t src, size_t expected,
                 int64_t deadline, void** value) {
  size_t len = 0;
  int rc;
  *value = NULL;
  rc = comm->store.get(comm->store.ctx, key, value, &len, remaining_ms(deadline));
  if (rc == HVD_ERR_TIMEOUT)
    return fail(comm, HVD_ERR_TIMEOUT,
                "%s: member rank %d (job rank %d) did not arrive within %" PRId64
                " ms (store key '%s')",
                what, (int)src, (int)comm->job_ranks[src], comm->timeout_ms, key);
  if (rc != HVD_OK)
    return fail(comm, as_status(rc),
                "%s: reading the contribution of member rank %d (job rank %d) failed with "
                "status %d (store key '%s')",
                what, (int)src, (int)comm->job_ranks[src], rc, key);
  if (len != expected) {
    if (*value != NULL) comm->store.release(comm->store.ctx, *value);
    *value = NULL;
    return fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "%s: member rank %d (job rank %d) contributed %zu bytes where %zu were expected; "
                "do all members pass the same counts and dtype?",
                what, (int)src, (int)comm->job_ranks[src], len, expected);
  }
  return HVD_OK;
}

static void release_value(hvd_comm* comm, void* value) {
  if (value != NULL) comm->store.release(comm->store.ctx, value);
}

/* Folds the contributions of all members into `out`, in rank order: every member then performs
 * the same sequence of roundings and gets a bitwise identical result. `own` is this member's
 * contribution; the others are read from the keys <seq>/<src>[/<dst>]. */
static int fold_in_rank_order(hvd_comm* comm, const char* what, uint64_t seq, int32_t dst,
                              const void* own, void* out, size_t count, hvd_dtype dtype,
                              hvd_reduce_op op, int64_t deadline) {
  size_t bytes = count * dtype_size(dtype);
  void* own_copy = NULL;
  int32_t src;
  int rc = HVD_OK;
  /* In place, member 0's data would overwrite ours before our turn in the fold: keep a copy. */
  if (comm->rank != 0 && overlaps(own, out, bytes)) {
    own_copy = malloc(bytes);
    if (own_copy == NULL) return fail(comm, HVD_ERR_INTERNAL, "%s: out of memory", what);
    memcpy(own_copy, own, bytes);
    own = own_copy;
  }
  for (src = 0; src < comm->size && rc == HVD_OK; ++src) {
    void* value = NULL;
    const void* in = own;
    if (src != comm->rank) {
      rc = fetch(comm, what, data_key(comm, seq, src, dst), src, bytes, deadline, &value);
      if (rc != HVD_OK) break;
      in = value;
    }
    if (src == 0)
      move_bytes(out, in, bytes);
    else
      reduce_into(dtype, op, out, in, count);
    release_value(comm, value);
  }
  free(own_copy);
  return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Communicator                                                                                 */
/* ------------------------------------------------------------------------------------------ */

static void comm_free(hvd_comm* comm) {
  if (comm == NULL) return;
  free(comm->job_ranks);
  free(comm->key_prefix);
  free(comm->key);
  free(comm);
}

/* Checks the config before anything is allocated; writes the reason into error. */
static int check_config(const hvd_comm_config_v1* config, const hvd_store_v1* store, hvd_comm** out,
                        char* error, size_t error_len) {
  const char* why = NULL;
  int status = HVD_ERR_INVALID_ARGUMENT;
  if (out == NULL)
    why = "out is NULL";
  else if (config == NULL)
    why = "config is NULL";
  else if (config->struct_size < sizeof(hvd_comm_config_v1))
    why = "config->struct_size is smaller than sizeof(hvd_comm_config_v1)";
  else if (config->size < 1)
    why = "config->size must be at least 1";
  else if (config->rank < 0 || config->rank >= config->size)
    why = "config->rank must be in [0, config->size)";
  else if (config->job_ranks == NULL)
    why = "config->job_ranks is NULL";
  else if (config->key_prefix == NULL || config->key_prefix[0] == '\0')
    why = "config->key_prefix is NULL or empty";
  else if (config->timeout_ms <= 0)
    why = "config->timeout_ms must be positive";
  else if (config->device_kind != HVD_DEVICE_CPU) {
    why = "config->device_kind: the example backend serves HVD_DEVICE_CPU only";
    status = HVD_ERR_UNSUPPORTED;
  } else if (store == NULL || store->set == NULL || store->get == NULL || store->release == NULL)
    why = "store is NULL or lacks set/get/release";
  if (why == NULL) return HVD_OK;
  if (error != NULL && error_len > 0) snprintf(error, error_len, "comm_create: %s", why);
  return status;
}

/* The "hello" exchange: each member publishes (size, job rank) and reads everyone else's, so
 * creation is collective, a missing member is named, and members that disagree about the
 * communicator's shape fail here rather than deadlock later. */
static int say_hello(hvd_comm* comm) {
  static const char* what = "comm_create";
  int32_t mine[2];
  int64_t deadline = now_ms() + comm->timeout_ms;
  int32_t src;
  int rc;
  mine[0] = comm->size;
  mine[1] = comm->job_ranks[comm->rank];
  snprintf(comm->key, comm->key_cap, "%s/hello/%d", comm->key_prefix, (int)comm->rank);
  rc = publish(comm, what, comm->key, mine, sizeof mine);
  for (src = 0; src < comm->size && rc == HVD_OK; ++src) {
    void* value = NULL;
    int32_t theirs[2];
    if (src == comm->rank) continue;
    snprintf(comm->key, comm->key_cap, "%s/hello/%d", comm->key_prefix, (int)src);
    rc = fetch(comm, what, comm->key, src, sizeof theirs, deadline, &value);
    if (rc != HVD_OK) break;
    memcpy(theirs, value, sizeof theirs);
    release_value(comm, value);
    if (theirs[0] != comm->size || theirs[1] != comm->job_ranks[src])
      rc = fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "%s: member rank %d says size %d and job rank %d, but this member expects size "
                "%d and job rank %d",
                what, (int)src, (int)theirs[0], (int)theirs[1], (int)comm->size,
                (int)comm->job_ranks[src]);
  }
  return rc;
}

static int comm_create(const hvd_comm_config_v1* config, const hvd_store_v1* store, hvd_comm** out,
                       char* error, size_t error_len) {
  hvd_comm* comm;
  int rc;
  if (out != NULL) *out = NULL;
  rc = check_config(config, store, out, error, error_len);
  if (rc != HVD_OK) return rc;
  comm = (hvd_comm*)calloc(1, sizeof *comm);
  if (comm != NULL) {
    comm->rank = config->rank;
    comm->size = config->size;
    comm->timeout_ms = config->timeout_ms;
    comm->store = *store;
    comm->job_ranks = (int32_t*)malloc(sizeof(int32_t) * (size_t)config->size);
    comm->key_prefix = (char*)malloc(strlen(config->key_prefix) + 1);
    /* room for "/<seq>/<src>/<dst>" or "/hello/<rank>" after the prefix */
    comm->key_cap = strlen(config->key_prefix) + 64;
    comm->key = (char*)malloc(comm->key_cap);
  }
  if (comm == NULL || comm->job_ranks == NULL || comm->key_prefix == NULL || comm->key == NULL) {
    comm_free(comm);
    if (error != NULL && error_len > 0) snprintf(error, error_len, "comm_create: out of memory");
    return HVD_ERR_INTERNAL;
  }
  memcpy(comm->job_ranks, config->job_ranks, sizeof(int32_t) * (size_t)config->size);
  strcpy(comm->key_prefix, config->key_prefix);
  rc = say_hello(comm);
  if (rc != HVD_OK) {
    if (error != NULL && error_len > 0) snprintf(error, error_len, "%s", comm->error);
    comm_free(comm);
    return rc;
  }
  *out = comm;
  return HVD_OK;
}

static void comm_destroy(hvd_comm* comm) { comm_free(comm); }

static const char* last_error(const hvd_comm* comm) {
  if (comm == NULL) return "comm is NULL";
  return comm->error;
}

/* ------------------------------------------------------------------------------------------ */
/* Collectives                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* NULL comm has nowhere to keep a message; last_error(NULL) says so. */
#define REQUIRE_COMM(comm)                               \
  do {                                                   \
    if ((comm) == NULL) return HVD_ERR_INVALID_ARGUMENT; \
  } while (0)

/* Propagates a failed check or store call. */
#define TRY(expr)                  \
  do {                             \
    int rc_ = (expr);              \
    if (rc_ != HVD_OK) return rc_; \
  } while (0)

static int allreduce(hvd_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                     hvd_dtype dtype, hvd_reduce_op op) {
  static const char* what = "allreduce";
  uint64_t seq;
  int64_t deadline;
  REQUIRE_COMM(comm);
  TRY(check_dtype(comm, what, dtype));
  TRY(check_op(comm, what, op));
  TRY(check_buffer(comm, what, "sendbuf", sendbuf, count, dtype_size(dtype)));
  TRY(check_buffer(comm, what, "recvbuf", recvbuf, count, dtype_size(dtype)));
  seq = comm->seq++;
  deadline = now_ms() + comm->timeout_ms;
  TRY(publish(comm, what, data_key(comm, seq, comm->rank, -1), sendbuf, count * dtype_size(dtype)));
  return fold_in_rank_order(comm, what, seq, -1, sendbuf, recvbuf, count, dtype, op, deadline);
}

static int allgatherv(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                      hvd_dtype dtype) {
  static const char* what = "allgatherv";
  size_t elem, total, offset = 0;
  uint64_t seq;
  int64_t deadline;
  int32_t src;
  REQUIRE_COMM(comm);
  TRY(check_dtype(comm, what, dtype));
  elem = dtype_size(dtype);
  TRY(sum_counts(comm, what, "recvcounts", recvcounts, elem, &total));
  TRY(check_buffer(comm, what, "sendbuf", sendbuf, recvcounts[comm->rank], elem));
  TRY(check_buffer(comm, what, "recvbuf", recvbuf, total, elem));
  seq = comm->seq++;
  deadline = now_ms() + comm->timeout_ms;
  TRY(publish(comm, what, data_key(comm, seq, comm->rank, -1), sendbuf,
              recvcounts[comm->rank] * elem));
  /* Our own block first: sendbuf may alias part of recvbuf, which peers' blocks overwrite. */
  for (src = 0; src < comm->rank; ++src) offset += recvcounts[src] * elem;
  move_bytes((char*)recvbuf + offset, sendbuf, recvcounts[comm->rank] * elem);
  offset = 0;
  for (src = 0; src < comm->size; ++src) {
    size_t bytes = recvcounts[src] * elem;
    if (src != comm->rank) {
      void* value;
      TRY(fetch(comm, what, data_key(comm, seq, src, -1), src, bytes, deadline, &value));
      move_bytes((char*)recvbuf + offset, value, bytes);
      release_value(comm, value);
    }
    offset += bytes;
  }
  return HVD_OK;
}

static int broadcast(hvd_comm* comm, void* buf, size_t count, hvd_dtype dtype, int32_t root) {
  static const char* what = "broadcast";
  size_t bytes;
  uint64_t seq;
  void* value;
  REQUIRE_COMM(comm);
  TRY(check_dtype(comm, what, dtype));
  if (root < 0 || root >= comm->size)
    return fail(comm, HVD_ERR_INVALID_ARGUMENT, "%s: root %d is not in [0, %d)", what, (int)root,
                (int)comm->size);
  TRY(check_buffer(comm, what, "buf", buf, count, dtype_size(dtype)));
  bytes = count * dtype_size(dtype);
  seq = comm->seq++;
  /* Only the root publishes; everyone else reads the root's key. */
  if (comm->rank == root) return publish(comm, what, data_key(comm, seq, root, -1), buf, bytes);
  TRY(fetch(comm, what, data_key(comm, seq, root, -1), root, bytes, now_ms() + comm->timeout_ms,
            &value));
  move_bytes(buf, value, bytes);
  release_value(comm, value);
  return HVD_OK;
}

static int alltoallv(hvd_comm* comm, const void* sendbuf, const size_t* sendcounts, void* recvbuf,
                     const size_t* recvcounts, hvd_dtype dtype) {
  static const char* what = "alltoallv";
  size_t elem, send_total, recv_total, send_off = 0, recv_off = 0, own_send_off = 0;
  size_t own_recv_off = 0;
  uint64_t seq;
  int64_t deadline;
  int32_t peer;
  REQUIRE_COMM(comm);
  TRY(check_dtype(comm, what, dtype));
  elem = dtype_size(dtype);
  TRY(sum_counts(comm, what, "sendcounts", sendcounts, elem, &send_total));
  TRY(sum_counts(comm, what, "recvcounts", recvcounts, elem, &recv_total));
  TRY(check_buffer(comm, what, "sendbuf", sendbuf, send_total, elem));
  TRY(check_buffer(comm, what, "recvbuf", recvbuf, recv_total, elem));
  if (sendcounts[comm->rank] != recvcounts[comm->rank])
    return fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "%s: sendcounts[%d] = %zu but recvcounts[%d] = %zu (this member's own block)", what,
                (int)comm->rank, sendcounts[comm->rank], (int)comm->rank, recvcounts[comm->rank]);
  seq = comm->seq++;
  deadline = now_ms() + comm->timeout_ms;
  /* Each destination gets its own key, so nobody reads blocks meant for somebody else. */
  for (peer = 0; peer < comm->size; ++peer) {
    if (peer == comm->rank)
      own_send_off = send_off;
    else
      TRY(publish(comm, what, data_key(comm, seq, comm->rank, peer),
                  (const char*)sendbuf + send_off, sendcounts[peer] * elem));
    send_off += sendcounts[peer] * elem;
  }
  for (peer = 0; peer < comm->rank; ++peer) own_recv_off += recvcounts[peer] * elem;
  move_bytes((char*)recvbuf + own_recv_off, (const char*)sendbuf + own_send_off,
             recvcounts[comm->rank] * elem);
  for (peer = 0; peer < comm->size; ++peer) {
    size_t bytes = recvcounts[peer] * elem;
    if (peer != comm->rank) {
      void* value;
      TRY(fetch(comm, what, data_key(comm, seq, peer, comm->rank), peer, bytes, deadline, &value));
      move_bytes((char*)recvbuf + recv_off, value, bytes);
      release_value(comm, value);
    }
    recv_off += bytes;
  }
  return HVD_OK;
}

static int reducescatter(hvd_comm* comm, const void* sendbuf, void* recvbuf,
                         const size_t* recvcounts, hvd_dtype dtype, hvd_reduce_op op) {
  static const char* what = "reducescatter";
  size_t elem, total, offset = 0, own_offset = 0;
  uint64_t seq;
  int64_t deadline;
  int32_t dst;
  REQUIRE_COMM(comm);
  TRY(check_dtype(comm, what, dtype));
  TRY(check_op(comm, what, op));
  elem = dtype_size(dtype);
  TRY(sum_counts(comm, what, "recvcounts", recvcounts, elem, &total));
  TRY(check_buffer(comm, what, "sendbuf", sendbuf, total, elem));
  TRY(check_buffer(comm, what, "recvbuf", recvbuf, recvcounts[comm->rank], elem));
  seq = comm->seq++;
  deadline = now_ms() + comm->timeout_ms;
  /* Block `dst` of our sendbuf goes to member dst only. */
  for (dst = 0; dst < comm->size; ++dst) {
    if (dst == comm->rank)
      own_offset = offset;
    else
      TRY(publish(comm, what, data_key(comm, seq, comm->rank, dst), (const char*)sendbuf + offset,
                  recvcounts[dst] * elem));
    offset += recvcounts[dst] * elem;
  }
  return fold_in_rank_order(comm, what, seq, comm->rank, (const char*)sendbuf + own_offset, recvbuf,
                            recvcounts[comm->rank], dtype, op, deadline);
}

static int barrier(hvd_comm* comm) {
  static const char* what = "barrier";
  uint64_t seq;
  int64_t deadline;
  int32_t src;
  REQUIRE_COMM(comm);
  seq = comm->seq++;
  deadline = now_ms() + comm->timeout_ms;
  TRY(publish(comm, what, data_key(comm, seq, comm->rank, -1), NULL, 0));
  for (src = 0; src < comm->size; ++src) {
    void* value;
    if (src == comm->rank) continue;
    TRY(fetch(comm, what, data_key(comm, seq, src, -1), src, 0, deadline, &value));
    release_value(comm, value);
  }
  return HVD_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Optional extension: the multi-buffer allreduce                                               */
/* ------------------------------------------------------------------------------------------ */

/* hvd_backend_ext_v1's allreduce_buffers, for unscaled results only. Scaling must follow
 * hvd::scale's arithmetic, a C++ header this C backend does not use, so a call with a postscale
 * is declined: HVD_ERR_UNSUPPORTED, before any communication and on what every member passes
 * alike, hands it back to the engine, which then fuses the buffers, calls allreduce and scales.
 * The store takes one value per member, so the buffers travel packed, through allreduce: this
 * shows the contract, not a saving. A backend with a transport of its own would read and write
 * each buffer where it is. */
static int allreduce_buffers(hvd_comm* comm, const hvd_buffer_pair* buffers, size_t n,
                             hvd_dtype dtype, hvd_reduce_op op, double postscale) {
  static const char* what = "allreduce_buffers";
  size_t elem, total = 0, offset = 0, i;
  unsigned char* packed;
  int rc;
  REQUIRE_COMM(comm);
  TRY(check_dtype(comm, what, dtype));
  TRY(check_op(comm, what, op));
  if (postscale != 1.0)
    return fail(comm, HVD_ERR_UNSUPPORTED, "%s: scaled results are left to the engine", what);
  if (buffers == NULL && n > 0)
    return fail(comm, HVD_ERR_INVALID_ARGUMENT, "%s: buffers is NULL but n is %zu", what, n);
  elem = dtype_size(dtype);
  for (i = 0; i < n; ++i) {
    TRY(check_buffer(comm, what, "a sendbuf", buffers[i].sendbuf, buffers[i].count, elem));
    TRY(check_buffer(comm, what, "a recvbuf", buffers[i].recvbuf, buffers[i].count, elem));
    if (buffers[i].count > SIZE_MAX / elem - total)
      return fail(comm, HVD_ERR_INVALID_ARGUMENT, "%s: the buffers' total overflows size_t", what);
    total += buffers[i].count;
  }
  packed = malloc(total ? total * elem : 1);
  if (packed == NULL) return fail(comm, HVD_ERR_INTERNAL, "%s: out of memory", what);
  for (i = 0; i < n; offset += buffers[i].count, ++i)
    move_bytes(packed + offset * elem, buffers[i].sendbuf, buffers[i].count * elem);
  rc = allreduce(comm, packed, packed, total, dtype, op);
  for (i = 0, offset = 0; rc == HVD_OK && i < n; offset += buffers[i].count, ++i)
    move_bytes(buffers[i].recvbuf, packed + offset * elem, buffers[i].count * elem);
  free(packed);
  return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Entry point                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static const hvd_backend_v1 kBackend = {
    .abi_version = HVD_BACKEND_ABI_VERSION,
    .struct_size = (uint32_t)sizeof(hvd_backend_v1),
    .name = "example",
    .version = HVD_BACKEND_EXAMPLE_VERSION,
    .device_kinds = HVD_DEVICE_CPU,
    .reserved = 0,
    /* no send/recv; works across processes; 16-bit floats are widened, not reduced natively */
    .capabilities = 0,
    .comm_create = comm_create,
    .comm_destroy = comm_destroy,
    .last_error = last_error,
    .allreduce = allreduce,
    .allgatherv = allgatherv,
    .broadcast = broadcast,
    .alltoallv = alltoallv,
    .reducescatter = reducescatter,
    .barrier = barrier,
    .send = NULL,
    .recv = NULL,
};

HVD_BACKEND_EXPORT const hvd_backend_v1* hvd_backend_v1_get(void) { return &kBackend; }

static const hvd_backend_ext_v1 kExtensions = {
    .struct_size = (uint32_t)sizeof(hvd_backend_ext_v1),
    .reserved = 0,
    .allreduce_buffers = allreduce_buffers,
};

HVD_BACKEND_EXPORT const hvd_backend_ext_v1* hvd_backend_ext_v1_get(void) { return &kExtensions; }
