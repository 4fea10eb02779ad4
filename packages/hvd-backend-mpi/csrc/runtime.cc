#include "runtime.h"

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include <strings.h>
#include <unistd.h>

#include "errors.h"

namespace hvd_mpi {
namespace {

std::mutex g_mutex;
bool g_initialized_here = false;
pid_t g_initializing_pid = 0;

int ToMpiLevel(int level) {
  switch (level) {
    case kThreadSingle: return MPI_THREAD_SINGLE;
    case kThreadFunneled: return MPI_THREAD_FUNNELED;
    case kThreadSerialized: return MPI_THREAD_SERIALIZED;
    default: return MPI_THREAD_MULTIPLE;
  }
}

int FromMpiLevel(int mpi_level) {
  if (mpi_level == MPI_THREAD_MULTIPLE) return kThreadMultiple;
  if (mpi_level == MPI_THREAD_SERIALIZED) return kThreadSerialized;
  if (mpi_level == MPI_THREAD_FUNNELED) return kThreadFunneled;
  return kThreadSingle;
}

// Registered with atexit by the call that initialised MPI. It runs after Python's own atexit
// handlers (hvd's shutdown among them), when no engine uses MPI any more. A forked child that
// exits through exit() inherits the handler but not the right to end its parent's MPI.
void FinalizeAtExit() {
  if (getpid() != g_initializing_pid) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

const char* ThreadLevelName(int level) {
  switch (level) {
    case kThreadSingle: return "MPI_THREAD_SINGLE";
    case kThreadFunneled: return "MPI_THREAD_FUNNELED";
    case kThreadSerialized: return "MPI_THREAD_SERIALIZED";
    case kThreadMultiple: return "MPI_THREAD_MULTIPLE";
    default: return "not initialised";
  }
}

bool ThreadsDisabledByEnvironment() {
  const char* value = std::getenv("HOROVOD_MPI_THREADS_DISABLE");
  return value && (!std::strcmp(value, "1") || !strcasecmp(value, "true") || !strcasecmp(value, "yes") ||
                   !strcasecmp(value, "on"));
}

bool Finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

int ProvidedThreadLevel() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized || Finalized()) return -1;
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return FromMpiLevel(provided);
}

bool InitializedHere() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_initialized_here;
}

int EnsureInitialized(bool threads_disabled, std::string* error) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (Finalized()) {
    *error =
        "mpi: MPI was already finalized in this process (by MPI.Finalize() or mpi4py at exit), and MPI "
        "cannot be initialized twice in one process";
    return HVD_ERR_INVALID_ARGUMENT;
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return HVD_OK;  // by mpi4py, or by an earlier call here: theirs to finalize
  int provided = MPI_THREAD_SINGLE;
  int rc =
      MPI_Init_thread(nullptr, nullptr, ToMpiLevel(threads_disabled ? kThreadSerialized : kThreadMultiple), &provided);
  if (rc != MPI_SUCCESS) {
    *error = "mpi: " + CallFailed("MPI_Init_thread", rc);
    return StatusOf(rc);
  }
  g_initialized_here = true;
  g_initializing_pid = getpid();
  std::atexit(FinalizeAtExit);
  return HVD_OK;
}

int CheckUsableFromEngine(std::string* error) {
  int level = ProvidedThreadLevel();
  if (level >= kThreadSerialized) return HVD_OK;
  if (level < 0) {
    *error = "mpi: MPI is not initialised";
    return HVD_ERR_INTERNAL;
  }
  *error = std::string("mpi: MPI was initialised with ") + ThreadLevelName(level) +
           ", but hvd calls MPI from its engine's thread and needs MPI_THREAD_SERIALIZED or "
           "MPI_THREAD_MULTIPLE; if mpi4py initialised it, leave mpi4py.rc.thread_level at its default "
           "('multiple') before importing mpi4py.MPI";
  return HVD_ERR_UNSUPPORTED;
}

}  // namespace hvd_mpi
