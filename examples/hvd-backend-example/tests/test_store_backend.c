/*
 * test_store_backend.c: drives the example backend with N threads (N = 1..4) through a tiny
 * in-process key-value store, and checks every collective, dtype and op against a reference
 * computed locally. Inputs are small integers, so every reference result is exact and the
 * comparison is bitwise. Build and run with tests/run_c_tests.sh.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "horovod/hvd_backend.h"

const hvd_backend_v1* hvd_backend_v1_get(void);
const hvd_backend_ext_v1* hvd_backend_ext_v1_get(void);
static const hvd_backend_v1* B;
static const hvd_backend_ext_v1* X;

/* ---------------------------------------------------------------------------------------- */
/* The in-process store: a hash map under one mutex, with a condvar for blocking gets.      */
/* ---------------------------------------------------------------------------------------- */

#define NBUCKETS 4096

typedef struct entry {
  struct entry* next;
  char* key;
  void* value;
  size_t len;
} entry;

typedef struct mem_store {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  entry* buckets[NBUCKETS];
  long outstanding; /* values handed out by get and not yet released: must end at 0 */
  long keys;
} mem_store;

static size_t hash(const char* s) {
  size_t h = 5381;
  while (*s) h = h * 33 + (unsigned char)*s++;
  return h % NBUCKETS;
}

static entry* lookup(mem_store* st, const char* key) {
  entry* e;
  for (e = st->buckets[hash(key)]; e != NULL; e = e->next)
    if (strcmp(e->key, key) == 0) return e;
  return NULL;
}

static int store_set(void* ctx, const char* key, const void* value, size_t len) {
  mem_store* st = (mem_store*)ctx;
  entry* e;
  pthread_mutex_lock(&st->mu);
  e = lookup(st, key);
  if (e == NULL) {
    size_t b = hash(key);
    e = (entry*)calloc(1, sizeof *e);
    e->key = strdup(key);
    e->next = st->buckets[b];
    st->buckets[b] = e;
    st->keys++;
  }
  free(e->value);
  e->value = malloc(len ? len : 1);
  if (len) memcpy(e->value, value, len);
  e->len = len;
  pthread_cond_broadcast(&st->cv);
  pthread_mutex_unlock(&st->mu);
  return HVD_OK;
}

static int store_get(void* ctx, const char* key, void** value, size_t* len, int64_t timeout_ms) {
  mem_store* st = (mem_store*)ctx;
  struct timespec until;
  entry* e;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_ms / 1000;
  until.tv_nsec += (timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&st->mu);
  while ((e = lookup(st, key)) == NULL) {
    if (pthread_cond_timedwait(&st->cv, &st->mu, &until) == ETIMEDOUT && !lookup(st, key)) {
      pthread_mutex_unlock(&st->mu);
      return HVD_ERR_TIMEOUT;
    }
  }
  *value = malloc(e->len ? e->len : 1);
  memcpy(*value, e->value, e->len);
  *len = e->len;
  st->outstanding++;
  pthread_mutex_unlock(&st->mu);
  return HVD_OK;
}

static void store_release(void* ctx, void* value) {
  mem_store* st = (mem_store*)ctx;
  pthread_mutex_lock(&st->mu);
  st->outstanding--;
  pthread_mutex_unlock(&st->mu);
  free(value);
}

static void store_init(mem_store* st) {
  memset(st, 0, sizeof *st);
  pthread_mutex_init(&st->mu, NULL);
  pthread_cond_init(&st->cv, NULL);
}

static void store_free(mem_store* st) {
  size_t b;
  for (b = 0; b < NBUCKETS; ++b) {
    entry* e = st->buckets[b];
    while (e != NULL) {
      entry* next = e->next;
      free(e->key);
      free(e->value);
      free(e);
      e = next;
    }
  }
  pthread_mutex_destroy(&st->mu);
  pthread_cond_destroy(&st->cv);
}

/* ---------------------------------------------------------------------------------------- */
/* Checks                                                                                   */
/* ---------------------------------------------------------------------------------------- */

