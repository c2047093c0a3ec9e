"""``wandb.data_types``: the media classes, under the module name W&B code imports them from."""

from __future__ import annotations

from labledger.wandb.media import Classes, Histogram, Html, Image, Table

__all__ = ["Classes", "Histogram", "Html", "Image", "Table"]
