"""INSERT ... SELECT of constants, read as the INSERT ... VALUES it amounts to.

SQLAlchemy's ORM inserts the objects of one flush whose keys the server generates as
`INSERT INTO t (a, b) SELECT p0::VARCHAR, p1::INTEGER FROM (VALUES ($1::VARCHAR,
$2::INTEGER, 0), ($3::VARCHAR, $4::INTEGER, 1)) AS imp_sen(p0, p1, sen_counter) ORDER
BY sen_counter RETURNING t.id` ("insertmanyvalues", so that the keys come back in the
objects' order), and hand-written SQL has `INSERT INTO t SELECT 1, 'x'`. Both ran as
a writing transaction of their own (~14 ms, every other writer waiting for the write
lock). Read as `INSERT INTO t (a, b) VALUES ($1::VARCHAR, $2::INTEGER), ($3::VARCHAR,
$4::INTEGER)` in the ORDER BY's order, they take the fast INSERT path
(server/writes.py), whose rows, RETURNING and errors are the general path's.

Only what gives PostgreSQL's values either way is read so: a VALUES column whose
items are all casts to one type, all constants of one kind (numbers, booleans) or
strings going into a string column; a SELECT list of such columns, casts of them and
expressions of them (computed as VALUES items: server/value_exprs.py); no WHERE,
GROUP BY, DISTINCT, LIMIT, set operation or other FROM item; an ORDER BY of one
column of integer constants. (PostgreSQL types a VALUES column of bare strings as
text first: `INSERT INTO t (n) SELECT x FROM (VALUES ('1')) v(x)` is its 42804 for
an integer n, where `VALUES ('1')` would insert 1: such statements stay general.)
"""

from __future__ import annotations

import copy
from typing import Any

import pglast.ast as A
import pglast.enums as E
from headwater.catalog.objects import Table
from headwater.planner.syntax import column_field, nodes, replaced

_KINDS = (A.Integer, A.Float, A.Boolean)  # constants typed by their spelling alone


def as_values(stmt: A.InsertStmt, table: Table) -> A.InsertStmt | None:
    """The INSERT ... VALUES that `stmt` amounts to, or None (see the module)."""
    src = stmt.selectStmt
    if not isinstance(src, A.SelectStmt) or src.valuesLists or not _plain_select(src):
        return None
    names = [rt.name for rt in stmt.cols] if stmt.cols else [c.name for c in table.columns]
    targets = [rt.val for rt in src.targetList or ()]
    if len(targets) > len(names) or (stmt.cols and len(targets) != len(names)):
        return None  # (PostgreSQL's 42601: the general path)
    if not src.fromClause:  # SELECT 1, 'x': PostgreSQL types its strings by the columns
        if src.sortClause or any(_refs(t) for t in targets):  # (SELECT *: 42P01 ...)
            return None
        rows = [targets]
    else:
        found = _values_rows(src, targets, [table.column(n) for n in names[: len(targets)]])
        if found is None:
            return None
        rows = found
    out = copy.copy(stmt)
    out.selectStmt = A.SelectStmt(
        valuesLists=tuple(tuple(r) for r in rows), op=E.SetOperation.SETOP_NONE
    )
    return out


def _plain_select(src: A.SelectStmt) -> bool:
    return not (
        src.whereClause
        or src.groupClause
        or src.havingClause
        or src.distinctClause
        or src.windowClause
        or src.limitCount
        or src.limitOffset
        or src.lockingClause
        or src.withClause
        or src.intoClause
        or src.op != E.SetOperation.SETOP_NONE
    )


