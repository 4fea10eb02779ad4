"""One rank of a RankPool (_mpirun.py): ``python _rank_worker.py <job directory> <ranks>``.

Runs job.0.pkl, job.1.pkl... in turn: a job is (function, args, env overrides), or None to exit.
Each job's outcome goes to result.<job>.<rank>.pkl as ("ok", value) or ("error", traceback).

A rank still in a job shortly before the pool's time limit prints every thread's stack to the
output, which the pool reports when it gives up.

Horovod's shutdown stops every rank's engine, so a rank that is done waits until every rank is done
before shutting down (otherwise it would stop a slower peer mid-job). A rank that fails shuts down
at once instead, which releases peers waiting for it in a collective.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import sys
import time
import traceback
from pathlib import Path

JOB_WAIT = 900.0  # an idle rank gives up after this long (its pool was abandoned)
DONE_WAIT = 120.0


def launcher_rank() -> int:
    for name in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"):
        if os.environ.get(name, "").strip():
            return int(os.environ[name])
    raise RuntimeError("not started by mpiexec: no rank in the environment")


def wait_for(paths: list[Path], limit: float) -> bool:
    deadline, pause = time.monotonic() + limit, 0.001
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
    return True


def write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def run_job(fn, args, env: dict) -> tuple:
    import horovod.common as hvd

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return ("ok", fn(*args)), hvd
    except BaseException:  # reported with the rank
        outcome = ("error", traceback.format_exc())
        hvd.shutdown()
        return outcome, hvd
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main(directory: str, ranks: int) -> int:
    root, rank = Path(directory), launcher_rank()
    job = 0
    while wait_for([root / f"job.{job}.pkl"], JOB_WAIT):
        spec = pickle.loads((root / f"job.{job}.pkl").read_bytes())
        if spec is None:
            return 0
        fn, args, env, limit = spec
        faulthandler.dump_traceback_later(max(1.0, limit - 5.0))
        outcome, hvd = run_job(fn, args, env)
        write(root / f"done.{job}.{rank}", b"")
        if not wait_for([root / f"done.{job}.{r}" for r in range(ranks)], DONE_WAIT) and outcome[0] == "ok":
            outcome = ("error", f"the other ranks did not finish job {job} within {DONE_WAIT} s")
        hvd.shutdown()
        try:
            data = pickle.dumps(outcome)
        except Exception as error:  # an unpicklable result is the test's mistake
            data = pickle.dumps(("error", f"result cannot be pickled: {error!r}"))
        write(root / f"result.{job}.{rank}.pkl", data)
        faulthandler.cancel_dump_traceback_later()
        job += 1
    print(f"rank {rank}: no job {job} within {JOB_WAIT} s; exiting", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
