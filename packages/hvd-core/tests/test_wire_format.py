"""The negotiation decoder never crashes or over-allocates on corrupt or hostile input."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

import horovod.common as hvd
from horovod.common import _core

VALID = _core.encode_request("layer1.weight", _core.OP_ALLREDUCE, _core.DTYPE_FLOAT32, [64, 3, 3])


def _decode_or_clean_error(decode, data: bytes) -> None:
    try:
        decode(data)
    except hvd.HorovodInternalError as error:
        assert "malformed negotiation message" in str(error)


def test_valid_message_round_trips() -> None:
    assert _core.decode_requests(VALID) == 1


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=512))
def test_random_bytes(data: bytes) -> None:
    _decode_or_clean_error(_core.decode_requests, data)
    _decode_or_clean_error(_core.decode_responses, data)


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=8), st.integers(0, len(VALID)))
def test_mutated_valid_message(flips, cut) -> None:
    data = bytearray(VALID)
    for index, value in flips:
        data[index] = value
    _decode_or_clean_error(_core.decode_requests, bytes(data[:cut]))


def test_forged_counts_are_refused_without_allocating() -> None:
    magic = VALID[:4]
    for count in (2**31, 2**32 - 1, 10**6):
        data = magic + struct.pack("<I", count) + b"\0" * 64
        _decode_or_clean_error(_core.decode_requests, data)
    # A name length far beyond the message.
    head = bytearray(VALID)
    name_len_at = 4 + 4 + 4 + 4 + 4 + 4 + 8 + 8
    head[name_len_at : name_len_at + 4] = struct.pack("<I", 0xFFFFFFF0)
    _decode_or_clean_error(_core.decode_requests, bytes(head))