def _values_rows(src: A.SelectStmt, targets: list[Any], cols: list[Any]) -> list[list[Any]] | None:
    """The rows `targets` select from the statement's one VALUES item, in its order."""
    if len(src.fromClause) != 1 or not isinstance(src.fromClause[0], A.RangeSubselect):
        return None
    sub = src.fromClause[0]
    values = sub.subquery
    if sub.lateral or not isinstance(values, A.SelectStmt) or not values.valuesLists:
        return None
    if values.sortClause or values.limitCount or values.withClause or sub.alias is None:
        return None
    alias = sub.alias.aliasname
    width = len(values.valuesLists[0])
    names = [n.sval for n in sub.alias.colnames or ()]
    names += [f"column{i + 1}" for i in range(len(names), width)]  # PostgreSQL's names
    if len(names) != width or len(set(names)) != width:
        return None
    lists = values.valuesLists
    if any(len(r) != width for r in lists):
        return None
    column = {n: [r[i] for r in lists] for i, n in enumerate(names)}
    for t, col in zip(targets, cols, strict=True):
        if col is None:
            return None
        for ref in _refs(t):
            name = _name(ref, alias)
            if name not in column or not _typed_alike(column[name], t is ref, col):
                return None
    order = _order(src.sortClause, alias, column)
    if order is None:
        return None
    return [[_substituted(t, alias, names, lists[r]) for t in targets] for r in order]


def _typed_alike(items: list[Any], bare: bool, col: Any) -> bool:
    """Whether a VALUES column of `items` has the type each item alone would have
    (`bare`: selected as it is into `col`, else under a cast or in an expression)."""
    if all(isinstance(i, A.TypeCast) for i in items):
        return all(i.typeName == items[0].typeName for i in items)
    consts = [i for i in items if not (isinstance(i, A.A_Const) and i.isnull)]
    if not consts or not all(isinstance(i, A.A_Const) for i in consts):
        return False  # all NULL (text), parameters (unknown: text), expressions
    kinds = {type(i.val) for i in consts}
    if len(kinds) != 1:
        return False  # (1, 2.5: numeric first)
    (kind,) = kinds
    return kind in _KINDS or (kind is A.String and bare and col.type.pg.category == "S")


def _order(sort: Any, alias: str, column: dict[str, list[Any]]) -> list[int] | None:
    """The rows' order: as written, or by one column of integer constants ascending."""
    rows = len(next(iter(column.values())))
    if not sort:
        return list(range(rows))
    if len(sort) != 1:
        return None
    by = sort[0]
    if by.sortby_dir not in (E.SortByDir.SORTBY_DEFAULT, E.SortByDir.SORTBY_ASC) or by.useOp:
        return None
    if not isinstance(by.node, A.ColumnRef) or _name(by.node, alias) not in column:
        return None
    keys = column[_name(by.node, alias)]
    if not all(isinstance(k, A.A_Const) and isinstance(k.val, A.Integer) for k in keys):
        return None
    return sorted(range(rows), key=lambda r: keys[r].val.ival)


def _substituted(node: Any, alias: str, names: list[str], row: tuple[Any, ...]) -> Any:
    """`node` with each column of the VALUES item replaced by the row's item; a cast of
    an item that is the same cast already is the item (`p0::VARCHAR` of `$1::VARCHAR`)."""
    if isinstance(node, A.ColumnRef):
        return row[names.index(_name(node, alias))]
    if isinstance(node, A.TypeCast) and isinstance(node.arg, A.ColumnRef):
        item = row[names.index(_name(node.arg, alias))]
        if isinstance(item, A.TypeCast) and item.typeName == node.typeName:
            return item
        return A.TypeCast(arg=item, typeName=node.typeName, location=node.location)
    if not _refs(node):
        return node

    def item(n: A.Node) -> Any | None:
        if isinstance(n, A.ColumnRef):
            return copy.deepcopy(row[names.index(_name(n, alias))])
        return None

    return replaced(copy.deepcopy(node), item)


def _refs(node: Any) -> list[A.ColumnRef]:
    return [n for n in nodes(node) if isinstance(n, A.ColumnRef)]


def _name(ref: A.ColumnRef, alias: str) -> str | None:
    """The VALUES column `ref` names (`p0`, `imp_sen.p0`), or None."""
    field = column_field(ref, alias)
    return field.sval if isinstance(field, A.String) else None
