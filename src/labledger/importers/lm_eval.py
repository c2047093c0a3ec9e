"""Import EleutherAI lm-evaluation-harness output (``--output_path DIR --log_samples``).

PATH is a ``results_<timestamp>.json`` or a folder holding them (searched recursively); each results
file is one harness invocation and becomes one run, with one result set per task and filter from
the ``samples_<task>_<timestamp>.jsonl`` files beside it (same timestamp). A document appears once
per filter; a task's only filter ``none`` gives the set the task's name, any other filter is added
after a dot (``gsm8k.strict-match``). Rows (see :mod:`labledger.importers.harness`):

- multiple-choice tasks (``output_type: multiple_choice``): ``acc`` from the per-choice
  log-likelihoods in ``filtered_resps``, ``acc_norm`` from the same divided by the length of each
  choice's text (characters, as lm-eval does); gold is ``target`` (the choice index);
- corpus metrics stored per sample as ``[gold, pred]`` (``f1``, ``mcc``): label rows;
- every other per-sample number (``exact_match``, ``acc`` of a generative task...): score rows;
- perplexity metrics of ``loglikelihood_rolling`` tasks (``word_perplexity``, ``byte_perplexity``,
  ``bits_per_byte``, stored per sample as ``[loglikelihood, words or bytes]``): one score row per
  document under the task ``loglikelihood`` (``pred`` the document's log-likelihood, ``words`` and
  ``bytes`` beside it), and each perplexity recomputed from those pairs as lm-eval aggregates them
  (``exp(-Σ loglikelihood / Σ units)``; bits per byte ``-Σ loglikelihood / Σ bytes / ln 2``), set
  beside lm-eval's value in the set's meta (``recomputed``).

Group results (``aggregate_metric_list`` of a group) are recomputed from the member tasks' items,
weighted as lm-eval weights them (by size or not), and each is a note of the run with lm-eval's
value beside it (:func:`group_notes`).

``item_hash`` is ``doc_hash/prompt_hash``; ``prompt`` the first request's context, ``target`` the
target, ``prediction`` the filtered response (generative) or the chosen choice (multiple choice).
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import orjson

from labledger.errors import ImportSourceError, LedgerError, RecordError
from labledger.importers.harness import (
    EncodedSet,
    HarnessMetric,
    HarnessTask,
    ItemMean,
    as_float,
    encode_tasks,
    import_workers,
    pool_result,
    read_results,
    results_stamp,
    score_row,
    set_name,
    softmax,
    store_harness_run,
    task_error,
    worker_pool,
)
from labledger.importers.harness import results_files as harness_results_files
from labledger.importers.source import ImportedRun, ImportOptions, Source, load_jsonl
from labledger.inputs.result_columns import MISSING, Probs, ResultColumns
from labledger.machine import paused_gc
from labledger.store.ledger import Ledger

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

FORMAT = "lm-eval"
#: lm-eval's corpus-level metrics recomputable from ``[gold, pred]`` pairs, and their labledger spec.
CORPUS = {"f1": "f1:average=binary,pos_label=1", "mcc": "mcc"}
#: lm-eval's perplexity metrics (per sample ``[loglikelihood, units]``) and the unit each divides by.
PERPLEXITY = {"word_perplexity": "words", "byte_perplexity": "bytes", "bits_per_byte": "bytes"}
#: The task of the per-document log-likelihood rows a perplexity metric is recomputed from.
LOGLIK = "loglikelihood"


#: Keys in the head of an lm-eval results file (lighteval's has ``config_general`` instead).
MARKERS = (b'"n-shot"', b'"configs"')


def results_files(path: Path) -> list[Path]:
    """The lm-eval results files at ``path`` (the file itself, or those under the folder)."""
    return harness_results_files(path, MARKERS, head=1_000_000)


def old_layout(path: Path) -> Path | None:
    """The ``results.json`` of lm-eval 0.4.2's layout at ``path`` (the file, or one under the
    folder): what lm-eval wrote before 0.4.3 (``results.json`` with the samples of ``--log_samples``
    as ``<model_args>_<task>.jsonl``, each one JSON array), which labledger does not read; None
    when there is none.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "results.json").write_text('{"results": {}, "configs": {}, "n-shot": {}}')
    >>> old_layout(d).name
    'results.json'
    """
    found = [path] if path.is_file() else (sorted(path.rglob("results.json")) if path.is_dir() else [])
    for p in found:
        if p.name != "results.json":
            continue
        try:
            with open(p, "rb") as f:
                head = f.read(1_000_000)
        except OSError:
            continue
        if b'"results"' in head and b'"configs"' in head and (b'"n-shot"' in head or b'"versions"' in head):
            return p
    return None


def detect(path: Path) -> bool:
    """A ``results_<timestamp>.json`` with lm-eval's keys, or a folder holding one (or lm-eval
    0.4.2's ``results.json``, which :func:`make_source` refuses naming the cause)."""
    return bool(results_files(path)) or old_layout(path) is not None


def _samples_files(results: Path) -> dict[str, Path]:
    stamp = results_stamp(results)
    out = {}
    for p in sorted(results.parent.glob(f"samples_*_{stamp}.jsonl")):
        out[p.name[len("samples_") : -len(f"_{stamp}.jsonl")]] = p
    return out


def make_source(path: Path) -> Source:
    files = []
    for r in results_files(path):
        files.append(r)
        files.extend(_samples_files(r).values())
    if not files:
        old = old_layout(path)
        if old is not None:
            raise ImportSourceError(
                f"{old}: lm-eval 0.4.2's layout (results.json, samples as <model_args>_<task>.jsonl JSON arrays), "
                "which labledger does not read: it reads lm-eval >= 0.4.3's results_<timestamp>.json with "
                "samples_<task>_<timestamp>.jsonl; rerun the evaluation with lm-eval 0.4.3 or later"
            )
        raise ImportSourceError(f"{path}: no lm-eval results_<timestamp>.json here")
    return Source(path, FORMAT, files)


def _fail(path: Path, line: int | None, fld: str, msg: str) -> RecordError:
    return RecordError(msg, source=str(path), line=line, field=fld)


