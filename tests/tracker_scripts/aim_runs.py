"""Write an Aim repository with real `aim` (run by tests/test_import_aim.py in a subprocess).

Usage: python aim_runs.py REPO_DIR [N_STEPS]. Run `first` (experiment exp1): params, two tags, a
description, `loss` in two contexts with epochs, `acc` without context, a text sequence, Aim's own
system metrics; closed. Run `crashed`: one metric, then the process ends without run.close()
(os._exit, as a killed job would). The runs' hashes go to REPO_DIR/hashes.json.
"""

import json
import os
import sys
import time

import aim

repo, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5
run = aim.Run(repo=repo, experiment="exp1", system_tracking_interval=0.1, capture_terminal_logs=False)
run.name = "first"
run.description = "from <Aim>"
run["hparams"] = {"lr": 0.1, "opt": {"name": "adam"}}
run["batch_size"] = 32
run.add_tag("t1")
run.add_tag("t2")
for s in range(n):
    run.track(1.0 / (s + 1), name="loss", step=s, epoch=s // 2, context={"subset": "train"})
    run.track(0.5 + s, name="loss", step=s, epoch=s // 2, context={"subset": "val"})
    run.track(s / 10, name="acc", step=s)
run.track(aim.Text("hello"), name="sample", step=0)
time.sleep(0.35)  # a few system samples
run.close()
first = run.hash

crashed = aim.Run(repo=repo, experiment="exp2", system_tracking_interval=None, capture_terminal_logs=False)
crashed.name = "crashed"
crashed.track(2.0, name="loss", step=0)
crashed.track(1.0, name="loss", step=1)
hashes = {"first": first, "crashed": crashed.hash}
with open(os.path.join(repo, "hashes.json"), "w") as f:
    json.dump(hashes, f)
sys.stdout.flush()
os._exit(0)
