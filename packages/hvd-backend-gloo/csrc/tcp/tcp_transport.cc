// The TCP transport's set-up (tcp_transport.h); its collectives are in the files it names.
#include "tcp/tcp_transport.h"

namespace hvd_gloo {

TcpTransport::TcpTransport(hvd_comm* comm) : comm_(comm), direct_(comm, {0}) {}

}  // namespace hvd_gloo
