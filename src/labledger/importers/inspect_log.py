"""Import UK AISI inspect_ai logs: ``.eval`` files (a ZIP of zstd-compressed JSON members) and ``.json``.

PATH is one log or a folder of them. Logs of one ``eval()`` call and one model (same ``eval.run_id``
and ``eval.model``) become one run, each log's task one result set, each scorer one labledger task
of score rows (see :mod:`labledger.importers.harness`). A sample scored over several epochs is
reduced to one row first, with the mean of its epochs (``value_to_float`` as inspect maps values:
``C`` 1, ``P`` 0.5, ``I`` and ``N`` 0, numbers as they are, ``yes``/``true`` 1, ``no``/``false`` 0),
or with the value in ``reductions`` when the log has one (that is what inspect computed its
metrics on); ``epochs`` keeps the values per epoch, and ``prediction`` and ``answer`` every epoch's
output and answer (lists in the same epoch order; a single epoch's, the value). So ``n`` counts
questions, not attempts, and the run's config records the epochs K. When the harness reported a clustered ``stderr(cluster=F)``,
metadata field ``F`` becomes each row's ``group`` (the bootstrap cluster).

A scorer whose value is a dict (``{"a": 1, "b": 0}``) gives one labledger task per key, named
after the key as inspect reports it (``scorer.key`` when two scorers share a key). A log with
several epoch reducers (``Epochs(2, ["mean", "max"])``) gives one task per reducer,
``<name>.<reducer>``, each from its own ``reductions`` entry. Samples that errored (``error`` set,
no scores) are left out, as inspect leaves them out of its metrics; the import note counts them
(inspect's ``completed_samples`` of ``total_samples``) and names them, and the result set's
``meta.json`` lists their ids under ``errored``.

``.eval`` members are zstd-compressed (method 93) since inspect_ai 0.3.1xx; Python's ``zipfile``
cannot read them before 3.14, so this needs the ``zstandard`` package (``pip install
'labledger[harness]'``). Log format ``version`` 1 and 2 are read; newer ones are refused.
"""

from __future__ import annotations

import datetime as dt
import statistics
import struct
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import orjson

from labledger.errors import ImportSourceError, LedgerError, RecordError
from labledger.importers.harness import (
    HarnessMetric,
    HarnessTask,
    as_float,
    item_hash,
    set_name,
    store_harness_run,
    task_error,
)
from labledger.importers.source import ImportedRun, ImportOptions, Source, load_json
from labledger.inputs.result_columns import MISSING, ResultColumns
from labledger.machine import paused_gc
from labledger.store.ledger import Ledger

FORMAT = "inspect"
SUPPORTED_VERSIONS = (1, 2)
_ZSTD = 93


