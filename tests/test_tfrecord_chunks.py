"""TensorBoard event files read a window at a time (#19) equal the whole file read at once: records
that straddle a window, a torn last record and a damaged record included."""

from __future__ import annotations

import io
import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from labledger.importers.tfrecord import frames, masked_crc32c, read_events, scalar_events


def record(payload: bytes) -> bytes:
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", masked_crc32c(head)) + payload + struct.pack("<I", masked_crc32c(payload))


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def add_scalar(wall: float, step: int, tag: bytes, value: float) -> bytes:
    """The Event protobuf that ``add_scalar`` writes (wall_time, step, one simple_value)."""
    val = b"\x0a" + bytes([len(tag)]) + tag + b"\x15" + struct.pack("<f", value)
    summary = b"\x0a" + bytes([len(val)]) + val
    return b"\x09" + struct.pack("<d", wall) + b"\x10" + varint(step) + b"\x2a" + bytes([len(summary)]) + summary


payload = st.one_of(
    st.builds(
        add_scalar,
        st.floats(allow_nan=False),
        st.integers(0, 2**40),
        st.sampled_from([b"loss", b"lr", b"a/b", "ü".encode(), b"\xff"]),
        st.floats(width=32),
    ),
    st.binary(max_size=40),
)


@st.composite
def event_file(draw: st.DrawFn) -> bytes:
    data = b"".join(record(p) for p in draw(st.lists(payload, max_size=30)))
    tail = draw(st.sampled_from(["none", "torn", "damaged"]))
    if tail == "torn":
        data += record(draw(payload))[: draw(st.integers(1, 20))]
    elif tail == "damaged" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1 :]
    return data


@settings(max_examples=60, deadline=None)
@given(data=event_file(), chunk=st.integers(1, 120))
def test_reading_in_windows_equals_reading_the_whole_file(data, chunk):
    fr = frames(data)
    sc = scalar_events(data, fr)
    ev = read_events(io.BytesIO(data), chunk=chunk)
    assert (ev.size, ev.consumed, ev.records) == (len(data), fr.consumed, fr.offsets.size)
    got = ev.scalars
    assert got.index.tolist() == sc.index.tolist() and got.rest.tolist() == sc.rest.tolist()
    assert np.array_equal(got.wall_time, sc.wall_time) and np.array_equal(got.step, sc.step)
    assert np.array_equal(got.value, sc.value, equal_nan=True)
    assert [got.tags[t] for t in got.tag.tolist()] == [sc.tags[t] for t in sc.tag.tolist()]
    want = {i: data[int(fr.offsets[i]) : int(fr.offsets[i] + fr.lengths[i])] for i in sc.rest.tolist()}
    assert ev.payloads == want


def test_a_record_longer_than_the_window_is_carried_over_whole():
    big = record(b"x" * 5000)
    data = record(add_scalar(1.0, 1, b"loss", 0.5)) + big + record(add_scalar(2.0, 2, b"loss", 0.25))
    ev = read_events(io.BytesIO(data), chunk=64)
    assert ev.records == 3 and ev.scalars.step.tolist() == [1, 2] and ev.payloads == {1: b"x" * 5000}
