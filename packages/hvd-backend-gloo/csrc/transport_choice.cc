// Which transport carries a communicator's collectives (transport.h).
#include "comm.h"
#include "shm_transport.h"
#include "tcp/tcp_transport.h"

namespace hvd_gloo {

std::unique_ptr<Transport> ChooseTransport(hvd_comm* comm, StoreAdapter& store) {
  // Every member takes part in the shared-memory set-up, also one that will not use it: the
  // others learn that from the store, and all of them then fall back to TCP together.
  if (std::unique_ptr<Transport> shm = ConnectSharedMemory(comm, store)) return shm;
  return std::make_unique<TcpTransport>(comm);
}

}  // namespace hvd_gloo