def _is_json_log(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return b'"eval"' in head and b'"version"' in head and (b'"plan"' in head or b'"status"' in head)


def log_files(path: Path) -> list[Path]:
    """The inspect logs at ``path``: the file itself, or the ``.eval`` / ``.json`` logs under the folder."""
    if path.is_file():
        if path.suffix == ".eval" and zipfile.is_zipfile(path):
            return [path]
        return [path] if path.suffix == ".json" and _is_json_log(path) else []
    out = [p for p in path.rglob("*.eval") if zipfile.is_zipfile(p)]
    out += [p for p in path.rglob("*.json") if p.name not in ("logs.json", "listing.json") and _is_json_log(p)]
    return sorted(out)


def detect(path: Path) -> bool:
    """An inspect ``.eval`` or ``.json`` log, or a folder holding one (and no lm-eval results)."""
    return bool(log_files(path))


def make_source(path: Path) -> Source:
    files = log_files(path)
    if not files:
        raise ImportSourceError(f"{path}: no inspect_ai log (.eval or .json) here")
    return Source(path, FORMAT, files)


class _Output(msgspec.Struct, gc=False):
    completion: Any = None


class _Error(msgspec.Struct, gc=False):
    message: Any = None


class _Sample(msgspec.Struct, gc=False):
    """What the import reads of a sample (see :func:`_task_of`): absent fields read as ``.get`` gives them."""

    id: Any
    epoch: Any = 1
    input: Any = None
    target: Any = None
    output: _Output | None = None
    scores: dict[str, Any] | None = None
    metadata: Any = None
    error: _Error | None = None
    model_usage: Any = None
    working_time: Any = None
    total_time: Any = None


_SAMPLE = msgspec.json.Decoder(_Sample)
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")  # a central directory file header (46 bytes)


def _central_directory(data: bytes) -> dict[str, tuple[int, int, int]] | None:
    """``{member: (compression method, local header offset, compressed size)}`` from a ZIP's
    central directory, read with :mod:`struct` (zipfile builds a ``ZipInfo`` per member: 10x the
    time on 30,000 samples); ``None`` for anything but a plain one-disk, non-ZIP64 archive.

    >>> import io
    >>> b = io.BytesIO()
    >>> with zipfile.ZipFile(b, "w") as z: z.writestr("a.json", "{}")
    >>> _central_directory(b.getvalue())
    {'a.json': (0, 0, 2)}
    """
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 65_557))
    if end < 0 or len(data) < end + 22 or data[max(0, end - 20) : end - 16] == b"PK\x06\x07":
        return None
    _, disk, disk_cd, n_disk, n, cd_size, cd_offset, _ = struct.unpack_from("<IHHHHIIH", data, end)
    if disk or disk_cd or n_disk != n or cd_offset + cd_size != end:
        return None
    out: dict[str, tuple[int, int, int]] = {}
    pos = cd_offset
    unpack = _CENTRAL.unpack_from
    try:
        for _ in range(n):
            sig, _, _, flags, method, _, _, _, csize, usize, n_name, n_extra, n_comment, _, _, _, offset = unpack(
                data, pos
            )
            if sig != 0x02014B50 or flags & 1 or 0xFFFFFFFF in (csize, usize, offset):
                return None
            raw = data[pos + 46 : pos + 46 + n_name]
            try:
                name = raw.decode("ascii")  # what inspect writes; the same in cp437 and in UTF-8
            except UnicodeDecodeError:
                name = raw.decode("utf-8" if flags & 0x800 else "cp437")
            out[name] = (method, offset, csize)
            pos += 46 + n_name + n_extra + n_comment
    except (struct.error, UnicodeDecodeError):
        return None
    return out if len(out) == n and pos == end else None