def _pair(value: Any) -> bool:
    """A perplexity metric's per-sample ``[loglikelihood, units]``."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and as_float(value[0]) is not None
        and isinstance(value[1], int)
        and not isinstance(value[1], bool)
    )


def perplexity(name: str, logliks: list[float], units: list[int]) -> float | None:
    """lm-eval's aggregate of a perplexity metric from its per-document pairs: ``weighted_perplexity``
    (``exp(-Σ loglikelihood / Σ units)``) or ``bits_per_byte`` (``-Σ loglikelihood / Σ bytes / ln 2``);
    None without units.

    >>> perplexity("word_perplexity", [-1.0, -3.0], [2, 2]), perplexity("bits_per_byte", [-math.log(2)], [1])
    (2.718281828459045, 1.0)
    """
    total = sum(units)
    if not total:
        return None
    mean = sum(logliks) / total
    return -mean / math.log(2) if name == "bits_per_byte" else math.exp(-mean)


def _loglik(path: Path, line: int, resps: Any) -> list[float]:
    """Per-choice log-likelihoods from ``filtered_resps`` (``[["-0.1", "False"], ...]``, strings)."""
    if not isinstance(resps, list) or not resps:
        raise _fail(path, line, "filtered_resps", "must be a list of [loglikelihood, is_greedy] per choice")
    out = []
    for i, r in enumerate(resps):
        v = r[0] if isinstance(r, list) and r else r
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            raise _fail(
                path, line, f"filtered_resps[{i}]", f"must start with a log-likelihood; got {str(v)[:40]!r}"
            ) from None
    return out


_TEMPLATE_FIELD = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")


def _doc_field(config: dict[str, Any], key: str, doc: Any) -> Any:
    """The document value lm-eval's ``config[key]`` names: a plain field name (``label``) or a
    template of one field (``{{label}}``); ``None`` for anything else (a function, an expression)."""
    spec = config.get(key)
    if not isinstance(spec, str) or not isinstance(doc, dict):
        return None
    m = _TEMPLATE_FIELD.match(spec.strip())
    name = m.group(1) if m else spec
    return doc.get(name)


@dataclass
class _Choices:
    """What a multiple-choice document's rows need: log-likelihoods, choice texts, the choice
    lengths lm-eval's ``acc_norm`` divides by (``None``: not in the file), the gold index, and
    where the gold came from."""

    loglik: list[float]
    texts: list[str]
    lengths: list[int] | None
    gold: int
    gold_from: str


def _mc_doc(path: Path, line: int, doc: dict[str, Any], config: dict[str, Any], delim: str) -> _Choices:
    """A multiple-choice document of either of lm-eval's forms:

    - one context and one continuation per choice (``arguments.gen_args_<i>.arg_1``, the target
      delimiter stripped); gold = ``target``, an index, or the gold answer's text (its index among
      the choices, as lm-eval takes it);
    - one context per choice and one shared continuation (winogrande: ``doc_to_text`` gives the gold
      index): gold = the document field ``doc_to_text`` names; when ``doc_to_text`` is a function
      (which labledger does not run), the index lm-eval's own per-document ``acc`` implies (``acc``
      1: the highest log-likelihood; ``acc`` 0 of two choices: the other one), else an error. The
      choices are the document field ``doc_to_choice`` names (their lengths divide ``acc_norm``'s
      log-likelihoods, as lm-eval does); when it is a function, each context's last line, and
      ``acc_norm`` is left out (the lengths are not in the file).
    """
    logliks = _loglik(path, line, doc.get("filtered_resps"))
    k = len(logliks)
    args = doc.get("arguments")
    if not isinstance(args, dict) or len(args) != k:
        raise _fail(path, line, "arguments", f"must hold one request per choice ({k})")
    contexts, conts = [], []
    for i in range(k):
        req = args.get(f"gen_args_{i}")
        cont = req.get("arg_1") if isinstance(req, dict) else None
        if not isinstance(cont, str):
            raise _fail(path, line, f"arguments.gen_args_{i}.arg_1", "must be the choice's continuation string")
        conts.append(cont)
        contexts.append(req.get("arg_0") if isinstance(req, dict) else None)
    target = doc.get("target")
    if k > 1 and len(set(conts)) == 1 and all(isinstance(c, str) for c in contexts) and len(set(contexts)) > 1:
        choice_list = _doc_field(config, "doc_to_choice", doc.get("doc"))
        if isinstance(choice_list, list) and len(choice_list) == k and all(isinstance(c, str) for c in choice_list):
            texts, lengths = list(choice_list), [len(c) for c in choice_list]
        else:  # doc_to_choice is a function: each choice's context, its last line (few-shot examples before it)
            texts, lengths = [str(c).rsplit("\n", 1)[-1] for c in contexts], None
        field_gold = _doc_field(config, "doc_to_text", doc.get("doc"))
        if isinstance(field_gold, str) and field_gold.isdigit():
            field_gold = int(field_gold)
        if isinstance(field_gold, int) and not isinstance(field_gold, bool):
            gold, gold_from = field_gold, f"doc.{config.get('doc_to_text')} (doc_to_text)"
        else:
            acc = doc.get("acc")
            pick = logliks.index(max(logliks))
            if acc in (1, 1.0, True):
                gold = pick
            elif acc in (0, 0.0, False) and k == 2:
                gold = 1 - pick
            else:
                raise _fail(
                    path,
                    line,
                    "doc_to_text",
                    "gives the gold index of this one-context-per-choice document through a function labledger "
                    f"does not run, and lm-eval's acc ({acc!r} over {k} choices) does not tell which choice it is",
                )
            gold_from = "lm-eval's per-document acc (doc_to_text is a function)"
        if not 0 <= gold < k:
            raise _fail(path, line, "doc_to_text", f"must give a choice index in 0..{k - 1}; got {gold}")
        return _Choices(logliks, texts, lengths, gold, gold_from)
    texts = strip_prefix(conts, delim)
    if isinstance(target, int) and not isinstance(target, bool):
        gold, gold_from = target, "target (index)"
    elif isinstance(target, str) and target in texts:
        gold, gold_from = texts.index(target), "target (the answer's text)"
    elif isinstance(target, str) and target.strip().isdigit():
        gold, gold_from = int(target), "target (index)"
    else:
        raise _fail(
            path,
            line,
            "target",
            f"must be the gold choice's index or its text; got {str(target)[:40]!r}, not one of the {k} choices",
        )
    if not 0 <= gold < k:
        raise _fail(path, line, "target", f"must be a choice index in 0..{k - 1}")
    return _Choices(logliks, texts, [len(c) for c in texts], gold, gold_from)


def _task_rows(
    path: Path,
    task: str,
    samples: Path,
    config: dict[str, Any],
    results: dict[str, Any],
    expected: int | None = None,
    partial: bool = False,
    *,
    columns: bool = True,
) -> list[HarnessTask]:
    """The result sets of one samples file: built as columns when the file's shape allows
    (:func:`_metric_columns`), else row by row (:func:`_metric_rows`, whose errors name the line).

    ``expected`` is the number of documents the results file states (``n-samples.effective``): a
    filter with fewer (a truncated file) is an error naming the file, unless ``partial``, which
    imports what is there and says so in the set's ``info`` (``documents``, ``n_samples``)."""
    by_filter = _metric_columns(samples, config) if columns else None
    if by_filter is None:
        by_filter = _metric_rows(samples, config)
    out = _tasks_of(task, samples, by_filter, results)
    if expected is not None:
        for t in out:
            n = max((len(m.rows) for m in t.metrics), default=None)
            if n is not None and n < expected:
                if not partial:
                    raise _fail(
                        samples,
                        None,
                        "n-samples",
                        f"is {expected} in {path.name} but the file holds {n} documents (filter "
                        f"{t.info['filter']}): a truncated file? --partial imports what is there",
                    )
                t.info["documents"], t.info["n_samples"] = n, expected
    return out


