"""Writing a site folder: JavaScript data files, write-if-changed, and the build manifest.

Every data file is one JavaScript assignment::

    (window.LABLEDGER=window.LABLEDGER||{})["runs/<id>"]={...};

so that a page opened from ``file://`` loads it with a ``<script>`` tag (no fetch, no server). The
JSON inside is made safe for any context: ``<`` is written ``\\u003c`` and U+2028/U+2029 as
escapes, which changes no value.

The manifest (``OUT/.labledger-site.json``) records the sha256 and size of every file the builder
wrote and, per run, a signature of the ledger files it was built from. A file whose new content has
the recorded hash (and is still there with the recorded size) is not rewritten; a file the new
build no longer produces is removed. Only files listed in the manifest are ever removed, and only
when the builder can prove it wrote them: a plain relative path (no ``..``, not absolute) whose
folder resolves inside ``OUT`` (no symlink out) and whose bytes still have the recorded sha256 (a
copied file: the recorded size). A crafted manifest cannot make a build delete anything else.

A build is resumable: before its first write it leaves ``OUT/.labledger-site.building``, and the
manifest is written atomically and last, after which the marker goes. A build killed half-way
leaves the marker, so the next build knows the folder is its own, removes its temporary files and
picks up where it stopped (files already written with the right bytes are kept).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from labledger.errors import SiteError
from labledger.store.jsonl import atomic_open, atomic_write

MANIFEST = ".labledger-site.json"
#: Left in the folder while a build writes; removed once the manifest is saved.
BUILDING = ".labledger-site.building"
#: Bumped when the layout of data files changes: a new format rebuilds everything.
FORMAT = 1
_PREFIX = b"(window.LABLEDGER=window.LABLEDGER||{})["
_JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def js_safe(json_bytes: bytes) -> bytes:
    """Escape ``<``, U+2028 and U+2029 inside JSON text (they only occur inside strings)."""
    return (
        json_bytes.replace(b"<", b"\\u003c").replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    )


def _default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def dumps(payload: Any) -> bytes:
    """JSON bytes for a payload (NaN and infinities become ``null``)."""
    return orjson.dumps(payload, option=_JSON_OPTIONS, default=_default)


def js_assignment(key: str, payload: Any = None, *, raw_json: bytes | None = None) -> bytes:
    """The bytes of a data file that stores ``payload`` (or ready JSON ``raw_json``) under ``key``.

    >>> js_assignment("catalog", {"runs": ["<b>"]})
    b'(window.LABLEDGER=window.LABLEDGER||{})["catalog"]={"runs":["\\\\u003cb>"]};\\n'
    """
    body = raw_json if raw_json is not None else dumps(payload)
    return _PREFIX + orjson.dumps(key) + b"]=" + js_safe(body) + b";\n"


#: The ``encoding`` of a packed payload (see :func:`packed_json`).
PACKED = "gzip+base64"
#: gzip level of packed payloads (the batch chunks: 6 is zlib's default).
PACK_LEVEL = 6


def packed_json(raw_json: bytes, *, level: int = PACK_LEVEL) -> bytes:
    """A payload that holds ``raw_json`` gzip-compressed, as base64 text:
    ``{"encoding": "gzip+base64", "data": "..."}``. A page unpacks it with the browser's
    ``DecompressionStream("gzip")`` (``LL.unpack`` in common.js): a script tag is the only way a
    page opened from ``file://`` can load data, and it loads text, so the bytes travel as base64.
    The output is the same for the same input (no time stamp in the gzip header).

    >>> p = packed_json(b'{"a": 1}')
    >>> p.startswith(b'{"encoding":"gzip+base64","data":"'), unpack_payload(orjson.loads(p))
    (True, {'a': 1})
    """
    import base64
    import gzip

    data = base64.b64encode(gzip.compress(raw_json, compresslevel=level, mtime=0))
    return b'{"encoding":"' + PACKED.encode() + b'","data":"' + data + b'"}'


def unpack_payload(payload: Any) -> Any:
    """The payload a :func:`packed_json` payload holds (any other payload as it is)."""
    if isinstance(payload, dict) and payload.get("encoding") == PACKED and isinstance(payload.get("data"), str):
        import base64
        import gzip

        return orjson.loads(gzip.decompress(base64.b64decode(payload["data"])))
    return payload


def load_data_file(path: str | os.PathLike[str]) -> tuple[str, Any]:
    """Read a data file written by :func:`js_assignment` back into ``(key, payload)`` (a packed
    payload is unpacked, :func:`packed_json`; a packed catalog comes back in its list-of-objects form,
    :func:`labledger.site.packing.unpack_catalog`, a catalog's head with the runs of its chunks, read
    from the folder ``catalog/`` beside it: :func:`labledger.site.packing.join_catalog`).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.js"
    >>> _ = p.write_bytes(js_assignment("k", {"a": "<i>"}))
    >>> load_data_file(p)
    ('k', {'a': '<i>'})
    """
    data = Path(path).read_bytes()
    if not data.startswith(_PREFIX) or not data.endswith(b";\n"):
        raise SiteError(f"{path}: not a labledger site data file")
    rest = data[len(_PREFIX) : -2]
    end = rest.index(b"]=")
    key, payload = orjson.loads(rest[:end]), unpack_payload(orjson.loads(rest[end + 2 :]))
    if key == "catalog" and isinstance(payload, dict) and payload.get("packed"):
        from labledger.site.packing import join_catalog

        chunks = []
        for k in range(len(payload.get("chunks") or ())):
            chunk_key, chunk = load_data_file(Path(path).parent / "catalog" / f"{k}.js")
            if chunk_key != f"catalog/{k}":
                raise SiteError(f"{path}: catalog chunk {k} holds {chunk_key!r}")
            chunks.append(chunk)
        payload = join_catalog(payload, chunks)
    return key, payload


#: Temporary files of atomic writes (``.NAME.PID.tmp``), removed when a killed build resumes.
_TEMPORARY = re.compile(r"\..+\.\d+\.tmp")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class SiteWriter:
    """Writes files under ``out`` only when their content changed, and keeps the manifest."""

    def __init__(self, out: Path):
        self.out = out
        self._prefix = os.path.join(out, "")  # "OUT/": a file's path is this + its rel
        self.old = self._read_manifest()
        same_format = self.old.get("format") == FORMAT
        self.old_files: dict[str, dict[str, Any]] = self.old.get("files", {}) if same_format else {}
        self.old_runs: dict[str, dict[str, Any]] = self.old.get("runs", {}) if same_format else {}
        self.files: dict[str, dict[str, Any]] = {}
        #: ``files``' keys in the order first produced (``mark``/``produced_since`` slice it: a copy
        #: of every key per run made a build quadratic in runs)
        self._order: list[str] = []
        self.runs: dict[str, dict[str, Any]] = {}
        self.written: list[str] = []
        self.unchanged: list[str] = []
        self.removed: list[str] = []
        self.bytes_written = 0
        self._building = False
        #: Folders this writer made or found (one ``mkdir`` each, not one per file written in it).
        self._folders: set[Path] = set()

    # -- manifest -------------------------------------------------------------------------------
    def _read_manifest(self) -> dict[str, Any]:
        path = self.out / MANIFEST
        if self.out.exists() and not self.out.is_dir():
            raise SiteError(f"{self.out} exists and is not a folder")
        if (self.out / BUILDING).is_file():
            self._clean_temporaries()  # a build of ours was killed here: resume it
        if not path.exists():
            if (self.out / BUILDING).is_file():
                return {}
            if self.out.is_dir() and any(self.out.iterdir()):
                raise SiteError(
                    f"{self.out} is not empty and holds no labledger site ({MANIFEST} is "
                    f"missing); choose an empty or new folder so nothing of yours is "
                    f"overwritten"
                )
            return {}
        try:
            manifest = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            return {}  # a damaged manifest: rebuild everything (nothing is removed)
        return manifest if isinstance(manifest, dict) else {}

    def _clean_temporaries(self) -> None:
        """Remove the temporary files (``.NAME.PID.tmp``) a killed build left in the folder."""
        for root, _dirs, names in os.walk(self.out):
            for name in names:
                if _TEMPORARY.fullmatch(name):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(root, name))

    def begin(self) -> None:
        """Mark the folder as being built (called before the first write; see the module docstring)."""
        if not self._building:
            self.out.mkdir(parents=True, exist_ok=True)
            atomic_write(self.out / BUILDING, orjson.dumps({"pid": os.getpid()}), fsync=False)
            self._building = True

    def owned_path(self, rel: Any, entry: Any) -> Path | None:
        """``OUT/rel`` if the builder can prove it wrote it (see the module docstring), else None.

        >>> import tempfile
        >>> w = SiteWriter(Path(tempfile.mkdtemp()))
        >>> w.owned_path("../victim.txt", {"size": 1}), w.owned_path("/etc/passwd", {"size": 1})
        (None, None)
        """
        if not isinstance(rel, str) or not isinstance(entry, dict) or not rel or "\\" in rel or "\0" in rel:
            return None
        parts = rel.split("/")
        if rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or parts[0] in (MANIFEST, BUILDING):
            return None
        out = self.out.resolve()
        path = self.out / rel
        try:
            if not Path(os.path.realpath(path.parent)).is_relative_to(out):
                return None
            st = path.lstat()
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size != entry.get("size"):
            return None
        digest = entry.get("sha256")
        if digest is not None and sha256_bytes(path.read_bytes()) != digest:
            return None  # changed since we wrote it: somebody else's now
        return path

    def save(self, extra: dict[str, Any]) -> None:
        """Remove files of the old build that this build did not produce, then save the manifest."""
        for rel in sorted(set(self.old_files) - set(self.files)):
            path = self.owned_path(rel, self.old_files[rel])
            if path is not None:
                path.unlink()
                self.removed.append(rel)
                self._prune(path.parent)
        manifest = {"format": FORMAT, **extra, "runs": self.runs, "files": self.files}
        atomic_write(self.out / MANIFEST, orjson.dumps(manifest), fsync=False)
        (self.out / BUILDING).unlink(missing_ok=True)
        self._building = False

    def _prune(self, folder: Path) -> None:
        out = self.out.resolve()
        while (
            folder.resolve() != out
            and folder.resolve().is_relative_to(out)
            and folder.is_dir()
            and not folder.is_symlink()
            and not any(folder.iterdir())
        ):
            folder.rmdir()
            folder = folder.parent

    # -- writing --------------------------------------------------------------------------------
    def _unchanged(self, rel: str, entry: dict[str, Any]) -> bool:
        old = self.old_files.get(rel)
        if old != entry:
            return False
        try:  # (a string path: pathlib's cost was most of a rebuild's)
            return os.stat(self._prefix + rel).st_size == entry["size"]
        except (FileNotFoundError, NotADirectoryError):
            return False

    def _folder(self, folder: Path) -> None:
        if folder not in self._folders:
            folder.mkdir(parents=True, exist_ok=True)
            self._folders.add(folder)

    def write(self, rel: str, data: bytes) -> bool:
        """Write ``data`` to ``out/rel`` unless the same bytes are already there. True if written."""
        entry = {"sha256": sha256_bytes(data), "size": len(data)}
        self._produce(rel, entry)
        if self._unchanged(rel, entry):
            self.unchanged.append(rel)
            return False
        self.begin()
        path = self.out / rel
        self._folder(path.parent)
        atomic_write(path, data, fsync=False)
        self.written.append(rel)
        self.bytes_written += len(data)
        return True

    def write_data(self, rel: str, key: str, payload: Any = None, *, raw_json: bytes | None = None) -> bool:
        """Write a JavaScript data file (see :func:`js_assignment`)."""
        return self.write(rel, js_assignment(key, payload, raw_json=raw_json))

    def copy(self, rel: str, src: Path) -> bool:
        """Copy ``src`` to ``out/rel`` unless a copy of the same source (size, mtime) is there."""
        st = src.stat()
        entry = {"src_size": st.st_size, "src_mtime_ns": st.st_mtime_ns, "size": st.st_size}
        self._produce(rel, entry)
        if self._unchanged(rel, entry):
            self.unchanged.append(rel)
            return False
        self.begin()
        path = self.out / rel
        self._folder(path.parent)
        with atomic_open(path, fsync=False) as out, open(src, "rb") as f:  # a full disk: named, nothing left
            shutil.copyfileobj(f, out, 1 << 20)
        self.written.append(rel)
        self.bytes_written += st.st_size
        return True

    def keep(self, rels: Iterable[str]) -> bool:
        """Carry files of an unchanged run over from the last build; False if any is missing."""
        entries = {}
        for rel in rels:
            entry = self.old_files.get(rel)
            if entry is None or not self._unchanged(rel, entry):
                return False
            entries[rel] = entry
        for rel, entry in entries.items():
            self._produce(rel, entry)
        self.unchanged.extend(entries)
        return True

    def carry(self, rels: Iterable[str]) -> bool:
        """Carry files of an unchanged run over from the last build without looking at them (the
        manifest is trusted: a rebuild that checks, :meth:`keep`, writes a removed file again);
        False if the last build did not write one of them."""
        old = self.old_files
        try:
            entries = [(rel, old[rel]) for rel in rels]
        except KeyError:
            return False
        files, order = self.files, self._order
        for rel, entry in entries:
            if rel not in files:
                order.append(rel)
            files[rel] = entry
        self.unchanged.extend(rel for rel, _ in entries)
        return True

    def _produce(self, rel: str, entry: dict[str, Any]) -> None:
        if rel not in self.files:
            self._order.append(rel)
        self.files[rel] = entry

    def mark(self) -> int:
        """A position in the list of produced files (see :meth:`produced_since`)."""
        return len(self._order)

    def produced_since(self, mark: int) -> list[str]:
        """Files produced (written or unchanged) since ``mark``, in order."""
        return self._order[mark:]

    def forget_since(self, mark: int) -> None:
        """Drop the files produced since ``mark`` (a run that failed half-way): files this build
        wrote are deleted now, files of an earlier build are removed by :meth:`save`."""
        dropped = self._order[mark:]
        del self._order[mark:]
        written = set(self.written)
        for rel in dropped:
            entry = self.files.pop(rel)
            if rel in written:
                self.bytes_written -= entry.get("size", 0)
            if rel in written and rel not in self.old_files:
                path = self.out / rel
                if path.is_file():
                    path.unlink()
                    self._prune(path.parent)
        gone = set(dropped)
        self.written = [r for r in self.written if r not in gone]
        self.unchanged = [r for r in self.unchanged if r not in gone]
