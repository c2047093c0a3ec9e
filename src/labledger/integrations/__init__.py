"""Log training runs from the frameworks people already use.

- :mod:`labledger.integrations.hf`: ``LedgerCallback`` (a ``transformers`` ``TrainerCallback``) and
  ``LedgerTrainer`` (a ``Trainer`` that also logs every microbatch with its samples);
- :mod:`labledger.integrations.lightning`: ``LedgerLogger`` (a Lightning ``Logger``).

Each module imports its framework only when it is imported itself, so ``import labledger`` never
needs them (``pip install 'labledger[integrations]'``).
"""

__all__: list[str] = []
