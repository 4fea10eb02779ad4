// The link from hvd's TensorFlow kernels to the engine: hvd-core's C entry point
// (horovod/hvd_framework.h), handed over once by horovod.tensorflow's Python (native.py) through
// hvd_tf_attach, and the mapping of TensorFlow's dtypes and error codes onto the engine's.
#pragma once

#include <cstdint>

#include "horovod/hvd_framework.h"
#include "tf_c_api.h"

namespace hvdtf {

// The entry point, or nullptr before hvd_tf_attach.
const hvd_framework_v1* Engine();

// The engine's dtype for a TensorFlow dtype; false when the engine has none for it.
bool EngineDtype(TF_DataType tf, hvd_dtype* out);

// How an engine status is raised by TensorFlow: InvalidArgumentError for misuse,
// FailedPreconditionError for ranks that disagree, AbortedError when Horovod stopped.
TF_Code TfCode(uint32_t hvd_fw_status);

}  // namespace hvdtf

// Called by horovod.tensorflow (ctypes) with the table's address from
// horovod.common.framework_api.native_entry(). 0: attached; 1: the table is of an unknown version.
extern "C" __attribute__((visibility("default"))) int hvd_tf_attach(const void* framework_v1);
