"""One query language over many runs: parsed by a small recursive-descent parser, compiled to
parameterised SQL for the index (SQLite's JSON functions, or jsonb on PostgreSQL).

The same text selects runs in ``labledger runs --where``, ``Ledger.runs(where=)``,
``GET /api/runs?where=`` and the site's filter box (site/static/js/query.js mirrors this module).

Grammar (keywords are case-insensitive)::

    expr      := conj ("or" conj)*
    conj      := unary ("and" unary)*
    unary     := "not" unary | "(" expr ")" | "has" "tag" value | field test
    test      := ("=" | "!=" | "<" | "<=" | ">" | ">=") value
               | ["not"] "in" "(" value ("," value)* ")"
               | ["not"] "between" value "and" value
               | ("~" | "!~") string                        regex search
               | "is" ["not"] "null"
               | "has" value                                only for `tags`
    value     := 'text' | "text" | number | true | false
    field     := name | `any text`        e.g. config.optim.lr, eval.test.f1[average=macro]

Fields: ``id name group status host git.commit`` (text), ``started duration`` (seconds; ``started``
also takes an ISO date string), ``tags`` (with ``has``), and from the index's JSON columns
``config.<dotted.key>``, ``scalars.<name>.last|min|max``, ``summary.<key>``, ``counts.<kind>`` and
``eval.<result set>.<metric key>`` (see :mod:`labledger.store.fields`).

Semantics (the same in SQLite, PostgreSQL and :func:`evaluate`): every test is true or false,
never unknown. A comparison is true only when the field holds a value of the literal's type
(a number compares with numbers, text with text, a boolean with ``=``/``!=``), so a missing field
or another type makes ``=``, ``<``, ``in``, ``between`` and ``~`` false, and ``!=`` is ``not =``.
Text compares by code point. Regexes are searched, not anchored (use ``^...$``); keep to the
syntax that Python's ``re`` and PostgreSQL share. ``is null`` is true for a missing field.

Sorting: ``--sort KEY[,KEY]``, ``-KEY`` descending; numbers before text before booleans, missing
values last in both directions, ties by newest start.

Why hand-written and not ``lark``: the grammar is twenty lines, the parser has no dependency, and
every error can say exactly what was expected at which character (a caret line), with the field
names of this ledger as suggestions.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from labledger.errors import LedgerError
from labledger.store.runinfo import INDEX_COLUMNS


class QueryError(LedgerError):
    """A query expression or sort key that does not parse, or names a field no run has (usage error)."""

    exit_code = 2


#: Run fields that are columns of the index: name in the language -> (SQL column, type).
COLUMNS: dict[str, tuple[str, str]] = {
    "id": ("id", "text"),
    "name": ("name", "text"),
    "group": ("grp", "text"),
    "status": ("status", "text"),
    "host": ("host", "text"),
    "git.commit": ("git_commit", "text"),
    "started": ("started", "number"),
    "duration": ("duration", "number"),
}
#: Prefixes of the fields kept in the index's JSON columns (``eval.`` in ``eval_fields``).
PREFIXES = ("config.", "scalars.", "summary.", "counts.", "eval.")
KEYWORDS = {"and", "or", "not", "in", "between", "is", "null", "has", "tag", "true", "false"}
OPERATORS = ("<=", ">=", "!=", "!~", "=", "<", ">", "~")

#: The tokens, as text: compiled (and cached by ``re``) at the first :func:`tokenize`, so that importing
#: this module compiles nothing.
_TOKEN = r"""(?P<ws>\s+)
    |(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    |(?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    |(?P<quoted>`[^`"\\]+`)
    |(?P<name>[A-Za-z_][A-Za-z0-9_.@-]*(?:\[[^\]"\\]*\])?)
    |(?P<op><=|>=|!=|!~|=|<|>|~)
    |(?P<punct>[(),-])"""


class Token(NamedTuple):
    kind: str  # number, string, name, op, punct, end
    text: str
    pos: int
    value: Any = None


class Field(NamedTuple):
    name: str
    pos: int

    @property
    def column(self) -> tuple[str, str] | None:
        return COLUMNS.get(self.name)


class Predicate(NamedTuple):
    """One test of a field: ``op`` is = != < <= > >= in between ~ null has."""

    field: Field
    op: str
    values: tuple[Any, ...]
    negated: bool = False


class HasTag(NamedTuple):
    tag: str


class Bool(NamedTuple):
    op: str  # and, or, not
    parts: tuple[Node, ...]


Node = Predicate | HasTag | Bool


def _caret(text: str, pos: int, message: str, what: str = "expression") -> QueryError:
    return QueryError(f"invalid {what}: {message}\n  {text}\n  {' ' * pos}^")


def tokenize(text: str) -> list[Token]:
    """The tokens of an expression (an unknown character is an error pointing at it)."""
    out: list[Token] = []
    token = re.compile(_TOKEN, re.X).match
    i = 0
    while i < len(text):
        m = token(text, i)
        if m is None:
            raise _caret(text, i, f"unexpected character {text[i]!r}")
        kind = m.lastgroup or ""
        raw = m.group()
        if kind == "number":
            value: Any = float(raw) if any(c in raw for c in ".eE") else int(raw)
            out.append(Token("number", raw, i, value))
        elif kind == "string":
            out.append(Token("string", raw, i, re.sub(r"\\(.)", r"\1", raw[1:-1])))
        elif kind == "quoted":
            out.append(Token("field", raw, i, raw[1:-1]))
        elif kind == "name":
            low = raw.lower()
            out.append(Token("keyword" if low in KEYWORDS else "field", raw, i, low if low in KEYWORDS else raw))
        elif kind in ("op", "punct"):
            out.append(Token(kind, raw, i, raw))
        i = m.end()
    out.append(Token("end", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    def peek(self) -> Token:
        return self.tokens[self.i]

    def next(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def fail(self, message: str, tok: Token | None = None) -> QueryError:
        tok = tok or self.peek()
        return _caret(self.text, tok.pos, message)

    def is_kw(self, *words: str) -> bool:
        tok = self.peek()
        return tok.kind == "keyword" and tok.value in words

    def expect_kw(self, word: str, after: str) -> None:
        if not self.is_kw(word):
            raise self.fail(f"expected '{word}' after {after}; got {self._shown(self.peek())}")
        self.next()

    @staticmethod
    def _shown(tok: Token) -> str:
        return "the end of the expression" if tok.kind == "end" else repr(tok.text)

    def parse(self) -> Node:
        if self.peek().kind == "end":
            raise self.fail("the expression is empty (try: config.lr < 1e-3 and status = 'finished')")
        node = self.disjunction()
        if self.peek().kind != "end":
            tok = self.peek()
            raise self.fail(f"expected 'and', 'or' or the end of the expression; got {tok.text!r}")
        return node

    def disjunction(self) -> Node:
        parts = [self.conjunction()]
        while self.is_kw("or"):
            self.next()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else Bool("or", tuple(parts))

    def conjunction(self) -> Node:
        parts = [self.unary()]
        while self.is_kw("and"):
            self.next()
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else Bool("and", tuple(parts))

    def unary(self) -> Node:
        tok = self.peek()
        if self.is_kw("not"):
            self.next()
            return Bool("not", (self.unary(),))
        if tok.kind == "punct" and tok.text == "(":
            self.next()
            node = self.disjunction()
            close = self.peek()
            if not (close.kind == "punct" and close.text == ")"):
                raise self.fail(f"expected ')' to close the '(' at character {tok.pos + 1}; got {self._shown(close)}")
            self.next()
            return node
        if self.is_kw("has"):
            self.next()
            self.expect_kw("tag", "'has'")
            return HasTag(self.string_value("a tag"))
        if tok.kind != "field":
            raise self.fail(f"expected a field name (like config.lr or name), 'not' or '('; got {self._shown(tok)}")
        self.next()
        return self.test(Field(tok.value, tok.pos))

    def string_value(self, what: str) -> str:
        tok = self.next()
        if tok.kind != "string":
            raise self.fail(f"expected {what} in quotes; got {self._shown(tok)}", tok)
        text: str = tok.value  # a string token's value is its unquoted text
        return text

    def value(self, after: str) -> Any:
        tok = self.next()
        if tok.kind in ("string", "number"):
            return tok.value
        if tok.kind == "punct" and tok.text == "-" and self.peek().kind == "number":
            return -self.next().value
        if tok.kind == "keyword" and tok.value in ("true", "false"):
            return tok.value == "true"
        if tok.kind == "keyword" and tok.value == "null":
            raise self.fail("null is not a value to compare with; write 'is null' or 'is not null'", tok)
        raise self.fail(
            f"expected a value (a number, 'text', true or false) after {after}; got {self._shown(tok)}", tok
        )

    def test(self, field: Field) -> Node:
        tok = self.peek()
        if tok.kind == "op":
            self.next()
            if tok.text in ("~", "!~"):
                pattern = self.string_value(f"a regular expression after {tok.text!r}")
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise _caret(self.text, self.tokens[self.i - 1].pos, f"bad regular expression ({exc})") from None
                return Predicate(field, "~", (pattern,), negated=tok.text == "!~")
            at = self.peek()
            value = self.value(repr(tok.text))
            if isinstance(value, bool) and tok.text not in ("=", "!="):
                raise self.fail(f"booleans compare with = and != only; got {tok.text!r}", at)
            if tok.text == "!=":
                return Predicate(field, "=", (value,), negated=True)
            return Predicate(field, tok.text, (value,))
        negated = False
        if self.is_kw("not"):
            self.next()
            negated = True
            if not self.is_kw("in", "between"):
                raise self.fail(f"expected 'in' or 'between' after 'not'; got {self._shown(self.peek())}")
        if self.is_kw("in"):
            self.next()
            open_ = self.next()
            if not (open_.kind == "punct" and open_.text == "("):
                raise self.fail(f"expected '(' after 'in'; got {self._shown(open_)}", open_)
            values = [self.value("'('")]
            while self.peek().kind == "punct" and self.peek().text == ",":
                self.next()
                values.append(self.value("','"))
            close = self.next()
            if not (close.kind == "punct" and close.text == ")"):
                raise self.fail(f"expected ',' or ')' in the list after 'in'; got {self._shown(close)}", close)
            return Predicate(field, "in", tuple(values), negated)
        if self.is_kw("between"):
            self.next()
            low = self.value("'between'")
            self.expect_kw("and", "the first value of 'between'")
            high = self.value("'and'")
            if type(low) is bool or type(high) is bool or isinstance(low, str) != isinstance(high, str):
                raise self.fail("'between' needs two numbers or two texts", tok)
            return Predicate(field, "between", (low, high), negated)
        if self.is_kw("is"):
            self.next()
            neg = False
            if self.is_kw("not"):
                self.next()
                neg = True
            self.expect_kw("null", "'is'" if not neg else "'is not'")
            return Predicate(field, "null", (), negated=neg)
        if self.is_kw("has"):
            self.next()
            if field.name != "tags":
                raise _caret(self.text, field.pos, f"'has' is for tags (tags has 'x'); {field.name!r} is not tags")
            return HasTag(self.string_value("a tag"))
        raise self.fail(
            f"expected an operator (= != < <= > >= ~ !~ in between is has) after {field.name!r}; got {self._shown(tok)}"
        )


def parse(text: str) -> Node:
    """The syntax tree of an expression; a :class:`QueryError` with a caret line when it does not parse.

    >>> parse("config.lr < 1e-3 and not status = 'failed'")
    Bool(op='and', parts=(Predicate(field=Field(name='config.lr', pos=0), op='<', values=(0.001,), negated=False), Bool(op='not', parts=(Predicate(field=Field(name='status', pos=25), op='=', values=('failed',), negated=False),))))
    >>> parse("lr << 3")
    Traceback (most recent call last):
    ...
    labledger.store.query.QueryError: invalid expression: expected a value (a number, 'text', true or false) after '<'; got '<'
      lr << 3
          ^
    """
    return _Parser(text).parse()


def predicates_in(node: Node) -> Iterable[Predicate]:
    if isinstance(node, Predicate):
        yield node
    elif isinstance(node, Bool):
        for p in node.parts:
            yield from predicates_in(p)


def check_fields(text: str, node: Node, known: Iterable[str] | None, suggest: Iterable[str] = ()) -> None:
    """Every field is a run field or has a known prefix (and, with ``known``, some run has it);
    column fields are compared with values of their type. Errors point at the field and suggest
    names from ``suggest``."""
    known_set = set(known) if known is not None else None
    hints = set(suggest)
    for t in predicates_in(node):
        f = t.field
        col = f.column
        if col is not None:
            _check_column_values(text, t, col[1])
            continue
        if f.name == "tags":
            raise _caret(text, f.pos, "tags are tested with has: tags has 'baseline' (or: has tag 'baseline')")
        if not f.name.startswith(PREFIXES) or (known_set is not None and f.name not in known_set):
            raise _caret(text, f.pos, unknown_field_message(f.name, hints))


def _check_column_values(text: str, t: Predicate, kind: str) -> None:
    for v in t.values:
        if kind == "text" and not isinstance(v, str):
            raise _caret(text, t.field.pos, f"{t.field.name!r} holds text; compare it with a quoted value")
        if kind == "number" and (isinstance(v, bool) or (isinstance(v, str) and t.field.name != "started")):
            raise _caret(text, t.field.pos, f"{t.field.name!r} is a number of seconds; compare it with a number")
        if kind == "number" and isinstance(v, str):
            try:
                dt.datetime.fromisoformat(v)
            except ValueError:
                raise _caret(text, t.field.pos, f"'started' takes a number or an ISO date; got {v!r}") from None
    if t.op == "~" and kind != "text":
        raise _caret(text, t.field.pos, f"{t.field.name!r} is a number; '~' matches text")


def unknown_field_message(name: str, known: set[str]) -> str:
    """``unknown field 'lr'; did you mean 'config.lr'?`` (nearest names among the ledger's fields)."""
    import difflib

    names = sorted(set(COLUMNS) | {"tags"} | known)
    close = [k for k in names if k.endswith("." + name) or f".{name}." in k][:3]
    close += [c for c in difflib.get_close_matches(name, names, n=3, cutoff=0.6) if c not in close]
    hint = f"; did you mean {' or '.join(repr(c) for c in close[:3])}?" if close else ""
    if name.startswith(PREFIXES):
        return f"no run has the field {name!r}{hint}"
    prefixes = ", ".join(p + "*" for p in PREFIXES)
    return f"unknown field {name!r}{hint} (fields: {', '.join(COLUMNS)}, tags, {prefixes})"


def parse_sort(text: str | Sequence[str] | None) -> list[tuple[Field, bool]]:
    """``"-eval.test.accuracy,name"`` -> ``[(field, descending), ...]``."""
    if not text:
        return []
    keys = [k.strip() for k in (text.split(",") if isinstance(text, str) else text)]
    out = []
    shown = text if isinstance(text, str) else ",".join(text)
    pos = 0
    for key in keys:
        desc = key.startswith("-")
        name = key[1:].strip() if desc else key
        if name.startswith("`") and name.endswith("`"):
            name = name[1:-1]
        at = shown.find(key, pos)
        pos = max(at, 0) + len(key)
        if not name or not re.fullmatch(r"[^\s`\"\\]+", name):
            raise _caret(
                shown, max(at, 0), f"bad sort key {key!r} (a field name, '-' before it for descending)", "sort"
            )
        out.append((Field(name, max(at, 0) + (1 if desc else 0)), desc))
    return out


def check_sort(
    text: str,
    keys: list[tuple[Field, bool]],
    known: Iterable[str] | None,
    suggest: Iterable[str] = (),
    what: str = "sort",
) -> None:
    known_set = set(known) if known is not None else None
    hints = set(suggest)
    for f, _ in keys:
        if f.column is not None:
            continue
        if not f.name.startswith(PREFIXES) or (known_set is not None and f.name not in known_set):
            raise _caret(text, f.pos, unknown_field_message(f.name, hints), what)


# -- SQL ---------------------------------------------------------------------------------------
class _Compiler:
    """Builds ``SELECT ... FROM (runs + duration) r [LEFT JOIN run_fields sN ...] WHERE ... ORDER BY ...``.

    A test of a query field is ``r.id IN (SELECT run_id FROM run_fields WHERE key = ? AND ...)``:
    the index's narrow field table (migration m008, one row per run and field: ``kind`` 0 number,
    1 text, 2 boolean, 3 list or object, 4 null; numbers and booleans in ``num``, text in ``str``)
    answers it from its (key, kind, num) index or its (key, str) index of text values, without parsing any run's JSON. A
    run has no row for a field it does not have, so every test is true or false, never unknown.
    A sort key is a LEFT JOIN on (run_id, key), the table's primary key.
    """

    def __init__(self, dialect: str, now: float):
        self.pg = dialect == "postgresql"
        self.now = now
        self.joins: dict[str, int] = {}
        self.join_params: list[Any] = []
        self.params: list[Any] = []

    def column_value(self, f: Field, value: Any) -> Any:
        if f.name == "started" and isinstance(value, str):
            return dt.datetime.fromisoformat(value).timestamp()
        return value

    def field_test(self, name: str, condition: str, params: Sequence[Any]) -> str:
        self.params.append(name)
        self.params.extend(params)
        return f"(r.id IN (SELECT run_id FROM run_fields WHERE key = ? AND {condition}))"

    @staticmethod
    def typed(kind: str) -> str:
        """The ``run_fields`` condition and column that hold a value of ``kind``."""
        if kind == "number":
            return "kind = 0 AND num"
        if kind == "text":
            return "str"
        return "kind = 2 AND num"

    def node(self, n: Node) -> str:
        if isinstance(n, Bool):
            if n.op == "not":
                return f"(NOT {self.node(n.parts[0])})"
            return "(" + f" {n.op.upper()} ".join(self.node(p) for p in n.parts) + ")"
        if isinstance(n, HasTag):
            self.params.append(n.tag)
            return "EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = r.id AND t.tag = ?)"
        sql = self.test(n) if n.field.column is None else self.column_test(n)
        return f"(NOT {sql})" if n.negated else sql

    def column_test(self, t: Predicate) -> str:
        f = t.field
        col = f"r.{f.column[0]}" if f.column is not None else ""
        if t.op == "null":
            return f"({col} IS NULL)"
        if t.op == "~":
            self.params.append(t.values[0])
            return f"COALESCE(({col} ~ ?), FALSE)" if self.pg else f"COALESCE(regexp(?, {col}), FALSE)"
        values = [self.column_value(f, v) for v in t.values]
        self.params.extend(values)
        if t.op == "in":
            return f"COALESCE(({col} IN ({', '.join('?' * len(values))})), FALSE)"
        if t.op == "between":
            return f"COALESCE(({col} BETWEEN ? AND ?), FALSE)"
        return f"COALESCE(({col} {t.op} ?), FALSE)"

    def test(self, t: Predicate) -> str:
        name = t.field.name
        if t.op == "null":
            return f"(NOT {self.field_test(name, 'kind != 4', ())})"
        if t.op == "~":
            regex = "str IS NOT NULL AND " + ("str ~ ?" if self.pg else "regexp(?, str)")  # the str index's rows
            return self.field_test(name, regex, t.values)
        if t.op == "in":
            parts, params = [], []
            for kind in ("number", "text", "boolean"):
                vals = [int(v) if kind == "boolean" else v for v in t.values if _kind(v) == kind]
                if vals:
                    parts.append(f"({self.typed(kind)} IN ({', '.join('?' * len(vals))}))")
                    params += vals
            return self.field_test(name, "(" + " OR ".join(parts) + ")", params)
        kind = _kind(t.values[0])
        if t.op == "between":
            return self.field_test(name, f"{self.typed(kind)} BETWEEN ? AND ?", t.values)
        value = int(t.values[0]) if kind == "boolean" else t.values[0]
        return self.field_test(name, f"{self.typed(kind)} {t.op} ?", (value,))

    def order(self, keys: list[tuple[Field, bool]]) -> str:
        out = []
        for f, desc in keys:
            d = " DESC" if desc else ""
            col = f.column
            if col is not None:
                out += [f"(r.{col[0]} IS NULL)", f"r.{col[0]}{d}"]
                continue
            if f.name not in self.joins:
                self.joins[f.name] = len(self.joins)
                self.join_params.append(f.name)
            s = f"s{self.joins[f.name]}"
            # numbers, then text, then booleans, then the rest (lists, null, missing) in both directions
            out += [f"(CASE WHEN {s}.kind <= 2 THEN {s}.kind ELSE 3 END)", f"{s}.num{d}", f"{s}.str{d}"]
        out += ["r.started DESC", "r.id DESC"]
        return ", ".join(out)


def _kind(v: Any) -> str:
    return "boolean" if isinstance(v, bool) else ("text" if isinstance(v, str) else "number")


#: Columns of ``runs`` a query may select beside :data:`labledger.store.runinfo.INDEX_COLUMNS`.
_QUERY_COLUMNS = ("fields", "eval_fields")


def compile_query(
    where: Node | None, sort: list[tuple[Field, bool]], *, columns: str, dialect: str = "sqlite", now: float
) -> tuple[str, list[Any]]:
    """``(sql, params)`` selecting ``columns`` (of ``runs``, and ``duration``) for the runs that match, in order.

    >>> sql, params = compile_query(parse("config.opt = 'adam'"), [], columns="id", now=0.0)
    >>> params
    [0.0, 'config.opt', 'adam']
    """
    c = _Compiler(dialect, now)
    where_sql = c.node(where) if where is not None else "TRUE"
    order_sql = c.order(sort)
    duration = "CASE WHEN ended IS NOT NULL THEN ended - started WHEN status = 'running' THEN ? - started END"
    wanted = [col.strip() for col in columns.split(",")]

    base = ", ".join((*INDEX_COLUMNS, *_QUERY_COLUMNS))
    joins = "".join(f" LEFT JOIN run_fields s{i} ON s{i}.run_id = r.id AND s{i}.key = ?" for i in range(len(c.joins)))
    select = ", ".join(f"r.{col}" for col in wanted)
    sql = (
        f"SELECT {select} FROM (SELECT {base}, {duration} AS duration FROM runs) r{joins} "
        f"WHERE {where_sql} ORDER BY {order_sql}"
    )
    return sql, [now, *c.join_params, *c.params]


# -- the reference evaluator (tests; the site's query.js follows it) --------------------------
def _get(row: Mapping[str, Any], f: Field) -> Any:
    col = f.column
    if col is not None:
        return row.get(col[0])
    return row.get("fields", {}).get(f.name)


def _typed(v: Any, kind: str) -> Any:
    if kind == "boolean":
        return int(v) if isinstance(v, bool) else None
    if kind == "text":
        return v if isinstance(v, str) else None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def evaluate(node: Node, row: Mapping[str, Any]) -> bool:
    """Whether ``row`` (index columns + ``tags`` + merged ``fields``) matches: the semantics the SQL
    implements, written plainly.

    >>> evaluate(parse("config.lr < 0.01 and has tag 'x'"), {"tags": ["x"], "fields": {"config.lr": 0.001}})
    True
    """
    if isinstance(node, Bool):
        if node.op == "not":
            return not evaluate(node.parts[0], row)
        results = (evaluate(p, row) for p in node.parts)
        return all(results) if node.op == "and" else any(results)
    if isinstance(node, HasTag):
        return node.tag in row.get("tags", ())
    hit = _test(node, row)
    return not hit if node.negated else hit


def _test(t: Predicate, row: Mapping[str, Any]) -> bool:
    raw = _get(row, t.field)
    if t.op == "null":
        return raw is None
    if t.op == "~":
        v = _typed(raw, "text")
        return v is not None and re.search(t.values[0], v) is not None

    def conv(value: Any) -> Any:
        if t.field.name == "started" and isinstance(value, str):
            return dt.datetime.fromisoformat(value).timestamp()
        return int(value) if isinstance(value, bool) else value

    def typed_for(value: Any) -> Any:
        if t.field.column is not None:
            return raw
        return _typed(raw, _kind(value))

    if t.op == "in":
        return any(typed_for(v) is not None and typed_for(v) == conv(v) for v in t.values)
    if t.op == "between":
        v = typed_for(t.values[0])
        return v is not None and conv(t.values[0]) <= v <= conv(t.values[1])
    value = t.values[0]
    v = typed_for(value)
    if v is None:
        return False
    w = conv(value)
    ok: bool = {"=": v == w, "<": v < w, "<=": v <= w, ">": v > w, ">=": v >= w}[t.op]
    return ok


def sort_rows(rows: list[Mapping[str, Any]], keys: list[tuple[Field, bool]]) -> list[Mapping[str, Any]]:
    """``rows`` in the order the SQL gives (the reference for tests)."""
    out = sorted(rows, key=lambda r: (r["started"], r["id"]), reverse=True)
    for f, desc in reversed(keys):

        def rank(r: Mapping[str, Any], f: Field = f) -> int:
            v = _get(r, f)
            if f.column is not None:
                return 0 if v is not None else 3
            if isinstance(v, bool):
                return 2
            if isinstance(v, (int, float)):
                return 0
            return 1 if isinstance(v, str) else 3

        groups: list[list[Mapping[str, Any]]] = [[], [], [], []]
        for r in out:
            groups[rank(r)].append(r)

        def sort_key(r: Mapping[str, Any], f: Field = f) -> Any:
            return _sort_value(_get(r, f))

        for g in groups[:3]:
            g.sort(key=sort_key, reverse=desc)
        out = [r for g in groups for r in g]
    return out


def _sort_value(v: Any) -> Any:
    return int(v) if isinstance(v, bool) else v


def regexp(pattern: str, value: Any) -> bool | None:
    """SQLite's ``regexp(pattern, value)`` for the index (a search, like PostgreSQL's ``~``)."""
    if value is None or not isinstance(value, str):
        return None
    compiled = _REGEX_CACHE.get(pattern)
    if compiled is None:
        compiled = _REGEX_CACHE[pattern] = re.compile(pattern)
    return compiled.search(value) is not None


_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


# -- running a query on the index -----------------------------------------------------------
def _has_field(db: Any, dialect: str, name: str) -> bool:
    return db.execute("SELECT 1 FROM run_fields WHERE key = ? LIMIT 1", (name,)).fetchone() is not None


def known_fields(db: Any, dialect: str = "sqlite") -> list[str]:
    """Every field name some run of the index has (run fields first, then the JSON fields, sorted)."""
    keys = [r[0] for r in db.execute("SELECT DISTINCT key FROM run_fields ORDER BY key").fetchall()]
    return [*COLUMNS, "tags", *keys]


def prepare(
    db: Any,
    dialect: str,
    where: str | None,
    sort: str | Sequence[str] | None,
    *,
    strict: bool = True,
    what: str = "sort",
) -> tuple[Node | None, list[tuple[Field, bool]]]:
    """Parse and check ``where`` and ``sort``; with ``strict``, a JSON field that no run has is an
    error suggesting the fields that exist (the lookup runs only for names not found); ``what``
    names the field list in errors about ``sort`` (``columns`` when that list is the columns)."""
    node = parse(where) if where is not None and str(where).strip() else None
    keys = parse_sort(sort)
    names = {t.field.name for t in predicates_in(node)} if node is not None else set()
    names |= {f.name for f, _ in keys}
    bad = [n for n in names if n not in COLUMNS and not n.startswith(PREFIXES)]
    absent = [n for n in names if strict and n.startswith(PREFIXES) and not _has_field(db, dialect, n)]
    suggest = known_fields(db, dialect) if bad or absent else []
    known = (names - set(absent)) if strict else None
    if node is not None:
        check_fields(str(where), node, known, suggest)
        if strict:
            check_value_kinds(db, str(where), node)
    if keys:
        shown = sort if isinstance(sort, str) else ",".join(sort or ())
        check_sort(shown, keys, known, suggest, what)
    return node, keys


#: ``run_fields.kind`` -> the kind of value a field holds (3: lists and objects, 4: null).
KIND_NAMES = {0: "number", 1: "text", 2: "boolean"}
_PLURAL = {"number": "numbers", "text": "text", "boolean": "booleans"}
_HOW = {"number": "a number", "text": "a quoted value", "boolean": "true or false"}


def held_kinds(db: Any, name: str) -> list[str]:
    """The kinds of value (number, text, boolean: in that order) that some run holds in JSON field
    ``name``: one look-up of ``run_fields``' ``(key, kind, num)`` index per kind, no count."""
    probe = "SELECT 1 FROM run_fields WHERE key = ? AND kind = ? LIMIT 1"
    return [label for kind, label in KIND_NAMES.items() if db.execute(probe, (name, kind)).fetchone() is not None]


def kind_count(db: Any, name: str, label: str) -> tuple[int, Any]:
    """How many runs hold a value of kind ``label`` in JSON field ``name``, and an example (the least).

    Read from one of ``run_fields``' indexes alone: numbers and booleans from ``(key, kind, num)``,
    text from ``(key, str)`` (only text values have a ``str``)."""
    kind = next(k for k, v in KIND_NAMES.items() if v == label)
    if kind == 1:
        count, value = db.execute(
            "SELECT COUNT(*), MIN(str) FROM run_fields WHERE key = ? AND str IS NOT NULL", (name,)
        ).fetchone()
    else:
        count, value = db.execute(
            "SELECT COUNT(*), MIN(num) FROM run_fields WHERE key = ? AND kind = ?", (name, kind)
        ).fetchone()
    return int(count), bool(value) if kind == 2 else value


def check_value_kinds(db: Any, text: str, node: Node) -> None:
    """A comparison of a JSON field with a value of a kind that no run holds there is an error
    (``config.lr < 0.05`` where every run's ``lr`` is text matches nothing); when only some runs
    hold another kind, a :class:`~labledger.errors.QueryWarning` says how many the test skips.

    The runs are counted only for those messages: a field whose runs all hold the kind compared
    with costs one index look-up per kind."""
    import warnings

    from labledger.errors import QueryWarning

    seen: dict[str, list[str]] = {}
    for t in predicates_in(node):
        f = t.field
        if f.column is not None or t.op in ("null", "has") or not f.name.startswith(PREFIXES):
            continue
        wanted = {"text"} if t.op == "~" else {_kind(v) for v in t.values}
        held = seen[f.name] if f.name in seen else seen.setdefault(f.name, held_kinds(db, f.name))
        if not held:
            continue
        if not wanted.intersection(held):
            counts = {k: kind_count(db, f.name, k)[0] for k in held}
            most = max(held, key=lambda k: counts[k])  # the first of the most common
            raise _caret(
                text,
                f.pos,
                f"{f.name!r} holds {' and '.join(_PLURAL[k] for k in held)}, never "
                f"{' or '.join(_PLURAL[k] for k in sorted(wanted))}: compare it with {_HOW[most]}",
            )
        for kind in held:
            if kind not in wanted:
                count, example = kind_count(db, f.name, kind)
                warnings.warn(
                    f"{f.name!r} holds {_PLURAL[kind]} in {count} run(s) (e.g. {example!r}), which "
                    f"'{f.name} {t.op} ...' does not match",
                    QueryWarning,
                    stacklevel=2,
                )


#: Run columns of :func:`runs_table` before the fields.
TABLE_RUN_COLUMNS = ("group", "status", "started", "duration", "tags")


def runs_table(
    ledger: Any, *, where: str | None, sort: str | Sequence[str] | None, columns: Sequence[str] | None
) -> Any:
    """:meth:`labledger.store.ledger.Ledger.runs_table` (an Arrow table of the matching runs)."""
    import orjson
    import pyarrow as pa

    ledger.reap()
    node, keys = prepare(ledger.db, ledger.dialect, where, sort)
    if columns is not None:
        named = [c for c in columns if c not in ("id", "name", "tags")]
        if named:  # unknown column names are errors too, as unknown sort keys are
            prepare(ledger.db, ledger.dialect, None, named, what="columns")
    sql, params = compile_query(
        node,
        keys,
        columns="id, name, grp, status, started, duration, host, git_commit, fields, eval_fields",
        dialect=ledger.dialect,
        now=__import__("time").time(),
    )
    rows = ledger.db.execute(sql, params).fetchall()
    tags = ledger.tags_of([r[0] for r in rows])
    records = []
    for rid, name, grp, status, started, duration, host, commit, fields, evals in rows:
        merged = {**orjson.loads(fields or "{}"), **orjson.loads(evals or "{}")}
        base = {"id": rid, "name": name, "group": grp, "status": status, "started": started, "duration": duration}
        base.update({"host": host, "git.commit": commit, "tags": tags[rid]})
        records.append((base, merged))
    if columns is None:
        seen: dict[str, None] = {}
        for _, merged in records:
            for k in merged:
                if k.startswith(("config.", "eval.")) or (k.startswith("scalars.") and k.endswith(".last")):
                    seen.setdefault(k, None)
        columns = [*TABLE_RUN_COLUMNS, *sorted(seen)]
    data: dict[str, list[Any]] = {"id": [b["id"] for b, _ in records], "name": [b["name"] for b, _ in records]}
    for col in columns:
        if col in ("id", "name"):
            continue
        data[col] = [b[col] if col in b else _arrow_value(m.get(col)) for b, m in records]
    arrays = {}
    for col, values in data.items():
        try:
            arrays[col] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types in one column: shown as text
            arrays[col] = pa.array([None if v is None else str(v) for v in values], type=pa.string())
    return pa.table(arrays)


def _arrow_value(v: Any) -> Any:
    if isinstance(v, (list, dict)):
        import orjson

        return orjson.dumps(v).decode()
    return v
