"""The relational IR and its rewrites (planner/ir.py, planner/incremental.py): no Spark."""

from __future__ import annotations

import pytest
from headwater.planner.incremental import (
    conjuncts,
    incrementalize,
    lower_set_ops,
    push_down_filters,
)
from headwater.planner.ir import (
    Aggregate,
    Difference,
    Distinct,
    Filter,
    Join,
    Scan,
    SemiJoin,
    SetOp,
    unique_columns,
    walk,
)

from headwater.errors import SQLError
from tests.test_engine_support import catalog, plan_of

UNSUPPORTED = {
    "SELECT a FROM t WHERE row_number() OVER (ORDER BY a) > 1": "window functions in this",
    "SELECT array_agg(b) OVER (PARTITION BY a) FROM t": "window function array_agg",
    "SELECT (SELECT max(x) FROM u WHERE u.a < t.a + random()) FROM t": "volatile function",
    "SELECT a, (SELECT max(x) FROM u WHERE u.a = t.a) FROM t GROUP BY a": "in an aggregated",
    "SELECT a FROM t WHERE b > ANY (SELECT x FROM u)": "subquery in this position",
    "SELECT xmlagg(b) FROM t": "aggregate function xmlagg",
    "SELECT stddev(b) OVER (PARTITION BY a) FROM t": "window function stddev",
    "SELECT random() FROM t": "volatile function random()",
    "SELECT now() FROM t": "now() outside WHERE",
    "SELECT CURRENT_TIMESTAMP FROM t": "time-dependent",
    "WITH RECURSIVE r(n) AS (SELECT a FROM t UNION SELECT n FROM r WHERE NOT EXISTS"
    " (SELECT 1 FROM u WHERE u.a = r.n)) SELECT n FROM r": "WITH RECURSIVE with NOT EXISTS",
    "SELECT a, count(*) FROM t GROUP BY DISTINCT ROLLUP (a)": "GROUP BY DISTINCT",
    "SELECT mode() WITHIN GROUP (ORDER BY b) OVER () FROM t": "window function mode",
    "SELECT * FROM json_each('{}')": "function in FROM",
    "SELECT * FROM generate_series(1, 3) WITH ORDINALITY": "WITH ORDINALITY",
    "SELECT a FROM t WHERE a IN (SELECT generate_series(1, 3))": "set-returning function",
    "SELECT CASE WHEN a > 0 THEN unnest(ARRAY[a]) END FROM t": "set-returning function",
    "SELECT * FROM t, LATERAL (SELECT x FROM u WHERE u.a <> t.a LIMIT 1) s": "other than by equ",
    "SELECT * FROM t RIGHT JOIN LATERAL (SELECT x FROM u WHERE u.a = t.a) s ON true": "LATERAL in",
    "SELECT * FROM pg_catalog.pg_class": "system relation",
    "SELECT id FROM t WHERE a NOT IN (SELECT a FROM u WHERE u.x = t.b)": "NOT IN with a correlated",
}


@pytest.mark.parametrize("sql", sorted(UNSUPPORTED))
def test_out_of_scope_is_0A000_naming_the_construct(sql: str) -> None:
    with pytest.raises(SQLError) as err:
        incrementalize(plan_of(sql, catalog()))
    assert err.value.sqlstate == "0A000"
    assert UNSUPPORTED[sql] in err.value.message


@pytest.mark.parametrize(
    ("sql", "sqlstate"),
    [
        ("SELECT a, b FROM t GROUP BY a", "42803"),
        ("SELECT nope FROM t", "42703"),
        ("SELECT a FROM t, u", "42702"),
        ("SELECT * FROM missing", "42P01"),
        ("SELECT a FROM t UNION SELECT a, x FROM u", "42601"),
    ],
)
def test_binding_errors_keep_postgres_sqlstates(sql: str, sqlstate: str) -> None:
    with pytest.raises(SQLError) as err:
        plan_of(sql, catalog())
    assert err.value.sqlstate == sqlstate


def test_output_names_follow_postgres() -> None:
    plan = plan_of("SELECT a, count(*), sum(b) AS total, b + 1 FROM t GROUP BY a, b", catalog())
    assert plan.output == ("a", "count", "total", "?column?")
    assert plan_of("SELECT * FROM t JOIN u USING (a)", catalog()).output == (
        "a",
        "id",
        "b",
        "s",
        "id",
        "x",
    )


def test_views_are_expanded_inline() -> None:
    plan = plan_of("SELECT a FROM big_t", catalog())
    scans = [n for n in walk(plan.root) if isinstance(n, Scan)]
    assert [s.table for s in scans] == [16400]
    assert any(isinstance(n, Filter) and "3" in n.predicate for n in walk(plan.root))