static pthread_mutex_t g_count_mu = PTHREAD_MUTEX_INITIALIZER;
static long g_passed, g_failed;

static void check(int ok, const char* fmt, ...) {
  pthread_mutex_lock(&g_count_mu);
  if (ok) {
    g_passed++;
  } else {
    va_list args;
    g_failed++;
    fprintf(stderr, "FAIL: ");
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fprintf(stderr, "\n");
  }
  pthread_mutex_unlock(&g_count_mu);
}

static const char* dtype_names[HVD_DTYPE_COUNT] = {"uint8",   "int8",    "int16",    "int32",
                                                   "int64",   "float16", "bfloat16", "float32",
                                                   "float64", "bool"};
static const char* op_names[4] = {"sum", "min", "max", "product"};

static size_t esize(hvd_dtype dt) {
  static const size_t sizes[HVD_DTYPE_COUNT] = {1, 1, 2, 4, 8, 2, 2, 4, 8, 1};
  return sizes[dt];
}

/* ---------------------------------------------------------------------------------------- */
/* Inputs and references: small integers, exact in every dtype                              */
/* ---------------------------------------------------------------------------------------- */

/* The input of `who` at element i, in [-4, 4]. */
static int64_t gen(int who, size_t i, int salt) {
  return (int64_t)(((size_t)who * 5 + i * 3 + (size_t)salt) % 9) - 4;
}

/* Maps a generated value into the domain of dt: uint8 in [0, 8], bool in {0, 1}. */
static int64_t domain(hvd_dtype dt, int64_t v) {
  if (dt == HVD_DTYPE_UINT8) return v + 4;
  if (dt == HVD_DTYPE_BOOL) return (v + 4) % 2;
  return v;
}

/* An independent, exact-only float16 encoder (asserts the value is representable). */
static uint16_t exact_half(double v) {
  uint16_t sign = signbit(v) ? 0x8000u : 0u;
  int e;
  double m, frac;
  v = fabs(v);
  if (v == 0) return sign;
  m = frexp(v, &e); /* v = m * 2^e, m in [0.5, 1) */
  frac = (m * 2 - 1) * 1024;
  if (frac != floor(frac) || e - 1 + 15 < 1 || e - 1 + 15 > 30) {
    fprintf(stderr, "test bug: %g is not exact in float16\n", v);
    abort();
  }
  return (uint16_t)(sign | ((unsigned)(e - 1 + 15) << 10) | (unsigned)frac);
}

static uint16_t exact_bfloat(double v) {
  float f = (float)v;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if (bits & 0xFFFFu) {
    fprintf(stderr, "test bug: %g is not exact in bfloat16\n", v);
    abort();
  }
  return (uint16_t)(bits >> 16);
}

/* Stores the exact value v as element idx of a dt buffer; integer types wrap like the backend. */
static void put(hvd_dtype dt, void* buf, size_t idx, double v) {
  switch (dt) {
    case HVD_DTYPE_UINT8: ((uint8_t*)buf)[idx] = (uint8_t)(int64_t)v; break;
    case HVD_DTYPE_INT8: ((int8_t*)buf)[idx] = (int8_t)(int64_t)v; break;
    case HVD_DTYPE_INT16: ((int16_t*)buf)[idx] = (int16_t)(int64_t)v; break;
    case HVD_DTYPE_INT32: ((int32_t*)buf)[idx] = (int32_t)(int64_t)v; break;
    case HVD_DTYPE_INT64: ((int64_t*)buf)[idx] = (int64_t)v; break;
    case HVD_DTYPE_FLOAT16: ((uint16_t*)buf)[idx] = exact_half(v); break;
    case HVD_DTYPE_BFLOAT16: ((uint16_t*)buf)[idx] = exact_bfloat(v); break;
    case HVD_DTYPE_FLOAT32: ((float*)buf)[idx] = (float)v; break;
    case HVD_DTYPE_FLOAT64: ((double*)buf)[idx] = v; break;
    case HVD_DTYPE_BOOL: ((uint8_t*)buf)[idx] = (uint8_t)(v != 0); break;
  }
}