def _metric_rows(samples: Path, config: dict[str, Any]) -> dict[str, dict[str, HarnessMetric]]:
    """``{filter: {metric: HarnessMetric}}`` with one row dict per document and metric."""
    mc = config.get("output_type") == "multiple_choice"
    delim = config.get("target_delimiter", " ")
    by_filter: dict[str, dict[str, HarnessMetric]] = {}
    golds: dict[str, set[str]] = {}
    for line, doc in load_jsonl(samples):
        if not isinstance(doc, dict):
            raise _fail(samples, line, "doc_id", "each line must be a JSON object (one document)")
        for key in ("doc_id", "filter", "metrics"):
            if key not in doc:
                raise _fail(samples, line, key, "is missing (lm-eval --log_samples writes it on every line)")
        filt, metric_names = str(doc["filter"]), doc["metrics"]
        if not isinstance(metric_names, list):
            raise _fail(samples, line, "metrics", "must be a list of metric names")
        doc_id = str(doc["doc_id"])
        extras = {
            "item_hash": f"{doc.get('doc_hash', '')}/{doc.get('prompt_hash', '')}",
            "target": doc.get("target"),
            "filter": filt,
        }
        args = doc.get("arguments")
        first = args.get("gen_args_0") if isinstance(args, dict) else None
        if isinstance(first, dict):
            extras["prompt"] = first.get("arg_0")
        mets = by_filter.setdefault(filt, {})
        form: _Choices | None = None
        ll_row: dict[str, Any] | None = None
        for name in metric_names:
            if name not in doc:
                raise _fail(samples, line, name, f"is missing (listed in 'metrics' of document {doc_id})")
            value = doc[name]
            if mc and name in ("acc", "acc_norm"):
                if form is None:
                    form = _mc_doc(samples, line, doc, config, delim)
                    golds.setdefault(filt, set()).add(form.gold_from)
                logliks = form.loglik
                if name == "acc":
                    ll = logliks
                elif form.lengths is None:
                    # one context per choice, the choices' lengths (lm-eval's divisor) not in the file
                    mets.setdefault(name, HarnessMetric(name, "skipped", [], ""))
                    continue
                else:
                    ll = [v / max(n, 1) for v, n in zip(logliks, form.lengths)]
                # the row choice_rows would build, plus what lm-eval recorded (built once, no copies)
                row = {"id": doc_id, "task": name, "gold": str(form.gold), "probs": softmax(ll), "loglik": logliks}
                row.update(extras)
                row["prediction"] = form.texts[ll.index(max(ll))]
                row["choices"] = form.texts
                row["harness_score"] = as_float(value)
                shape, spec = "choices", "accuracy"
            elif name in PERPLEXITY and _pair(value):
                doc_ll, units = float(value[0]), value[1]
                if ll_row is None:  # the document's row (before the metrics' entries, as the columns have it)
                    ll_row = score_row(doc_id, LOGLIK, doc_ll)
                    ll_row.update(extras)
                    mets.setdefault(LOGLIK, HarnessMetric(LOGLIK, "scores", [], "mean")).add_row(ll_row)
                ll_row[PERPLEXITY[name]] = units
                pm = mets.setdefault(name, HarnessMetric(name, "perplexity", [], "", extra={"_ll": [], "_units": []}))
                pm.extra["_ll"].append(doc_ll)
                pm.extra["_units"].append(units)
                continue
            elif isinstance(value, list) and len(value) == 2 and name in CORPUS:
                row = {"id": doc_id, "task": name, "gold": str(value[0]), "pred": str(value[1]), **extras}
                shape, spec = "labels", CORPUS[name]
            elif as_float(value) is not None:
                row = score_row(doc_id, name, value)
                resp = doc.get("filtered_resps")
                row.update(extras, prediction=resp[0] if isinstance(resp, list) and len(resp) == 1 else resp)
                shape, spec = "scores", "mean"
            else:
                # corpus metrics labledger cannot recompute (bleu, chrf, ter...): left out, said in the note
                mets.setdefault(name, HarnessMetric(name, "skipped", [], ""))
                continue
            mets.setdefault(name, HarnessMetric(name, shape, [], spec)).add_row(row)
    for filt, sources in golds.items():
        for m in by_filter[filt].values():
            if m.shape == "choices":
                m.extra["gold_from"] = sorted(sources)
    return by_filter


class _Request(msgspec.Struct, gc=False):
    """One request of a document's ``arguments`` (``arg_0`` the context, ``arg_1`` the continuation)."""

    arg_0: Any = None
    arg_1: Any = None


class _FirstChoice(msgspec.Struct, gc=False):
    """The first request of a multiple-choice document: the choice's continuation and the context."""

    arg_1: str
    arg_0: Any = None


class _Choice(msgspec.Struct, gc=False):
    """Another request of a multiple-choice document: only its continuation (the context, the same
    as the first request's, is skipped unparsed)."""

    arg_1: str


_FIXED = ("doc_id", "filter", "metrics", "target", "arguments", "filtered_resps", "doc_hash", "prompt_hash")


