"""`labledger import --format wandb`: W&B offline runs written by real wandb in the test (#14)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import labledger
from labledger.errors import ImportSourceError
from labledger.importers import detect_format, import_path
from labledger.wandb.records import WandbFileDamage, chunk_crc, iter_records, read_wandb_file, regroup

pytest.importorskip("wandb.proto.wandb_internal_pb2")
ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "wandb_scripts" / "media_run.py"


@pytest.fixture(scope="module")
def wandb_dirs(tmp_path_factory):
    """Two W&B offline runs written by real wandb: one finished, one finished with exit code 3."""
    out = {}
    for kind in ("ok", "fail"):
        d = tmp_path_factory.mktemp(kind)
        env = {**os.environ, "WANDB_SILENT": "true", "WANDB_MODE": "offline"}
        args = [sys.executable, str(SCRIPT), str(d)] + (["fail"] if kind == "fail" else [])
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300, cwd=d)
        assert done.returncode == 0, done.stderr[-2000:]
        out[kind] = d
    return out


@pytest.mark.slow
def test_reader_reads_what_wandb_wrote(wandb_dirs):
    (path,) = (wandb_dirs["ok"] / "wandb").glob("offline-run-*/run-*.wandb")
    data = read_wandb_file(path)
    assert data.run["project"] == "imp" and data.run["name"] == "media" and data.run["tags"] == ["x"]
    assert data.config == {"lr": 0.5, "opt": {"name": "sgd"}}
    assert [r["_step"] for r in data.history] == [0, 1, 2, 5]
    assert [r["loss"] for r in data.history[:3]] == [1.0, 0.5, 1 / 3]
    assert data.history[3]["img"]["_type"] == "image-file" and data.exit_code == 0
    assert data.summary["best"] == 0.25


@pytest.mark.slow
def test_import_wandb_offline_run(wandb_dirs, tmp_path):
    src = wandb_dirs["ok"]
    assert detect_format(src) == "wandb"
    result = import_path(src, tmp_path / "ledger")
    assert result.format == "wandb" and len(result.runs) == 1
    view = labledger.open_ledger(tmp_path / "ledger").run(result.run_ids[0])
    assert view.name == "media" and view.group == "imp" and view.tags == ["x"] and view.status == "finished"
    assert view.config == {"lr": 0.5, "opt": {"name": "sgd"}}
    (path,) = (src / "wandb").glob("offline-run-*/run-*.wandb")
    theirs = read_wandb_file(path).history
    rows = list(view.scalars())
    assert [r["step"] for r in rows] == [0, 1, 2]
    for mine, row in zip(rows, theirs, strict=False):
        assert mine["time"] == row["_timestamp"] and mine["loss"] == row["loss"]
        assert mine["eval.acc"] == row["eval.acc"] and mine["step_"] == row["step"]  # `step` renamed
    assert view.summary["headline"]["best"] == 0.25
    files = view.files()
    (png,) = [f for f in files if f.endswith(".png")]
    assert png.startswith("media/img/5-")
    original = next((path.parent / "files" / "media" / "images").glob("*.png"))
    assert hashlib.sha256(view.file_path(png).read_bytes()).digest() == hashlib.sha256(original.read_bytes()).digest()
    table = [json.loads(x) for x in view.file_path("tables/tab/5.jsonl").read_text().splitlines()]
    assert table == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    notes = [n["text"] for n in view.notes()]
    assert notes[0] == "from W&B" and not any("histogram" in n for n in notes)
    (hist,) = [m for m in view.records("media") if m["kind"] == "histogram"]  # as labledger.wandb logs one
    assert hist["key"] == "hist" and hist["step"] == 5
    assert hist["bins"] == theirs[3]["hist"]["bins"] and hist["counts"] == theirs[3]["hist"]["values"]
    assert view.meta["imported_from"]["format"] == "wandb"
    with pytest.raises(ImportSourceError, match="--again"):
        import_path(src, tmp_path / "ledger")


@pytest.mark.slow
def test_import_failed_wandb_run_and_cli(wandb_dirs, tmp_path):
    src = wandb_dirs["fail"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "labledger", "import", str(src), "--format", "wandb", "--ledger", str(tmp_path / "l")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "(wandb, sha256" in done.stdout
    (info,) = labledger.open_ledger(tmp_path / "l").runs()
    assert info.status == "failed" and info.error == "exit code 3"


def _chunk(kind: int, body: bytes) -> bytes:
    return struct.pack("<IHB", chunk_crc(kind, body), len(body), kind) + body


def test_chunks_across_blocks_and_a_torn_tail():
    from labledger.wandb.records import BLOCK, HEADER

    big = b"x" * (BLOCK + 100)  # spans two blocks: FIRST + LAST
    first_len = BLOCK - len(HEADER) - 7
    blob = HEADER + _chunk(2, big[:first_len]) + _chunk(4, big[first_len:])
    assert list(iter_records(blob)) == [(7, big)]
    torn = blob + _chunk(1, b"torn")[:-2]
    records = iter_records(torn, "f.wandb")
    assert next(records) == (7, big)
    with pytest.raises(WandbFileDamage, match=rf"^f\.wandb:{len(blob)}: truncated: the file ends inside a record") as e:
        next(records)
    assert e.value.truncated and e.value.records == 1 and e.value.offset == len(blob)
    with pytest.raises(WandbFileDamage, match=r"^f\.wandb:7: truncated: the file ends inside a record that spans"):
        list(iter_records(HEADER + _chunk(2, big[:first_len]), "f.wandb"))
    with pytest.raises(ImportSourceError, match="not a W&B run file"):
        list(iter_records(b"nope"))


@pytest.mark.parametrize(
    ("blob", "offset", "reason"),
    [
        (_chunk(1, b"ab")[:-1] + b"c", 7, "record checksum mismatch"),  # one byte changed
        (_chunk(1, b"ab") + _chunk(3, b"cd"), 16, r"a continuation chunk \(type 3\) without the record's first"),
        (_chunk(2, b"ab") + _chunk(1, b"cd"), 16, "a record starts before the one at byte 7 ended"),
        (_chunk(1, b"ab") + struct.pack("<IHB", 0, 9, 7), 16, "unknown chunk type 7"),
        (_chunk(1, b"ab") + bytes(7) + b"data", 16, "a zeroed chunk header followed by data"),
        (struct.pack("<IHB", 0, 40000, 1), 7, "a chunk of 40000 bytes overflows its block"),
    ],
)
def test_every_damage_is_named_with_its_byte(blob, offset, reason):
    from labledger.wandb.records import HEADER

    with pytest.raises(WandbFileDamage, match=rf"^x\.wandb:{offset}: {reason}") as e:
        list(iter_records(HEADER + blob, "x.wandb"))
    assert not e.value.truncated and "\n" not in str(e.value)


def test_zero_padding_and_a_zeroed_rest_of_block_are_skipped():
    from labledger.wandb.records import BLOCK, HEADER

    body = b"y" * (BLOCK - len(HEADER) - 7 - 10)  # leaves 10 bytes in the block: a zeroed header
    blob = HEADER + _chunk(1, body) + bytes(10) + _chunk(1, b"next")
    assert [r for _, r in iter_records(blob)] == [body, b"next"]
    body = b"y" * (BLOCK - len(HEADER) - 7 - 3)  # leaves 3 bytes: the block's trailer
    blob = HEADER + _chunk(1, body) + bytes(3) + _chunk(1, b"next")
    assert [r for _, r in iter_records(blob)] == [body, b"next"]
    with pytest.raises(WandbFileDamage, match=rf"^<wandb>:{BLOCK - 3}: non-zero bytes in a block's trailer"):
        list(iter_records(HEADER + _chunk(1, body) + b"\0\1\0" + _chunk(1, b"next")))


def _theirs(path: Path) -> tuple[list[dict], str]:
    """What wandb's own reader (``wandb leet inspect --json``, wandb-core's Go reader) reads from
    ``path``: its records and what it says on stderr."""
    exe = Path(sys.executable).parent / "wandb"
    env = {**os.environ, "WANDB_SILENT": "true"}
    done = subprocess.run(
        [str(exe), "leet", "inspect", "--json", str(path)], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def _copy_run(wandb_dirs, tmp_path) -> tuple[Path, Path]:
    src = tmp_path / "src"
    shutil.copytree(wandb_dirs["ok"], src, symlinks=True)
    (path,) = (src / "wandb").glob("offline-run-*/run-*.wandb")
    return src, path


def _history(records: list[dict]) -> list[dict]:
    return sorted((r["history"]["item"] for r in records if r["type"] == "history"), key=lambda h: h["_step"])


@pytest.mark.slow
def test_a_changed_digit_is_refused_at_its_byte_and_salvage_imports_what_wandb_reads(wandb_dirs, tmp_path):
    src, path = _copy_run(wandb_dirs, tmp_path)
    data = path.read_bytes()
    at = data.index(b"0.3333333333333333")  # loss at step 2, as W&B's value_json holds it
    path.write_bytes(data[:at] + b"0.3333333333333334" + data[at + 18 :])
    theirs, said = _theirs(path)
    assert "checksum mismatch" in said  # wandb's reader stops there too
    with pytest.raises(ImportSourceError) as e:
        import_path(src, tmp_path / "ledger")
    message = str(e.value)
    m = re.match(rf"{re.escape(str(path))}:(\d+): record checksum mismatch \(stored [0-9a-f]{{8}}, computed", message)
    assert m and "\n" not in message and "--salvage imports the" in message, message
    offset = int(m.group(1))
    length = struct.unpack_from("<H", data, offset + 4)[0]
    assert offset < at < offset + 7 + length  # the chunk that holds the changed digit
    assert labledger.open_ledger(tmp_path / "ledger").runs() == []  # nothing stored

    result = import_path(src, tmp_path / "ledger", salvage=True)
    view = labledger.open_ledger(tmp_path / "ledger").run(result.run_ids[0])
    rows = list(view.scalars())
    want = _history(theirs)
    assert [r["step"] for r in rows] == [h["_step"] for h in want] == [0, 1]
    for mine, row in zip(rows, want, strict=True):
        assert mine["loss"] == row["loss"] and mine["eval.acc"] == row["eval.acc"] and mine["time"] == row["_timestamp"]
    assert view.status == "killed" and f"damaged at byte {offset}" in view.meta["error"]
    (note,) = [n["text"] for n in view.notes() if n["text"].startswith("Salvaged")]
    rel = path.relative_to(src).as_posix()
    assert note.startswith(f"Salvaged from a damaged file: {rel}:{offset}: record checksum mismatch")
    assert f"Imported the {len(theirs)} verified record(s) before that byte" in note
    assert f"the {len(data) - offset} byte(s) from there on are not imported" in note


@pytest.mark.slow
def test_a_cut_file_says_it_is_truncated(wandb_dirs, tmp_path):
    src, path = _copy_run(wandb_dirs, tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-20])  # inside the last record (the exit record)
    theirs, said = _theirs(path)
    assert "incomplete .wandb file" in said  # wandb's reader ends there, not an error
    result = import_path(src, tmp_path / "ledger")  # no --salvage needed: nothing read is damaged
    view = labledger.open_ledger(tmp_path / "ledger").run(result.run_ids[0])
    assert [r["step"] for r in view.scalars()] == [h["_step"] for h in _history(theirs) if "loss" in h] == [0, 1, 2]
    assert not any(r["type"] == "exit" for r in theirs) and view.status == "killed"
    assert view.meta["error"].startswith("the W&B run file ends inside a record at byte")
    (note,) = [n["text"] for n in view.notes() if n["text"].startswith("Truncated file")]
    rel = path.relative_to(src).as_posix()
    assert f"{rel}:" in note and "truncated: the file ends inside a record" in note
    assert f"Imported the {len(theirs)} verified record(s)" in note


KILLED = """
import sys, wandb
run = wandb.init(project="k", name="killed", dir=sys.argv[1], mode="offline")
for i in range(10**9):
    wandb.log({f"m{k}": i * k + 0.5 for k in range(40)})
