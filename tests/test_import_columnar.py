"""The columnar import paths (#19): TFRecord framing and CRCs, ``add_scalar`` events decoded with
numpy, scalar records written from columns; each checked against the slow path it replaces
(TensorBoard's own record reader and protobuf, ``Run.log``) on random data."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import labledger
from labledger.importers import tfrecord
from labledger.importers.source import log_scalar_columns

event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
summary_pb2 = pytest.importorskip("tensorboard.compat.proto.summary_pb2")


def record(payload: bytes) -> bytes:
    head = struct.pack("<Q", len(payload))
    return (
        head
        + struct.pack("<I", tfrecord.masked_crc32c(head))
        + payload
        + struct.pack("<I", tfrecord.masked_crc32c(payload))
    )


def scalar_event(step: int, wall: float, tag: str, value: float) -> bytes:
    ev = event_pb2.Event(step=step, wall_time=wall)
    ev.summary.value.add(tag=tag, simple_value=value)
    return ev.SerializeToString()


def test_crc_matches_tensorboards_own():
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    rng = np.random.default_rng(0)
    for width in (0, 1, 3, 4, 5, 8, 13, 64, 100):
        rows = rng.integers(0, 256, (9, width), dtype=np.uint8)
        assert tfrecord.masked_crc32c_rows(rows).tolist() == [masked_crc32c(r.tobytes()) for r in rows]


def test_frames_stop_at_the_first_bad_record_as_tensorboard_does():
    from tensorboard.compat.tensorflow_stub import errors
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New

    recs = [record(scalar_event(i + 1, 10.0 + i, "loss", 0.5 * i)) for i in range(20)]
    data = bytearray(b"".join(recs))
    data[len(b"".join(recs[:7])) + 14] ^= 0x40  # a payload byte of record 7
    fr = tfrecord.frames(bytes(data))
    assert fr.lengths.size == 7 and fr.consumed == len(b"".join(recs[:7]))
    data2 = b"".join(recs) + recs[0][:10]  # a torn tail
    assert tfrecord.frames(data2).consumed == len(b"".join(recs))
    # TensorBoard's reader agrees on the damaged file
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".tfevents") as f:
        f.write(bytes(data))
        f.flush()
        reader = PyRecordReader_New(f.name)
        n = 0
        try:
            while True:
                reader.GetNext()
                n += 1
        except (errors.DataLossError, errors.OutOfRangeError):
            pass
    assert n == 7


tags = st.text(min_size=0, max_size=140)
steps = st.integers(min_value=-(2**63), max_value=2**63 - 1)
walls = st.floats(allow_nan=True, allow_infinity=True)
values = st.floats(width=32, allow_nan=True, allow_infinity=True)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(steps, walls, tags, values), min_size=1, max_size=30), st.booleans())
def test_numpy_scalar_decoding_equals_the_protobuf_decoder(events, with_other):
    payloads = [scalar_event(*e) for e in events]
    if with_other:  # a record of another shape, and two values in one event
        ev = event_pb2.Event(step=3, wall_time=1.0, file_version="brain.Event:2")
        payloads.insert(0, ev.SerializeToString())
        two = event_pb2.Event(step=4, wall_time=2.0)
        two.summary.value.add(tag="a", simple_value=1.0)
        two.summary.value.add(tag="b", simple_value=2.0)
        payloads.append(two.SerializeToString())
    data = b"".join(record(p) for p in payloads)
    fr = tfrecord.frames(data)
    assert fr.lengths.size == len(payloads)
    sc = tfrecord.scalar_events(data, fr)
    assert sorted([*sc.index.tolist(), *sc.rest.tolist()]) == list(range(len(payloads)))
    for j, i in enumerate(sc.index.tolist()):
        ev = event_pb2.Event.FromString(payloads[i])
        [v] = ev.summary.value
        assert sc.step[j] == ev.step and sc.tags[sc.tag[j]] == v.tag
        assert np.array_equal(sc.wall_time[j], ev.wall_time, equal_nan=True)
        assert np.array_equal(sc.value[j], v.simple_value, equal_nan=True)
    for i in sc.rest.tolist():  # what is left: not add_scalar-shaped, a default field omitted, or a
        # summary of 128 bytes or more (tag over 118 bytes: two-byte lengths, left to protobuf)
        ev = event_pb2.Event.FromString(payloads[i])
        assert (
            len(ev.summary.value) != 1
            or ev.step == 0
            or ev.wall_time == 0
            or not ev.summary.value[0].tag
            or len(ev.summary.value[0].tag.encode()) > 118
        )
    # and the other way round: every add_scalar-shaped event with a short tag is decoded by numpy
    short = [i for i, e in enumerate(events) if e[0] and e[1] and e[2] and len(e[2].encode()) <= 118]
    assert set(short) <= {i - with_other for i in sc.index.tolist()}


names = st.sampled_from(["loss", "acc", 'we"ird%s', "ünï", "lr"])


@settings(max_examples=8, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-5, 10**12),
            st.floats(allow_nan=False, allow_infinity=False, width=64),
            st.dictionaries(names, st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=4),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_columns_write_what_run_log_writes(tmp_path_factory, recs):
    root = tmp_path_factory.mktemp("led")
    all_names = sorted({k for _, _, d in recs for k in d})
    with labledger.start_run("a", ledger=root) as slow:
        for s, t, d in recs:
            slow.log(s, time=t, **d)
    with labledger.start_run("b", ledger=root) as fast:
        counts = [len(d) for _, _, d in recs]
        log_scalar_columns(
            fast,
            all_names,
            np.array([r[0] for r in recs]),
            np.array([r[1] for r in recs]),
            np.concatenate([[0], np.cumsum(counts)]),
            np.array([all_names.index(k) for _, _, d in recs for k in d]),
            np.array([v for _, _, d in recs for v in d.values()]),
        )
    assert (fast.dir / "metrics.jsonl").read_bytes() == (slow.dir / "metrics.jsonl").read_bytes()
    ledger = labledger.open_ledger(root)
    a, b = ledger.run(slow.id).info, ledger.run(fast.id).info
    assert a.summary == b.summary
