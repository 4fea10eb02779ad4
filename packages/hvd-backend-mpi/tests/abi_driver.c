/*
 * Drives the backend library through its C ABI, as the engine does, on 3 ranks under mpiexec:
 * what the engine never exercises. Point to point, arguments the engine would have refused first
 * (and the communicator working after them), NaN in min/max, float16/bfloat16/bool reductions out
 * of place, empty and uneven blocks, a process set's communicator, and a CUDA request.
 *
 * Usage: mpiexec -n 3 abi_driver <path of libhvd_backend_mpi.so> <libmpi it runs on>. Prints "rank R: ok" per rank and
 * exits 0, or prints each failed check and exits 1.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "horovod/hvd_backend.h"

static const hvd_backend_v1* B;
static int rank, size, failures;

static void check(int ok, int line, const char* what, const char* fmt, ...) {
  if (ok) return;
  va_list args;
  va_start(args, fmt);
  fprintf(stderr, "rank %d: line %d: %s: ", rank, line, what);
  vfprintf(stderr, fmt, args);
  fputc('\n', stderr);
  va_end(args);
  ++failures;
}
#define CHECK(cond, ...) check((cond) != 0, __LINE__, #cond, __VA_ARGS__)
#define CHECK_OK(comm, call) CHECK((call) == HVD_OK, "%s", B->last_error(comm))

static hvd_comm* create(int my_rank, int n, const int32_t* job_ranks) {
  hvd_comm_config_v1 config = {sizeof config, my_rank, n, job_ranks, "abi", 30000, HVD_DEVICE_CPU, -1};
  hvd_comm* comm = NULL;
  char error[512] = "";
  int rc = B->comm_create(&config, NULL, &comm, error, sizeof error);  /* MPI needs no store */
  CHECK(rc == HVD_OK && comm, "comm_create: %d %s", rc, error);
  if (!comm) exit(1);
  return comm;
}

static void send_and_recv(hvd_comm* c) {
  enum { N = 100000 }; /* 800 kB: past the eager limit, so MPI_Send waits for the receive */
  static int64_t payload[N], got[N];
  for (int i = 0; i < N; ++i) payload[i] = i * 3;
  int64_t answer = 0, sum = 0;
  if (rank == 0) {
    CHECK_OK(c, B->send(c, payload, sizeof payload, 1, 7));
    CHECK_OK(c, B->send(c, payload, 0, 1, 8));
    CHECK_OK(c, B->recv(c, &answer, sizeof answer, 1, 9));
    for (int i = 0; i < N; ++i) sum += payload[i];
    CHECK(answer == sum, "answer %lld, expected %lld", (long long)answer, (long long)sum);
    CHECK_OK(c, B->send(c, payload, 8, 1, 10)); /* shorter than the receiver expects */
  } else if (rank == 1) {
    CHECK_OK(c, B->recv(c, got, sizeof got, 0, 7));
    CHECK_OK(c, B->recv(c, got, 0, 0, 8));
    CHECK(memcmp(got, payload, sizeof got) == 0, "payload differs");
    for (int i = 0; i < N; ++i) sum += got[i];
    CHECK_OK(c, B->send(c, &sum, sizeof sum, 0, 9));
    CHECK(B->recv(c, got, 16, 0, 10) == HVD_ERR_INVALID_ARGUMENT, "a short message was accepted");
    CHECK(strstr(B->last_error(c), "expected 16 bytes from member 0 (tag 10), got 8") != NULL, "%s", B->last_error(c));
  }
  CHECK(B->send(c, payload, 8, rank, 0) == HVD_ERR_INVALID_ARGUMENT, "sent to itself");
  CHECK(strstr(B->last_error(c), "not another member") != NULL, "%s", B->last_error(c));
  CHECK(B->recv(c, got, 8, 5, 0) == HVD_ERR_INVALID_ARGUMENT, "received from member 5 of 3");
  CHECK(B->send(c, payload, 8, (rank + 1) % size, -1) == HVD_ERR_INVALID_ARGUMENT, "negative tag");
  CHECK(strstr(B->last_error(c), "tag -1 is outside MPI's [0, ") != NULL, "%s", B->last_error(c));
}

static void refused_arguments_leave_the_communicator_usable(hvd_comm* c) {
  float buf[2] = {1, 1};
  CHECK(B->broadcast(c, buf, 2, HVD_DTYPE_FLOAT32, size) == HVD_ERR_INVALID_ARGUMENT, "root out of range");
  CHECK(strstr(B->last_error(c), "mpi broadcast (rank ") && strstr(B->last_error(c), "root 3 is out of range"), "%s",
        B->last_error(c));
  CHECK(B->allreduce(c, buf, buf, 2, (hvd_dtype)42, HVD_REDUCE_SUM) == HVD_ERR_INVALID_ARGUMENT, "dtype 42");
  CHECK(strstr(B->last_error(c), "unknown dtype 42") != NULL, "%s", B->last_error(c));
  CHECK(B->allreduce(c, buf, buf, 2, HVD_DTYPE_FLOAT32, (hvd_reduce_op)9) == HVD_ERR_INVALID_ARGUMENT, "op 9");
  CHECK_OK(c, B->allreduce(c, buf, buf, 2, HVD_DTYPE_FLOAT32, HVD_REDUCE_SUM));
  CHECK(buf[0] == size && buf[1] == size, "sum %g %g", buf[0], buf[1]);
}

