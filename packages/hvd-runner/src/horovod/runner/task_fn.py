"""What each rank of ``horovod.run`` executes: ``python -m horovod.runner.task_fn <dir>``.

``<dir>`` is the launcher's private job directory (mode 0700, on this machine). The rank loads the
function and its arguments from ``func.pkl``, calls it, and writes its return value to
``result.<rank>.pkl``, or its traceback to ``error.<rank>.txt`` before exiting non-zero.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def result_path(directory: str, rank: int) -> str:
    return os.path.join(directory, f"result.{rank}.pkl")


def error_path(directory: str, rank: int) -> str:
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
    rank = int(os.environ.get("HOROVOD_RANK", "0"))
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
        _write_atomically(result_path(directory, rank), cloudpickle.dumps(result))
    except BaseException as error:  # reported to the caller with the rank
        _write_atomically(error_path(directory, rank), traceback.format_exc().encode("utf-8", "replace"))
        if not isinstance(error, SystemExit):
            from horovod.runner import exit_report

            exit_report.report(f"{type(error).__name__}: {error}", primary=not exit_report.is_secondary(error))
        if isinstance(error, SystemExit):
            raise
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
