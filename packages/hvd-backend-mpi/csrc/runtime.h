// MPI's life in this process: initialised once (by us or by someone else, e.g. mpi4py), finalised
// at exit by whoever initialised it.
//
// MPI can be initialised only once per process, so hvd.init() after hvd.shutdown() reuses it: no
// communicator's destruction finalises MPI. If this library initialised MPI, it finalises it when
// the process exits (after Python's atexit handlers, which shut the engine down first); Open MPI
// reports a rank that exits without MPI_Finalize as failed. If mpi4py (or anything else)
// initialised MPI, finalising it is theirs.
#pragma once

#include <string>

namespace hvd_mpi {

// Thread levels, numbered the same for every MPI (their MPI_THREAD_* constants may differ).
enum ThreadLevel { kThreadSingle = 0, kThreadFunneled = 1, kThreadSerialized = 2, kThreadMultiple = 3 };

// Initialises MPI unless it is already initialised. Asks for MPI_THREAD_MULTIPLE, so that other
// code (mpi4py) may call MPI while the engine does, or MPI_THREAD_SERIALIZED when
// `threads_disabled` (HOROVOD_MPI_THREADS_DISABLE=1). Returns HVD_OK or a status with `error` set.
int EnsureInitialized(bool threads_disabled, std::string* error);

// HOROVOD_MPI_THREADS_DISABLE from the process's environment, for callers given no setting.
bool ThreadsDisabledByEnvironment();

// HVD_OK when MPI is initialised at a thread level the engine can use: it calls MPI from its own
// thread (and from the one that called hvd.init()), never at once, so at least SERIALIZED.
int CheckUsableFromEngine(std::string* error);

// The thread level MPI provides, or -1 before it is initialised.
int ProvidedThreadLevel();

// Whether this library called MPI_Init_thread (and so will call MPI_Finalize at exit).
bool InitializedHere();

// Whether MPI_Finalize was called, by anyone: no MPI call is allowed after it.
bool Finalized();

const char* ThreadLevelName(int level);

}  // namespace hvd_mpi