"""


@pytest.mark.slow
def test_a_wandb_run_killed_mid_log_is_killed_with_what_its_file_holds(tmp_path):
    """Real wandb killed (SIGKILL to its process group, wandb-core included) once its file holds
    three blocks: the import holds exactly the history wandb's own reader reads, and says the run
    has no end."""
    import signal
    import time

    env = {**os.environ, "WANDB_SILENT": "true", "WANDB_MODE": "offline"}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(tmp_path)],
        env=env,
        cwd=tmp_path,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.2)
            files = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
            if files and files[0].stat().st_size >= 3 * 32768:
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    (path,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    theirs, _said = _theirs(path)
    want = _history(theirs)
    assert len(want) > 10 and not any(r["type"] == "exit" for r in theirs)
    result = import_path(tmp_path / "wandb", tmp_path / "ledger")
    view = labledger.open_ledger(tmp_path / "ledger").run(result.run_ids[0])
    rows = list(view.scalars())
    assert [r["step"] for r in rows] == [h["_step"] for h in want]
    assert all(r["m7"] == h["m7"] and r["time"] == h["_timestamp"] for r, h in zip(rows, want, strict=True))
    assert view.status == "killed" and view.status != "finished"
    assert (
        view.meta["error"].startswith("the W&B run file")
        and f"the last at step {want[-1]['_step']}" in view.meta["error"]
    )


@pytest.mark.slow
def test_a_run_without_its_exit_record_is_not_finished(wandb_dirs, tmp_path):
    """A wandb process killed mid-log leaves whole flushed chunks and no exit record (checked by
    hand with kill -9: the file ended on a block boundary); here the real file is cut before its
    exit record, on the record boundary."""
    src, path = _copy_run(wandb_dirs, tmp_path)
    data = path.read_bytes()
    *_, (last, _raw) = iter_records(data)
    path.write_bytes(data[:last])
    theirs, said = _theirs(path)
    assert said == "" and not any(r["type"] == "exit" for r in theirs)
    result = import_path(src, tmp_path / "ledger")  # nothing is damaged: no --salvage needed
    view = labledger.open_ledger(tmp_path / "ledger").run(result.run_ids[0])
    assert view.status == "killed"
    assert (
        view.meta["error"].startswith("the W&B run file has no exit record")
        and "the last at step 5" in view.meta["error"]
    )
    assert any(n["text"].startswith("The source has no end record") for n in view.notes())
    assert [r["step"] for r in view.scalars()] == [0, 1, 2]


@pytest.mark.slow
def test_cli_refuses_a_damaged_file_in_one_line_and_salvages_it(wandb_dirs, tmp_path):
    src, path = _copy_run(wandb_dirs, tmp_path)
    data = path.read_bytes()
    at = data.index(b"0.3333333333333333")
    path.write_bytes(data[:at] + b"1" + data[at + 1 :])
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "labledger", "import", str(src), "--ledger", str(tmp_path / "l")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and f"{path}:" in done.stderr, done.stderr
    done = subprocess.run([*cmd, "--salvage"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "note: Salvaged from a damaged file:" in done.stdout


def test_regroup_keeps_plain_nested_keys():
    assert regroup({"eval.acc": 1.0}) == {"eval.acc": 1.0}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["protobuf", "json"])
def test_a_record_that_does_not_decode_is_damage_never_skipped(wandb_dirs, tmp_path, kind):
    """A chunk whose checksum holds but whose record is not a W&B protobuf (or holds a value that
    is not JSON) is refused at its byte, never skipped; --salvage stops there too."""
    from wandb.proto import wandb_internal_pb2 as pb

    src, path = _copy_run(wandb_dirs, tmp_path)
    data = path.read_bytes()
    if kind == "protobuf":
        body, reason = b"\xff\xff\xff\xff", "a record that does not decode as a W&B record"
    else:
        rec = pb.Record()
        item = rec.history.item.add()
        item.key, item.value_json = "loss", "{not json"
        body, reason = rec.SerializeToString(), "a history record with a value that is not JSON"
    path.write_bytes(data + _chunk(1, body))
    records = len(list(iter_records(data)))
    with pytest.raises(ImportSourceError, match=rf"^{re.escape(str(path))}:{len(data)}: {reason}"):
        import_path(src, tmp_path / "ledger")
    assert labledger.open_ledger(tmp_path / "ledger").runs() == []
    result = import_path(src, tmp_path / "ledger", salvage=True)
    view = labledger.open_ledger(tmp_path / "ledger").run(result.run_ids[0])
    (note,) = [n["text"] for n in view.notes() if n["text"].startswith("Salvaged")]
    assert f":{len(data)}: {reason}" in note and f"Imported the {records} verified record(s)" in note
    assert [r["step"] for r in view.scalars()] == [0, 1, 2] and view.status == "finished"