/* The reduction, in rank order, of inputs gen(rank, i, salt); exact in double (|v| <= 8^4).
 * Storing it through put() then wraps integers the way step-by-step wrapping would. */
static double reference(hvd_dtype dt, hvd_reduce_op op, int n, size_t i, int salt) {
  double acc = (double)domain(dt, gen(0, i, salt));
  int r;
  for (r = 1; r < n; ++r) {
    double v = (double)domain(dt, gen(r, i, salt));
    switch (op) {
      case HVD_REDUCE_SUM: acc += v; break;
      case HVD_REDUCE_PRODUCT: acc *= v; break;
      case HVD_REDUCE_MIN: acc = v < acc ? v : acc; break;
      case HVD_REDUCE_MAX: acc = v > acc ? v : acc; break;
    }
  }
  return acc;
}

/* ---------------------------------------------------------------------------------------- */
/* One rank's work                                                                          */
/* ---------------------------------------------------------------------------------------- */

typedef struct rank_ctx {
  int rank, n;
  mem_store* store;
} rank_ctx;

static hvd_store_v1 store_table(mem_store* st) {
  hvd_store_v1 t;
  t.ctx = st;
  t.set = store_set;
  t.get = store_get;
  t.release = store_release;
  return t;
}

static hvd_comm* create(rank_ctx* c, const char* prefix, int rank, int size,
                        const int32_t* job_ranks, int64_t timeout_ms) {
  hvd_comm_config_v1 cfg;
  hvd_store_v1 st = store_table(c->store);
  hvd_comm* comm = NULL;
  char err[256] = "";
  int rc;
  memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  cfg.rank = rank;
  cfg.size = size;
  cfg.job_ranks = job_ranks;
  cfg.key_prefix = prefix;
  cfg.timeout_ms = timeout_ms;
  cfg.device_kind = HVD_DEVICE_CPU;
  cfg.device_id = -1;
  rc = B->comm_create(&cfg, &st, &comm, err, sizeof err);
  check(rc == HVD_OK && comm != NULL, "N=%d rank %d: comm_create(%s) = %d: %s", c->n, c->rank,
        prefix, rc, err);
  return comm;
}

/* Fills count elements of dt with gen(who, first + i, salt). */
static void fill(hvd_dtype dt, void* buf, int who, size_t first, size_t count, int salt) {
  size_t i;
  for (i = 0; i < count; ++i) put(dt, buf, i, (double)domain(dt, gen(who, first + i, salt)));
}

static void check_bytes(rank_ctx* c, const char* what, hvd_dtype dt, int op, size_t count,
                        const void* got, const void* want, size_t bytes) {
  check(bytes == 0 || memcmp(got, want, bytes) == 0,
        "N=%d rank %d: %s dtype=%s op=%s count=%zu: wrong result", c->n, c->rank, what,
        dtype_names[dt], op >= 0 ? op_names[op] : "-", count);
}

static void check_rc(rank_ctx* c, hvd_comm* comm, const char* what, hvd_dtype dt, int rc) {
  check(rc == HVD_OK, "N=%d rank %d: %s dtype=%s returned %d: %s", c->n, c->rank, what,
        dtype_names[dt], rc, B->last_error(comm));
}

static void test_allreduce(rank_ctx* c, hvd_comm* comm, hvd_dtype dt, size_t count) {
  size_t bytes = count * esize(dt), i;
  char* send = malloc(bytes + 1);
  char* recv = malloc(bytes + 1);
  char* want = malloc(bytes + 1);
  int op;
  for (op = 0; op < 4; ++op) {
    for (i = 0; i < count; ++i) put(dt, want, i, reference(dt, (hvd_reduce_op)op, c->n, i, op));
    fill(dt, send, c->rank, 0, count, op);
    memset(recv, 0x5A, bytes);
    check_rc(c, comm, "allreduce", dt,
             B->allreduce(comm, send, recv, count, dt, (hvd_reduce_op)op));
    check_bytes(c, "allreduce", dt, op, count, recv, want, bytes);
    /* in place: sendbuf == recvbuf */
    check_rc(c, comm, "allreduce in-place", dt,
             B->allreduce(comm, send, send, count, dt, (hvd_reduce_op)op));
    check_bytes(c, "allreduce in-place", dt, op, count, send, want, bytes);
  }
  free(send);
  free(recv);
  free(want);
}

