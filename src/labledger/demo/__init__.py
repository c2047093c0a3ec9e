"""The demo: the digit stepping task of seed 004, trained for real and logged into a ledger.

``run_demo(ledger, quick=False, seed=0)`` trains two small PyTorch models (one group, two widths)
on scikit-learn's bundled ``load_digits`` and returns a :class:`DemoSummary` (ledger path, run ids,
run folders, headline numbers). Needs the ``demo`` extra (torch, scikit-learn); importing this
package does not import torch.
"""

from labledger.demo.run import DEMO_GROUP, DemoPlan, DemoRun, DemoSummary, run_demo

__all__ = ["DEMO_GROUP", "DemoPlan", "DemoRun", "DemoSummary", "run_demo"]
