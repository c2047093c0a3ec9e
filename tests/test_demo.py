"""The demo (issue 2): the seed-004 digit stepping task trained for real, checked record by record.

One quick demo runs once for the module; every test reads what it left in the ledger and
recomputes what it can independently (scikit-learn's digits, hashlib, numpy, a replay written here).
"""

from __future__ import annotations

import hashlib
import math
import struct
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

torch = pytest.importorskip("torch")
sklearn_datasets = pytest.importorskip("sklearn.datasets")

import labledger  # noqa: E402
from labledger.cli import main  # noqa: E402
from labledger.demo import DEMO_GROUP, run_demo  # noqa: E402
from labledger.demo.model import StepperMLP, encode_inputs  # noqa: E402
from labledger.demo.png import decode_gray_png, digit_png, encode_gray_png  # noqa: E402
from labledger.demo.task import (  # noqa: E402
    ACTIONS,
    DigitsData,
    RowPool,
    gold_action,
    replay_episode,
    state_text,
)
from labledger.errors import PNGError  # noqa: E402

DIGITS = sklearn_datasets.load_digits()
DELTA = {"-1": -1, "0": 0, "+1": 1}


def sign_label(target: int, current: int) -> str:
    return {-1: "-1", 0: "0", 1: "+1"}[int(np.sign(target - current))]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    ledger_dir = tmp_path_factory.mktemp("demo") / "ledger"
    summary = run_demo(ledger_dir, quick=True, site=ledger_dir.parent / "site", resamples=200)
    ledger = labledger.open_ledger(ledger_dir)
    yield summary, ledger
    ledger.close()


@pytest.fixture(scope="module")
def views(demo):
    summary, ledger = demo
    return [ledger.run(run_id) for run_id in summary.run_ids]


@pytest.fixture(scope="module")
def batches(views):
    return {v.id: list(v.batches()) for v in views}


# -- the task, standalone ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "target,current,expected",
    [
        (7, 3, "+1"),
        (3, 7, "-1"),
        (5, 5, "0"),
        (0, 9, "-1"),
        (9, 0, "+1"),
        (0, 0, "0"),
    ],
)
def test_gold_action_is_the_sign(target, current, expected):
    assert gold_action(target, current) == expected == sign_label(target, current)


def test_state_text_names_the_current_number():
    assert state_text(3) == "The current number is 3. Move it toward the digit in the image."


def test_split_is_stratified_disjoint_and_fixed():
    data = DigitsData.load()
    a, b = data.split(seed=0), data.split(seed=0)
    assert all(np.array_equal(x, y) for x, y in ((a.train, b.train), (a.test, b.test)))
    parts = [set(a.train.tolist()), set(a.validation.tolist()), set(a.test.tolist())]
    assert sum(map(len, parts)) == len(DIGITS.target) == len(set().union(*parts))
    overall = np.bincount(DIGITS.target, minlength=10) / len(DIGITS.target)
    for ids in (a.train, a.validation, a.test):
        share = np.bincount(DIGITS.target[ids], minlength=10) / len(ids)
        assert np.abs(share - overall).max() < 0.02
    small = data.split(seed=0, max_per_split={"train": 100})
    assert len(small.train) == 100 and set(small.train.tolist()) <= parts[0]
    assert set(np.unique(DIGITS.target[small.train]).tolist()) == set(range(10))


def test_row_pool_is_balanced_and_covers_every_pair():
    data = DigitsData.load()
    ids = data.split(seed=0).train[:200]
    pool = RowPool.build(data, ids, seed=3)
    counts = Counter(pool.gold.tolist())
    assert len(set(counts.values())) == 1 and len(counts) == len(ACTIONS)
    pairs = set(zip(pool.image_ids.tolist(), pool.currents.tolist()))
    assert pairs == {(i, c) for i in ids.tolist() for c in range(10)}
    for i, c, g in zip(pool.image_ids.tolist(), pool.currents.tolist(), pool.gold.tolist()):
        assert ACTIONS[g] == sign_label(int(DIGITS.target[i]), c)
    natural = Counter(sign_label(int(DIGITS.target[i]), c) for i, c in pairs)
    assert pool.natural_counts == dict(natural)
    assert natural["0"] == len(ids)  # one current in ten is the target