class EvalZip:
    """The members of an inspect ``.eval`` file, decompressing zstd members with ``zstandard``.

    >>> import tempfile, zipfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.eval"
    >>> with zipfile.ZipFile(p, "w") as z: z.writestr("header.json", '{"version": 2}')
    >>> EvalZip(p).json("header.json")
    {'version': 2}
    """

    def __init__(self, path: Path):
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        self._dctx: Any = None
        try:
            self._data = path.read_bytes()
        except OSError as exc:
            raise ImportSourceError(f"{path}: not a readable .eval (ZIP) file ({exc})") from None
        entries = _central_directory(self._data)
        if entries is None:  # ZIP64, prepended data, anything unusual: zipfile reads the directory
            entries = {i.filename: (i.compress_type, i.header_offset, i.compress_size) for i in self.zip.infolist()}
        self._entries = entries
        self.names = list(entries)

    @property
    def zip(self) -> zipfile.ZipFile:
        """The file as :class:`zipfile.ZipFile` (opened on first use: members that are not zstd)."""
        if self._zip is None:
            try:
                self._zip = zipfile.ZipFile(self.path)
            except (OSError, zipfile.BadZipFile) as exc:
                raise ImportSourceError(f"{self.path}: not a readable .eval (ZIP) file ({exc})") from None
        return self._zip

    def read(self, name: str) -> bytes:
        method, offset, size = self._entries[name]
        if method != _ZSTD:
            return self.zip.read(name)
        if self._dctx is None:  # one decompressor for every member (#13)
            try:
                import zstandard
            except ImportError:
                raise ImportSourceError(
                    f"{self.path}: member {name} is zstd-compressed (inspect_ai's default); reading it needs the "
                    "'zstandard' package: pip install 'labledger[harness]' (or zstandard)"
                ) from None
            self._dctx = zstandard.ZstdDecompressor()
            self._zstd_error = zstandard.ZstdError
        data = self._data
        head = data[offset : offset + 30]
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise ImportSourceError(f"{self.path}: member {name}: bad local header")
        n_name, n_extra = struct.unpack("<HH", head[26:30])
        start = offset + 30 + n_name + n_extra
        raw = data[start : start + size]
        try:
            return self._dctx.decompressobj().decompress(raw)
        except self._zstd_error as exc:
            raise ImportSourceError(f"{self.path}: member {name}: cannot decompress ({exc})") from None

    def sample(self, name: str) -> Any:
        """A sample member with only the fields the import reads (``messages``, ``events``,
        ``store``... are skipped unparsed); a member of another shape is read whole (:meth:`json`)."""
        raw = self.read(name)
        try:
            s = _SAMPLE.decode(raw)
        except msgspec.DecodeError:
            return self.json(name)
        out = {"id": s.id, "epoch": s.epoch, "input": s.input, "target": s.target}
        out["output"] = None if s.output is None else {"completion": s.output.completion}
        out["scores"], out["metadata"] = s.scores, s.metadata
        out["error"] = None if s.error is None else {"message": s.error.message}
        out["model_usage"], out["working_time"], out["total_time"] = s.model_usage, s.working_time, s.total_time
        return out

    def json(self, name: str) -> Any:
        try:
            return orjson.loads(self.read(name))
        except orjson.JSONDecodeError as exc:
            raise RecordError(f"not valid JSON ({exc})", source=f"{self.path}:{name}") from None


def _read_log(path: Path) -> tuple[dict[str, Any], Iterator[tuple[str, dict[str, Any]]], list | None]:
    """``(header, (where, sample) pairs, reductions)`` of a ``.eval`` or ``.json`` log."""
    if path.suffix == ".eval":
        z = EvalZip(path)
        if "header.json" not in z.names:
            raise ImportSourceError(f"{path}: member header.json is missing (an unfinished log?)")
        header = z.json("header.json")
        members = sorted(
            (n for n in z.names if n.startswith("samples/") and n.endswith(".json")),
            key=lambda n: (n.rsplit("_epoch_", 1)[0], int(n.rsplit("_epoch_", 1)[-1][:-5] or 0)),
        )
        reductions = z.json("reductions.json") if "reductions.json" in z.names else None
        return header, ((f"{path}:{n}", z.sample(n)) for n in members), reductions
    data = load_json(path)
    if not isinstance(data, dict):
        raise RecordError("must be an inspect log (a JSON object)", source=str(path))
    samples = data.get("samples") or []
    return data, ((f"{path}:samples[{i}]", s) for i, s in enumerate(samples)), data.get("reductions")


def value_to_float(value: Any) -> float | None:
    """A score value as inspect's default ``value_to_float`` maps it; ``None`` for lists and dicts.

    >>> [value_to_float(v) for v in ("C", "P", "I", "N", 0.25, "yes", True)]
    [1.0, 0.5, 0.0, 0.0, 0.25, 1.0, 1.0]
    """
    if value == "C":
        return 1.0
    if value == "P":
        return 0.5
    if value in ("I", "N"):
        return 0.0
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        low = value.lower()
        if low in ("yes", "true"):
            return 1.0
        if low in ("no", "false"):
            return 0.0
        try:
            return float(low)
        except ValueError:
            return 0.0
    return None


def _text(v: Any) -> Any:
    """A sample's input as text: a string as is, chat messages as their contents joined."""
    if isinstance(v, list):
        parts = []
        for m in v:
            c = m.get("content") if isinstance(m, dict) else m
            if isinstance(c, list):
                c = " ".join(str(x.get("text", "")) for x in c if isinstance(x, dict))
            parts.append(f"{m.get('role', '')}: {c}" if isinstance(m, dict) else str(c))
        return "\n".join(parts)
    return v