/* The extension's multi-buffer allreduce: three buffers of `count`, 1 and 2 * `count` elements
 * (one of them in place), each result as if the three were one buffer; a call that needs scaling
 * is declined, on every member, and leaves the buffers alone. */
static void test_allreduce_buffers(rank_ctx* c, hvd_comm* comm, hvd_dtype dt, size_t count) {
  size_t counts[3], firsts[3], i, b;
  char *send[3], *recv[3], *want[3];
  hvd_buffer_pair pairs[3];
  int op, rc;
  counts[0] = count, counts[1] = 1, counts[2] = 2 * count;
  for (b = 0, i = 0; b < 3; i += counts[b], ++b) {
    firsts[b] = i;
    send[b] = malloc(counts[b] * esize(dt) + 1);
    want[b] = malloc(counts[b] * esize(dt) + 1);
    recv[b] = b == 1 ? send[b] : malloc(counts[b] * esize(dt) + 1);
  }
  for (op = 0; op < 4; ++op) {
    for (b = 0; b < 3; ++b) {
      for (i = 0; i < counts[b]; ++i)
        put(dt, want[b], i, reference(dt, (hvd_reduce_op)op, c->n, firsts[b] + i, op));
      fill(dt, send[b], c->rank, firsts[b], counts[b], op);
      if (recv[b] != send[b]) memset(recv[b], 0x5A, counts[b] * esize(dt));
      pairs[b].sendbuf = send[b], pairs[b].recvbuf = recv[b], pairs[b].count = counts[b];
    }
    check_rc(c, comm, "allreduce_buffers", dt,
             X->allreduce_buffers(comm, pairs, 3, dt, (hvd_reduce_op)op, 1.0));
    for (b = 0; b < 3; ++b)
      check_bytes(c, "allreduce_buffers", dt, op, counts[b], recv[b], want[b],
                  counts[b] * esize(dt));
  }
  memset(recv[0], 0x5A, counts[0] * esize(dt));
  memcpy(want[0], recv[0], counts[0] * esize(dt));
  rc = X->allreduce_buffers(comm, pairs, 3, dt, HVD_REDUCE_SUM, 0.5);
  check(rc == HVD_ERR_UNSUPPORTED && strstr(B->last_error(comm), "scaled") != NULL,
        "N=%d rank %d: allreduce_buffers with a postscale, dtype=%s: got %d (%s), want it declined",
        c->n, c->rank, dtype_names[dt], rc, B->last_error(comm));
  check_bytes(c, "declined allreduce_buffers", dt, -1, counts[0], recv[0], want[0],
              counts[0] * esize(dt));
  for (b = 0; b < 3; ++b) {
    if (recv[b] != send[b]) free(recv[b]);
    free(send[b]);
    free(want[b]);
  }
}

static void test_reducescatter(rank_ctx* c, hvd_comm* comm, hvd_dtype dt, size_t count) {
  size_t counts[4], total = 0, mine_off = 0, i;
  char *send, *recv, *want;
  int r, op;
  for (r = 0; r < c->n; ++r) {
    counts[r] = (count + (size_t)r) % 3 + count / 2;
    if (r < c->rank) mine_off += counts[r];
    total += counts[r];
  }
  send = malloc(total * esize(dt) + 1);
  recv = malloc(counts[c->rank] * esize(dt) + 1);
  want = malloc(counts[c->rank] * esize(dt) + 1);
  for (op = 0; op < 4; ++op) {
    for (i = 0; i < counts[c->rank]; ++i)
      put(dt, want, i, reference(dt, (hvd_reduce_op)op, c->n, mine_off + i, op + 7));
    fill(dt, send, c->rank, 0, total, op + 7);
    check_rc(c, comm, "reducescatter", dt,
             B->reducescatter(comm, send, recv, counts, dt, (hvd_reduce_op)op));
    check_bytes(c, "reducescatter", dt, op, count, recv, want, counts[c->rank] * esize(dt));
  }
  free(send);
  free(recv);
  free(want);
}