static void nan_propagates_in_min_and_max(hvd_comm* c) {
  for (int op = HVD_REDUCE_MIN; op <= HVD_REDUCE_MAX; ++op) {
    float in[3] = {(float)rank, (float)rank, rank == 1 ? NAN : (float)rank}, out[3];
    double in64[2] = {rank == 2 ? NAN : rank, rank}, out64[2];
    CHECK_OK(c, B->allreduce(c, in, out, 3, HVD_DTYPE_FLOAT32, (hvd_reduce_op)op));
    CHECK_OK(c, B->allreduce(c, in64, out64, 2, HVD_DTYPE_FLOAT64, (hvd_reduce_op)op));
    float expected = op == HVD_REDUCE_MIN ? 0.0f : (float)(size - 1);
    CHECK(out[0] == expected && out[1] == expected && isnan(out[2]), "op %d: %g %g %g", op, out[0], out[1], out[2]);
    CHECK(isnan(out64[0]) && out64[1] == expected, "op %d: %g %g", op, out64[0], out64[1]);
    CHECK(in[0] == (float)rank, "out of place changed the input");
  }
}

static void low_precision_and_bool_out_of_place(hvd_comm* c) {
  /* 1.5 * (rank + 1) in float16 (0x3E00 = 1.5, 0x4200 = 3, 0x4480 = 4.5) and bfloat16. */
  const uint16_t half[3] = {0x3E00, 0x4200, 0x4480}, bf16[3] = {0x3FC0, 0x4040, 0x4090};
  uint16_t in[2] = {half[rank], bf16[rank]}, out[2];
  CHECK_OK(c, B->allreduce(c, &in[0], &out[0], 1, HVD_DTYPE_FLOAT16, HVD_REDUCE_SUM));
  CHECK_OK(c, B->allreduce(c, &in[1], &out[1], 1, HVD_DTYPE_BFLOAT16, HVD_REDUCE_PRODUCT));
  CHECK(out[0] == 0x4880, "float16 1.5+3+4.5 = 0x%04x, expected 0x4880 (9)", out[0]);
  CHECK(out[1] == 0x41A2, "bfloat16 1.5*3*4.5 = 0x%04x, expected 0x41a2 (20.25)", out[1]);
  uint8_t flags[2] = {(uint8_t)(rank == 0), 1}, all[2], any[2];
  CHECK_OK(c, B->allreduce(c, flags, all, 2, HVD_DTYPE_BOOL, HVD_REDUCE_PRODUCT));
  CHECK_OK(c, B->allreduce(c, flags, any, 2, HVD_DTYPE_BOOL, HVD_REDUCE_SUM));
  CHECK(all[0] == 0 && all[1] == 1 && any[0] == 1 && any[1] == 1, "and %d %d, or %d %d", all[0], all[1], any[0],
        any[1]);
}

static void empty_and_uneven_blocks(hvd_comm* c) {
  size_t zeros[3] = {0, 0, 0};
  float none = 0;
  CHECK_OK(c, B->allreduce(c, &none, &none, 0, HVD_DTYPE_FLOAT32, HVD_REDUCE_SUM));
  CHECK_OK(c, B->allgatherv(c, &none, &none, zeros, HVD_DTYPE_FLOAT32));
  CHECK_OK(c, B->broadcast(c, &none, 0, HVD_DTYPE_FLOAT32, 0));
  CHECK_OK(c, B->alltoallv(c, &none, zeros, &none, zeros, HVD_DTYPE_FLOAT32));
  CHECK_OK(c, B->reducescatter(c, &none, &none, zeros, HVD_DTYPE_FLOAT32, HVD_REDUCE_SUM));
  CHECK_OK(c, B->barrier(c));
  /* Member r sends (r + p) % 3 elements of value 10r + p to member p: some blocks are empty. */
  size_t sendcounts[3], recvcounts[3], n_send = 0, n_recv = 0;
  int32_t send[8], recv[8];
  for (int p = 0; p < 3; ++p) {
    sendcounts[p] = (size_t)((rank + p) % 3);
    recvcounts[p] = (size_t)((p + rank) % 3);
    for (size_t i = 0; i < sendcounts[p]; ++i) send[n_send++] = 10 * rank + p;
  }
  CHECK_OK(c, B->alltoallv(c, send, sendcounts, recv, recvcounts, HVD_DTYPE_INT32));
  for (int q = 0; q < 3; ++q)
    for (size_t i = 0; i < recvcounts[q]; ++i, ++n_recv)
      CHECK(recv[n_recv] == 10 * q + rank, "from %d: %d", q, recv[n_recv]);
  size_t counts[3] = {2, 0, 3}; /* member 1 receives nothing */
  double data[5], out[3] = {-1, -1, -1};
  for (int i = 0; i < 5; ++i) data[i] = i + rank;
  CHECK_OK(c, B->reducescatter(c, data, out, counts, HVD_DTYPE_FLOAT64, HVD_REDUCE_MAX));
  size_t start = rank == 0 ? 0 : 2;
  for (size_t i = 0; i < counts[rank]; ++i) CHECK(out[i] == (double)(start + i + 2), "block %d: %g", rank, out[i]);
}

