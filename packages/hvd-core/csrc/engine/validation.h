// Checks made when an operation is submitted, on the caller's thread, so that misuse that one
// rank can see by itself raises at once (ValueError) instead of during negotiation.
#pragma once

#include "core/common.h"
#include "core/handle.h"

namespace hvdcore {

// `set_size` is the size of the entry's process set; `device_kinds` the HVD_DEVICE_* bits served.
Status ValidateEntry(const TensorEntry& e, int32_t set_size, uint32_t device_kinds);

}  // namespace hvdcore
