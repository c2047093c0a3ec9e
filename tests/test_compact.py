"""Compaction of finished runs (#19): record files become verified zstd files in the zstd seekable
format (``X.jsonl.zst``), which ``zstdcat`` and ``pyzstd.SeekableZstdFile`` read too (#42).

Round trips are byte-exact; a crash at each step of a compaction leaves a readable run with the
same records; every reader answers the same on a compacted run as on the plain one; ``verify``
finds a corrupted frame; the site's batch data is packed and its page shows the same rows.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import warnings
from pathlib import Path

import orjson
import pytest
import zstandard
from click.testing import CliRunner
from conftest import make_batch

import labledger
from labledger.cli import main
from labledger.errors import DamagedLineWarning
from labledger.server.lines import LineIndex
from labledger.site import build_site, load_data_file
from labledger.store.compressed import (
    check_compressed,
    compact_file,
    compact_run,
    compressed_path,
    open_record,
    read_index,
    read_record_bytes,
    record_state,
)
from labledger.store.jsonl import RECORD_FILES, Appender, iter_lines
from labledger.store.verify import verify_ledger

FRAME = 4096  # small frames: many of them in a small file


def _ledger(root: Path) -> str:
    with labledger.start_run("alpha", config={"lr": 0.1}, notes="first", ledger=root) as run:
        for mb in range(1, 121):
            run.log_batch(make_batch(mb, n=3))
            run.log(mb, loss=1.0 / mb, acc=mb / 200, val=float("nan") if mb == 60 else 0.5)
        for e in (1, 2):
            run.log_history({"kind": "train", "step": e, "epoch": e, "loss": 1.0 / e})
        ckpt = root.parent / "ckpt.bin"
        ckpt.write_bytes(b"w" * 64)
        run.log_checkpoint(ckpt, step=2)
        run.note("a note with \u00e9 and <b>")
    return run.id


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The same ledger twice: ``plain`` as logged, ``packed`` with every record file compacted."""
    root = tmp_path_factory.mktemp("compact")
    run_id = _ledger(root / "plain")
    shutil.copytree(root / "plain", root / "packed")
    done = compact_run(root / "packed" / "runs" / run_id, min_bytes=0, frame_bytes=FRAME)
    assert {c.action for c in done} == {"compacted"} and len(done) == 5
    return root, run_id


def _views(pair):
    root, run_id = pair
    return [labledger.open_ledger(root / k).run(run_id) for k in ("plain", "packed")]


