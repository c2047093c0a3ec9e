"""The query language: its grammar (valid and invalid expressions with their errors), and SQLite =
PostgreSQL = the reference evaluator on random ledgers (hypothesis)."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from postgres_server import postgres_cluster  # noqa: F401 (fixture)

import labledger
from labledger.store.ledger import Ledger
from labledger.store.query import QueryError, evaluate, parse, parse_sort, sort_rows

VALID = [
    "config.lr < 1e-3 and config.opt = 'adam'",
    "config.optim.betas.0 >= .9",
    "not (status = 'failed' or status = 'crashed')",
    "name ~ '^mlp-h(32|128)$' and group != 'old'",
    "name !~ 'debug'",
    "config.opt in ('adam', 'sgd', 3)",
    "config.opt not in ('adam')",
    "scalars.loss.min between 0.1 and 0.5",
    "scalars.loss.min not between -1 and -0.5",
    "has tag 'baseline' and tags has 'v2'",
    "eval.test.accuracy is not null or summary.best is null",
    "`eval.test.f1[average=macro]` > 0.5",
    "eval.test.f1[average=macro] > 0.5",
    "config.use_amp = true and config.debug != false",
    "started > '2026-11-30' and duration < 3600",
    "git.commit = 'abc' OR host = 'gpu1' AND NOT id = 'x'",
]

INVALID = [
    ("lr << 3", "expected a value", "lr <"),
    ("config.lr <", "expected a value", "config.lr <"),
    ("config.lr = 1 and", "expected a field name", "config.lr = 1 and"),
    ("(config.lr = 1", "expected ')'", "(config.lr = 1"),
    ("config.lr = 1)", "expected 'and', 'or'", "config.lr = 1"),
    ("config.lr = null", "write 'is null'", "config.lr = "),
    ("config.lr is 3", "expected 'null' after 'is'", "config.lr is "),
    ("config.lr in 1, 2", "expected '(' after 'in'", "config.lr in "),
    ("config.lr between 1 2", "expected 'and' after the first value", "config.lr between 1 "),
    ("config.lr between 1 and 'x'", "two numbers or two texts", "config.lr "),
    ("name ~ 'a('", "bad regular expression", "name ~ "),
    ("name ~ 3", "a regular expression", "name ~ "),
    ("config.lr $ 3", "unexpected character '$'", "config.lr "),
    ("name = 3", "'name' holds text", ""),
    ("duration = 'x'", "number of seconds", ""),
    ("started > 'yesterday'", "an ISO date", ""),
    ("lr < 3", "unknown field 'lr'", ""),
    ("tags = 'x'", "tags are tested with has", ""),
    ("config.lr has 'x'", "'has' is for tags", ""),
    ("has label 'x'", "expected 'tag' after 'has'", "has "),
    ("config.flag < true", "booleans compare with = and != only", "config.flag < "),
]


def test_valid_expressions_parse():
    for text in VALID:
        parse(text)
    with pytest.raises(QueryError, match="the expression is empty"):
        parse("  ")


@pytest.fixture(scope="module")
def small_ledger(tmp_path_factory):
    d = tmp_path_factory.mktemp("q") / "ledger"
    for i, (lr, opt) in enumerate([(1e-4, "adam"), (1e-2, "sgd"), (5e-4, "adam")]):
        with labledger.start_run(
            f"mlp-{i}",
            group="sweep",
            tags=["baseline"] if i else [],
            config={"lr": lr, "opt": opt, "n": {"h": i}},
            ledger=d,
        ) as run:
            for s in range(1, 4):
                run.log(s, loss=1.0 / s + i, accuracy=0.1 * s)
            run.set_summary(best=i)
    return labledger.open_ledger(d)


@pytest.mark.parametrize("text,message,before_caret", INVALID, ids=[t for t, _, _ in INVALID])
def test_invalid_expressions_point_at_the_fault(small_ledger, text, message, before_caret):
    with pytest.raises(QueryError) as info:
        small_ledger.runs(where=text)
    err = str(info.value)
    assert message in err, err
    assert info.value.exit_code == 2
    if before_caret is not None:
        lines = err.splitlines()
        assert lines[1] == "  " + text
        assert lines[2] == "  " + " " * len(before_caret) + "^", err


def test_unknown_fields_suggest_the_ledgers_names(small_ledger):
    with pytest.raises(QueryError, match=r"unknown field 'lr'; did you mean 'config.lr'\?"):
        small_ledger.runs(where="lr < 3")
    with pytest.raises(QueryError, match=r"no run has the field 'config.lrr'; did you mean 'config.lr'"):
        small_ledger.runs(where="config.lrr < 3")
    with pytest.raises(QueryError, match=r"invalid sort: unknown field 'loss'; did you mean 'scalars.loss"):
        small_ledger.runs(sort="-loss")


def test_queries_on_a_logged_ledger(small_ledger):
    names = lambda **kw: [r.name for r in small_ledger.runs(**kw)]  # noqa: E731
    assert names(where="config.lr < 1e-3 and config.opt = 'adam'", sort="-config.lr") == ["mlp-2", "mlp-0"]
    assert names(where="config.n.h >= 1", sort="scalars.loss.min") == ["mlp-1", "mlp-2"]
    assert names(where="scalars.loss.max between 2 and 3.5") == ["mlp-2", "mlp-1"]
    assert names(where="has tag 'baseline' and not name ~ '1$'") == ["mlp-2"]
    assert names(where="summary.best = 0 and counts.steps = 3") == ["mlp-0"]
    assert names(where="config.opt in ('sgd', 1)", tag="baseline", group="sweep") == ["mlp-1"]
    table = small_ledger.runs_table(where="config.opt = 'adam'", sort="config.lr", columns=["config.lr", "tags"])
    assert table.column_names == ["id", "name", "config.lr", "tags"]
    assert table.to_pydict()["config.lr"] == [1e-4, 5e-4]
    assert list(table.to_pandas()["name"]) == ["mlp-0", "mlp-2"]


def test_evaluations_are_queryable(tmp_path):
    d = tmp_path / "ledger"
    rows = [{"id": f"x{i}", "task": "t", "gold": "a" if i % 3 else "b", "pred": "a"} for i in range(9)]
    ids = []
    for i in range(2):
        with labledger.start_run(f"m{i}", ledger=d) as run:
            run.log_results("test", rows[: 6 + i * 3])
        ids.append(run.id)
    book = labledger.open_ledger(d)
    for rid in ids:
        ev = labledger.evaluate(book.run(rid).results_path("test"), metrics=["accuracy"])
        book.save_evaluation(rid, "test", ev.to_dict() if hasattr(ev, "to_dict") else ev)
    fields = book.db.execute("SELECT eval_fields FROM runs WHERE id = ?", (ids[0],)).fetchone()[0]
    assert '"eval.test.accuracy"' in fields and '"eval.test.t.accuracy"' in fields
    got = [r.name for r in book.runs(where="eval.test.accuracy > 0", sort="-eval.test.accuracy")]
    assert sorted(got) == ["m0", "m1"]


def test_a_ledger_from_before_the_fields_is_backfilled(tmp_path):
    d = tmp_path / "ledger"
    with labledger.start_run("old", config={"a": {"b": 2}}, ledger=d) as run:
        run.log(1, loss=3.0)
        run.log(2, loss=1.0)
        run.log(3, loss=2.0)
    book = labledger.open_ledger(d)
    book.db.execute("UPDATE runs SET fields = NULL")
    book.close()
    book = labledger.open_ledger(d)
    assert [r.name for r in book.runs(where="config.a.b = 2 and scalars.loss.min = 1 and scalars.loss.last = 2")] == [
        "old"
    ]


def test_a_running_run_is_queryable_at_its_sync(tmp_path):
    d = tmp_path / "ledger"
    with labledger.start_run("live", config={"lr": 0.1}, ledger=d) as run:
        book = labledger.open_ledger(d)
        assert [r.name for r in book.runs(where="config.lr = 0.1")] == ["live"]  # from the start
        for s in range(5):
            run.log(s, loss=10.0 - s)
        run.sync()
        assert [r.name for r in book.runs(where="scalars.loss.min = 6 and scalars.loss.max = 10")] == ["live"]


# -- SQLite = PostgreSQL = the reference evaluator ----------------------------------------------
KEYS = ["config.lr", "config.opt", "config.a.b", "scalars.loss.min", "eval.test.accuracy"]
WORDS = ["adam", "sgd", "Adam", "a'b", "", "ü", "10"]
values = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.5, -1.5, 1e-3, 2.0]),
    st.sampled_from(WORDS),
    st.booleans(),
    st.none(),
    st.just([1, 2]),
)
run_rows = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["a", "b", "mlp-1", "mlp-2"]),
            "group": st.one_of(st.none(), st.sampled_from(["g1", "g2"])),
            "status": st.sampled_from(["finished", "failed", "killed"]),
            "tags": st.lists(st.sampled_from(["x", "y", "z"]), unique=True, max_size=2),
            "started": st.integers(0, 5).map(float),
            "length": st.one_of(st.none(), st.sampled_from([1.0, 10.0])),
            "fields": st.dictionaries(st.sampled_from(KEYS), values, max_size=5),
        }
    ),
    min_size=0,
    max_size=8,
)


def literal(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return repr(v)


scalars_lit = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5, 1e-3]), st.sampled_from(WORDS))
json_field = st.sampled_from([*KEYS, "config.never"])


@st.composite
def predicates(draw) -> str:
    kind = draw(st.sampled_from(["cmp", "in", "between", "null", "regex", "tag", "col", "bool"]))
    f = draw(json_field)
    if kind == "cmp":
        return f"{f} {draw(st.sampled_from(['=', '!=', '<', '<=', '>', '>=']))} {literal(draw(scalars_lit))}"
    if kind == "bool":
        return f"{f} {draw(st.sampled_from(['=', '!=']))} {literal(draw(st.booleans()))}"
    if kind == "in":
        vals = draw(st.lists(st.one_of(scalars_lit, st.booleans()), min_size=1, max_size=3))
        return f"{f} {draw(st.sampled_from(['in', 'not in']))} ({', '.join(literal(v) for v in vals)})"
    if kind == "between":
        if draw(st.booleans()):
            lo, hi = sorted([draw(st.integers(-3, 3)), draw(st.integers(-3, 3))])
        else:
            lo, hi = sorted(draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=2)))
        return f"{f} {draw(st.sampled_from(['between', 'not between']))} {literal(lo)} and {literal(hi)}"
    if kind == "null":
        return f"{draw(st.sampled_from([f, 'group']))} is {draw(st.sampled_from(['', 'not ']))}null"
    if kind == "regex":
        pat = draw(st.sampled_from(["^a", "d", "m$", "^$", "[A-Z]", "mlp-.", "1|2"]))
        return f"{draw(st.sampled_from([f, 'name', 'group']))} {draw(st.sampled_from(['~', '!~']))} '{pat}'"
    if kind == "tag":
        return f"has tag '{draw(st.sampled_from(['x', 'y', 'w']))}'"
    col = draw(st.sampled_from(["name", "group", "status", "started", "duration"]))
    if col in ("started", "duration"):
        return f"{col} {draw(st.sampled_from(['=', '<', '>=']))} {draw(st.integers(0, 11))}"
    return f"{col} {draw(st.sampled_from(['=', '!=', '<', '>']))} {literal(draw(st.sampled_from(['a', 'mlp-2', 'g1', 'failed'])))}"


def expressions(depth: int = 2):
    if depth == 0:
        return predicates()
    sub = expressions(depth - 1)
    return st.one_of(
        predicates(),
        st.builds(lambda a, b, op: f"({a} {op} {b})", sub, sub, st.sampled_from(["and", "or"])),
        st.builds(lambda a: f"not {a}", sub),
    )


sorts = st.lists(
    st.tuples(st.sampled_from([*KEYS, "name", "group", "started", "duration"]), st.booleans()), max_size=2
).map(lambda keys: ",".join(("-" if d else "") + k for k, d in keys))


def fill(ledger: Ledger, rows: list[dict]) -> list[dict]:
    """Write ``rows`` into the index as runs (index rows only: the query never opens run files)."""
    ledger.db.execute("DELETE FROM run_tags")
    ledger.db.execute("DELETE FROM runs")
    out = []
    for i, row in enumerate(rows):
        rid = f"r{i:02d}"
        ledger.register_run(
            {
                "id": rid,
                "name": row["name"],
                "group": row["group"],
                "tags": row["tags"],
                "status": row["status"],
                "started": row["started"],
            }
        )
        ended = None if row["length"] is None else row["started"] + row["length"]
        plain = {k: v for k, v in row["fields"].items() if not k.startswith("eval.")}
        evals = {k: v for k, v in row["fields"].items() if k.startswith("eval.")}
        ledger.update_run(rid, status=row["status"], ended=ended, fields=plain, eval_fields=evals)
        out.append(
            {
                "id": rid,
                "name": row["name"],
                "grp": row["group"],
                "status": row["status"],
                "started": row["started"],
                "duration": None if ended is None else ended - row["started"],
                "tags": row["tags"],
                "fields": row["fields"],
            }
        )
    return out


def query_ids(ledger: Ledger, where: str, sort: str) -> list[str]:
    from labledger.store.query import compile_query, prepare

    node, keys = prepare(ledger.db, ledger.dialect, where, sort, strict=False)
    sql, params = compile_query(node, keys, columns="id", dialect=ledger.dialect, now=100.0)
    return [r[0] for r in ledger.db.execute(sql, params).fetchall()]


def reference_ids(rows: list[dict], where: str, sort: str) -> list[str]:
    node = parse(where)
    return [r["id"] for r in sort_rows([r for r in rows if evaluate(node, r)], parse_sort(sort))]


@pytest.fixture(scope="module")
def both(tmp_path_factory, postgres_cluster):
    lite = Ledger(tmp_path_factory.mktemp("lite") / "ledger", create=True)
    pg = Ledger(postgres_cluster.new_database(), artifacts=tmp_path_factory.mktemp("pg"), create=True)
    yield lite, pg
    lite.close()
    pg.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=run_rows, queries=st.lists(st.tuples(expressions(), sorts), min_size=1, max_size=6))
def test_sqlite_postgres_and_the_reference_agree(both, rows, queries):
    lite, pg = both
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = fill(lite, rows)
        fill(pg, rows)
    for where, sort in queries:
        expected = reference_ids(reference, where, sort)
        assert query_ids(lite, where, sort) == expected, (where, sort)
        assert query_ids(pg, where, sort) == expected, (where, sort)


def test_every_run_without_a_filter_is_what_the_compiled_query_selects(tmp_path):
    """``runs()`` without a filter or a sort skips the query language (#19): same rows, same order as
    compile_query's SQL, ties in ``started`` broken by id."""
    import time

    from labledger.store.query import compile_query
    from labledger.store.run import Run

    ledger = Ledger(tmp_path / "l", create=True)
    for name, started in (("a", 5.0), ("b", 7.0), ("c", 5.0), ("d", 6.0)):
        Run(name, ledger=ledger, started=started).finish()
    sql, params = compile_query(None, [], columns=Ledger._COLUMNS, now=time.time())
    expected = ledger.db.execute(sql, params).fetchall()
    assert ledger._select(None, None, None, None, None, None) == expected
    assert ledger._select(None, None, None, None, "  ", []) == expected
    names = [r.name for r in ledger.runs()]
    assert names == [row[1] for row in expected] and names[:2] == ["b", "d"] and len(names) == 4