static void test_allgatherv(rank_ctx* c, hvd_comm* comm, hvd_dtype dt, size_t count) {
  size_t counts[4], total = 0, off = 0;
  char *send, *recv, *want;
  int r;
  for (r = 0; r < c->n; ++r) total += counts[r] = (count + 2 * (size_t)r) % 4 + count / 3;
  send = malloc(counts[c->rank] * esize(dt) + 1);
  recv = malloc(total * esize(dt) + 1);
  want = malloc(total * esize(dt) + 1);
  for (r = 0; r < c->n; ++r) {
    fill(dt, want + off * esize(dt), r, 0, counts[r], 3);
    off += counts[r];
  }
  fill(dt, send, c->rank, 0, counts[c->rank], 3);
  check_rc(c, comm, "allgatherv", dt, B->allgatherv(comm, send, recv, counts, dt));
  check_bytes(c, "allgatherv", dt, -1, count, recv, want, total * esize(dt));
  free(send);
  free(recv);
  free(want);
}

static void test_broadcast(rank_ctx* c, hvd_comm* comm, hvd_dtype dt, size_t count) {
  size_t bytes = count * esize(dt);
  int root = (int)(count % (size_t)c->n);
  char* buf = malloc(bytes + 1);
  char* want = malloc(bytes + 1);
  fill(dt, want, root, 0, count, 5);
  if (c->rank == root)
    memcpy(buf, want, bytes);
  else
    memset(buf, 0x5A, bytes);
  check_rc(c, comm, "broadcast", dt, B->broadcast(comm, buf, count, dt, root));
  check_bytes(c, "broadcast", dt, -1, count, buf, want, bytes);
  free(buf);
  free(want);
}

/* Member src sends (src + dst + count) % 3 elements to member dst, valued gen(src*16+dst, ...). */
static size_t pair_count(int src, int dst, size_t count) {
  return ((size_t)src + (size_t)dst + count) % 3 + count / 4;
}

static void test_alltoallv(rank_ctx* c, hvd_comm* comm, hvd_dtype dt, size_t count) {
  size_t sendcounts[4], recvcounts[4], stotal = 0, rtotal = 0, off;
  char *send, *recv, *want;
  int p;
  for (p = 0; p < c->n; ++p) {
    stotal += sendcounts[p] = pair_count(c->rank, p, count);
    rtotal += recvcounts[p] = pair_count(p, c->rank, count);
  }
  send = malloc(stotal * esize(dt) + 1);
  recv = malloc(rtotal * esize(dt) + 1);
  want = malloc(rtotal * esize(dt) + 1);
  for (p = 0, off = 0; p < c->n; off += sendcounts[p], ++p)
    fill(dt, send + off * esize(dt), c->rank * 16 + p, 0, sendcounts[p], 11);
  for (p = 0, off = 0; p < c->n; off += recvcounts[p], ++p)
    fill(dt, want + off * esize(dt), p * 16 + c->rank, 0, recvcounts[p], 11);
  check_rc(c, comm, "alltoallv", dt, B->alltoallv(comm, send, sendcounts, recv, recvcounts, dt));
  check_bytes(c, "alltoallv", dt, -1, count, recv, want, rtotal * esize(dt));
  free(send);
  free(recv);
  free(want);
}

