"""Analysis: the engines that turn stored predictions and records into documents.

Evaluations and comparisons (:mod:`~labledger.analysis.evaluation`), the benchmark ledger and
version tables (:mod:`~labledger.analysis.benchmarks`), groups of runs
(:mod:`~labledger.analysis.groups`), data-mixture audits (:mod:`~labledger.analysis.mixture`) and
checkpoint hashing, soups and logit diffs (:mod:`~labledger.analysis.checkpoints`). Calibration has
its own package, :mod:`labledger.calibrate`. Engines read the ledger and the metrics below them;
they never print.
"""