def _when(s: Any) -> float | None:
    if not isinstance(s, str):
        return None
    try:
        return dt.datetime.fromisoformat(s).timestamp()
    except ValueError:
        return None


def _scorer_results(header: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per reported score ``(scorer, name, reducer)`` (``name``: the scorer's, or a key of its dict
    value): the headline value, plain stderr, clustered stderr and its cluster field."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for sc in ((header.get("results") or {}).get("scores")) or []:
        if not isinstance(sc, dict):
            continue
        info: dict[str, Any] = {"value": None, "stderr": None, "cluster": None, "cluster_stderr": None}
        for m in (sc.get("metrics") or {}).values():
            if not isinstance(m, dict):
                continue
            name, params = m.get("name"), m.get("params") or {}
            if name in ("accuracy", "mean") and info["value"] is None:
                info["value"] = as_float(m.get("value"))
            elif name == "stderr" and params.get("cluster"):
                info["cluster"], info["cluster_stderr"] = str(params["cluster"]), as_float(m.get("value"))
            elif name == "stderr":
                info["stderr"] = as_float(m.get("value"))
        name = str(sc.get("name"))
        out[(str(sc.get("scorer") or name), name, str(sc.get("reducer") or "mean"))] = info
    return out


def _median(v: list[float]) -> float:
    return statistics.median(v)


def _mean(v: list[float]) -> float:
    return sum(v) / len(v)


#: Per-item usage fields carried from each sample (``cost``, ``tokens_in``, ... as metrics.usage names them).
USAGE_FIELDS = ("tokens_in", "tokens_out", "cost", "latency_ms")


def sample_usage(sample: dict[str, Any]) -> dict[str, float]:
    """One inspect sample's usage: input and output tokens and cost summed over its models'
    ``model_usage`` (cost only when a model reports ``total_cost``), and ``latency_ms`` from its
    ``working_time`` (seconds; else ``total_time``).

    >>> sample_usage({"model_usage": {"m": {"input_tokens": 10, "output_tokens": 4, "total_cost": 0.002}},
    ...               "working_time": 0.25})
    {'tokens_in': 10.0, 'tokens_out': 4.0, 'cost': 0.002, 'latency_ms': 250.0}
    """
    out: dict[str, float] = {}
    usage = sample.get("model_usage")
    if isinstance(usage, dict) and usage:
        per = [u for u in usage.values() if isinstance(u, dict)]
        for name, key in (("tokens_in", "input_tokens"), ("tokens_out", "output_tokens"), ("cost", "total_cost")):
            vals = [u[key] for u in per if isinstance(u.get(key), (int, float)) and not isinstance(u.get(key), bool)]
            if vals:
                out[name] = float(sum(vals))
    took = sample.get("working_time", sample.get("total_time"))
    if isinstance(took, (int, float)) and not isinstance(took, bool):
        out["latency_ms"] = float(took) * 1000.0
    return out


def _mean_usage(per_epoch: list[dict[str, float]], name: str) -> Any:
    """The mean of a usage field over a sample's epochs (per attempt), or MISSING unless every epoch has it."""
    vals = [u[name] for u in per_epoch if name in u]
    if not per_epoch or len(vals) != len(per_epoch):
        return MISSING
    return sum(vals) / len(vals)


#: The epoch reducers labledger applies itself when a log has no ``reductions`` (inspect's names).
_REDUCE: dict[str, Callable[[list[float]], float]] = {"mean": _mean, "max": max, "min": min, "median": _median}


def _scores(raw: list[Any], key: str | None) -> list[Any]:
    """``value_to_float`` of each value (of its ``key`` for a dict-valued score); ``None`` where a
    value has no known form (:func:`_as_score` then gives the error)."""
    if key is None:
        return [value_to_float(v) for v in raw]
    return [value_to_float(v[key]) if isinstance(v, dict) and key in v else None for v in raw]


def _as_score(raw: Any, key: str | None, where: str, field: str) -> float:
    """One score value as a float (a dict-valued score: its ``key``), or a one-line error."""
    if key is not None:
        if not isinstance(raw, dict) or key not in raw:
            raise RecordError(
                f"must be a dict with key {key!r} (as the scorer's other values)", source=where, field=field
            )
        raw, field = raw[key], f"{field}.{key}"
    v = value_to_float(raw)
    if v is None:
        raise RecordError(
            "must be C, I, P, N, a number, a boolean, or a dict of those (one metric per key)",
            source=where,
            field=field,
        )
    return v


def _task_of(path: Path, header: dict[str, Any], samples, reductions) -> tuple[HarnessTask, int, list[str]]:
    """One log's result set: one labledger task per scorer (per key of a dict-valued scorer, and
    per epoch reducer when the log has several), with the notes the import shows for it."""
    ev = header.get("eval") or {}
    results = header.get("results") or {}
    reported = _scorer_results(header)
    per: dict[str, dict[str, dict[str, Any]]] = {}  # scorer -> sample id -> info
    epochs_seen = 0
    errored: dict[str, str] = {}  # sample id -> the first error message
    for where, s in samples:
        if not isinstance(s, dict) or "id" not in s:
            raise RecordError("must be an inspect sample with an 'id'", source=where, field="id")
        sid, epoch = str(s["id"]), s.get("epoch", 1)
        epochs_seen = max(epochs_seen, int(epoch) if isinstance(epoch, int) else 1)
        if s.get("error"):
            err = s["error"]
            errored.setdefault(sid, str(err.get("message") if isinstance(err, dict) else err)[:200])
        scores = s.get("scores") or {}
        if not isinstance(scores, dict):
            raise RecordError("must map scorer names to scores", source=where, field="scores")
        for scorer, sc in scores.items():
            if not isinstance(sc, dict) or "value" not in sc:
                raise RecordError("must be a score with a value", source=where, field=f"scores.{scorer}")
            entry = per.setdefault(scorer, {}).setdefault(
                sid,
                {
                    "raw": [],
                    "where": [],
                    "input": s.get("input"),
                    "target": s.get("target"),
                    "metadata": s.get("metadata") or {},
                    "predictions": [],
                    "answers": [],
                },
            )
            entry["raw"].append(sc.get("value"))
            entry["where"].append(where)
            entry.setdefault("usage", []).append(sample_usage(s))
            out = s.get("output") or {}
            entry["predictions"].append(out.get("completion") if isinstance(out, dict) else None)
            entry["answers"].append(sc.get("answer"))
    reduced: dict[tuple[str, str], dict[str, Any]] = {}  # (scorer, reducer) -> sample id -> reduced raw value
    for red in reductions or []:
        if isinstance(red, dict) and red.get("scorer") in per:
            vals = {str(x.get("sample_id")): x.get("value") for x in red.get("samples") or [] if isinstance(x, dict)}
            reduced[(str(red["scorer"]), str(red.get("reducer") or "mean"))] = vals
    # every (scorer, key, reducer) to import: those inspect reported, and any other scorer of the samples
    wanted: list[tuple[str, str | None, str]] = []
    for scorer, items in per.items():
        first = next(iter(items.values()))["raw"][0]
        keys: list[str | None] = list(first) if isinstance(first, dict) else [None]
        reducers = [r for (sc, _, r) in reported if sc == scorer] + [r for (sc, r) in reduced if sc == scorer]
        for key in keys:
            for reducer in dict.fromkeys(reducers or ["mean"]):
                wanted.append((scorer, key, reducer))
    base = {(sc, k): k if k is not None else sc for sc, k, _ in wanted}
    clash = {b for b in base.values() if sum(1 for v in base.values() if v == b) > 1}
    several = {(sc, k) for sc, k, r in wanted if sum(1 for s2, k2, _ in wanted if (s2, k2) == (sc, k)) > 1}
    metrics = []
    for scorer, key, reducer in wanted:
        items = per[scorer]
        name = base[(scorer, key)] if base[(scorer, key)] not in clash else f"{scorer}.{key}"
        if (scorer, key) in several:
            name = f"{name}.{reducer}"
        res = reported.get((scorer, key if key is not None else scorer, reducer), {})
        cluster = res.get("cluster")
        red = reduced.get((scorer, reducer))
        if red is None and reducer not in _REDUCE:
            raise RecordError(
                f"has no values of epoch reducer {reducer!r} for scorer {scorer!r} (labledger reduces mean, max, "
                "min and median itself)",
                source=str(path),
                field="reductions",
            )
        ids = list(items)
        entries = list(items.values())
        field = f"scores.{scorer}.value"
        epochs = [_scores(e["raw"], key) for e in entries]
        for e, ep in zip(entries, epochs):
            if None in ep:  # the first value of no known form: its one-line error
                for v, w in zip(e["raw"], e["where"]):
                    _as_score(v, key, w, field)
        if red is not None:
            values = [
                _scores([red[sid]], key)[0] if sid in red else _REDUCE.get(reducer, _REDUCE["mean"])(ep)
                for sid, ep in zip(ids, epochs)
            ]
            for sid, v in zip(ids, values):
                if v is None:
                    _as_score(red[sid], key, str(path), f"reductions[{scorer}, {reducer}].{sid}")
        else:
            values = [_REDUCE[reducer](ep) for ep in epochs]
        fields: dict[str, Any] = {
            "pred": values,
            "epochs": epochs,
            "item_hash": [item_hash(e["input"], e["target"]) for e in entries],
            "prompt": [_text(e["input"]) for e in entries],
            "target": [e["target"] for e in entries],
            # every epoch's output and answer, in epoch order beside ``epochs`` (one epoch: the value itself)
            "prediction": [e["predictions"] if len(e["predictions"]) > 1 else e["predictions"][0] for e in entries],
            "answer": [e["answers"] if len(e["answers"]) > 1 else e["answers"][0] for e in entries],
            "metadata": [e["metadata"] for e in entries],
        }
        for usage_field in USAGE_FIELDS:
            column = [_mean_usage(e["usage"], usage_field) for e in entries]
            if any(v is not MISSING for v in column):
                fields[usage_field] = column
        if cluster:
            fields["group"] = [str(e["metadata"][cluster]) if cluster in e["metadata"] else MISSING for e in entries]
        rows = ResultColumns(name, ids, [1.0] * len(ids), fields)
        metrics.append(
            HarnessMetric(
                name,
                "scores",
                rows,
                "mean",
                value=res.get("value"),
                stderr=res.get("cluster_stderr") if cluster else res.get("stderr"),
                stderr_method=(
                    f"clustered CLT stderr over '{cluster}' with C/(C-1) correction (inspect stderr(cluster=))"
                    if cluster
                    else "sample sd (n-1) / sqrt(n) over epoch-reduced samples (inspect stderr())"
                ),
                extra={
                    "cluster": cluster,
                    "epochs": epochs_seen,
                    "n": len(rows),
                    **({"scorer": scorer, "key": key} if key is not None else {}),
                    **({"reducer": reducer} if (scorer, key) in several else {}),
                },
            )
        )
    task = str(ev.get("task") or path.stem)
    label = set_name(task.rsplit("/", 1)[-1])
    info: dict[str, Any] = {"task_version": ev.get("task_version"), "epochs": epochs_seen, "log": path.name}
    notes = []
    total, completed = results.get("total_samples"), results.get("completed_samples")
    if errored or (isinstance(total, int) and isinstance(completed, int) and completed < total):
        info["samples_total"], info["samples_completed"] = total, completed
        info["errored"] = sorted(errored)
        shown = ", ".join(f"{sid} ({msg})" for sid, msg in sorted(errored.items())[:3])
        more = f" and {len(errored) - 3} more" if len(errored) > 3 else ""
        notes.append(
            f"{label}: {completed} of {total} samples completed (samples x epochs, as inspect counts them); "
            f"errored, left out as inspect leaves them out of its metrics: {shown}{more}"
        )
    return HarnessTask(label, task, metrics, info=info, files=[path.name]), epochs_seen, notes


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    with paused_gc():  # 30,000 sample members decoded: the collector would walk them again and again
        return _load(source, stage, opts)


def _load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    """The runs of every log, one per ``eval()`` call and model. A log whose header cannot be read
    ends the import (its run is unknown); a log that cannot be imported otherwise (format version,
    status, a sample) is left out with its one-line error, the run's other logs stored, unless none
    of the run's logs can be, which ends the import with that error and stores nothing."""
    groups: dict[tuple[str, str], list[tuple[Path, dict[str, Any], HarnessTask]]] = {}
    failed: dict[tuple[str, str], list[LedgerError]] = {}
    notes: list[str] = []
    for path in log_files(source.path):
        header, samples, reductions = _read_log(path)
        ev = header.get("eval") or {}
        key = (str(ev.get("run_id")), str(ev.get("model")))
        try:
            version = header.get("version")
            if version not in SUPPORTED_VERSIONS:
                raise RecordError(
                    f"inspect log format version {version!r} is not supported (known: 1, 2)",
                    source=str(path),
                    field="version",
                )
            if header.get("status") != "success":
                raise ImportSourceError(
                    f"{path}: the log's status is {header.get('status')!r}, not 'success' (an unfinished or "
                    "failed evaluation); fix or rerun it before importing"
                )
            task, _, task_notes = _task_of(path, header, samples, reductions)
        except LedgerError as exc:
            failed.setdefault(key, []).append(task_error(exc, str(ev.get("task") or path.stem)))
            continue
        notes.extend(task_notes)
        groups.setdefault(key, []).append((path, header, task))
    for key, errors in failed.items():
        if key not in groups:  # no log of this run can be read: nothing is stored
            err = errors[0]
            more = f"; {len(errors) - 1} more log(s) could not be read either" if len(errors) > 1 else ""
            if more and isinstance(err, RecordError):
                raise RecordError(err.detail + more, source=err.source, line=err.line, field=err.field)
            raise err if not more else type(err)(f"{err}{more}")
    runs = []
    for (run_key, model), logs in groups.items():
        first = logs[0][1]
        ev = first.get("eval") or {}
        version = (ev.get("packages") or {}).get("inspect_ai")
        config = {
            "harness": "inspect_ai",
            "harness_version": version,
            "log_version": first.get("version"),
            "model": model,
            "model_args": ev.get("model_args"),
            "model_generate_config": ev.get("model_generate_config"),
            "tasks": {
                t.task: {
                    "version": t.info.get("task_version"),
                    "epochs": t.info.get("epochs"),
                    "samples": max((len(m.rows) for m in t.metrics), default=0),
                    "task_args": (h.get("eval") or {}).get("task_args"),
                    "dataset": (h.get("eval") or {}).get("dataset", {}).get("name"),
                }
                for _, h, t in logs
            },
            "eval_config": ev.get("config"),
            "revision": ev.get("revision"),
        }
        when_started = [
            _when((h.get("stats") or {}).get("started_at") or (h.get("eval") or {}).get("created")) for _, h, _ in logs
        ]
        when_ended = [_when((h.get("stats") or {}).get("completed_at")) for _, h, _ in logs]
        starts = [s for s in when_started if s is not None]
        ends = [e for e in when_ended if e is not None]
        name = opts.name if opts.name and len(groups) == 1 else (f"{opts.name}-{model}" if opts.name else model)
        runs.append(
            store_harness_run(
                stage,
                source,
                opts,
                harness="inspect_ai",
                version=version,
                name=name,
                config=config,
                tasks=[t for _, _, t in logs],
                started=min(starts) if starts else None,
                ended=max(ends) if ends else None,
                notes=[n for n in notes if any(n.startswith(f"{t.name}:") for _, _, t in logs)],
                errors=failed.get((run_key, model), []),
                files=[p for p, _, _ in logs],
            )
        )
    return runs
