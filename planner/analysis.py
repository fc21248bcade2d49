"""PostgreSQL's parse-analysis errors that DuckDB does not raise, found with the IR.

A plain read runs as DuckDB SQL, and DuckDB is more lenient than PostgreSQL's
parse analysis in places: it prefers a JOIN ... USING column where PostgreSQL
finds an unqualified name ambiguous (`SELECT k FROM a FULL JOIN b USING (k), c`
when c has a k too: 42702), it never looks at a WITH query the statement does
not read (`WITH w AS (SELECT k FROM a GROUP BY 3) SELECT 1`: 42P10), and it takes
`string_agg(DISTINCT s, ',' ORDER BY ',')` (42P10: PostgreSQL's untyped literal
is not the argument). The IR
(planner/ir.py) resolves names with PostgreSQL's rules and analyzes every WITH
query, so `check_read` builds it for such statements and raises what it finds:

    >>> check_read(parse_sql("WITH w AS (SELECT 1 GROUP BY 2) SELECT 1")[0].stmt, catalog, path)
    Traceback (most recent call last):
    headwater.errors.InvalidColumnReference: GROUP BY position 2 is not in select list

Only errors whose rules the IR follows as PostgreSQL does are raised; anything else
(a construct outside the IR, a name it cannot resolve) is left to DuckDB.
"""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.catalog.catalog import Catalog
from headwater.planner.ir import PlanBuilder

from headwater.errors import SQLError

# ambiguous column, duplicate USING column, bad GROUP/ORDER BY position, aggregate misplaced
_ANALYSIS_ERRORS = frozenset({"42702", "42701", "42P10", "42803"})


def check_read(stmt: Any, catalog: Catalog, search_path: tuple[str, ...]) -> None:
    """Raise PostgreSQL's error for a SELECT DuckDB would run although PostgreSQL
    refuses it (see the module's docstring); `stmt` is not changed."""
    if not isinstance(stmt, A.SelectStmt) or not _lenient_spots(stmt):
        return
    try:
        PlanBuilder(catalog, search_path, serving=True).build(stmt)
    except SQLError as e:
        if e.sqlstate in _ANALYSIS_ERRORS:
            raise
    except Exception:  # noqa: BLE001 - outside the IR: DuckDB decides
        return


def _lenient_spots(node: Any) -> bool:
    """Does the tree hold a WITH clause, a JOIN ... USING / NATURAL JOIN or an
    aggregate with DISTINCT and ORDER BY?"""
    if isinstance(node, tuple | list):
        return any(_lenient_spots(n) for n in node)
    if not isinstance(node, A.Node):
        return False
    if isinstance(node, A.WithClause):
        return True
    if isinstance(node, A.JoinExpr) and (node.usingClause or node.isNatural):
        return True
    if isinstance(node, A.FuncCall) and node.agg_distinct and node.agg_order:
        return True
    return any(_lenient_spots(getattr(node, attr)) for attr in node)
