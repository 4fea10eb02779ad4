// The part of NCCL's C API this backend calls, declared here from NCCL's documented interface so
// that building the backend needs neither nccl.h nor CUDA's headers (nccl.h includes
// cuda_runtime.h). Nothing links libnccl: the library is opened at run time (nccl_library.h) and
// these are the types of the functions looked up in it.
//
// Streams are cudaStream_t in NCCL's prototypes; hvd_stream_t (hvd_device.h) holds exactly that
// pointer for the CUDA device, so it is passed through as an opaque pointer.
#pragma once

#include <cstddef>

namespace hvd_nccl {

// NCCL_VERSION(X,Y,Z): releases up to 2.8 were coded X*1000 + Y*100 + Z, later ones
// X*10000 + Y*100 + Z (as ncclGetVersion returns them).
constexpr int NcclVersionCode(int major, int minor, int patch) {
  return (major <= 2 && minor <= 8) ? major * 1000 + minor * 100 + patch : major * 10000 + minor * 100 + patch;
}

// Oldest release this backend runs on: ncclSend/ncclRecv (allgatherv, alltoallv) came in 2.7.
constexpr int kMinimumVersion = NcclVersionCode(2, 7, 0);
// ncclAvg (2.10) and ncclRedOpCreatePreMulSum (2.11): scaled allreduces inside NCCL.
constexpr int kAvgVersion = NcclVersionCode(2, 10, 0);
constexpr int kPreMulSumVersion = NcclVersionCode(2, 11, 0);
// Non-blocking communicators (ncclConfig_t.blocking = 0, ncclCommInitRankConfig): 2.14.
constexpr int kNonBlockingVersion = NcclVersionCode(2, 14, 0);

typedef struct ncclComm* ncclComm_t;

constexpr size_t kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct ncclUniqueId {
  char internal[kUniqueIdBytes];
};

enum ncclResult_t : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,  // 2.13
  ncclInProgress = 7,   // 2.14: a non-blocking call is still under way
  ncclTimeout = 8,      // 2.29
};

enum ncclDataType_t : int {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
};

// An int-sized enum in NCCL; operators made by ncclRedOpCreatePreMulSum are further values.
enum ncclRedOp_t : int { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };

enum ncclScalarResidence_t : int { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 };

// ncclConfig_t as NCCL 2.14 laid it out: NCCL reads `size` bytes and, by `version`, only the
// members that release had, taking its defaults for the rest, so this prefix stays valid.
constexpr unsigned kConfigMagic = 0xcafebeef;  // NCCL_API_MAGIC
constexpr int kConfigUndefined = -2147483647 - 1;  // NCCL_CONFIG_UNDEF_INT (INT_MIN)
struct ncclConfigPrefix {
  size_t size = sizeof(ncclConfigPrefix);
  unsigned magic = kConfigMagic;
  unsigned version = NcclVersionCode(2, 14, 0);
  int blocking = kConfigUndefined;
};

extern "C" {
typedef ncclResult_t (*ncclGetVersion_fn)(int* version);
typedef ncclResult_t (*ncclGetUniqueId_fn)(ncclUniqueId* id);
typedef ncclResult_t (*ncclCommInitRank_fn)(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
typedef ncclResult_t (*ncclCommInitRankConfig_fn)(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                                  ncclConfigPrefix* config);
typedef ncclResult_t (*ncclCommFinalize_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclCommDestroy_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclCommAbort_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclCommGetAsyncError_fn)(ncclComm_t comm, ncclResult_t* async_error);
typedef const char* (*ncclGetErrorString_fn)(ncclResult_t result);
typedef const char* (*ncclGetLastError_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclAllReduce_fn)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                         ncclRedOp_t op, ncclComm_t comm, void* stream);
typedef ncclResult_t (*ncclBroadcast_fn)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                         int root, ncclComm_t comm, void* stream);
typedef ncclResult_t (*ncclReduce_fn)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, int root, ncclComm_t comm, void* stream);
typedef ncclResult_t (*ncclReduceScatter_fn)(const void* sendbuff, void* recvbuff, size_t recvcount,
                                             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, void* stream);
typedef ncclResult_t (*ncclAllGather_fn)(const void* sendbuff, void* recvbuff, size_t sendcount,
                                         ncclDataType_t datatype, ncclComm_t comm, void* stream);
typedef ncclResult_t (*ncclSend_fn)(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                    ncclComm_t comm, void* stream);
typedef ncclResult_t (*ncclRecv_fn)(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                    void* stream);
typedef ncclResult_t (*ncclGroupStart_fn)(void);
typedef ncclResult_t (*ncclGroupEnd_fn)(void);
typedef ncclResult_t (*ncclRedOpCreatePreMulSum_fn)(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                    ncclScalarResidence_t residence, ncclComm_t comm);
typedef ncclResult_t (*ncclRedOpDestroy_fn)(ncclRedOp_t op, ncclComm_t comm);
}

// The functions looked up in the loaded library. Those marked optional may be NULL: older
// releases lack them, and the backend then does without (nccl_library.cc says how).
struct NcclApi {
  int version = 0;           // ncclGetVersion's code
  char version_text[32];     // "2.30.7"
  char origin[512];          // where the library was loaded from, for messages
  ncclGetVersion_fn GetVersion;
  ncclGetUniqueId_fn GetUniqueId;
  ncclCommInitRank_fn CommInitRank;
  ncclCommInitRankConfig_fn CommInitRankConfig;  // optional (2.14)
  ncclCommFinalize_fn CommFinalize;              // optional (2.14)
  ncclCommDestroy_fn CommDestroy;
  ncclCommAbort_fn CommAbort;
  ncclCommGetAsyncError_fn CommGetAsyncError;
  ncclGetErrorString_fn GetErrorString;
  ncclGetLastError_fn GetLastError;  // optional (2.13)
  ncclAllReduce_fn AllReduce;
  ncclBroadcast_fn Broadcast;
  ncclReduce_fn Reduce;
  ncclReduceScatter_fn ReduceScatter;
  ncclAllGather_fn AllGather;
  ncclSend_fn Send;
  ncclRecv_fn Recv;
  ncclGroupStart_fn GroupStart;
  ncclGroupEnd_fn GroupEnd;
  ncclRedOpCreatePreMulSum_fn RedOpCreatePreMulSum;  // optional (2.11)
  ncclRedOpDestroy_fn RedOpDestroy;                  // optional (2.11)

  bool has_avg() const { return version >= kAvgVersion; }
  bool has_pre_mul_sum() const { return version >= kPreMulSumVersion && RedOpCreatePreMulSum && RedOpDestroy; }
  bool has_non_blocking() const { return version >= kNonBlockingVersion && CommInitRankConfig; }
};

}  // namespace hvd_nccl