@pytest.mark.parametrize(
    "predictions,target,start,success,termination,steps",
    [
        (["+1"] * 5 + ["-1"] * 5, 4, 1, True, "reached_target", 3),
        (["+1"] * 5 + ["-1"] * 5, 6, 9, True, "reached_target", 3),
        (["+1"] * 10, 4, 4, True, "reached_target", 0),
        (["+1"] * 10, 4, 7, False, "left_range", 3),
        (["-1"] * 10, 4, 2, False, "left_range", 3),
        (["0"] * 10, 4, 2, False, "stalled", 1),
        (["+1", "+1", "-1", "+1", "+1", "+1", "+1", "+1", "+1", "+1"], 5, 0, False, "loop", 3),
    ],
)
def test_replay_episode_table(predictions, target, start, success, termination, steps):
    ep = replay_episode(predictions, target=target, start=start)
    assert (ep["success"], ep["termination"], len(ep["trace"])) == (success, termination, steps)
    assert ep["extra_moves"] == (0 if success else None)
    for move in ep["trace"]:
        assert move["after"] == move["before"] + DELTA[move["action"]]


def test_replay_episode_step_limit():
    ep = replay_episode(["+1"] * 10, target=9, start=0, max_steps=4)
    assert (ep["success"], ep["termination"], len(ep["trace"])) == (False, "step_limit", 4)


@settings(max_examples=50, deadline=None)
@given(arrays(np.uint8, st.tuples(st.integers(1, 20), st.integers(1, 20))))
def test_png_round_trip(pixels):
    data = encode_gray_png(pixels)
    assert np.array_equal(decode_gray_png(data), pixels)
    # Independent of our decoder: the IHDR fields and the raw scanlines through zlib.
    width, height, depth, color = struct.unpack(">IIBB", data[16:26])
    assert (height, width, depth, color) == (*pixels.shape, 8, 0)
    idat_len = struct.unpack(">I", data[33:37])[0]
    raw = zlib.decompress(data[41 : 41 + idat_len])
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, width + 1)
    assert (rows[:, 0] == 0).all() and np.array_equal(rows[:, 1:], pixels)


@pytest.mark.parametrize(
    "data,message",
    [
        (b"GIF89a", "signature"),
        (encode_gray_png(np.zeros((2, 2), np.uint8))[:-20] + b"\0" * 20, "bad CRC"),
    ],
)
def test_png_decoder_names_the_fault(data, message):
    with pytest.raises(PNGError, match=message):
        decode_gray_png(data)


def test_model_shapes():
    model = StepperMLP(hidden=16)
    x = encode_inputs(DIGITS.images[:5], np.arange(5))
    assert model(x).shape == (5, len(ACTIONS))
    assert x[:, 64:].sum(dim=1).tolist() == [1.0] * 5


# -- the ledger the demo left ------------------------------------------------------------------


def test_two_finished_runs_in_one_group(demo, views):
    summary, ledger = demo
    assert len(summary.run_ids) == 2 == len(set(summary.run_ids))
    in_group = ledger.runs(group=DEMO_GROUP)
    assert sorted(r.id for r in in_group) == sorted(summary.run_ids)
    assert {v.status for v in views} == {"finished"}
    assert len({v.config["model"]["hidden"] for v in views}) == 2
    for run, view in zip(summary.runs, views):
        assert run.dir == view.dir.resolve() and run.dir.is_dir() and run.dir.is_absolute()
        assert (summary.ledger / "runs" / run.id) == run.dir


def test_every_microbatch_with_every_sample(views, batches):
    for view in views:
        cfg = view.config["train"]
        mb_size, accum = cfg["microbatch_size"], cfg["grad_accum"]
        recs = batches[view.id]
        assert [r["microbatch"] for r in recs] == list(range(1, len(recs) + 1))
        per_step = Counter(r["optimizer_step"] for r in recs)
        assert sorted(per_step) == list(range(1, len(per_step) + 1))
        assert set(per_step.values()) == {accum}
        seen = 0
        for r in recs:
            assert r["batch_size"] == len(r["samples"]) == mb_size
            seen += r["batch_size"]
            assert r["examples_seen"] == seen
            assert r["forward_ms"] >= 0 and r["gpu_allocated_mib"] == 0.0
            ces = [s["cross_entropy"] for s in r["samples"]]
            assert math.isclose(r["loss"], sum(ces) / len(ces), abs_tol=1e-4)


