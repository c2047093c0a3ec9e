"""The ``labledger`` command line. Commands live in one module per area and attach to ``main``.

A command's module is imported only when that command runs, and ``labledger --help`` lists the
commands from ``COMMANDS`` without importing any, so ``labledger runs`` starts without numpy, pyarrow
or the metric registry. A new command: define it in its module with ``@main.command(...)`` and
add its name, module and the first paragraph of its help to ``COMMANDS`` (a test checks they agree).
"""

from labledger.cli.base import main, run

#: Every command of ``labledger`` -> (the module of ``labledger.cli`` that defines it, the first
#: paragraph of its help: what ``labledger --help`` lists without importing the module).
COMMANDS = {
    "cache": (
        "cache",
        "The columnar cache of large results and record files: where it is, what it holds, and freeing it. Entries are rebuilt from their JSONL when next read; the folder is $LABLEDGER_CACHE_DIR ('off': no cache), else $XDG_CACHE_HOME/labledger/columnar (~/.cache/labledger/columnar).",
    ),
    "calibrate": (
        "calibrate",
        "Post-hoc calibration: fit a recipe, apply it to results.jsonl, report raw vs calibrated.",
    ),
    "compare": ("evaluation", "Compare results A and B (files or RUN:NAME): A - B per metric with a CI and a p-value."),
    "compare-groups": (
        "groups",
        "Mean, spread and run count of each metric per group, and the difference from the baseline.",
    ),
    "compact": (
        "compact",
        "Compress the record files of RUNs (default: every run that is not running) into verified zstd files in the zstd seekable format (X.jsonl.zst), as Run.finish does: each is decompressed and its sha256 checked before the JSONL is removed. Idempotent; a running run is skipped.",
    ),
    "contamination": (
        "contamination",
        "Evaluation items found among RUN's training samples (exact and n-gram overlap), and the metric on clean vs overlapping items.",
    ),
    "demo": ("demo", "Train two small PyTorch models on the digit stepping task and log everything."),
    "diff": (
        "diff",
        "What differs between runs A and B: config (dotted keys), environment (Python, packages, git, host), data (declared mixture, result sets), scalar summaries and stored evaluations; result sets both runs have are compared item by item (B - A, paired bootstrap) when their items match.",
    ),
    "eval": (
        "evaluation",
        "Metrics of RESULTS (a results.jsonl, or RUN:NAME of a run's stored results) with bootstrap CIs.",
    ),
    "export": ("runs", "Export a run's records as JSONL (exactly as logged), Parquet or CSV (flattened)."),
    "forensics": ("sweep", "Every binary confusion matrix consistent with recorded accuracy and weighted F1."),
    "frontier": (
        "ranking",
        "The cost-quality frontier of RESULTS (two or more files or RUN:NAME on the same items), with paired intervals on both axes.",
    ),
    "gc": (
        "trash",
        "Empty the trash for good: RUNs of it, else the runs deleted more than --older-than ago, else all. Files kept for other runs go once no run uses them.",
    ),
    "hash": ("checkpoints", "sha256 and size of each FILE, streamed (1 MiB at a time)."),
    "import": ("importing", "Import PATH as runs, all or nothing, through the same validation as logging."),
    "lineage": (
        "lineage",
        "The lineage graph up and down from RUN (id, prefix or name) or a CHECKPOINT sha256 (prefix): runs, checkpoints (step, sha256, size; a file changed since it was logged is flagged), soups with their weights, and each run's headline result.",
    ),
    "logit-diff": (
        "checkpoints",
        "Maximum absolute difference between two models' outputs (npy/npz or results files), per head.",
    ),
    "mixture": (
        "checkpoints",
        "Audit RUN's data mixture: intended vs actual share of examples seen per dataset, and the class balance trained on vs each dataset's natural distribution (a forced 50:50 is flagged).",
    ),
    "noise": (
        "groups",
        "The noise floor of GROUP: how far two runs that differ only by their seed land apart on a metric.",
    ),
    "power": (
        "power",
        "Items needed to detect --delta, or the minimum detectable effect of --n items, for a paired test.",
    ),
    "push": ("serve", "Upload FILE to a labledger server and verify the sha256 it stored."),
    "rank": (
        "ranking",
        "Rank RESULTS (two or more files or RUN:NAME on the same items) by a metric: each one's rank with an interval, and the tie group of the best.",
    ),
    "report": (
        "report",
        "Write a Markdown hand-off: version tables, calibration recipes with provenance and in-sample flags, metric definitions, checkpoints and soup lineage, mixture audits, notes and limits.",
    ),
    "restore": (
        "trash",
        "Bring RUNs (ids, id prefixes or names of deleted runs) back from the trash: their index rows exactly as they were and their folders.",
    ),
    "query": ("query", "Run SQL (DuckDB) over every ended run: views runs, scalars, results and metrics."),
    "rm": (
        "trash",
        "Move RUNs (ids, id prefixes or names) to the ledger's trash: their folders and index rows, in one step each. labledger restore brings them back; labledger gc removes them for good.",
    ),
    "runs": ("runs", "List runs: id, name, group, status, steps, started, duration, headline metrics."),
    "schema": ("schema", "Print the JSON Schema of document KIND (default: every kind, sharing $defs)."),
    "select-epoch": ("sweep", "Pick the epoch of RUN's history with the best METRIC (ties: the earliest)."),
    "serve": ("serve", "Serve the ledger: live pages at /, a JSON API at /api, uploads at /upload and /uploads/NAME."),
    "show": ("runs", "Show one run: meta, config, files, counts, last scalars, checkpoints (sha256)."),
    "signal": (
        "groups",
        "Which benchmarks tell a run's checkpoints apart: signal-to-noise and monotonicity per task of RESULTS at successive checkpoints.",
    ),
    "site": ("site", "Write (or update) the static site of the ledger in the folder OUT."),
    "soup": ("checkpoints", "Weighted average of CHECKPOINTS (same keys, shapes, dtypes), streamed tensor by tensor."),
    "sweep": ("sweep", "Sweep a decision threshold over RESULTS and select one under gates; write the report."),
    "sync": ("sync", "Copy RUNs (default: every run) to the team server at --to, and verify them."),
    "table": ("tables", "Version table: benchmarks by category x models, with a mean row and deltas."),
    "trash": ("trash", "List the deleted runs in the ledger's trash: id, name, when deleted, size, kept files."),
    "verify": (
        "verify",
        "Check the ledger (or only RUNs): every record file line by line, index rows against folders, result and checkpoint sha256s, site manifests, leftovers of interrupted imports.",
    ),
}
main.lazy.update({name: module for name, (module, _) in COMMANDS.items()})
main.lazy_help.update({name: text for name, (_, text) in COMMANDS.items()})

__all__ = ["COMMANDS", "main", "run"]
