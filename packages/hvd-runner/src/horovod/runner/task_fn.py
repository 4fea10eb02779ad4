"""What each rank of ``horovod.run`` executes: ``python -m horovod.runner.task_fn <dir>``.

``<dir>`` is the launcher's private job directory (mode 0700, on this machine). The rank loads the
function and its arguments from ``func.pkl``, calls it, and writes its return value to
``result.<rank>.pkl``, or its traceback to ``error.<rank>.txt`` before exiting non-zero.

In an elastic job a worker's rank changes from world to world: its result is filed under the rank it
ended with, and its error under its worker id (``error.w<id>.txt``). A worker the driver sent away
(``SystemExit(0)`` from ``init()``) leaves no file.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def result_path(directory: str, rank: int | str) -> str:
    return os.path.join(directory, f"result.{rank}.pkl")


def error_path(directory: str, rank: int | str) -> str:
    return os.path.join(directory, f"error.{rank}.txt")


def _write_atomically(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m horovod.runner.task_fn <job directory>", file=sys.stderr)
        return 2
    directory = argv[0]
    worker = os.environ.get("HOROVOD_ELASTIC_WORKER_ID")
    rank: int | str = int(os.environ.get("HOROVOD_RANK", "0")) if worker is None else f"w{worker}"
    try:
        # The caller's import path, so functions defined in its modules can be unpickled here.
        with open(os.path.join(directory, "sys_path.json"), encoding="utf-8") as f:
            for entry in reversed(json.load(f)):
                if entry not in sys.path:
                    sys.path.insert(0, entry)
        import cloudpickle

        with open(os.path.join(directory, "func.pkl"), "rb") as f:
            func, args, kwargs = cloudpickle.load(f)
        result = func(*args, **kwargs)
        if worker is not None:
            from horovod.common.elastic import last_assignment

            last = last_assignment()
            rank = last.rank if last is not None else rank  # its rank in the last world it joined
        _write_atomically(result_path(directory, rank), cloudpickle.dumps(result))
    except SystemExit as leaving:
        if worker is None or leaving.code not in (0, None):
            _write_atomically(error_path(directory, rank), traceback.format_exc().encode("utf-8", "replace"))
        raise
    except BaseException as error:  # reported to the caller with the rank
        _write_atomically(error_path(directory, rank), traceback.format_exc().encode("utf-8", "replace"))
        from horovod.runner import exit_report

        exit_report.report(f"{type(error).__name__}: {error}", primary=not exit_report.is_secondary(error))
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