def test_each_sample_is_consistent(demo, views, batches):
    _summary, _ = demo
    for view in views:
        pool_size = view.config["row_pool"]["size"]
        files = set(view.files())
        row_pair: dict[int, tuple[int, int]] = {}
        for r in batches[view.id]:
            for s in r["samples"]:
                probs = s["probabilities"]
                assert set(probs) == set(ACTIONS)
                assert math.isclose(sum(probs.values()), 1.0, abs_tol=1e-9)
                assert abs(s["cross_entropy"] + math.log(probs[s["gold"]])) < 1e-9
                assert s["prediction"] == max(probs, key=probs.get)
                target = int(DIGITS.target[s["image_id"]])
                assert s["target_digit"] == target
                assert s["gold"] == sign_label(target, s["current"])
                assert 0 <= s["training_row"] < pool_size
                pair = (s["image_id"], s["current"])
                assert row_pair.setdefault(s["training_row"], pair) == pair
                assert s["source"] == "sklearn-digits"
                assert s["input"]["state"] == state_text(s["current"])
                assert s["input"]["image"] == f"images/{s['image_id']}.png"
                assert s["input"]["image"] in files


def test_training_rows_come_from_the_balanced_pool(views, batches):
    data = DigitsData.load()
    for view in views:
        split = orjson.loads(view.file_path("split.json").read_bytes())
        pool = RowPool.build(data, np.array(split["train"]), seed=view.config["row_pool"]["seed"])
        assert len(pool) == view.config["row_pool"]["size"]
        assert pool.class_counts() == view.config["row_pool"]["balanced_counts"]
        used = Counter()
        for r in batches[view.id]:
            for s in r["samples"]:
                row = s["training_row"]
                assert (pool.image_ids[row], pool.currents[row]) == (s["image_id"], s["current"])
                used[s["gold"]] += 1
        # Balanced sampling: each action is about a third of what training saw.
        total = sum(used.values())
        assert all(abs(n / total - 1 / 3) < 0.05 for n in used.values())
        trained_on = {s["image_id"] for r in batches[view.id] for s in r["samples"]}
        assert not set(split["test"]) & trained_on


def test_scalars_per_optimizer_step(views, batches):
    for view in views:
        by_step = defaultdict(list)
        for r in batches[view.id]:
            by_step[r["optimizer_step"]].append(r["loss"])
        scalars = list(view.scalars())
        assert [s["step"] for s in scalars] == sorted(by_step)
        for s in scalars:
            assert math.isclose(s["loss"], np.mean(by_step[s["step"]]), abs_tol=1e-9)
            assert s["lr"] > 0 and s["grad_norm"] >= 0


def test_history_has_training_intervals_and_validation_every_epoch(views, batches):
    for view in views:
        pool_size = view.config["row_pool"]["size"]
        history = list(view.history())
        train = [h for h in history if h["kind"] == "train"]
        evals = [h for h in history if h["kind"] == "eval"]
        assert len(evals) == view.config["train"]["epochs"]
        assert [h["epoch_index"] for h in evals] == list(range(1, len(evals) + 1))
        seen_at_step = {r["optimizer_step"]: r["examples_seen"] for r in batches[view.id]}
        for h in train + evals:
            assert math.isclose(h["epoch"], seen_at_step[h["step"]] / pool_size)
        for h in train:
            assert {"loss", "grad_norm", "learning_rate"} <= set(h)
        for h in evals:
            assert 0 <= h["eval_accuracy"] <= 1 and 0 <= h["eval_macro_f1"] <= 1
            assert h["eval_loss"] > 0
        # The interval loss is the mean over the interval's microbatches, not the last one.
        losses = [r["loss"] for r in batches[view.id]]
        first = train[0]
        assert math.isclose(first["loss"], np.mean(losses[: first["microbatches"]]), abs_tol=1e-9)


