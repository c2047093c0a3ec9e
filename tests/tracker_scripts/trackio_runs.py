"""Write a Trackio project with real `trackio` (run by tests/test_import_trackio.py in a subprocess).

Usage: python trackio_runs.py TRACKIO_DIR [N_STEPS]. Two runs in project `proj`: `alpha` (group g1,
an alert, a NaN and a string value, a nested dict) and `beta` (no group), and a system-metrics row.
"""

import os
import sys

os.environ["TRACKIO_DIR"] = sys.argv[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
n = int(sys.argv[2]) if len(sys.argv) > 2 else 5

import trackio  # noqa: E402

for i, name in enumerate(["alpha", "beta"]):
    trackio.init(
        project="proj",
        name=name,
        group="g1" if i == 0 else None,
        config={"lr": 0.1 * (i + 1), "opt": {"name": "adam"}},
        auto_log_gpu=False,
        auto_log_cpu=False,
    )
    for s in range(n):
        row = {"loss": 1.0 / (s + 1), "eval/acc": s / 10, "nested": {"a": s}}
        if i == 0 and s == 1:
            row.update(nan=float("nan"), txt="hi")
        trackio.log(row, step=s * 2)
    if i == 0:
        trackio.alert("loss spike", text="at step 2", level=trackio.AlertLevel.WARN)
        trackio.log_system({"cpu_percent": 12.5, "mem": {"rss_mb": 100.0}})
    trackio.finish()

# What trackio's own reader returns, for the test to compare against.
import json  # noqa: E402

from trackio.sqlite_storage import SQLiteStorage  # noqa: E402

theirs = {
    r["name"]: [
        {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
        for row in SQLiteStorage.get_logs("proj", run_id=r["id"])
    ]
    for r in SQLiteStorage.get_run_records("proj")
}
with open(os.path.join(sys.argv[1], "theirs.json"), "w") as f:
    json.dump(theirs, f, default=str)