def _doc_decoder(metric_names: list[Any], choices: int | None = None) -> msgspec.json.Decoder | None:
    """A decoder of one samples line that keeps only what the rows need (``doc`` and ``resps`` are
    skipped unparsed), with one field per metric (``UNSET`` where a line lacks it).

    With ``choices`` (a multiple-choice task's K), ``arguments`` must hold exactly ``gen_args_0`` to
    ``gen_args_{K-1}`` with string continuations, and ``filtered_resps`` K ``[loglikelihood,
    is_greedy]`` pairs, the log-likelihood decoded straight to a float from its string (what
    ``float()`` of it gives: checked by :func:`_loglik_matrix`); a line of another shape fails the
    decode, and the file is read with the plain decoder instead."""
    if not all(type(m) is str for m in metric_names) or set(metric_names) & set(_FIXED):
        return None
    arguments: Any = dict[str, _Request] | None
    resps: Any = Any
    if choices is not None:
        if choices < 1:
            return None
        arguments = msgspec.defstruct(
            "Arguments",
            [(f"gen_args_{i}", _FirstChoice if i == 0 else _Choice) for i in range(choices)],
            forbid_unknown_fields=True,
            gc=False,
        )
        resps = list[tuple[float, bool]]
    doc = msgspec.defstruct(
        "Doc",
        [
            ("doc_id", Any),
            ("filter", Any),
            ("metrics", Any),
            ("target", Any, None),
            ("arguments", arguments, None),
            ("filtered_resps", resps, None),
            ("doc_hash", Any, ""),
            ("prompt_hash", Any, ""),
            *((f"m{i}", Any, msgspec.UNSET) for i in range(len(metric_names))),
        ],
        rename={f"m{i}": m for i, m in enumerate(metric_names)},
        gc=False,
    )
    return msgspec.json.Decoder(doc, strict=choices is None)


def _floats(values: list[Any]) -> list[float | None]:
    """``[as_float(v) for v in values]``, without a call per value when all are finite floats."""
    if set(map(type, values)) == {float} and np.isfinite(np.asarray(values, dtype=np.float64)).all():
        return values
    return [as_float(v) for v in values]


def _exp_is_math_exp() -> bool:
    """Whether numpy's float64 ``exp`` computes what :func:`math.exp` computes. numpy calls the C
    library's ``exp`` (as :mod:`math` does) unless it was built with a kernel of its own for the CPU
    (AVX-512); an own kernel differs from the C library's in the last bit on many inputs, which a
    probe over every magnitude the softmax meets finds at once.

    >>> isinstance(_exp_is_math_exp(), bool)
    True
    """
    probe = -np.concatenate([np.geomspace(1e-300, 745.0, 6000), np.linspace(0.0, 60.0, 6001)[1:] * np.pi])
    expected = np.fromiter(map(math.exp, probe.tolist()), dtype=np.float64, count=probe.size)
    return bool(np.array_equal(np.exp(probe), expected))


_NUMPY_EXP: bool | None = None


def _exp(x: np.ndarray) -> np.ndarray:
    """``math.exp`` of every value of ``x``, vectorised where numpy's ``exp`` is the same function."""
    global _NUMPY_EXP
    if _NUMPY_EXP is None:
        _NUMPY_EXP = _exp_is_math_exp()
    if _NUMPY_EXP:
        return np.exp(x)
    return np.fromiter(map(math.exp, x.ravel().tolist()), dtype=np.float64, count=x.size).reshape(x.shape)


def _softmax_rows(ll: np.ndarray) -> np.ndarray:
    """:func:`~labledger.importers.harness.softmax` of each row, to the last bit (``math.exp`` and
    ``math.fsum``, as the row path computes it).

    >>> _softmax_rows(np.array([[0.0, 0.0]])).tolist()
    [[0.5, 0.5]]
    """
    ex = _exp(ll - ll.max(axis=1, keepdims=True))
    total = np.fromiter(map(math.fsum, ex.tolist()), dtype=np.float64, count=len(ex))
    return ex / total[:, None]


def _metric_columns(samples: Path, config: dict[str, Any]) -> dict[str, dict[str, HarnessMetric]] | None:
    """What :func:`_metric_rows` builds, as :class:`ResultColumns` (one block per metric), from one
    decode of the file; ``None`` when the file is not in the common shape (every document of a
    filter with the same metrics, one number of choices per task, nothing malformed), and the row
    path then reads it (and names the line of any fault)."""
    try:
        data = samples.read_bytes()
    except OSError:
        return None
    if not data.endswith(b"\n") or data.startswith(b"\xef\xbb\xbf"):
        return None
    try:
        first = orjson.loads(data[: data.index(b"\n")])
        names = first["metrics"]
        resps = first.get("filtered_resps")
    except (orjson.JSONDecodeError, TypeError, KeyError, ValueError, AttributeError):
        return None
    if not isinstance(names, list):
        return None
    attempts: list[int | None] = [None]
    if config.get("output_type") == "multiple_choice" and set(names) <= {"acc", "acc_norm"} and resps:
        attempts.insert(0, len(resps) if isinstance(resps, list) else 0)  # log-likelihoods decoded as floats
    for choices in attempts:
        dec = _doc_decoder(names, choices)
        if dec is None:
            continue
        try:
            docs = dec.decode_lines(data)
        except (msgspec.DecodeError, TypeError, ValueError):
            continue
        try:
            out = _columns_of(docs, names, config, typed=choices is not None)
        except (TypeError, ValueError, AttributeError, IndexError, KeyError):
            out = None
        if out is not None:
            return out
    return None


