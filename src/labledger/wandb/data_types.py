"""``wandb.data_types``: the media classes, under the module name W&B code imports them from."""

from __future__ import annotations

from labledger.wandb.media import Classes, Histogram, Image, Table

__all__ = ["Classes", "Histogram", "Image", "Table"]