/* Rounding to nearest even, subnormals and overflow in the 16-bit types (N = 2 only). */
static void test_rounding(rank_ctx* c, hvd_comm* comm) {
  /* float16: 1 + 2^-11 ties to 1; (1 + 2^-10) + 2^-11 ties to 1 + 2^-9; tiny subnormals add
   * exactly; 65504 + 65504 overflows to inf. */
  uint16_t h[2][4] = {{0x3C00, 0x3C01, 0x0001, 0x7BFF}, {0x1000, 0x1000, 0x0001, 0x7BFF}};
  uint16_t h_want[4] = {0x3C00, 0x3C02, 0x0002, 0x7C00};
  /* bfloat16: the same ties at 2^-8, max + max = inf, -2 + 1 = -1. */
  uint16_t b[2][4] = {{0x3F80, 0x3F81, 0x7F7F, 0xC000}, {0x3B80, 0x3B80, 0x7F7F, 0x3F80}};
  uint16_t b_want[4] = {0x3F80, 0x3F82, 0x7F80, 0xBF80};
  uint16_t out[4];
  check_rc(c, comm, "allreduce rounding", HVD_DTYPE_FLOAT16,
           B->allreduce(comm, h[c->rank], out, 4, HVD_DTYPE_FLOAT16, HVD_REDUCE_SUM));
  check_bytes(c, "allreduce rounding", HVD_DTYPE_FLOAT16, 0, 4, out, h_want, sizeof out);
  check_rc(c, comm, "allreduce rounding", HVD_DTYPE_BFLOAT16,
           B->allreduce(comm, b[c->rank], out, 4, HVD_DTYPE_BFLOAT16, HVD_REDUCE_SUM));
  check_bytes(c, "allreduce rounding", HVD_DTYPE_BFLOAT16, 0, 4, out, b_want, sizeof out);
}

static int contains(const char* s, const char* part) {
  return s != NULL && strstr(s, part) != NULL;
}

/* Argument errors are detected locally, before any store traffic, so ranks need not agree. */
static void test_invalid_arguments(rank_ctx* c, hvd_comm* comm) {
  int32_t buf[4] = {0};
  size_t counts[4] = {1, 1, 1, 1}, other[4] = {1, 1, 1, 1};
  int rc;
  rc = B->allreduce(NULL, buf, buf, 1, HVD_DTYPE_INT32, HVD_REDUCE_SUM);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(B->last_error(NULL), "comm"), "NULL comm");
  rc = B->allreduce(comm, buf, buf, 1, (hvd_dtype)42, HVD_REDUCE_SUM);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(B->last_error(comm), "dtype"), "bad dtype: %s",
        B->last_error(comm));
  rc = B->allreduce(comm, buf, buf, 1, HVD_DTYPE_INT32, (hvd_reduce_op)9);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(B->last_error(comm), "op"), "bad op: %s",
        B->last_error(comm));
  rc = B->reducescatter(comm, buf, buf, counts, HVD_DTYPE_INT32, (hvd_reduce_op)-1);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(B->last_error(comm), "op"),
        "reducescatter bad op: %s", B->last_error(comm));
  rc = B->allreduce(comm, NULL, buf, 3, HVD_DTYPE_INT32, HVD_REDUCE_SUM);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(B->last_error(comm), "sendbuf"),
        "NULL sendbuf: %s", B->last_error(comm));
  rc = B->allreduce(comm, buf, buf, (size_t)-1 / 2, HVD_DTYPE_INT32, HVD_REDUCE_SUM);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(B->last_error(comm), "count"), "huge count: %s",
        B->last_error(comm));
  rc = B->broadcast(comm, buf, 1, HVD_DTYPE_INT32, c->n);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(B->last_error(comm), "root"), "bad root: %s",
        B->last_error(comm));
  rc = B->broadcast(comm, buf, 1, HVD_DTYPE_INT32, -1);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(B->last_error(comm), "root"),
        "negative root: %s", B->last_error(comm));
  rc = B->allgatherv(comm, buf, buf, NULL, HVD_DTYPE_INT32);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(B->last_error(comm), "recvcounts"),
        "NULL recvcounts: %s", B->last_error(comm));
  other[c->rank] = 2;
  rc = B->alltoallv(comm, buf, counts, buf, other, HVD_DTYPE_INT32);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(B->last_error(comm), "sendcounts"),
        "own block mismatch: %s", B->last_error(comm));
}