def _columns_of(
    docs: list[Any], names: list[str], config: dict[str, Any], *, typed: bool = False
) -> dict[str, dict[str, HarnessMetric]] | None:
    """The metrics of each filter from decoded documents (``typed``: decoded by the
    multiple-choice decoder of :func:`_doc_decoder`), or ``None`` for the row path to decide."""
    mc = config.get("output_type") == "multiple_choice"
    delim = config.get("target_delimiter", " ")
    by_filter: dict[str, list[Any]] = {}
    for d in docs:
        if type(d.filter) is not str or d.metrics != names:
            return None
        by_filter.setdefault(d.filter, []).append(d)
    out: dict[str, dict[str, HarnessMetric]] = {}
    for filt, group in by_filter.items():
        n = len(group)
        ids = list(map(str, map(attrgetter("doc_id"), group)))
        common = {
            "item_hash": [f"{d.doc_hash}/{d.prompt_hash}" for d in group],
            "target": list(map(attrgetter("target"), group)),
            "filter": [filt] * n,
        }
        if typed:
            prompts = list(map(attrgetter("arguments.gen_args_0.arg_0"), group))
        else:
            firsts = [d.arguments.get("gen_args_0") if d.arguments is not None else None for d in group]
            prompts = [MISSING if r is None else r.arg_0 for r in firsts]
        mets: dict[str, HarnessMetric] = {}
        choice_cols: dict[str, Any] | None = None
        for i, name in enumerate(names):
            values = list(map(attrgetter(f"m{i}"), group))
            if msgspec.UNSET in values:
                return None
            if mc and name in ("acc", "acc_norm"):
                if choice_cols is None:
                    choice_cols = (_typed_choice_columns if typed else _choice_columns)(group, delim, prompts)
                    if choice_cols is None:
                        return None
                ll = choice_cols["loglik"] if name == "acc" else choice_cols["norm"]
                probs = Probs(choice_cols["labels"], _softmax_rows(ll))
                pick = ll.argmax(axis=1).tolist()
                fields = {
                    "probs": probs,
                    "loglik": choice_cols["loglik"],
                    **common,
                    "prompt": prompts,
                    "prediction": [c[j] for c, j in zip(choice_cols["choices"], pick)],
                    "choices": choice_cols["choices"],
                    "harness_score": _floats(values),
                }
                cols = ResultColumns(name, ids, choice_cols["gold"], fields)
                shape, spec = "choices", "accuracy"
            elif name in PERPLEXITY and all(map(_pair, values)):
                lls, units = [float(v[0]) for v in values], [v[1] for v in values]
                loglik = mets.get(LOGLIK)
                if loglik is None:
                    fields = {"pred": lls, **common, "prompt": prompts}
                    loglik = mets[LOGLIK] = HarnessMetric(
                        LOGLIK, "scores", ResultColumns(LOGLIK, ids, [1.0] * n, fields), "mean"
                    )
                assert isinstance(loglik.rows, ResultColumns)
                if loglik.rows.fields["pred"] != lls:
                    return None  # the metrics disagree on a document's log-likelihood: the row path decides
                loglik.rows.fields[PERPLEXITY[name]] = units
                mets[name] = HarnessMetric(name, "perplexity", [], "", extra={"_ll": lls, "_units": units})
                continue
            elif name in CORPUS and all(isinstance(v, list) and len(v) == 2 for v in values):
                fields = {"pred": [str(v[1]) for v in values], **common, "prompt": prompts}
                cols = ResultColumns(name, ids, [str(v[0]) for v in values], fields)
                shape, spec = "labels", CORPUS[name]
            elif all(
                as_float(v) is not None and not (isinstance(v, list) and len(v) == 2 and name in CORPUS) for v in values
            ):
                resps = [d.filtered_resps for d in group]
                fields = {
                    "pred": [float(v) for v in values],
                    **common,
                    "prompt": prompts,
                    "prediction": [r[0] if isinstance(r, list) and len(r) == 1 else r for r in resps],
                }
                cols = ResultColumns(name, ids, [1.0] * n, fields)
                shape, spec = "scores", "mean"
            elif all(
                as_float(v) is None and not (isinstance(v, list) and len(v) == 2 and name in CORPUS) for v in values
            ):
                mets[name] = HarnessMetric(name, "skipped", [], "")
                continue
            else:
                return None  # a metric whose documents have different shapes: the row path decides
            mets[name] = HarnessMetric(name, shape, cols, spec)
            if shape == "choices":
                mets[name].extra["gold_from"] = ["target (index)"]
        out[filt] = mets
    return out


def _choice_columns(group: list[Any], delim: str, prompts: list[Any]) -> dict[str, Any] | None:
    """Per-choice log-likelihoods (raw and length-normalised), choice texts and gold indices of a
    multiple-choice task, when every document has the same number of choices and valid fields."""
    resps = list(map(attrgetter("filtered_resps"), group))
    if not resps or set(map(type, resps)) != {list}:
        return None
    k = len(resps[0])
    if not k or set(map(len, resps)) != {k} or MISSING in prompts:
        return None
    each = list(chain.from_iterable(resps))
    if set(map(type, each)) == {list} and all(map(len, each)):  # [["-0.1", "False"], ...]: as lm-eval writes
        flat = list(map(float, [r[0] for r in each]))
    else:
        flat = [float(r[0] if isinstance(r, list) and r else r) for r in each]
    keys = [f"gen_args_{i}" for i in range(k)]
    arguments = list(map(attrgetter("arguments"), group))
    if None in arguments or set(map(len, arguments)) != {k}:
        return None
    conts = [args[key].arg_1 for args in arguments for key in keys]
    if set(map(type, conts)) != {str}:
        return None
    loglik = np.asarray(flat, dtype=np.float64).reshape(len(group), k)
    return _choice_fields(group, loglik, strip_prefix(conts, delim))


def _typed_choice_columns(group: list[Any], delim: str, prompts: list[Any]) -> dict[str, Any] | None:
    """:func:`_choice_columns` of documents read by the multiple-choice decoder (every one with
    the same K requests and K log-likelihoods, already floats)."""
    k = len(type(group[0].arguments).__struct_fields__)  # the decoder's K: every document's requests
    if set(map(len, map(attrgetter("filtered_resps"), group))) != {k}:
        return None
    flat = list(map(itemgetter(0), chain.from_iterable(map(attrgetter("filtered_resps"), group))))
    loglik = np.asarray(flat, dtype=np.float64).reshape(len(group), k)
    if not loglik.all():  # a zero: the decoder reads "-0" as 0.0, float() as -0.0; the plain decoder decides
        return None
    conts: Any = attrgetter(*(f"arguments.gen_args_{i}.arg_1" for i in range(k)))  # a K-tuple (K > 1)
    flat_conts: list[str] = list(chain.from_iterable(map(conts, group))) if k > 1 else list(map(conts, group))
    return _choice_fields(group, loglik, strip_prefix(flat_conts, delim))


def _choice_fields(group: list[Any], loglik: np.ndarray, conts: list[str]) -> dict[str, Any] | None:
    k = loglik.shape[1]
    choices = [conts[i : i + k] for i in range(0, len(conts), k)]
    if k > 1 and any(len(set(c)) == 1 for c in choices):
        return None  # one context per choice and a shared continuation: the row path reads it
    targets = list(map(attrgetter("target"), group))
    kinds = set(map(type, targets))
    if kinds == {str} and not any(t in c for t, c in zip(targets, choices)):
        gold = list(map(int, targets))  # an index written as a string (a ValueError: the row path decides)
    elif kinds == {int}:
        gold = targets
    else:
        return None  # a gold given as the answer's text: the row path reads it
    if min(gold) < 0 or max(gold) >= k or not np.isfinite(loglik).all():
        return None
    lengths = np.fromiter(map(len, conts), dtype=np.float64, count=len(conts)).reshape(loglik.shape)
    lengths[lengths < 1] = 1
    return {
        "loglik": loglik,
        "norm": loglik / lengths,
        "choices": choices,
        "gold": [str(g) for g in gold],
        "labels": tuple(str(i) for i in range(k)),
    }


