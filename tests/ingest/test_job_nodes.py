"""``job_nodes``: every job's node list expanded one row per node, whichever way the load takes
(one name, one range, anything else), the names ``gpuyield.hostlist`` gives (its Python
expansion for valid lists; its SQL macro, which the load used for every list, for any list);
and every list's node count, which the sacct checks take from a range's ends, the macro's."""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuyield.hostlist import HOSTLIST_MACRO_SQL, expand_hostlist
from gpuyield.ingest.sacct import checks, load

_PREFIX = st.text(alphabet="abn-x0", min_size=1, max_size=4)
_NUMBER = st.integers(min_value=0, max_value=120).map(str) | st.sampled_from(["007", "0", "099"])
_RANGE = st.tuples(_NUMBER, _NUMBER).map(lambda r: f"{r[0]}-{r[1]}") | _NUMBER
_ITEM = st.tuples(
    _PREFIX, st.lists(_RANGE, min_size=0, max_size=2), st.sampled_from(["", "b"])
).map(lambda t: f"{t[0]}[{','.join(t[1])}]{t[2]}" if t[1] else t[0])
_NODE_LIST = st.lists(_ITEM, min_size=1, max_size=3).map(",".join)


def _stored(node_lists: list[str | None]) -> list[tuple[int, str]]:
    con = duckdb.connect()
    con.execute(HOSTLIST_MACRO_SQL)
    con.execute("CREATE TABLE job_nodes (job_key BIGINT, node VARCHAR)")
    con.execute(
        """CREATE TABLE jobs AS SELECT k AS job_key, l AS node_list, 0 AS start_s
           FROM (SELECT unnest(range(?)) AS k, unnest(?) AS l)""",
        [len(node_lists), node_lists],
    )
    load._insert_job_nodes(con, "SELECT * FROM jobs")
    return con.execute("SELECT job_key, node FROM job_nodes ORDER BY ALL").fetchall()


def _macro(node_lists: list[str]) -> list[tuple[int, str]]:
    con = duckdb.connect()
    con.execute(HOSTLIST_MACRO_SQL)
    return con.execute(
        """SELECT k, unnest(hostlist_expand(l)) AS node
           FROM (SELECT unnest(range(?)) AS k, unnest(?) AS l) ORDER BY ALL""",
        [len(node_lists), node_lists],
    ).fetchall()


def _expected(node_lists: list[str | None]) -> list[tuple[int, str]]:
    return sorted(
        (key, name)
        for key, text in enumerate(node_lists)
        if text is not None
        for name in expand_hostlist(text)
    )


def test_lists_of_every_shape_expand_to_their_names() -> None:
    lists = ["n1", "n[1-3]", "gpu-a[08-11]", "x[98-102]", "p[007-7]", "a[1-2]b", "a[1-2],b3"]
    lists += ["c[1,3-4]", "z[000001-000003]", "q-r-s[1-2]", None]
    stored = _stored(lists)
    assert stored == _expected(lists)
    assert [n for k, n in stored if k == 3] == ["x100", "x101", "x102", "x98", "x99"]


@settings(deadline=None, max_examples=60)
@given(st.lists(_NODE_LIST, min_size=1, max_size=8))
def test_any_list_expands_as_the_hostlist_macro_expands_it(node_lists: list[str]) -> None:
    # Descending ranges too (the ingest refuses them before; the expansions must still agree).
    assert _stored(list(node_lists)) == _macro(list(node_lists))


def _counts(node_lists: list[str | None]) -> list[tuple[float | None, float | None]]:
    """(the sacct checks' node count, the ``hostlist_size`` macro's) of each list."""
    con = duckdb.connect()
    con.execute(HOSTLIST_MACRO_SQL)
    return con.execute(
        f"""SELECT {checks.node_count_sql("l")},
                CASE WHEN l IS NULL OR l = '' THEN 0.0 ELSE hostlist_size(l) END
            FROM (SELECT unnest(?) AS l, unnest(range(?)) AS k) ORDER BY k""",
        [node_lists, len(node_lists)],
    ).fetchall()


def test_node_counts_of_every_shape_are_the_macros() -> None:
    lists = ["n1", "n[1-3]", "gpu-a[08-11]", "p[007-7]", "n[5-3]", "a[1-2]b", "c[1,3-4]"]
    lists += ["n[0-99999999999999999999]", "q-r-s[1-2]", "", None]
    counts = _counts(lists)
    assert [ours for ours, _ in counts] == [1, 3, 4, 1, 0, 2, 3, 1e20, 2, 0, 0]
    assert all(ours == macro for ours, macro in counts)


@settings(deadline=None, max_examples=80)
@given(st.lists(_NODE_LIST, min_size=1, max_size=8))
def test_any_lists_node_count_is_the_macros(node_lists: list[str]) -> None:
    # One range is counted from its ends, anything else by the macro: the same number either way.
    assert all(ours == macro for ours, macro in _counts(list(node_lists)))
