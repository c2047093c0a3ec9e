"""``wandb.Image``, ``wandb.Table``, ``wandb.Histogram``, ``wandb.Artifact``, ``wandb.Settings`` and the
chart objects ``wandb.plot`` returns (``CustomChart``, ``Visualize``).

Each media object turns into plain files when it is logged: images into PNG files under the run's
``files/media/``, tables into a result set (rows with ``id``/``task``/``gold``/predictions) or a JSONL
record file under ``files/tables/``, histograms into bins and counts, artifacts into copied files
with their sha256, charts into their table (a JSONL file) and their spec. The run's ``media.jsonl``
references each one by key and step.

>>> import numpy as np
>>> img = Image(np.zeros((2, 3), dtype=np.uint8), caption="blank")
>>> img.png()[:8] == PNG_SIGNATURE, img.shape
(True, (2, 3))
>>> Table(columns=["a", "b"], data=[[1, "x"]]).rows()
[{'a': 1, 'b': 'x'}]
>>> Histogram([1, 2, 2, 3], num_bins=2).counts
[1, 3]
"""

from __future__ import annotations

import enum
import os
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from labledger.errors import LedgerError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> PNG colour type (gray, gray+alpha, RGB, RGBA)


class MediaError(LedgerError):
    """A media object (image, table, histogram, artifact) cannot be built from what it was given."""


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_png(pixels: np.ndarray) -> bytes:
    """8-bit PNG of an ``HxW`` (gray), ``HxWx1``, ``HxWx2``, ``HxWx3`` (RGB) or ``HxWx4`` (RGBA) uint8 array.

    >>> encode_png(np.zeros((1, 1, 3), dtype=np.uint8))[:8] == PNG_SIGNATURE
    True
    """
    arr = np.asarray(pixels)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[2] not in _COLOR_TYPES or arr.size == 0:
        raise MediaError(f"an image needs HxW or HxWxC pixels with C in 1..4; got shape {arr.shape}")
    arr = np.ascontiguousarray(arr.astype(np.uint8, copy=False))
    height, width, channels = arr.shape
    raw = np.zeros((height, width * channels + 1), dtype=np.uint8)  # filter byte 0 before every row
    raw[:, 1:] = arr.reshape(height, width * channels)
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOR_TYPES[channels], 0, 0, 0)
    return (
        PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw.tobytes(), 6))
        + _chunk(b"IEND", b"")
    )


def _to_pixels(data: Any) -> np.ndarray:
    """uint8 HxWxC pixels from a numpy array, a torch tensor (CHW or HWC) or a PIL image, as W&B reads them."""
    if hasattr(data, "getbands") and hasattr(data, "convert"):  # PIL.Image.Image
        return np.asarray(data.convert("RGBA") if data.mode not in ("L", "RGB", "RGBA", "LA") else data)
    is_torch = type(data).__module__.startswith("torch")
    if is_torch:
        data = data.detach().cpu().numpy()
        if data.ndim == 3 and data.shape[0] in (1, 3, 4) and data.shape[-1] not in (1, 3, 4):
            data = np.transpose(data, (1, 2, 0))  # torch images are channels-first
        elif data.ndim == 3 and data.shape[0] in (1, 3, 4) and data.shape[-1] > 4:
            data = np.transpose(data, (1, 2, 0))
    arr = np.asarray(data)
    if arr.ndim == 3 and arr.shape[0] in (1, 3, 4) and arr.shape[2] not in (1, 2, 3, 4):
        arr = np.transpose(arr, (1, 2, 0))
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8) * 255
    elif np.issubdtype(arr.dtype, np.floating):
        finite = arr[np.isfinite(arr)]
        # W&B's rule: floats in [0, 1] are scaled to 0..255, anything else is clipped to 0..255
        if finite.size and finite.min() >= 0 and finite.max() <= 1:
            arr = arr * 255.0
        arr = np.clip(np.nan_to_num(arr), 0, 255).round().astype(np.uint8)
    elif arr.dtype != np.uint8:
        arr = np.clip(arr, 0, 255).astype(np.uint8)
    return arr


