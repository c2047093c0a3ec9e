"""TensorBoard event files read a window at a time (#19) equal the whole file read at once: records
that straddle a window, a torn last record and a damaged record included."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import labledger
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


def test_an_import_in_small_windows_writes_what_one_window_writes(tmp_path, monkeypatch):
    event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
    from labledger.importers import import_path, tfrecord

    first = event_pb2.Event(step=0, wall_time=0.5, file_version="brain.Event:2").SerializeToString()
    two = event_pb2.Event(step=7, wall_time=7.5)
    two.summary.value.add(tag="a", simple_value=1.0)
    two.summary.value.add(tag="b", simple_value=2.0)
    payloads = [first] + [add_scalar(1.0 + i, i, b"loss" if i % 3 else b"acc", i / 7) for i in range(1, 40)]
    payloads.insert(20, two.SerializeToString())
    src = tmp_path / "logs" / "run1"
    src.mkdir(parents=True)
    data = b"".join(record(p) for p in payloads) + record(add_scalar(99.0, 99, b"loss", 0.0))[:-3]
    (src / "events.out.tfevents.1.host").write_bytes(data)
    written = []
    for i, chunk in enumerate((tfrecord.CHUNK, 50)):
        monkeypatch.setattr(tfrecord, "CHUNK", chunk)
        result = import_path(src, tmp_path / f"ledger{i}")
        book = labledger.open_ledger(tmp_path / f"ledger{i}")
        run = book.run(result.runs[0].id)
        written.append(((run.dir / "metrics.jsonl").read_bytes(), result.runs[0].notes, result.runs[0].counts))
    assert written[0] == written[1]
    assert written[0][2]["scalars"] == 40 and "the last" in written[0][1][0]
