// Connecting a communicator's members with Gloo: one TCP device and one Gloo context per
// communicator, fully connected, with addresses exchanged through the engine's store.
#pragma once

#include "comm.h"
#include "tcp/store_adapter.h"

namespace hvd_gloo {

// Sets comm->device, device_description and context (a communicator of several members). Throws
// what Gloo and the store adapter throw; comm->device_description is set as soon as it is known,
// for the message of a failure to connect.
void ConnectGloo(hvd_comm* comm, StoreAdapter& store);

}  // namespace hvd_gloo