def strip_prefix(texts: list[str], prefix: str) -> list[str]:
    """``[t[len(prefix):] if t.startswith(prefix) else t for t in texts]``, in a few passes over one
    joined string when every text starts with ``prefix`` (lm-eval's continuations all begin with
    the target delimiter).

    >>> strip_prefix([" a", " b c", "d"], " "), strip_prefix([" a", " b"], " ")
    (['a', 'b c', 'd'], ['a', 'b'])
    """
    if not prefix:
        return texts
    cut = len(prefix)
    if texts and "\0" not in prefix:
        joined = "\0".join(texts)
        if joined.count("\0") == len(texts) - 1 and ("\0" + joined).count("\0" + prefix) == len(texts):
            return joined[cut:].split("\0" + prefix)  # NULs only between texts, each followed by the prefix
    return [t[cut:] if t.startswith(prefix) else t for t in texts]


def _tasks_of(
    task: str, samples: Path, by_filter: dict[str, dict[str, HarnessMetric]], results: dict[str, Any]
) -> list[HarnessTask]:
    out = []
    for rank, (filt, mets) in enumerate(by_filter.items()):
        label = set_name(task) if filt == "none" and len(by_filter) == 1 else set_name(task, filt)
        kept = []
        values: dict[str, ItemMean] = {}
        for m in mets.values():
            if m.shape == "skipped":
                continue
            m.value = as_float(results.get(f"{m.name},{filt}"))
            m.stderr = as_float(results.get(f"{m.name}_stderr,{filt}"))
            m.stderr_method = (
                "bootstrap (lm-eval bootstrap_stderr)"
                if m.shape in ("labels", "perplexity")
                else "sample sd (n-1) / sqrt(n) (lm-eval mean_stderr)"
            )
            if m.shape == "perplexity":
                lls, units = m.extra.pop("_ll"), m.extra.pop("_units")
                unit = PERPLEXITY[m.name]
                recomputed = perplexity(m.name, lls, units)
                form = (
                    f"-Σ loglikelihood / Σ {unit} / ln 2"
                    if m.name == "bits_per_byte"
                    else f"exp(-Σ loglikelihood / Σ {unit})"
                )
                m.extra.update(
                    recomputed=recomputed, recomputed_from=f"{form} over the {len(lls)} documents' {LOGLIK} rows"
                )
                if recomputed is not None:
                    values[m.name] = (recomputed, len(lls), None)
            elif m.shape == "scores" and m.name == LOGLIK and m.value is None:
                m.stderr_method = None  # lm-eval reports no mean log-likelihood: labledger's own, with its CI
            value = _item_mean(m)
            if value is not None:
                values[m.name] = value
            kept.append(m)
        skipped = sorted(m.name for m in mets.values() if m.shape == "skipped")
        # the first filter lm-eval wrote (its filter_list order) stands for the task in a suite
        info: dict[str, Any] = {"filter": filt, "primary": rank == 0, "skipped_metrics": skipped}
        gold_from = sorted({g for m in kept for g in m.extra.get("gold_from") or ()})
        if gold_from:
            info["gold_from"] = gold_from
        out.append(HarnessTask(label, task, kept, info=info, files=[samples.name], values=values))
    return out


def _item_mean(m: HarnessMetric) -> ItemMean | None:
    """``(value, n, stderr)`` of a metric lm-eval aggregates by the mean over its items, from the
    rows (``accuracy`` of a choices metric: the first highest probability against the gold, as
    lm-eval's ``argmax``; the mean ``pred`` of a scores metric) and its standard error as lm-eval's
    ``mean_stderr`` forms it (sample sd with n - 1 over sqrt(n); None for one item), for the
    groups' recomputation; None for other shapes (a corpus metric, a perplexity)."""
    rows = m.rows
    if not len(rows) or m.shape not in ("choices", "scores"):
        return None
    if isinstance(rows, ResultColumns):
        if m.shape == "scores":
            per_item = np.asarray(rows.fields["pred"], dtype=np.float64)
        else:
            probs = rows.fields["probs"]
            if not isinstance(probs, Probs):
                return None
            labels = np.asarray(probs.labels)[probs.matrix.argmax(axis=1)]
            per_item = (labels == np.asarray(rows.gold, dtype=str)).astype(np.float64)
    elif m.shape == "scores":
        per_item = np.fromiter((r["pred"] for r in rows), dtype=np.float64, count=len(rows))
    else:
        hits = []
        for r in rows:
            p = r["probs"]
            hits.append(max(p, key=p.__getitem__) == r["gold"])  # the first highest, in choice order
        per_item = np.asarray(hits, dtype=np.float64)
    n = len(per_item)
    value = math.fsum(per_item.tolist()) / n
    se = float(np.std(per_item, ddof=1)) / math.sqrt(n) if n > 1 else None
    return value, n, se


def _leaves(group: str, subtasks: dict[str, Any], seen: frozenset[str] = frozenset()) -> list[str]:
    """The tasks under ``group`` (its subgroups' tasks, recursively), in order."""
    out: list[str] = []
    for child in subtasks.get(group) or ():
        if child in subtasks and child not in seen:
            out.extend(_leaves(child, subtasks, seen | {group}))
        elif child not in out:
            out.append(str(child))
    return out


def group_stderr(parts: Sequence[ItemMean], *, by_size: bool) -> float | None:
    """A group's standard error from its tasks' ``(value, n, stderr)``, as lm-eval (0.4.13,
    ``lm_eval.api.group``) forms it: weighted by size, ``pooled_sample_stderr`` (the tasks'
    variances pooled, ``sqrt(Σ (n_i - 1) n_i se_i² / (N - k) / N)``); else
    ``unweighted_mean_stderr`` (``sqrt(Σ se_i²) / k``). None when a task has no stderr.

    >>> round(group_stderr([(0.5, 4, 0.25), (0.5, 4, 0.25)], by_size=True), 6)
    0.176777
    >>> round(group_stderr([(0.5, 4, 0.25), (0.5, 4, 0.25)], by_size=False), 6)
    0.176777
    """
    ses = [se for _, _, se in parts]
    if not parts or any(se is None for se in ses):
        return None
    known = [float(se) for se in ses if se is not None]
    if not by_size:
        return math.sqrt(math.fsum(se * se for se in known)) / len(known)
    sizes = [n for _, n, _ in parts]
    total = sum(sizes)
    if total <= len(sizes):
        return None
    pooled = math.fsum((n - 1) * se * se * n for n, se in zip(sizes, known)) / (total - len(sizes))
    return math.sqrt(pooled / total)


