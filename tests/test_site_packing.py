"""The catalog's packed form (#12): every column encoding gives back the values it was given."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from labledger.site.output import js_assignment, load_data_file
from labledger.site.packing import ABSENT, pack_catalog, pack_column, unpack_catalog, unpack_column

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
)
VALUES = st.one_of(
    SCALARS, st.lists(st.text(max_size=3), max_size=3), st.dictionaries(st.text(max_size=3), SCALARS, max_size=2)
)


def same(a, b) -> bool:
    """Equal with types (True is not 1, 1.0 may come back as 1.0 only)."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(VALUES, st.just(ABSENT)), max_size=40), st.sampled_from([1, 3, 30]))
def test_a_column_comes_back(values, repeat):
    values = values * repeat  # long columns take the dictionary and float encodings
    got = unpack_column(pack_column(values), len(values))
    assert len(got) == len(values)
    for a, b in zip(values, got):
        assert (a is ABSENT and b is ABSENT) or same(a, b), (a, b)


def test_columns_take_the_compact_encodings():
    n = 1000
    assert "c" in pack_column([1000] * n)
    assert "v" in pack_column([f"run-{i}" for i in range(n)])
    floats = pack_column([i / 7 if i % 9 else None for i in range(n)])
    assert set(floats) == {"f"}
    assert pack_column(list(range(n)))["int"] == 1
    lr = pack_column([[1e-3, 3e-4, 1e-4][i % 3] for i in range(n)])
    assert lr["d"] == [1e-3, 3e-4, 1e-4] and lr["w"] == 1


def test_a_packed_catalog_reads_back_as_the_catalog(tmp_path):
    runs = [{"id": f"r{i}", "name": "<b>x</b>", "steps": 10, "tags": ["a"] if i % 2 else []} for i in range(50)]
    runs[3]["unreadable"] = "no run.json"
    rows = [[i * 0.5, "adam" if i % 3 else None, True] for i in range(50)]
    cat = {"ledger": "L", "runs": runs, "fields": {"names": ["config.lr", "config.opt", "config.x"], "rows": rows}}
    path = tmp_path / "catalog.js"
    data = js_assignment("catalog", pack_catalog(cat))
    assert b"<b>" not in data and b'"packed":1' in data
    path.write_bytes(data)
    assert load_data_file(path) == ("catalog", cat)
    assert unpack_catalog(cat) is cat  # the older list form is read as it is