/* Members passing different counts get an error naming a member, not garbage. */
static void test_count_mismatch(rank_ctx* c, hvd_comm* comm) {
  int32_t send[8] = {0}, recv[8];
  int rc = B->allreduce(comm, send, recv, 4 + (size_t)c->rank, HVD_DTYPE_INT32, HVD_REDUCE_SUM);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(B->last_error(comm), "member rank"),
        "N=%d rank %d: count mismatch gave %d: %s", c->n, c->rank, rc, B->last_error(comm));
  /* the sequence numbers stayed in step: the communicator still works */
  check_rc(c, comm, "barrier after mismatch", HVD_DTYPE_INT32, B->barrier(comm));
}

/* A sub-communicator of the even ranks, with job ranks that differ from communicator ranks. */
static void test_subcomm(rank_ctx* c) {
  int32_t job_ranks[2] = {0, 2}, one = c->rank + 1, sum = 0;
  hvd_comm* sub;
  if (c->n < 3 || c->rank % 2 != 0) return;
  sub = create(c, "evens", c->rank / 2, 2, job_ranks, 10000);
  if (sub == NULL) return;
  check_rc(c, sub, "sub allreduce", HVD_DTYPE_INT32,
           B->allreduce(sub, &one, &sum, 1, HVD_DTYPE_INT32, HVD_REDUCE_SUM));
  check(sum == 1 + 3, "N=%d rank %d: sub-communicator sum %d, want 4", c->n, c->rank, (int)sum);
  B->comm_destroy(sub);
}

/* A collective one member never joins times out, naming that member (N = 2 only). */
static void test_collective_timeout(rank_ctx* c) {
  int32_t job_ranks[2] = {0, 1}, x = 1, y;
  hvd_comm* late = create(c, "late", c->rank, 2, job_ranks, 300);
  if (late == NULL) return;
  if (c->rank == 0) {
    int rc = B->allreduce(late, &x, &y, 1, HVD_DTYPE_INT32, HVD_REDUCE_SUM);
    check(rc == HVD_ERR_TIMEOUT && contains(B->last_error(late), "member rank 1"),
          "collective timeout gave %d: %s", rc, B->last_error(late));
  }
  B->comm_destroy(late);
}

static void* rank_main(void* arg) {
  static const size_t counts[] = {0, 1, 5, 33};
  rank_ctx* c = (rank_ctx*)arg;
  int32_t job_ranks[4];
  hvd_comm* comm;
  size_t k;
  int r, dt;
  for (r = 0; r < c->n; ++r) job_ranks[r] = 100 + r; /* job ranks differ from comm ranks */
  comm = create(c, "world", c->rank, c->n, job_ranks, 10000);
  if (comm == NULL) return NULL;
  for (dt = 0; dt < HVD_DTYPE_COUNT; ++dt) {
    for (k = 0; k < sizeof counts / sizeof counts[0]; ++k) {
      test_allreduce(c, comm, (hvd_dtype)dt, counts[k]);
      test_allreduce_buffers(c, comm, (hvd_dtype)dt, counts[k]);
      test_reducescatter(c, comm, (hvd_dtype)dt, counts[k]);
      test_allgatherv(c, comm, (hvd_dtype)dt, counts[k]);
      test_broadcast(c, comm, (hvd_dtype)dt, counts[k]);
      test_alltoallv(c, comm, (hvd_dtype)dt, counts[k]);
    }
  }
  check_rc(c, comm, "barrier", HVD_DTYPE_INT32, B->barrier(comm));
  if (c->n == 2) test_rounding(c, comm);
  test_invalid_arguments(c, comm);
  if (c->n >= 2) test_count_mismatch(c, comm);
  test_subcomm(c);
  if (c->n == 2) test_collective_timeout(c);
  B->comm_destroy(comm);
  return NULL;
}

