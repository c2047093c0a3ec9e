"""The data dictionary: every file of a run, every index table and every document, field by field (#15).

Generated from the types alone (:mod:`labledger.schema.records` and the documents of
:mod:`labledger.schema.documents`): a field's type comes from its annotation, its unit and meaning
from its ``msgspec.Meta``. ``labledger schema --markdown`` prints :func:`dictionary_markdown`
(docs/data-dictionary.md is its output, checked by a test), and the site's data dictionary page
renders the same :func:`dictionary_sections`.

>>> sections = dictionary_sections()
>>> sections[0].title, sections[0].rows[0].name
('run.json', 'id')
>>> "| `step` * | int |  | the step the values belong to" in dictionary_markdown()
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import msgspec.inspect as mi

from labledger.schema.dataset import DATASET_KINDS, SCHEMA_NAMES
from labledger.schema.documents import KINDS, SCHEMA_VERSION
from labledger.schema.records import INDEX_TABLES, RUN_FILES


@dataclass(frozen=True)
class FieldRow:
    """One field: its JSON name, type, unit, meaning, and whether every record has it."""

    name: str
    type: str
    unit: str
    meaning: str
    required: bool


@dataclass
class Section:
    """One table of the dictionary: a file, an index table, or a (part of a) document."""

    group: str
    title: str
    anchor: str
    about: str
    rows: list[FieldRow] = field(default_factory=list)
    extra: str | None = None


def _type_name(t: mi.Type) -> str:
    if isinstance(t, mi.Metadata):
        return _type_name(t.type)
    if isinstance(t, mi.UnionType):
        parts = [_type_name(x) for x in t.types]
        if "any" in parts:
            return "any"
        return " | ".join(dict.fromkeys(parts))
    if isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        return f"list[{_type_name(t.item_type)}]"
    if isinstance(t, mi.DictType):
        return f"object[{_type_name(t.key_type)}, {_type_name(t.value_type)}]"
    if isinstance(t, mi.StructType):
        return t.cls.__name__
    if isinstance(t, mi.LiteralType):
        return " | ".join(repr(v) for v in t.values)
    names = {
        mi.IntType: "int",
        mi.FloatType: "float",
        mi.StrType: "str",
        mi.BoolType: "bool",
        mi.NoneType: "null",
        mi.AnyType: "any",
    }
    for cls, name in names.items():
        if isinstance(t, cls):
            return name
    return type(t).__name__.removesuffix("Type").lower()


def _meta(t: mi.Type) -> tuple[str, str]:
    if isinstance(t, mi.Metadata):
        return (t.extra or {}).get("unit", "") or "", (t.extra_json_schema or {}).get("description", "") or ""
    return "", ""


def field_rows(struct: type[msgspec.Struct]) -> list[FieldRow]:
    """The fields of ``struct`` in declared order (``ClassVar``\\ s are not fields).

    >>> from labledger.schema.records import NoteRecord
    >>> [(r.name, r.type) for r in field_rows(NoteRecord)]
    [('time', 'float'), ('text', 'str')]
    """
    info = mi.type_info(struct)
    assert isinstance(info, mi.StructType)
    out = []
    for f in info.fields:
        unit, text = _meta(f.type)
        out.append(FieldRow(f.encode_name, _type_name(f.type), unit, text, f.required))
    return out


def _nested(struct: type[msgspec.Struct]) -> list[type[msgspec.Struct]]:
    """``struct`` and every Struct its fields reach, depth first, each once."""
    seen: dict[type, None] = {}

    def walk(t: mi.Type) -> None:
        if isinstance(t, mi.Metadata):
            walk(t.type)
        elif isinstance(t, mi.UnionType):
            for x in t.types:
                walk(x)
        elif isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
            walk(t.item_type)
        elif isinstance(t, mi.DictType):
            walk(t.value_type)
        elif isinstance(t, mi.StructType) and t.cls not in seen:
            seen[t.cls] = None
            for f in t.fields:
                walk(f.type)

    walk(mi.type_info(struct))
    return list(seen)


def _first_line(obj: Any) -> str:
    """The first paragraph of ``obj``'s docstring, on one line, with Markdown code spans."""
    text = " ".join((obj.__doc__ or "").split("\n\n")[0].split())
    return _rst(text)