def test_comma_join_becomes_keyed_join() -> None:
    plan = incrementalize(plan_of("SELECT t.id FROM t, u WHERE t.a = u.a AND u.x > 2", catalog()))
    joins = [n for n in walk(plan.root) if isinstance(n, Join)]
    assert len(joins) == 1 and joins[0].kind == "inner" and len(joins[0].left_keys) == 1
    assert isinstance(joins[0].right, Filter)  # u.x > 2 pushed below the join


def test_push_down_filters_is_a_pure_rule() -> None:
    a = Scan(1, ("x", "y"), ("c1", "c2"))
    b = Scan(2, ("x",), ("c3",))
    out = push_down_filters(Filter(Join("cross", a, b), "c1 = c3 AND c2 > 0 AND c1 + c3 > c2"))
    assert isinstance(out, Join) and out.kind == "inner"
    assert out.left_keys == ("c1",) and out.right_keys == ("c3",)
    assert out.residual == "c1 + c3 > c2"
    assert isinstance(out.left, Filter) and out.left.predicate == "(c2 > 0)"
    assert conjuncts("(c1 > 0) AND c2 IS NULL AND (c3 = 1 OR c4 = 2)") == [
        "c1 > 0",
        "c2 IS NULL",
        "c3 = 1 OR c4 = 2",
    ]


def test_union_is_distinct_of_union_all() -> None:
    a = Scan(1, ("x",), ("c1",))
    b = Scan(2, ("x",), ("c2",))
    out = lower_set_ops(SetOp("union", False, a, b, ("c3",)))
    assert isinstance(out, Distinct) and isinstance(out.input, SetOp) and out.input.all


def test_subqueries_and_outer_joins_are_lowered() -> None:
    sqls = [
        "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a)",
        "SELECT id FROM t WHERE a NOT IN (SELECT a FROM u)",
        "SELECT * FROM t FULL JOIN u ON t.a = u.a AND t.b < u.x",
    ]
    for sql in sqls:
        plan = plan_of(sql, catalog())
        assert any(isinstance(n, SemiJoin) or isinstance(n, Join) for n in walk(plan.root))
        low = incrementalize(plan)
        kinds = {type(n) for n in walk(low.root)}
        assert SemiJoin not in kinds
        assert all(n.kind in ("inner", "cross") for n in walk(low.root) if isinstance(n, Join))
    low = incrementalize(plan_of(sqls[1], catalog()))
    assert any(isinstance(n, Difference) for n in walk(low.root))
    assert any(isinstance(n, Aggregate) and n.scalar for n in walk(low.root))  # NULL check


def test_interval_fields_keep_postgres_meaning() -> None:
    """`interval '90' day` is 90 days in PostgreSQL (DuckDB would read 90 seconds)."""
    p = plan_of(
        "SELECT date '1998-12-01' - interval '90' day AS d, interval '1' year AS y,"
        " interval '1 day 2 hours' AS h FROM t",
        catalog(),
    )
    exprs = dict(p.root.exprs)  # type: ignore[attr-defined]
    texts = list(exprs.values())
    assert "CAST('90 day' AS interval)" in texts[0]
    assert texts[1] == "CAST('1 year' AS interval)"
    assert texts[2] == "CAST('1 day 2 hours' AS interval)"


@pytest.mark.parametrize(
    ("sql", "unique"),
    [
        ("SELECT a, count(*) AS n, avg(b) AS av FROM t GROUP BY a", True),
        ("SELECT a % 3 AS g, sum(b) AS s FROM t GROUP BY 1 HAVING sum(b) > 2", True),
        ("SELECT count(*) AS n FROM t", True),
        ("SELECT DISTINCT a, b FROM t", True),
        ("SELECT a FROM t", False),
        ("SELECT count(*) AS n FROM t GROUP BY a", False),  # the key is not kept
        ("SELECT a, count(*) AS n FROM t GROUP BY GROUPING SETS ((a), (a))", False),
        ("SELECT a FROM t UNION ALL SELECT a FROM t", False),
        # a set-returning function repeats the group's key once per element
        (
            "SELECT a, generate_series(1, n) AS k FROM (SELECT a, count(*) AS n FROM t"
            " GROUP BY a) s",
            False,
        ),
        (
            "SELECT g.a, k FROM (SELECT a, count(*) AS n FROM t GROUP BY a) g,"
            " generate_series(1, g.n) AS k",
            False,
        ),
    ],
)
def test_unique_rows_read_without_multiplicity(sql: str, unique: bool) -> None:
    """A view whose rows never repeat (engine/engine.py read_sql reads it without
    expanding each stored row by its multiplicity)."""
    root = incrementalize(plan_of(sql, catalog())).root
    assert (unique_columns(root) is not None) == unique, (
        root.explain() if hasattr(root, "explain") else root
    )