static void run_group(int n) {
  mem_store st;
  pthread_t threads[4];
  rank_ctx ctx[4];
  int r;
  long before = g_failed;
  store_init(&st);
  for (r = 0; r < n; ++r) {
    ctx[r].rank = r;
    ctx[r].n = n;
    ctx[r].store = &st;
    pthread_create(&threads[r], NULL, rank_main, &ctx[r]);
  }
  for (r = 0; r < n; ++r) pthread_join(threads[r], NULL);
  check(st.outstanding == 0, "N=%d: %ld store values were never released", n, st.outstanding);
  printf("N=%d: %s (%ld store keys)\n", n, g_failed == before ? "ok" : "FAILED", st.keys);
  store_free(&st);
}

/* ---------------------------------------------------------------------------------------- */
/* Tests that need no threads                                                               */
/* ---------------------------------------------------------------------------------------- */

static void test_table(void) {
  check(B != NULL && B->abi_version == HVD_BACKEND_ABI_VERSION, "abi_version");
  check(B->struct_size == sizeof(hvd_backend_v1), "struct_size");
  check(strcmp(B->name, "example") == 0 && B->version != NULL && B->version[0], "name/version");
  check(B->device_kinds == HVD_DEVICE_CPU && B->capabilities == 0, "device_kinds/capabilities");
  check(B->send == NULL && B->recv == NULL, "send/recv are NULL");
  check(X != NULL && X->struct_size == sizeof(hvd_backend_ext_v1) && X->allreduce_buffers != NULL,
        "extension table");
}

static void test_create_errors(void) {
  mem_store st;
  hvd_store_v1 table;
  hvd_comm_config_v1 cfg;
  int32_t job_ranks[2] = {7, 8};
  hvd_comm* comm = (hvd_comm*)&cfg; /* garbage: comm_create must reset it */
  char err[256];
  int rc;
  store_init(&st);
  table = store_table(&st);
  memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  cfg.rank = 0;
  cfg.size = 0;
  cfg.job_ranks = job_ranks;
  cfg.key_prefix = "bad";
  cfg.timeout_ms = 1000;
  cfg.device_kind = HVD_DEVICE_CPU;
  cfg.device_id = -1;
  rc = B->comm_create(&cfg, &table, &comm, err, sizeof err);
  check(rc == HVD_ERR_INVALID_ARGUMENT && comm == NULL && contains(err, "size"), "size 0: %s", err);
  cfg.size = 2;
  cfg.key_prefix = NULL;
  rc = B->comm_create(&cfg, &table, &comm, err, sizeof err);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(err, "key_prefix"), "no prefix: %s", err);
  cfg.key_prefix = "bad";
  cfg.device_kind = HVD_DEVICE_CUDA;
  rc = B->comm_create(&cfg, &table, &comm, err, sizeof err);
  check(rc == HVD_ERR_UNSUPPORTED && contains(err, "device_kind"), "cuda: %s", err);
  cfg.device_kind = HVD_DEVICE_CPU;
  rc = B->comm_create(&cfg, NULL, &comm, err, sizeof err);
  check(rc == HVD_ERR_INVALID_ARGUMENT && contains(err, "store"), "no store: %s", err);
  /* member 1 never arrives: creation times out and names it */
  cfg.timeout_ms = 200;
  rc = B->comm_create(&cfg, &table, &comm, err, sizeof err);
  check(rc == HVD_ERR_TIMEOUT && comm == NULL && contains(err, "member rank 1") &&
            contains(err, "job rank 8"),
        "missing member: %d %s", rc, err);
  check(st.outstanding == 0, "create errors: values not released");
  store_free(&st);
}

int main(void) {
  int n;
  B = hvd_backend_v1_get();
  X = hvd_backend_ext_v1_get();
  test_table();
  test_create_errors();
  for (n = 1; n <= 4; ++n) run_group(n);
  printf("%ld passed, %ld failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
