"""Regenerate the metric table of docs/metrics.md from the registry: ``python docs/gen_metrics.py``."""

from pathlib import Path

from labledger.metrics.registry import metrics_markdown

DOC = Path(__file__).with_name("metrics.md")
START, END = "<!-- metrics-table:start -->", "<!-- metrics-table:end -->"

text = DOC.read_text()
head, rest = text.split(START, 1)
_, tail = rest.split(END, 1)
DOC.write_text(f"{head}{START}\n{metrics_markdown()}{END}{tail}")
print(f"wrote {DOC}")
