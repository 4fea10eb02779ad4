#include "engine_link.h"

#include <atomic>

namespace hvdtf {

namespace {
std::atomic<const hvd_framework_v1*> g_engine{nullptr};
}  // namespace

const hvd_framework_v1* Engine() { return g_engine.load(std::memory_order_acquire); }

bool EngineDtype(TF_DataType tf, hvd_dtype* out) {
  switch (tf) {
    case TF_UINT8: *out = HVD_DTYPE_UINT8; return true;
    case TF_INT8: *out = HVD_DTYPE_INT8; return true;
    case TF_INT16: *out = HVD_DTYPE_INT16; return true;
    case TF_INT32: *out = HVD_DTYPE_INT32; return true;
    case TF_INT64: *out = HVD_DTYPE_INT64; return true;
    case TF_HALF: *out = HVD_DTYPE_FLOAT16; return true;
    case TF_BFLOAT16: *out = HVD_DTYPE_BFLOAT16; return true;
    case TF_FLOAT: *out = HVD_DTYPE_FLOAT32; return true;
    case TF_DOUBLE: *out = HVD_DTYPE_FLOAT64; return true;
    case TF_BOOL: *out = HVD_DTYPE_BOOL; return true;
    default: return false;
  }
}

TF_Code TfCode(uint32_t status) {
  switch (status) {
    case HVD_FW_OK: return TSL_OK;
    case HVD_FW_INVALID_ARGUMENT: return TSL_INVALID_ARGUMENT;
    case HVD_FW_MISMATCH: return TSL_FAILED_PRECONDITION;
    case HVD_FW_ABORTED: return TSL_ABORTED;
    default: return TSL_INTERNAL;
  }
}

}  // namespace hvdtf

extern "C" int hvd_tf_attach(const void* framework_v1) {
  auto* table = static_cast<const hvd_framework_v1*>(framework_v1);
  if (!table || table->api_version != HVD_FRAMEWORK_API_VERSION || table->struct_size < sizeof(hvd_framework_v1))
    return 1;
  hvdtf::g_engine.store(table, std::memory_order_release);
  return 0;
}
