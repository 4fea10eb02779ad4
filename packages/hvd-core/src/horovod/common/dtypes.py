"""The engine's dtype codes and their numpy counterparts."""

from __future__ import annotations

import numpy as np

from horovod.common import _core

CODES: dict[str, int] = {
    name: getattr(_core, f"DTYPE_{name.upper()}")
    for name in ("uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "bool")
}
NAMES = {code: name for name, code in CODES.items()}


def _bfloat16() -> np.dtype | None:
    try:
        import ml_dtypes  # optional: numpy has no bfloat16
    except ImportError:
        return None
    bf16: np.dtype = np.dtype(ml_dtypes.bfloat16)  # (ml_dtypes, when installed without stubs, is Any)
    return bf16


#: code_of's answers by dtype object: a dtype's ``name`` is computed anew on every read (3.5 us, a
#: tenth of a small eager allreduce's Python time, measured), while a dtype hashes in a dict lookup.
_CODE_BY_DTYPE: dict[np.dtype, int] = {}


def code_of(dtype: np.dtype) -> int:
    """The engine code for a numpy dtype; ValueError naming the dtype when unsupported."""
    code = _CODE_BY_DTYPE.get(dtype)
    if code is not None:
        return code
    name = np.dtype(dtype).name
    code = CODES.get(name)
    if code is None:
        raise ValueError(f"dtype {name} is not supported by hvd collectives (supported: {', '.join(CODES)})")
    _CODE_BY_DTYPE[np.dtype(dtype)] = code
    return code


def numpy_dtype(code: int) -> np.dtype:
    if NAMES[code] == "bfloat16":
        bf16 = _bfloat16()
        if bf16 is None:
            raise ValueError("bfloat16 arrays need the ml_dtypes package: pip install ml-dtypes")
        return bf16
    return np.dtype(NAMES[code])


def from_name(name: str) -> np.dtype:
    """The numpy dtype for an engine dtype name ("bfloat16" included, via ml_dtypes)."""
    return numpy_dtype(CODES[name])