def test_checkpoints_hash_and_reproduce_the_full_test(views):
    for view in views:
        cks = list(view.checkpoints())
        evals = [h for h in view.history() if h["kind"] == "eval"]
        assert [c["step"] for c in cks] == [h["step"] for h in evals]
        for c in cks:
            data = Path(c["path"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == c["sha256"] and len(data) == c["size"]
            assert str(view.dir) in c["path"]
        # The last checkpoint is the model that made the full test: same logits.
        spec = view.config["model"]
        model = StepperMLP(hidden=spec["hidden"], depth=spec["depth"])
        model.load_state_dict(torch.load(cks[-1]["path"], weights_only=True))
        model.eval()
        rows = list(view.results("full_test"))[:50]
        x = encode_inputs(DIGITS.images[[r["image_id"] for r in rows]], np.array([r["current"] for r in rows]))
        with torch.no_grad():
            logits = model(x).numpy()
        stored = np.array([[r["logits"][a] for a in ACTIONS] for r in rows])
        assert np.allclose(logits, stored, atol=1e-5)


def test_full_test_rows(demo, views):
    for view in views:
        split = orjson.loads(view.file_path("split.json").read_bytes())
        rows = list(view.results("full_test"))
        assert len(rows) == len(split["test"]) * 10
        assert {(r["image_id"], r["current"]) for r in rows} == {(i, c) for i in split["test"] for c in range(10)}
        assert len({r["id"] for r in rows}) == len(rows)
        for r in rows:
            target = int(DIGITS.target[r["image_id"]])
            assert r["id"] == f"img{r['image_id']}-cur{r['current']}"
            assert r["task"] == "digit_step" and r["group"] == f"img{r['image_id']}"
            assert r["gold"] == sign_label(target, r["current"])
            assert r["slices"] == {"current": str(r["current"]), "target": str(target)}
            z = np.array([r["logits"][a] for a in ACTIONS])
            p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
            assert np.allclose(p, [r["probs"][a] for a in ACTIONS], atol=1e-9)


def _images_jsonl(view):
    return [orjson.loads(line) for line in view.file_path("full_test/images.jsonl").read_bytes().splitlines() if line]


def _replay(predictions, target, start, max_steps):
    """Written here, independently: move by the cached actions until the target or a failure."""
    current, visited, trace = start, {start}, []
    while current != target:
        if len(trace) >= max_steps:
            return False, "step_limit", trace
        action = predictions[current]
        after = current + DELTA[action]
        trace.append({"before": current, "action": action, "after": after})
        if not 0 <= after <= 9:
            return False, "left_range", trace
        if after == current:
            return False, "stalled", trace
        if after in visited:
            return False, "loop", trace
        visited.add(after)
        current = after
    return True, "reached_target", trace


def test_episodes_replay_the_cached_predictions(views):
    for view in views:
        summary = orjson.loads(view.file_path("full_test/summary.json").read_bytes())
        max_steps = summary["analysis"]["max_steps"]
        rows = {(r["image_id"], r["current"]): r for r in view.results("full_test")}
        lines = _images_jsonl(view)
        assert len(lines) == summary["images"] == len(rows) // 10
        for line in lines:
            target = int(DIGITS.target[line["image_id"]])
            assert line["target"] == target
            for s in range(10):
                row = rows[(line["image_id"], s)]
                assert line["predictions"][s] == max(row["probs"], key=row["probs"].get)
                assert line["probabilities"][s] == row["probs"]
                ok, termination, trace = _replay(line["predictions"], target, s, max_steps)
                ep = line["episodes"][s]
                assert (ep["success"], ep["termination"], ep["trace"]) == (ok, termination, trace)
                assert ep["extra_moves"] == (len(trace) - abs(target - s) if ok else None)


def test_summary_cells_agree_with_the_rows(views):
    for view in views:
        summary = orjson.loads(view.file_path("full_test/summary.json").read_bytes())
        rows = list(view.results("full_test"))
        lines = _images_jsonl(view)
        errors, images, failed = Counter(), Counter(), Counter()
        for r in rows:
            key = (r["slices"]["target"], r["slices"]["current"])
            errors[key] += max(r["probs"], key=r["probs"].get) != r["gold"]
            images[key] += 1
        for line in lines:
            for s, ep in enumerate(line["episodes"]):
                failed[(str(line["target"]), str(s))] += not ep["success"]
        for t in map(str, range(10)):
            for c in map(str, range(10)):
                cell = summary["cells"][t][c]
                assert cell == {"images": images[(t, c)], "errors": errors[(t, c)], "failed_episodes": failed[(t, c)]}
        analysis = summary["analysis"]
        assert analysis["action_errors"] == sum(errors.values())
        assert math.isclose(analysis["action_accuracy"], 1 - sum(errors.values()) / len(rows))
        assert math.isclose(analysis["episode_success_rate"], 1 - sum(failed.values()) / len(rows))
        assert sum(analysis["terminations"].values()) == len(rows)
        assert summary["latency"]["images"] == len(lines) and summary["latency"]["mean_ms"] > 0


def test_images_are_real_pngs_of_the_digits(views, batches):
    for view in views:
        names = [n for n in view.files() if n.startswith("images/")]
        split = orjson.loads(view.file_path("split.json").read_bytes())
        used = set(split["train"]) | set(split["validation"]) | set(split["test"])
        assert {int(n[len("images/") : -len(".png")]) for n in names} == used
        for image_id in sorted(used)[:20]:
            pixels = decode_gray_png(view.file_path(f"images/{image_id}.png").read_bytes())
            assert pixels.shape == (32, 32)
            expected = np.rint(DIGITS.images[image_id] * 255 / 16).astype(np.uint8)
            assert np.array_equal(pixels[::4, ::4], expected)
        first = min(used)
        assert digit_png(DIGITS.images[first]) == view.file_path(f"images/{first}.png").read_bytes()


def test_summary_matches_the_ledger(demo, views, batches):
    summary, _ = demo
    for run, view in zip(summary.runs, views):
        recs = batches[view.id]
        assert run.microbatches == len(recs)
        assert run.optimizer_steps == recs[-1]["optimizer_step"]
        assert run.examples_seen == recs[-1]["examples_seen"]
        stored = orjson.loads(view.file_path("full_test/summary.json").read_bytes())
        assert run.test_accuracy == stored["analysis"]["action_accuracy"]
        assert run.episode_success_rate == stored["analysis"]["episode_success_rate"]
        assert view.summary.get("headline", {}).get("test_accuracy") == run.test_accuracy


# -- evaluation, comparison and site (issues 3 and 6) -------------------------------------------


def test_full_tests_are_evaluated_with_cis_by_current_state(demo, views):
    from sklearn.metrics import accuracy_score, f1_score, recall_score

    _summary, ledger = demo
    for view in views:
        doc = view.evaluation("full_test")
        body = doc["tasks"]["digit_step"]
        rows = list(view.results("full_test"))
        gold = [r["gold"] for r in rows]
        pred = [max(r["probs"], key=r["probs"].get) for r in rows]
        by_key = {m["key"]: m for m in body["metrics"]}
        acc = by_key["accuracy"]
        assert acc["value"] == pytest.approx(accuracy_score(gold, pred), abs=1e-12)
        assert acc["ci_low"] <= acc["value"] <= acc["ci_high"] and acc["n"] == len(rows)
        assert body["clusters"] == len({r["group"] for r in rows})  # images are resampled, not items
        macro = next(m for k, m in by_key.items() if k.startswith("f1[average=macro"))
        assert macro["value"] == pytest.approx(f1_score(gold, pred, average="macro"), abs=1e-12)
        recalls = {c["label"]: c["recall"]["value"] for c in body["per_class"]["labels"]}
        for label in ("-1", "0", "+1"):
            assert recalls[label] == pytest.approx(recall_score(gold, pred, labels=[label], average="macro"))
        assert set(body["slices"]["current"]) == {str(s) for s in range(10)}
        # indexed in the ledger and entered in the benchmark ledger under the run's name
        assert any(v["metric"] == "accuracy" for v in ledger.metric_values(view.id))
    from labledger.analysis.benchmarks import read_entries

    entries = read_entries(ledger, suite="digits-test")
    assert {e.model for e in entries} == {v.name for v in views}


def test_eval_by_reads_at_80_columns(demo, views):
    """``eval --by current`` on the demo's full test: slices as rows (one per slice value and metric,
    the metric named on its first), every line within 80 columns, every value and interval as
    ``--json`` has it (#43: it needed ~160 columns)."""
    import re

    summary, _ledger = demo
    ref = f"{views[1].id}:full_test"
    args = ["eval", ref, "--by", "current", "--resamples", "200", "--ledger", str(summary.ledger)]
    runner = CliRunner()
    shown = runner.invoke(main, args, env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert max(map(len, lines)) <= 80, shown.output
    doc = orjson.loads(runner.invoke(main, [*args, "--json"]).stdout)
    body = doc["tasks"]["digit_step"]
    start = next(i for i, line in enumerate(lines) if line.startswith("task 'digit_step' by current (95% CI)"))
    assert lines[start + 2].split() == ["metric", "current", "n", "value", "95%", "CI"]
    rows, metric = [], None
    for line in lines[start + 4 :]:
        if not line.strip():
            continue
        if not line.startswith(" "):
            break  # the table ends at the footer
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == 5:
            metric, cells = cells[0], cells[1:]
        rows.append((metric, *cells))
    expected = []
    for head in body["metrics"]:
        short = head["key"].replace(",zero_division=0", "").replace("[zero_division=0]", "")
        for value, sbody in body["slices"]["current"].items():
            m = next(x for x in sbody["metrics"] if x["key"] == head["key"])
            ci = f"[{m['ci_low']:.4f}, {m['ci_high']:.4f}]"
            expected.append((short, value, f"{sbody['n']:,}", f"{m['value']:.4f}", ci))
    assert rows == expected
    assert len(expected) == 10 * len(body["metrics"])


def test_the_two_runs_are_compared_on_the_same_items(demo, views):
    summary, _ledger = demo
    body = summary.comparison["tasks"]["digit_step"]
    assert body["paired"] and body["n"] == len(list(views[0].results("full_test")))
    acc = next(m for m in body["metrics"] if m["key"] == "accuracy")
    runs = {r.id: r for r in summary.runs}
    assert acc["diff"] == pytest.approx(runs[views[1].id].test_accuracy - runs[views[0].id].test_accuracy)
    assert acc["mcnemar"] is not None
    assert views[1].evaluation(f"compare-{views[0].name}", kind="comparison")["tasks"]


def test_validation_predictions_are_stored_for_calibration(demo, views):
    summary, _ = demo
    for view in views:
        rows = list(view.results("validation"))
        assert len(rows) == summary.split["validation"] * 10
        assert all("logits" in r for r in rows)
        assert not {r["image_id"] for r in rows} & {r["image_id"] for r in view.results("full_test")}


def test_the_site_is_built(demo):
    summary, _ = demo
    assert summary.site_index is not None and summary.site_index.is_file()
    data = summary.site_index.parent / "data"
    assert (data / "catalog.js").is_file()
    for run_id in summary.run_ids:
        assert (data / "runs" / f"{run_id}.js").is_file()


def test_the_demo_index_fits_a_1280_px_window(demo, browser):
    """The demo's runs table, with its two headline metrics and each run's pages, fits a 1280 px
    window without scrolling sideways: the headline names break after "_" and the pages' links wrap
    in their cell (the Pages column was cut at the window's edge)."""
    summary, _ = demo
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto(summary.site_index.as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=15000)
        fit = page.evaluate(
            """() => {
              const t = document.querySelector("table.runs"), box = t.parentElement.getBoundingClientRect();
              const links = [...t.querySelectorAll("td.pages a")].map((a) => a.getBoundingClientRect());
              return {table: t.scrollWidth, box: t.parentElement.clientWidth, links: links.length,
                      outside: links.filter((r) => r.right > box.right + 0.5).length};
            }"""
        )
        assert fit["table"] <= fit["box"] and fit["links"] >= 4 and fit["outside"] == 0, fit
    finally:
        page.close()


# -- the command --------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,code,expected",
    [
        (
            ["--quick"],
            0,
            [
                "Ledger:",
                "test accuracy",
                "episode success",
                "Runs (id, folder):",
                "[95% CI]",
                "same items",
                "Site:",
                "index.html",
            ],
        ),
        (["--quick", "--json"], 0, ['"run_ids"', '"test_accuracy"']),
        (["--seed", "x"], 2, ["Invalid value"]),
        (["--seed", "-1"], 2, ["Invalid value"]),
    ],
)
def test_cli_demo(tmp_path, args, code, expected):
    result = CliRunner().invoke(main, ["demo", "--ledger", str(tmp_path / "l"), *args])
    assert result.exit_code == code, result.output
    for text in expected:
        assert text in result.output
    if "--json" in args:
        doc = orjson.loads(result.stdout)
        assert len(doc["run_ids"]) == 2 and doc["group"] == DEMO_GROUP
        assert all(r["microbatches"] > 0 for r in doc["runs"])