def _rst(text: str) -> str:
    return text.replace("``", "`").replace("\\ ", "")


def dictionary_sections(kind: str | None = None) -> list[Section]:
    """Every table of the dictionary (or only document ``kind``'s, or dataset ``kind``'s:
    ``dataset-scalars``), in the order shown."""
    out: list[Section] = []
    if kind in SCHEMA_NAMES:
        return [dataset_section(SCHEMA_NAMES[kind])]
    if kind is None:
        listed = {struct for _, struct in RUN_FILES if not isinstance(struct, str)}
        for path, struct in RUN_FILES:
            if isinstance(struct, str):
                out.append(Section("Files of a run", path, "file-" + _slug(path), struct))
                continue
            for i, part in enumerate(_nested(struct)):
                if i and part in listed:
                    continue
                title = path if i == 0 else f"{path} › {part.__name__}"
                extra = getattr(part, "EXTRA", None)
                out.append(
                    Section("Files of a run", title, "file-" + _slug(title), _first_line(part), field_rows(part), extra)
                )
        for table, struct in INDEX_TABLES.items():
            out.append(
                Section("Index tables", table, "index-" + table, _first_line(struct), field_rows(struct), struct.EXTRA)
            )
        out += [dataset_section(name) for name in DATASET_KINDS]
    kinds = [kind] if kind else list(KINDS)
    for k in kinds:
        for i, doc_part in enumerate(_nested(KINDS[k])):
            title = f"{k}" if i == 0 else f"{k} › {doc_part.__name__}"
            out.append(
                Section(
                    "Documents",
                    title,
                    f"doc-{k}-{doc_part.__name__.lower()}",
                    _first_line(doc_part),
                    field_rows(doc_part),
                )
            )
    return out


def dataset_section(name: str) -> Section:
    """The table of one kind of the runs' open dataset (Parquet files, #46): its partitions, then its columns."""
    spec = DATASET_KINDS[name]
    rows = [
        FieldRow(p, "string", "", "the run's id" if p == "run" else "the result set's name", True)
        for p in spec.partitions
    ]
    rows += [FieldRow(c.name, c.type, "", c.meaning, False) for c in spec.columns]
    about = (
        f"`{spec.path}` (zstd Parquet): {spec.row}. Partition columns (`*`) come from the path; "
        f"JSON Schema: `labledger schema dataset-{name}`."
    )
    return Section("The runs as an open dataset (Parquet)", f"dataset/kind={name}", f"dataset-{name}", about, rows)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def dictionary_markdown(kind: str | None = None) -> str:
    """The data dictionary as Markdown: a table per file, index table and document part.

    >>> print(dictionary_markdown("import").splitlines()[0])
    # Data dictionary (schema_version 2)
    """
    lines = [
        f"# Data dictionary (schema_version {SCHEMA_VERSION})",
        "",
        "<!-- generated by `labledger schema --markdown` from labledger.schema; do not edit by hand -->",
        "",
        "Every file of a run folder (`LEDGER/runs/<run id>/`), every table of the index (`LEDGER/ledger.db`, "
        "or PostgreSQL in team mode) and every document, field by field. A field without `*` may be "
        "absent (or null). Units: `unix seconds` are seconds since 1970-01-01 UTC; `MiB` are 2^20 bytes; "
        "`nats` are natural-log units.",
        "",
    ]
    group = None
    for sec in dictionary_sections(kind):
        if sec.group != group:
            group = sec.group
            lines += [f"## {group}", ""]
        lines += [f"### `{sec.title}`", "", _cell(sec.about), ""]
        if sec.rows:
            lines += ["| field | type | unit | meaning |", "|---|---|---|---|"]
            for r in sec.rows:
                star = " *" if r.required else ""
                lines.append(f"| `{r.name}`{star} | {_cell(r.type)} | {r.unit} | {_cell(r.meaning)} |")
            lines.append("")
        if sec.extra:
            lines += [f"Other keys: {_cell(_rst(sec.extra))}", ""]
    return "\n".join(lines)


__all__ = ["FieldRow", "Section", "dataset_section", "dictionary_markdown", "dictionary_sections", "field_rows"]