static void process_set_of_ranks_0_and_2(void) {
  if (rank == 1) return; /* not a member: it does not take part */
  const int32_t members[2] = {0, 2};
  hvd_comm* c = create(rank / 2, 2, members);
  int64_t value = rank + 1;
  CHECK_OK(c, B->allreduce(c, &value, &value, 1, HVD_DTYPE_INT64, HVD_REDUCE_SUM));
  CHECK(value == 4, "sum over ranks 0 and 2: %lld", (long long)value);
  CHECK(B->broadcast(c, &value, 1, HVD_DTYPE_INT64, 5) == HVD_ERR_INVALID_ARGUMENT, "root 5");
  char expected[64];
  snprintf(expected, sizeof expected, "(rank %d, member %d of process set [0, 2])", rank, rank / 2);
  CHECK(strstr(B->last_error(c), expected) != NULL, "%s", B->last_error(c));
  B->comm_destroy(c);
}

static void requests_it_cannot_serve(void) {
  hvd_comm_config_v1 config = {sizeof config, 0, 1, NULL, "cuda", 1000, HVD_DEVICE_CUDA, 0};
  hvd_comm* comm = NULL;
  char error[256] = "";
  CHECK(B->comm_create(&config, NULL, &comm, error, sizeof error) == HVD_ERR_UNSUPPORTED && !comm, "cuda accepted");
  CHECK(strstr(error, "CPU") != NULL, "%s", error);
  config.device_kind = HVD_DEVICE_CPU;
  config.rank = 2;
  CHECK(B->comm_create(&config, NULL, &comm, error, sizeof error) == HVD_ERR_INVALID_ARGUMENT, "rank 2 of 1");
  CHECK(strstr(error, "rank 2 is out of range for size 1") != NULL, "%s", error);
}

int main(int argc, char** argv) {
  if (argc != 3) return fprintf(stderr, "usage: %s <libhvd_backend_mpi.so> <libmpi>\n", argv[0]), 2;
  /* The backend does not link libmpi: its MPI calls resolve against the MPI loaded globally first,
   * as horovod.backends.mpi.mpi_library does before the engine opens the backend. */
  if (!dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL)) return fprintf(stderr, "%s\n", dlerror()), 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fprintf(stderr, "%s\n", dlerror()), 2;
  hvd_backend_v1_get_fn get = (hvd_backend_v1_get_fn)dlsym(lib, HVD_BACKEND_V1_ENTRY);
  int (*initialize)(int, char*, size_t) = (int (*)(int, char*, size_t))dlsym(lib, "hvd_mpi_initialize");
  int (*topology)(int, int32_t*, char*, size_t) = (int (*)(int, int32_t*, char*, size_t))dlsym(lib, "hvd_mpi_topology");
  char error[512] = "";
  int32_t where[6];
  if (!get || !initialize || !topology || initialize(0, error, sizeof error) ||
      topology(0, where, error, sizeof error)) {
    return fprintf(stderr, "cannot start: %s\n", error), 2;
  }
  B = get();
  rank = where[0];
  size = where[1];
  if (size != 3) return fprintf(stderr, "run me on 3 ranks, not %d\n", size), 2;
  const int32_t everyone[3] = {0, 1, 2};
  hvd_comm* world = create(rank, size, everyone);
  send_and_recv(world);
  refused_arguments_leave_the_communicator_usable(world);
  nan_propagates_in_min_and_max(world);
  low_precision_and_bool_out_of_place(world);
  empty_and_uneven_blocks(world);
  process_set_of_ranks_0_and_2();
  requests_it_cannot_serve();
  CHECK_OK(world, B->barrier(world));
  B->comm_destroy(world);
  if (!failures) printf("rank %d: ok\n", rank);
  return failures ? 1 : 0; /* the library finalises MPI at exit: it initialised it */
}