def test_a_compacted_file_holds_the_jsonl_byte_for_byte(tmp_path):
    lines = [orjson.dumps({"i": i, "text": "é" * (i % 50)}) + b"\n" for i in range(3000)]
    lines[10] = b"\n"  # a blank line
    lines[20] = b'{"a": "' + b"x" * 10_000 + b'"}\n'  # a line longer than a frame
    data = b"".join(lines) + b'{"torn": '  # a torn last line stays as it was
    p = tmp_path / "metrics.jsonl"
    p.write_bytes(data)
    with pytest.warns(Warning, match="torn last line"):
        plain_lines = list(iter_lines(p))
    st = os.stat(p)
    assert compact_file(p, min_bytes=0, frame_bytes=FRAME).action == "compacted"
    z = compressed_path(p)
    assert not p.exists() and z.is_file()
    assert read_record_bytes(p) == data
    index = read_index(z)
    assert len(index.frames) > 10 and index.size == len(data) and index.lines == data.count(b"\n")
    assert record_state(p) == [st.st_size, st.st_mtime_ns]  # counters taken before stay current
    with pytest.warns(Warning, match="torn last line"):
        assert list(iter_lines(p)) == plain_lines  # the JSONL's line numbers
    # plain zstd tools read it too: frames one after another, the index and seek table skippable frames
    with open(z, "rb") as f:
        assert zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read() == data
    # seeking by JSONL offset
    with open_record(p) as f:
        f.seek(len(data) // 2)
        assert f.read(100) == data[len(data) // 2 : len(data) // 2 + 100]
        f.seek(7)
        assert f.readline() == data[7 : data.index(b"\n", 7) + 1]
    assert check_compressed(z) == []
    assert compact_file(p, min_bytes=0).action == "skipped: already compacted"


STEPS = ("frame", "written", "verified", "renamed", "removed")


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_step_leaves_a_readable_run_with_the_same_records(tmp_path, step):
    run_id = _ledger(tmp_path / "ledger")
    view = labledger.open_ledger(tmp_path / "ledger").run(run_id)
    path = view.dir / "batches.jsonl"
    before, data = list(view.batches()), path.read_bytes()

    def crash(name: str) -> None:
        if name == step:
            os._exit(0)  # no cleanup, no flush: as a kill -9

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child dies at the step
        try:
            compact_file(path, min_bytes=0, frame_bytes=FRAME, on_step=crash)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert list(view.batches()) == before and read_record_bytes(path) == data
    assert verify_ledger(labledger.open_ledger(tmp_path / "ledger"), [run_id]).ok or step == "renamed"
    # the next compaction finishes the job; nothing is left behind
    compact_file(path, min_bytes=0, frame_bytes=FRAME)
    assert not path.exists() and read_record_bytes(path) == data
    assert sorted(p.name for p in view.dir.iterdir() if "batches" in p.name) == ["batches.jsonl.zst"]
    assert list(view.batches()) == before


def test_every_reader_gives_the_same_answers_on_a_compacted_run(pair, tmp_path, monkeypatch):
    plain, packed = _views(pair)
    root, run_id = pair
    assert not any((packed.dir / f).exists() for f in RECORD_FILES.values())
    for kind in ("scalars", "batches", "samples", "history", "checkpoints", "notes"):
        a, b = (orjson.dumps(list(v.records(kind)), option=orjson.OPT_SERIALIZE_NUMPY) for v in (plain, packed))
        assert a.replace(b"/plain/", b"/packed/") == b, kind  # a copied checkpoint's path is in its ledger
    for cache in ("off", str(tmp_path / "cache")):  # the Arrow readers, and the columnar cache
        monkeypatch.setenv("LABLEDGER_CACHE_DIR", cache)
        monkeypatch.setenv("LABLEDGER_CACHE_MIN_BYTES", "0")
        for kind in ("samples", "batches", "scalars"):
            a, b = plain.table(kind), packed.table(kind)
            assert a.schema == b.schema and orjson.dumps(a.to_pylist()) == orjson.dumps(b.to_pylist()), kind
    assert packed.cached_parquet("samples") is not None  # a cache entry stays valid through compaction
    assert plain.counts() == packed.counts() and plain.last_scalars().keys() == packed.last_scalars().keys()
    assert plain.counters().records == packed.counters().records
    # the server's pages
    for fname in ("batches.jsonl", "metrics.jsonl"):
        a, b = LineIndex(plain.dir / fname), LineIndex(packed.dir / fname)
        for offset, limit in ((0, 5), (37, 100), (117, 10), (400, 3)):
            assert a.page(offset, limit) == b.page(offset, limit)
    # the CLI: show, export
    r = CliRunner()
    shows = [r.invoke(main, ["show", run_id, "--json", "--ledger", str(root / k)]).output for k in ("plain", "packed")]
    assert shows[0].replace("/plain/", "/packed/") == shows[1]
    exports = []
    for k in ("plain", "packed"):
        out = tmp_path / f"{k}.jsonl"
        res = r.invoke(main, ["export", run_id, "--what", "batches", "--ledger", str(root / k), "--out", str(out)])
        assert res.exit_code == 0, res.output
        exports.append(out.read_bytes())
    assert exports[0] == exports[1]
    # verify: the same lines checked, no problems
    reports = [verify_ledger(labledger.open_ledger(root / k), [run_id]) for k in ("plain", "packed")]
    assert reports[0].ok and reports[1].ok and reports[0].lines == reports[1].lines > 0


def test_the_site_packs_batch_chunks_and_reads_a_compacted_run(pair, tmp_path):
    root, run_id = pair
    sizes = {}
    for k in ("plain", "packed"):
        build_site(root / k, tmp_path / k, chunk_records=40)
        folder = tmp_path / k / "data" / "batches" / run_id
        sizes[k] = sum(p.stat().st_size for p in folder.glob("[0-9]*.js"))
    for i in range(3):
        a = load_data_file(tmp_path / "plain" / f"data/batches/{run_id}/{i}.js")
        b = load_data_file(tmp_path / "packed" / f"data/batches/{run_id}/{i}.js")
        assert a == b and len(a[1]["batches"]) == 40
    assert b'"encoding":"gzip+base64"' in (tmp_path / "packed" / f"data/batches/{run_id}/0.js").read_bytes()
    batch_file = read_record_bytes(root / "plain" / "runs" / run_id / "batches.jsonl")
    assert sizes["plain"] == sizes["packed"] < 0.6 * len(batch_file)  # not a second full copy


def test_verify_finds_a_corrupted_frame_and_readers_keep_line_numbers(pair, tmp_path):
    root, run_id = pair
    shutil.copytree(root / "packed", tmp_path / "l")
    book = labledger.open_ledger(tmp_path / "l")
    view = book.run(run_id)
    z = view.dir / "batches.jsonl.zst"
    index = read_index(z)
    off, csize, _, nl = index.frames[2]
    raw = bytearray(z.read_bytes())
    raw[off + csize // 2] ^= 0xFF
    z.write_bytes(bytes(raw))
    report = verify_ledger(book, [run_id])
    assert not report.ok
    assert any("damaged compressed frame 2" in p.message and p.line == index.first_lines[2] for p in report.problems)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [rec["microbatch"] for rec in view.batches()]
    first = index.first_lines[2]
    lost = set(range(first, first + nl))
    assert got == [mb for mb in range(1, 121) if mb not in lost]  # the other lines, numbered as before
    assert any(issubclass(w.category, DamagedLineWarning) and f"{first}-" in str(w.message) for w in caught)


def test_appending_to_a_compacted_file_turns_it_back_into_jsonl(pair, tmp_path):
    root, run_id = pair
    shutil.copytree(root / "packed", tmp_path / "l")
    path = tmp_path / "l" / "runs" / run_id / "notes.jsonl"
    before = read_record_bytes(path)
    a = Appender(path)
    a.append({"text": "later"})
    a.close()
    assert not compressed_path(path).exists() and path.read_bytes() == before + b'{"text":"later"}\n'


def test_finish_compacts_large_files_and_a_running_run_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("LABLEDGER_COMPACT_MIN_BYTES", "2000")
    run = labledger.start_run("live", ledger=tmp_path)
    for mb in range(1, 30):
        run.log_batch(make_batch(mb))
    run.log(1, loss=0.5)
    assert compact_run(run.dir, min_bytes=0)[0].action == "skipped: the run is running"
    with open(run.dir / ".lock") as f:  # the writer holds it
        with pytest.raises(BlockingIOError):
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    run.finish()
    names = sorted(p.name for p in run.dir.iterdir() if "jsonl" in p.name)
    assert names == ["batches.jsonl.zst", "metrics.jsonl", "notes.jsonl"] or names == [
        "batches.jsonl.zst",
        "metrics.jsonl",
    ]
    view = labledger.open_ledger(tmp_path).run(run.id)
    assert [b["microbatch"] for b in view.batches()] == list(range(1, 30)) and view.counts()["batches"] == 29


def test_compact_command_dry_run_then_compact_then_nothing_to_do(pair, tmp_path):
    root, run_id = pair
    shutil.copytree(root / "plain", tmp_path / "l")
    r = CliRunner()
    args = ["compact", "--ledger", str(tmp_path / "l"), "--min-bytes", "0"]
    dry = r.invoke(main, [*args, "--dry-run"])
    assert dry.exit_code == 0 and "would compact 5 file(s) of 1 run(s)" in dry.output
    assert (tmp_path / "l" / "runs" / run_id / "batches.jsonl").exists()
    done = r.invoke(main, args)
    assert done.exit_code == 0 and "compacted 5 file(s) of 1 run(s)" in done.output, done.output
    again = orjson.loads(r.invoke(main, [*args, "--json"]).output)
    assert {f["action"] for f in again["files"]} == {"skipped: already compacted"}


def test_importing_a_compacted_run_folder_gives_the_same_run(pair, tmp_path):
    from labledger.importers import import_path

    root, run_id = pair
    got = []
    for k in ("plain", "packed"):
        result = import_path(root / k / "runs" / run_id, tmp_path / k)
        view = labledger.open_ledger(tmp_path / k).run(result.runs[0].id)
        got.append((result.runs[0].counts, list(view.batches()), list(view.records("scalars"))))
    assert orjson.dumps(got[0]) == orjson.dumps(got[1]) and got[0][0]["batches"] == 120


def test_a_run_synced_live_then_compacted_at_finish_reads_the_same_on_the_server(tmp_path):
    from server_process import ServerProcess

    from labledger.server.sync_client import sync_runs
    from labledger.store.ledger import Ledger

    token = "compact-sync-token-0123456789"
    Ledger(tmp_path / "server", create=True).close()
    server = ServerProcess(tmp_path / "server", uploads_dir=tmp_path / "uploads", token=token).start()
    try:
        local = tmp_path / "local"
        run = labledger.start_run("live", ledger=local)
        for mb in range(1, 41):
            run.log_batch(make_batch(mb))
        sync_runs(local, server.url, token=token)  # the server has the JSONL as it was then
        for mb in range(41, 81):
            run.log_batch(make_batch(mb))
        run.compact_min_bytes = 0
        run.finish()
        assert (run.dir / "batches.jsonl.zst").is_file() and not (run.dir / "batches.jsonl").exists()
        sync_runs(local, server.url, token=token)
        mine = list(labledger.open_ledger(local).run(run.id).batches())
        with Ledger(tmp_path / "server") as book:
            assert book.info(run.id).status == "finished"
            theirs = list(book.run(run.id).batches())  # the compressed copy, not the stale JSONL
            assert verify_ledger(book, [run.id]).ok
        assert not (tmp_path / "server" / "runs" / run.id / "batches.jsonl").exists()  # replaced, held once
        assert theirs == mine and len(mine) == 80
    finally:
        server.stop()


@pytest.mark.browser
def test_the_batch_page_shows_the_same_rows_from_packed_chunks(pair, tmp_path):
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("/usr/bin/chromium is missing")
    root, run_id = pair
    build_site(root / "packed", tmp_path / "site", chunk_records=40)
    chunk = load_data_file(tmp_path / "site" / f"data/batches/{run_id}/1.js")[1]  # microbatches 41..80
    samples = chunk["batches"][2]["samples"]
    want = [(s["input"]["image"], f"{s['cross_entropy']:.3f}") for s in samples]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((tmp_path / "site" / "batches.html").as_uri() + f"#run={run_id}&mb=43")
            page.wait_for_function("document.querySelector('#position').innerText.indexOf('Microbatch 43 ') >= 0")
            rows = page.locator("#samples tbody tr")
            assert rows.count() == len(want) == 3 and not errors
            text = [rows.nth(i).inner_text() for i in range(3)]
            assert all(image in t and t.endswith(ce) for (image, ce), t in zip(want, text)), text
        finally:
            browser.close()


def test_a_reader_opening_as_the_run_is_compacted_finds_the_compressed_file(tmp_path, monkeypatch):
    """The compressed form is looked for first, then the JSONL: a compaction that lands between
    the two (the .zst renamed in, the JSONL removed) is found by a second look, not read as no
    records (a live page's record count dropped to 0 under load in CI)."""
    import builtins

    import labledger.store.compressed as compressed

    path = tmp_path / "batches.jsonl"
    lines = [orjson.dumps({"step": i, "loss": 1.0 / (i + 1)}) + b"\n" for i in range(3000)]
    path.write_bytes(b"".join(lines))
    zpath = compressed_path(path)
    real_open = builtins.open
    raced = []

    def racing_open(file, *args, **kwargs):
        if Path(file) == zpath and not raced:  # the first look misses, and the compaction lands now
            raced.append(True)
            compact_file(path, min_bytes=0)
            assert zpath.exists() and not path.exists()
            raise FileNotFoundError(file)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(compressed, "open", racing_open, raising=False)
    f = open_record(path)
    assert raced and f is not None
    with f:
        assert f.read() == b"".join(lines)


def test_readers_that_are_not_labledger_read_a_compacted_file(tmp_path):
    """The file is the zstd seekable format: zstd's own CLI decompresses it, and a maintained
    seekable-format reader (pyzstd) seeks in it to any offset."""
    import random
    import subprocess

    pyzstd = pytest.importorskip("pyzstd")
    rng = random.Random(7)
    data = b"".join(orjson.dumps({"step": i, "text": "x" * rng.randint(0, 80)}) + b"\n" for i in range(5000))
    p = tmp_path / "batches.jsonl"
    p.write_bytes(data)
    compact_file(p, min_bytes=0, frame_bytes=FRAME)
    z = compressed_path(p)
    assert len(read_index(z).frames) > 20
    if shutil.which("zstdcat"):
        assert subprocess.run(["zstdcat", str(z)], capture_output=True, check=True).stdout == data
    with pyzstd.SeekableZstdFile(z, "r") as f:
        for _ in range(200):
            at, n = rng.randrange(len(data) + 1), rng.randrange(20_000)
            f.seek(at)
            assert f.read(n) == data[at : at + n]


def _old_layout(data: bytes, frame_bytes: int) -> bytes:
    """``data`` compressed as labledger wrote it before the seekable format: frames, then a skippable
    frame holding a JSON index, its length (8 bytes) and ``LLZIDX01``."""
    cctx = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=True)
    frames, out, at = [], b"", 0
    for start in range(0, len(data), frame_bytes):
        cut = data.find(b"\n", start + frame_bytes - 1)
        chunk = data[at : cut + 1 if cut >= 0 else len(data)]
        if not chunk:
            continue
        comp = cctx.compress(chunk)
        frames.append([len(out), len(comp), len(chunk), chunk.count(b"\n")])
        out, at = out + comp, at + len(chunk)
    body = orjson.dumps(
        {"v": 1, "frames": frames, "size": len(data), "sha256": "", "key": "", "mtime_ns": 0, "lines": 0}
    )
    payload = body + len(body).to_bytes(8, "little") + b"LLZIDX01"
    return out + (0x184D2A5E).to_bytes(4, "little") + len(payload).to_bytes(4, "little") + payload


def test_a_file_of_the_old_layout_is_read_then_upgraded_by_compact_upgrade(pair, tmp_path):
    root, run_id = pair
    shutil.copytree(root / "plain", tmp_path / "l")
    run_dir = tmp_path / "l" / "runs" / run_id
    path = run_dir / "batches.jsonl"
    data = path.read_bytes()
    compressed_path(path).write_bytes(_old_layout(data, FRAME))
    path.unlink()
    view = labledger.open_ledger(tmp_path / "l").run(run_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # read in order, quietly: not damage
        assert [b["microbatch"] for b in view.batches()] == list(range(1, 121))
    assert any(
        "compact --upgrade" in p.message
        for p in verify_ledger(labledger.open_ledger(tmp_path / "l"), [run_id]).problems
    )
    r = CliRunner()
    args = ["compact", "--ledger", str(tmp_path / "l"), "--upgrade"]
    dry = r.invoke(main, [*args, "--dry-run"])
    assert dry.exit_code == 0 and "would upgrade 1 file(s)" in dry.output, dry.output
    done = r.invoke(main, args)
    assert done.exit_code == 0 and "upgraded 1 file(s)" in done.output, done.output
    assert read_index(compressed_path(path)) is not None and read_record_bytes(path) == data
    assert verify_ledger(labledger.open_ledger(tmp_path / "l"), [run_id]).ok
    again = orjson.loads(r.invoke(main, [*args, "--json"]).output)
    assert "upgraded" not in {f["action"] for f in again["files"]}
    # verify --repair upgrades one too
    compressed_path(path).write_bytes(_old_layout(data, FRAME))
    fixed = verify_ledger(labledger.open_ledger(tmp_path / "l"), [run_id], repair=True)
    assert fixed.ok and any(p.repaired == "rewritten in the zstd seekable format" for p in fixed.problems)
    assert read_index(compressed_path(path)) is not None and read_record_bytes(path) == data