def _stderr_note(reported: float | None, parts: Sequence[ItemMean], by_size: bool | None) -> str:
    """The group stderr's part of a :func:`group_notes` line: lm-eval's beside the one recomputed
    from the tasks' items with the weighting that gave its value (``by_size`` None: neither did)."""
    if reported is None:
        return ""
    pooled, unweighted = group_stderr(parts, by_size=True), group_stderr(parts, by_size=False)
    mine = pooled if by_size else unweighted if by_size is not None else None
    how = (
        "the tasks' stderrs pooled (lm-eval's pooled_sample_stderr)"
        if by_size
        else "the root of the tasks' summed squared stderrs over their number (lm-eval's unweighted_mean_stderr)"
    )
    if mine is not None and abs(mine - reported) <= 1e-9:
        return f"; stderr {mine:.6f} = lm-eval's {reported:.6f}, {how}, each task's from its items (sd with n - 1 / sqrt(n))"
    if pooled is None or unweighted is None:
        return f"; stderr {reported:.6f} as lm-eval reported it, not recomputed (a task has no stderr: one document)"
    return (
        f"; stderr: lm-eval {reported:.6f}, DIFFERENT from both recomputed from the tasks' items (pooled "
        f"{pooled:.6f}, unweighted {unweighted:.6f}): lm-eval pools the stderrs its tasks reported, which differ "
        "from the items' when a task's stderr is not the sample sd / sqrt(n) (a bootstrap, or another release's formula)"
    )


def group_notes(data: dict[str, Any], values: dict[tuple[str, str], dict[str, ItemMean]]) -> list[str]:
    """One line per group metric lm-eval reported (``groups``, an ``aggregate_metric_list``):
    its value beside the one recomputed from the member tasks' items (``values``: ``{(task,
    filter): {metric: (value, n, stderr)}}`` of the stored sets), weighted as lm-eval weights them,
    and its stderr beside the one recomputed the same way (:func:`group_stderr`).

    lm-eval (0.4.13) averages a group's metric over every task under it, subgroups' included, each
    weighted by its number of documents (``weight_by_size: true``) or not; earlier releases average
    the group's direct members (a subgroup counted as one). The results file does not record
    ``weight_by_size``: the line says which weighting gives lm-eval's value (both when the sizes
    are equal), or that none does, with both values.

    >>> data = {"groups": {"g": {"acc,none": 0.5, "acc_stderr,none": "N/A"}}, "group_subtasks": {"g": ["a", "b"]}}
    >>> group_notes(data, {("a", "none"): {"acc": (1.0, 2, 0.0)}, ("b", "none"): {"acc": (0.0, 2, 0.0)}})[0]
    "group g: acc 0.500000 = lm-eval's 0.500000, recomputed from the 4 documents of its 2 tasks (a, b) weighted by size (lm-eval's weight_by_size: true; or false: the same for equal sizes)"
    """
    raw_sub = data.get("group_subtasks")
    subtasks: dict[str, Any] = raw_sub if isinstance(raw_sub, dict) else {}
    raw_groups = data.get("groups")
    raw_results = data.get("results")
    results: dict[str, Any] = raw_results if isinstance(raw_results, dict) else {}
    groups: dict[str, Any] = (
        raw_groups if isinstance(raw_groups, dict) else {g: results[g] for g in subtasks if g in results}
    )
    out = []
    for group, reported in groups.items():
        if not isinstance(reported, dict):
            continue
        leaves = _leaves(group, subtasks)
        for key, raw in reported.items():
            metric, _, filt = str(key).partition(",")
            value = as_float(raw)
            if not filt or metric.endswith("_stderr") or value is None:
                continue
            reported_se = as_float(reported.get(f"{metric}_stderr,{filt}"))
            head = f"group {group}: {metric}{'' if filt == 'none' else f' ({filt})'}"
            parts = {t: values.get((t, filt), {}).get(metric) for t in leaves}
            missing = [t for t, v in parts.items() if v is None]
            if not leaves or missing:
                why = "no member task named" if not leaves else f"not recomputed for {', '.join(missing[:5])}"
                out.append(f"{head} = {value:.6f} as lm-eval reported it; not recomputed here ({why})")
                continue
            vals = [v for v in parts.values() if v is not None]
            n = sum(k for _, k, _ in vals)
            by_size = sum(v * k for v, k, _ in vals) / n if n else math.nan
            equal = sum(v for v, _, _ in vals) / len(vals)
            # earlier releases: the direct members, a subgroup as one member (its own value)
            direct: list[float] = []
            for child in subtasks.get(group) or ():
                sub = [parts[t] for t in _leaves(child, subtasks)] if child in subtasks else [parts[str(child)]]
                got = [v for v in sub if v is not None]
                size = sum(k for _, k, _ in got)
                if not got or len(got) < len(sub) or not size:
                    direct = []
                    break
                direct.append(sum(v * k for v, k, _ in got) / size)  # a subgroup: its size-weighted value
            members = f"the {n} documents of its {len(leaves)} tasks ({', '.join(leaves[:6])}{', ...' if len(leaves) > 6 else ''})"
            sizes_equal = len({k for _, k, _ in vals}) == 1
            if abs(by_size - value) <= 1e-9:
                how = "weighted by size (lm-eval's weight_by_size: true" + (
                    "; or false: the same for equal sizes)" if sizes_equal else ")"
                )
                se = _stderr_note(reported_se, vals, True)
                out.append(f"{head} {by_size:.6f} = lm-eval's {value:.6f}, recomputed from {members} {how}{se}")
            elif abs(equal - value) <= 1e-9:
                se = _stderr_note(reported_se, vals, False)
                out.append(
                    f"{head} {equal:.6f} = lm-eval's {value:.6f}, recomputed from {members}, each task weighted "
                    f"equally (lm-eval's weight_by_size: false){se}"
                )
            elif direct and abs(sum(direct) / len(direct) - value) <= 1e-9:
                se = _stderr_note(reported_se, vals, None)
                out.append(
                    f"{head} {sum(direct) / len(direct):.6f} = lm-eval's {value:.6f}, recomputed from {members}: the "
                    f"mean of its direct members, a subgroup counted once (weight_by_size: false, before lm-eval 0.4.13){se}"
                )
            else:
                se = _stderr_note(reported_se, vals, None)
                out.append(
                    f"{head}: lm-eval {value:.6f}, DIFFERENT from both weightings recomputed from {members} "
                    f"(by size {by_size:.6f}, equal {equal:.6f}): a member's documents or values differ from lm-eval's{se}"
                )
    return out


