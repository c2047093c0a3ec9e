"""What the library's results share: the typed document they hold and its standard accessors."""

from __future__ import annotations

from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

from labledger.schema.codec import decode


class Shown(Protocol):
    """A document with tables for a notebook (an evaluation, comparison, calibration, version table)."""

    def to_dict(self) -> dict[str, Any]: ...
    def to_json(self) -> str: ...
    def _repr_html_(self) -> str: ...


D = TypeVar("D", bound=Shown)


class DocumentResult(Generic[D]):
    """A result that holds one typed document, ``doc`` (given as its Struct or as the dict of it):
    ``to_dict()`` (and ``document``) give it as builtins, ``to_json()`` as JSON text, and a
    notebook shows its tables (:mod:`labledger.schema.html`)."""

    #: The Struct of the document (each result class names its own).
    doc_type: ClassVar[type[Any]]

    def __init__(self, doc: D | dict[str, Any]) -> None:
        # a dict (or anything not the Struct) is decoded: a wrong field is a RecordError naming it
        self.doc: D = doc if isinstance(doc, self.doc_type) else decode(cast(dict[str, Any], doc), type=self.doc_type)

    @property
    def document(self) -> dict[str, Any]:
        """The document as builtins (kept for code written against the dict documents)."""
        return self.doc.to_dict()

    def to_dict(self) -> dict[str, Any]:
        """The document as one JSON-ready dict (what the command's ``--json`` prints)."""
        return self.doc.to_dict()

    def to_json(self) -> str:
        """The document as JSON text."""
        return self.doc.to_json()

    def _repr_html_(self) -> str:
        """Notebook display (the document's tables, :mod:`labledger.schema.html`)."""
        return self.doc._repr_html_()