class Image:
    """An image to log (``wandb.Image``): numpy array, torch tensor, PIL image or a PNG/JPEG file path.

    Logged, it becomes ``files/media/<key>/<step>-<n>.png`` in the run, referenced from ``media.jsonl``.

    >>> Image(np.ones((4, 4, 3)), caption="white").shape
    (4, 4, 3)
    """

    def __init__(
        self,
        data_or_path: Any,
        mode: str | None = None,
        caption: str | None = None,
        masks: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        self.caption = caption
        self.masks = {str(name): Mask.of(name, m) for name, m in (masks or {}).items()}
        self._path: Path | None = None
        if isinstance(data_or_path, (str, os.PathLike)):
            self._path = Path(data_or_path)
            if not self._path.is_file():
                raise MediaError(f"wandb.Image: {self._path} does not exist or is not a file")
            self._pixels: np.ndarray | None = None
            self.shape: tuple[int, ...] = ()
        else:
            if mode is not None and hasattr(data_or_path, "convert"):
                data_or_path = data_or_path.convert(mode)
            self._pixels = _to_pixels(data_or_path)
            self.shape = tuple(self._pixels.shape)

    def png(self) -> bytes:
        """The image's bytes (PNG, or the file's own bytes for a path)."""
        if self._path is not None:
            return self._path.read_bytes()
        assert self._pixels is not None
        return encode_png(self._pixels)

    @property
    def suffix(self) -> str:
        return self._path.suffix.lower() if self._path is not None else ".png"


#: Colours of mask classes 1, 2, ... (class 0, the background, is left transparent): Okabe-Ito.
MASK_COLORS = (
    (0, 114, 178),
    (230, 159, 0),
    (0, 158, 115),
    (204, 121, 167),
    (86, 180, 233),
    (213, 94, 0),
    (240, 228, 66),
)


class Mask:
    """A segmentation mask of an :class:`Image` (W&B's ``masks={"name": {"mask_data": HxW class ids,
    "class_labels": {id: name}}}``, or ``{"path": png}``).

    Logged, it becomes two PNG files beside its image: the class ids as logged (8-bit gray) and an
    overlay (each class in its colour, class 0 transparent) that the run page draws over the image.

    >>> m = Mask.of("pred", {"mask_data": np.array([[0, 1], [2, 1]]), "class_labels": {1: "cat", 2: "dog"}})
    >>> m.class_labels, m.overlay_png()[:8] == PNG_SIGNATURE
    ({'1': 'cat', '2': 'dog'}, True)
    """

    def __init__(self, name: str, ids: np.ndarray, class_labels: dict[str, str]) -> None:
        self.name = name
        self.ids = ids
        self.class_labels = class_labels

    @classmethod
    def of(cls, name: Any, spec: Any) -> Mask:
        if isinstance(spec, Mask):
            return spec
        if not isinstance(spec, dict):
            raise MediaError(
                f"wandb.Image masks[{name!r}] is a dict with mask_data (or path); got {type(spec).__name__}"
            )
        labels = {str(k): str(v) for k, v in (spec.get("class_labels") or {}).items()}
        if spec.get("mask_data") is not None:
            data = spec["mask_data"]
            if type(data).__module__.startswith("torch"):
                data = data.detach().cpu().numpy()
            arr = np.asarray(data)
        elif spec.get("path") is not None:
            try:
                from PIL import Image as PILImage
            except ImportError as exc:  # pragma: no cover - depends on the environment
                raise MediaError(f"wandb.Image masks[{name!r}]: reading a mask file needs Pillow") from exc
            with PILImage.open(spec["path"]) as im:
                arr = np.asarray(im)
        else:
            raise MediaError(f"wandb.Image masks[{name!r}] needs mask_data (HxW class ids) or path")
        if arr.ndim == 3 and arr.shape[2] == 1:
            arr = arr[:, :, 0]
        if arr.ndim != 2 or arr.size == 0:
            raise MediaError(f"wandb.Image masks[{name!r}]: mask_data is HxW class ids; got shape {arr.shape}")
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise MediaError(f"wandb.Image masks[{name!r}]: mask_data holds NaN or infinity")
        if arr.min() < 0 or arr.max() > 255:
            raise MediaError(f"wandb.Image masks[{name!r}]: class ids must be 0..255 (W&B's limit)")
        return cls(str(name), arr.astype(np.uint8), labels)

    def png(self) -> bytes:
        """The class ids as an 8-bit gray PNG (what was logged)."""
        return encode_png(self.ids)

    def overlay_png(self) -> bytes:
        """RGBA: each class in its colour at 60% opacity, class 0 transparent."""
        palette = np.zeros((256, 4), dtype=np.uint8)
        for i in range(1, 256):
            palette[i, :3] = MASK_COLORS[(i - 1) % len(MASK_COLORS)]
            palette[i, 3] = 153
        return encode_png(palette[self.ids])

    def colors(self) -> dict[str, str]:
        """The overlay's colour of each class present or labelled (``#rrggbb``)."""
        ids = sorted({int(i) for i in np.unique(self.ids)} | {int(k) for k in self.class_labels if k.isdigit()})
        return {str(i): "#{:02x}{:02x}{:02x}".format(*MASK_COLORS[(i - 1) % len(MASK_COLORS)]) for i in ids if i > 0}


class Html:
    """An HTML page to log (``wandb.Html``): the text, an open file, or the path of an ``.html`` file.

    Logged, it becomes ``files/media/<key>/<step>-<n>.html`` in the run, referenced from ``media.jsonl``
    (W&B's ``inject``, which adds W&B's stylesheet, is accepted and changes nothing).

    >>> Html("<b>hi</b>").html
    '<b>hi</b>'
    """

    def __init__(self, data: Any, inject: bool = True, data_is_not_path: bool = False) -> None:
        if hasattr(data, "read"):
            text = data.read()
        elif (
            isinstance(data, (str, os.PathLike))
            and not data_is_not_path
            and str(data).lower().endswith((".html", ".htm"))
            and os.path.isfile(data)
        ):
            text = Path(data).read_text(encoding="utf-8")
        elif isinstance(data, str):
            text = data
        else:
            raise MediaError(f"wandb.Html takes HTML text, an open file or an .html path; got {type(data).__name__}")
        self.html = text if isinstance(text, str) else bytes(text).decode("utf-8")
        self.inject = inject


class Table:
    """A table to log (``wandb.Table``): ``columns`` and ``data`` rows, or a pandas ``dataframe``.

    Logged, rows that are result rows (``id``, ``task``, ``gold``, a prediction) become a result set;
    any other rows become a JSONL record file ``files/tables/<key>/<step>.jsonl``.

    >>> t = Table(columns=["x"])
    >>> t.add_data(1); t.add_data(2)
    >>> len(t.data), t.rows()[1]
    (2, {'x': 2})
    """

    def __init__(
        self,
        columns: Sequence[str] | None = None,
        data: Iterable[Sequence[Any]] | None = None,
        rows: Iterable[Sequence[Any]] | None = None,
        dataframe: Any = None,
        **_: Any,
    ) -> None:
        if dataframe is not None:
            columns = [str(c) for c in dataframe.columns]
            data = dataframe.itertuples(index=False, name=None)
        self.columns = [str(c) for c in (columns or [])]
        self.data: list[list[Any]] = [list(r) for r in (data if data is not None else rows or [])]
        if not self.columns and self.data:
            self.columns = [f"col{i}" for i in range(len(self.data[0]))]
        for i, row in enumerate(self.data, 1):
            if len(row) != len(self.columns):
                raise MediaError(f"wandb.Table: row {i} has {len(row)} values for {len(self.columns)} columns")

    def add_data(self, *values: Any) -> None:
        """Append one row (as many values as columns)."""
        if len(values) != len(self.columns):
            raise MediaError(f"wandb.Table.add_data: {len(values)} values for {len(self.columns)} columns")
        self.data.append(list(values))

    def add_column(self, name: str, data: Sequence[Any]) -> None:
        """Append a column (one value per existing row)."""
        if len(data) != len(self.data):
            raise MediaError(f"wandb.Table.add_column: {len(data)} values for {len(self.data)} rows")
        self.columns.append(str(name))
        for row, v in zip(self.data, data, strict=True):
            row.append(v)

    def get_column(self, name: str) -> list[Any]:
        """The values of column ``name``."""
        i = self.columns.index(name)
        return [row[i] for row in self.data]

    def rows(self) -> list[dict[str, Any]]:
        """The rows as dicts keyed by column."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.data]


class Histogram:
    """A histogram to log (``wandb.Histogram``): from a ``sequence`` or a numpy ``(counts, edges)``.

    >>> h = Histogram(np_histogram=([2, 1], [0.0, 0.5, 1.0]))
    >>> h.counts, h.bins
    ([2, 1], [0.0, 0.5, 1.0])
    """

    def __init__(
        self,
        sequence: Any = None,
        np_histogram: tuple[Sequence[Any], Sequence[Any]] | None = None,
        num_bins: int = 64,
    ) -> None:
        counts: Any
        edges: Any
        if np_histogram is not None:
            counts, edges = np_histogram
        elif sequence is not None:
            values = sequence
            if type(values).__module__.startswith("torch"):
                values = values.detach().cpu().numpy()
            arr = np.asarray(values, dtype=float).ravel()
            counts, edges = np.histogram(arr[np.isfinite(arr)], bins=int(num_bins))
        else:
            raise MediaError("wandb.Histogram needs a sequence or np_histogram=(counts, edges)")
        self.counts = [int(c) if float(c).is_integer() else float(c) for c in np.asarray(counts).tolist()]
        self.bins = [float(e) for e in np.asarray(edges).tolist()]
        if len(self.bins) != len(self.counts) + 1:
            raise MediaError(f"wandb.Histogram: {len(self.bins)} edges for {len(self.counts)} counts (need one more)")


class Artifact:
    """Files to keep with the run (``wandb.Artifact``); logged with their sha256 by ``log_artifact``.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "w.bin"; _ = p.write_bytes(b"x")
    >>> a = Artifact("model", type="model"); a.add_file(str(p))
    >>> [name for name, _ in a.files]
    ['w.bin']
    """

    def __init__(
        self,
        name: str,
        type: str = "unspecified",
        description: str | None = None,
        metadata: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        self.name = str(name)
        self.type = str(type)
        self.description = description
        self.metadata = dict(metadata or {})
        self.files: list[tuple[str, Path]] = []

    def add_file(self, local_path: str | os.PathLike[str], name: str | None = None, **_: Any) -> None:
        """Add one file (stored under ``name``, default its base name)."""
        path = Path(local_path)
        if not path.is_file():
            raise MediaError(f"wandb.Artifact.add_file: {path} does not exist or is not a file")
        self.files.append((name or path.name, path))

    def add_dir(self, local_path: str | os.PathLike[str], name: str | None = None, **_: Any) -> None:
        """Add every file under a folder (paths kept relative to it, under ``name`` when given)."""
        root = Path(local_path)
        if not root.is_dir():
            raise MediaError(f"wandb.Artifact.add_dir: {root} is not a folder")
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            rel = path.relative_to(root).as_posix()
            self.files.append((f"{name}/{rel}" if name else rel, path))

    def add_reference(self, uri: str, name: str | None = None, **_: Any) -> None:
        """Not supported: references to remote objects are not copied or hashed."""
        raise MediaError(
            f"wandb.Artifact.add_reference({uri!r}) is not supported by labledger.wandb: "
            "download the object and use add_file, or record its hash with Run.log_checkpoint_reference"
        )


class Settings:
    """``wandb.Settings(...)``: accepted; the values are kept (and stored in the run's meta) but change nothing.

    >>> Settings(silent=True).silent
    True
    """

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if isinstance(v, (str, int, float, bool, type(None)))}


class Classes:
    """``wandb.Classes``: the id -> name set of a segmentation or detection task, kept as given.

    Logged by itself it is stored as its ``class_set`` (a ``value`` media record).

    >>> Classes([{"id": 1, "name": "cat"}]).to_dict()
    {'class_set': [{'id': 1, 'name': 'cat'}]}
    """

    def __init__(self, class_set: Sequence[dict[str, Any]]) -> None:
        self._class_set = [dict(c) for c in class_set]

    def to_dict(self) -> dict[str, Any]:
        return {"class_set": [dict(c) for c in self._class_set]}


class AlertLevel(enum.Enum):
    """``wandb.AlertLevel`` (the levels ``wandb.alert`` takes)."""

    INFO = "INFO"
    WARN = "WARN"
    ERROR = "ERROR"


class ArtifactTTL(enum.Enum):
    """``wandb.ArtifactTTL``: ``INHERIT`` (artifacts kept by labledger are never expired)."""

    INHERIT = 0


@dataclass
class CustomChartSpec:
    """What a ``wandb.plot`` chart draws: the chart (``spec_name``, e.g. ``wandb/line/v0``) and which
    table columns fill its ``fields``; ``string_fields`` holds its titles."""

    spec_name: str
    fields: dict[str, Any]
    string_fields: dict[str, Any]
    key: str = ""
    panel_type: str = "Vega2"
    split_table: bool = False


@dataclass
class CustomChart:
    """A chart to log (what ``wandb.plot.line``, ``confusion_matrix``, ... return): a :class:`Table` and its spec.

    Logged under ``key``, the table becomes ``files/tables/<key>_table/<step>.jsonl`` and a ``chart``
    media record keeps the spec.
    """

    table: Table
    spec: CustomChartSpec

    def set_key(self, key: str) -> None:
        self.spec.key = key


@dataclass
class VisualizeSpec:
    """The preset chart (``name``) a :class:`Visualize` draws."""

    name: str
    key: str = ""


@dataclass
class Visualize:
    """``wandb.visualize(id, table)``: a :class:`Table` drawn by a preset chart; logged as a :class:`CustomChart` is."""

    table: Table
    spec: VisualizeSpec = field(default_factory=lambda: VisualizeSpec(""))

    def set_key(self, key: str) -> None:
        self.spec.key = key