def _run_for(
    source: Source,
    stage: Ledger,
    opts: ImportOptions,
    results_path: Path,
    several: bool,
    pool: ProcessPoolExecutor | None = None,
) -> ImportedRun:
    data = read_results(results_path)
    raw_cfg, raw_configs = data.get("config"), data.get("configs")
    cfg: dict[str, Any] = raw_cfg if isinstance(raw_cfg, dict) else {}
    configs: dict[str, Any] = raw_configs if isinstance(raw_configs, dict) else {}
    samples = _samples_files(results_path)
    notes: list[str] = []
    run_notes: list[str] = []
    errors: list[LedgerError] = []
    recomputed: dict[tuple[str, str], dict[str, ItemMean]] = {}
    version = data.get("lm_eval_version")

    raw_n = data.get("n-samples")
    n_samples: dict[str, Any] = raw_n if isinstance(raw_n, dict) else {}

    def size(task: str) -> tuple[int | None, bool]:
        """What :func:`_task_rows` checks a task's file against: lm-eval's ``n-samples.effective``."""
        stated = n_samples.get(task)
        effective = stated.get("effective") if isinstance(stated, dict) else None
        ok = isinstance(effective, int) and not isinstance(effective, bool)
        return (effective if ok else None), opts.partial

    def tasks() -> Iterator[EncodedSet]:
        """Each samples file's result sets, checked and encoded, when the run stores them, with its
        notes (the last note after the last file): read here when asked for (one file's columns in
        memory at a time), or by the pool's workers, every file submitted at once and taken in
        order. A task whose file cannot be read is left out with its error (:func:`task_error`)."""
        jobs = {}
        parts = stage.root / "parts" / secrets.token_hex(4)
        parts.mkdir(parents=True)
        if pool is not None:
            for k, (task, path) in enumerate(samples.items()):
                if task in data["results"]:
                    args = (results_path, task, path, configs.get(task) or {}, data["results"][task], *size(task))
                    jobs[task] = pool.submit(encode_tasks, _task_rows, args, "lm-eval", version, parts / str(k))
        for k, (task, path) in enumerate(samples.items()):
            if task not in data["results"]:
                raise _fail(results_path, None, f"results.{task}", f"is missing ({path.name} has samples for it)")
            try:
                # every set of the task read, checked and encoded before any is stored (here as in a
                # worker), so a task that cannot be read is left out whole
                args = (results_path, task, path, configs.get(task) or {}, data["results"][task], *size(task))
                sets = (
                    pool_result(jobs[task], path)
                    if task in jobs
                    else encode_tasks(_task_rows, args, "lm-eval", version, parts / str(k))
                )
                failed = next((t.error for t in sets if t.error is not None), None)
                if failed is not None:
                    raise failed
            except ImportSourceError:  # a worker that died, a file that cannot be read: the whole import
                raise
            except LedgerError as exc:  # this task only: the invocation's other tasks are stored
                errors.append(task_error(exc, task))
                continue
            for t in sets:
                if t.info.get("skipped_metrics"):
                    notes.append(f"{t.name}: not recomputable here, left out: {', '.join(t.info['skipped_metrics'])}")
                if t.info.get("n_samples") is not None:
                    notes.append(
                        f"{t.name}: {t.info['documents']} of the {t.info['n_samples']} documents lm-eval states "
                        "(n-samples): a truncated samples file, imported as it is (--partial)"
                    )
                inferred = [g for g in t.info.get("gold_from") or () if "acc" in g]
                if inferred:
                    notes.append(
                        f"{t.name}: gold index taken from {inferred[0]}: its acc is lm-eval's, not recomputed independently"
                    )
                recomputed[(task, str(t.info.get("filter")))] = t.values
                yield t
        missing = sorted(t for t in data["results"] if t not in samples and t in configs)
        if missing:
            notes.append(f"no samples file (run lm-eval with --log_samples) for: {', '.join(missing)}")
        groups = group_notes(data, recomputed)
        notes.extend(groups)
        run_notes.extend(groups)

    model = str(data.get("model_name") or cfg.get("model") or "model")
    model_args = cfg.get("model_args")
    name = opts.name or (model if not model_args else f"{model} {model_args}")[:200]
    if several and opts.name:
        name = f"{opts.name}-{results_stamp(results_path)}"
    config = {
        "harness": "lm-eval",
        "harness_version": data.get("lm_eval_version"),
        "model": cfg.get("model"),
        "model_args": model_args,
        "model_name": data.get("model_name"),
        "tasks": {
            t: {
                "version": (data.get("versions") or {}).get(t),
                "n_shot": (data.get("n-shot") or {}).get(t),
                "n_samples": (data.get("n-samples") or {}).get(t),
                "hash": (data.get("task_hashes") or {}).get(t),
            }
            for t in samples
        },
        "seeds": {k: cfg.get(k) for k in ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed") if k in cfg},
        "limit": cfg.get("limit"),
        "bootstrap_iters": cfg.get("bootstrap_iters"),
        "gen_kwargs": cfg.get("gen_kwargs"),
        "git_hash": data.get("git_hash"),
        "transformers_version": data.get("transformers_version"),
        "chat_template_sha": data.get("chat_template_sha"),
    }
    started = as_float(data.get("date"))
    total = as_float(data.get("total_evaluation_time_seconds"))
    if total is None and isinstance(data.get("total_evaluation_time_seconds"), str):
        try:
            total = float(data["total_evaluation_time_seconds"])
        except ValueError:
            total = None
    ended = started + total if started is not None and total is not None else started
    return store_harness_run(
        stage,
        source,
        opts,
        harness="lm-eval",
        version=version,
        name=name,
        config=config,
        tasks=tasks(),
        started=started,
        ended=ended,
        notes=notes,
        errors=errors,
        files=[results_path, *samples.values()],
        run_notes=run_notes,
    )


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    """The runs of every results file; the samples files are decoded and encoded by worker
    processes when they are large enough (:func:`~labledger.importers.harness.import_workers`),
    else here, with the same bytes stored either way."""
    files = results_files(source.path)
    samples = [p for f in files for p in _samples_files(f).values()]
    workers = import_workers([p.stat().st_size for p in samples])
    with paused_gc(), worker_pool(workers) as pool:
        return [_run_for(source, stage, opts, f, len(files) > 1, pool) for f in files]
