"""Point UPDATE and DELETE by primary key, outside DuckDB.

`UPDATE t SET c = $1, n = n + 1 WHERE id = $2` and `DELETE FROM t WHERE id = $1` are
what ORMs and OLTP applications send most after INSERT. In a writing transaction each
costs ~7 DuckDB statements under the instance's write lock: ~140 per second whatever
the number of clients (PostgreSQL: ~18,000). Here a statement of that shape is taken
apart once (a template per prepared statement) and its constants are coerced at once;
the new row is computed in Python against an exact copy of the table's live rows by
primary key (server/batcher.py `_LiveRows`), under the row's lock
(server/key_locks.py): autocommitted, at the batcher's turn, in the epoch it shares
with the INSERTs of its batch; in a transaction block, at once, staged in the session
until COMMIT hands it to the batcher (server/writes.py `fast_point`).

Taken here: SET of constants, parameters, the clock, `c + k` / `c - k` / `c * k` (integer
columns and integer `k`, as pgbench's `abalance = abalance + :delta`; numeric(p, s) columns
and a number `k`, computed exactly and rounded to the column as PostgreSQL's numeric
does, `balance = balance + $1`) and `c || k` (text
and varchar columns, a text `k`), FOREIGN KEY columns included (checked by
server/fast_refs.py); constants and parameters may be cast to their column's own type
(`$1::numeric`: batcher.plain_value); the WHERE clause names each
primary-key column once with `=` (or `IN` of one value, as Django deletes one object),
or each column of a UNIQUE key of integer, text or uuid columns (`WHERE token = $1`:
the row is found through an index of the live rows by that key, `_LiveRows.find`),
or a one-column primary key's `IN (v, ...)` / `= ANY($1)` of up to MANY_MAX keys (bulk deletes
and updates: the rows are computed at once under their locks and go to the batcher as
one unit, server/writes.py `_point_rows`); RETURNING of columns; a DELETE from a
referenced table of a row nothing references (server/ref_counts.py). Not taken (the
general path runs them): RETURNING of expressions, FROM/USING, WITH, a SET of a key
column, of a column a FOREIGN KEY references or of one a generated column or a unique
expression or partial index is computed from (`computed_inputs`; other SETs leave
those values as they are), a DELETE of a referenced row (its
action), tables with CHECKs server/fast_checks.py does not evaluate, and columns of
types other than SIMPLE_TYPES. A constant that does not fit its column fails the
statement whether a row matches or not, as in PostgreSQL (its planner folds the
assignment cast of a constant); a NOT NULL column set to NULL, a sum out of range or a
missing referenced key fails only when the row exists.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass
from typing import Any

import pglast.ast as A
from headwater.catalog.constraints import not_null_violation
from headwater.catalog.objects import Column, Table
from headwater.catalog.pgtypes import SessionFormat, text_decoder
from headwater.catalog.types import (
    ARRAY_TYPES,
    BOOL,
    BPCHAR,
    BYTEA,
    DATE,
    FLOAT4,
    FLOAT8,
    INT2,
    INT4,
    INT8,
    INTERVAL,
    JSON,
    JSONB,
    NUMERIC,
    TEXT,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    UUID,
    VARCHAR,
    ColumnType,
    PgType,
)
from headwater.planner.ddl import column_refs
from headwater.planner.syntax import column_field
from headwater.server.batcher import (
    INT_NAMES,
    INT_RANGES,
    Clock,
    NotFast,
    Row,
    clock_value,
    coerce,
    constant,
    numeric_assigned,
    per_statement,
    plain_value,
    returning_columns,
)
from headwater.server.fast_checks import check_error, compiled
from headwater.server.table_cache import per_table
from pglast import enums, parse_sql

from headwater.errors import NumericOutOfRange, SQLError, StringTooLong

# Types whose values the batcher coerces and keeps in Python as DuckDB returns them; a
# table with a column of another type keeps every UPDATE and DELETE on the general path
SIMPLE_TYPES: frozenset[PgType] = frozenset(
    {INT2, INT4, INT8, NUMERIC, FLOAT4, FLOAT8, BOOL, DATE, TIMESTAMP, TIMESTAMPTZ, BYTEA}
    | {TEXT, VARCHAR, BPCHAR, UUID, JSON, JSONB, TIME, INTERVAL}
    | {ARRAY_TYPES[e.name] for e in (BOOL, INT2, INT4, INT8, FLOAT4, FLOAT8, TEXT, VARCHAR)}
)
_INTS = (INT2, INT4, INT8)
_TEXTS = (TEXT, VARCHAR)
_KEY_TYPES = (INT2, INT4, INT8, TEXT, VARCHAR, UUID)  # key values compared exactly in Python


@dataclass(frozen=True)
class SetItem:
    """One SET item: the column at `target` takes `node`'s value, or (`source` not None)
    the column at `source` `op` it (+, -, * of integers or numerics, || of texts)."""

    target: int
    column: Column
    node: Any
    source: int | None = None
    op: str = "+"


@dataclass(frozen=True)
class _Shape:
    # per primary-key column (or per column of the UNIQUE key `unique`): (column, value)
    key: tuple[tuple[Column, Any], ...]
    sets: tuple[SetItem, ...]  # () for a DELETE
    returning: tuple[tuple[str, int], ...]  # RETURNING: (output name, column position)
    # a one-column key's `IN (v, ...)` (value nodes), or `= ANY(v)` (one node: an array)
    many: tuple[Any, ...] | None = None
    array: bool = False
    unique: tuple[int, ...] = ()  # the positions of a UNIQUE key's columns the WHERE names


@dataclass(frozen=True)
class PointWrite:
    """A point UPDATE or DELETE, its constants coerced: what the batcher applies. By a
    UNIQUE key (`unique`: its columns' positions, `by`: their values), `key` is the
    primary key of the row that held them when looked up (() none did): the batcher
    applies it only if that row still holds them."""

    table: Table
    key: Row  # the primary key's values
    sets: tuple[tuple[SetItem, Any], ...]  # (item, its coerced value); () for a DELETE
    delete: bool
    returning: tuple[tuple[str, int], ...] = ()  # (output name, column position)
    unique: tuple[int, ...] = ()
    by: Row = ()

    def new_row(self, row: Row) -> Row:
        """The row after the SET list (each item reads the old row, as in PostgreSQL);
        raises PostgreSQL's error for an out-of-range sum or a NULL in a NOT NULL column."""
        out = list(row)
        for item, value in self.sets:
            if item.source is None:
                out[item.target] = value
                continue
            base = row[item.source]
            if base is None or value is None:
                out[item.target] = None
                continue
            out[item.target] = _computed(item, base, value)
        for i, col in enumerate(self.table.columns):
            if col.not_null and out[i] is None:
                raise not_null_violation(self.table, col.name, out)
        new = tuple(out)
        if self.table.checks:
            err = check_error(self.table, compiled(self.table) or [], new)
            if err is not None:
                raise err
        return new


def _computed(item: SetItem, base: Any, value: Any) -> Any:
    """`base op value` assigned to the item's column: PostgreSQL's error where an
    integer is out of range, or a text too long for a varchar(n) (but for spaces)."""
    ct = item.column.type
    if item.op == "||":
        total = base + value
        n = ct.length
        if n is not None and len(total) > n:
            if total[n:].strip(" "):
                raise StringTooLong(f"value too long for type {ct.sql()}")
            total = total[:n]
        return total
    with decimal.localcontext(_EXACT):  # (a numeric's: no digit rounded away)
        total = base + value if item.op == "+" else base - value if item.op == "-" else base * value
    if ct.pg is NUMERIC:  # then rounded to the column's scale
        return numeric_assigned(total, item.column)
    lo, hi = INT_RANGES[ct.pg]
    if not lo <= total <= hi:
        raise NumericOutOfRange(f"{INT_NAMES[ct.pg]} out of range")
    return total


# numeric arithmetic as PostgreSQL's: exact (no digit of a sum or product rounded away)
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_NUMERIC_TEXT = text_decoder(ColumnType(NUMERIC))  # numeric's input function, unrounded


def _operand(v: Any) -> decimal.Decimal | None:
    """A constant or parameter added to (or multiplying) a numeric column, as PostgreSQL
    reads it: exactly, not rounded to the column first (NotFast: another kind of value,
    NaN or infinity: the general path)."""
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        return decimal.Decimal(v)
    if isinstance(v, str):
        try:
            v = _NUMERIC_TEXT(v)
        except SQLError:
            raise NotFast from None  # (the general path reports it, with its position)
    if isinstance(v, decimal.Decimal) and v.is_finite():
        return v
    raise NotFast


def eligible(table: Table) -> bool:
    """Can the table's rows be changed in Python (see the module's docstring)?"""
    pk = table.primary_key
    return (
        pk is not None
        and (not table.checks or compiled(table) is not None)
        and all(c.type.pg in SIMPLE_TYPES for c in table.columns)
        and _comparable(table, pk.columns)
    )


@per_table
def computed_inputs(table: Table) -> frozenset[str]:
    """The columns the table's generated columns and unique expression or partial
    indexes are computed from, and the generated columns: a point write that sets none
    of them leaves every generated value and index key as it was (a DELETE frees its
    row's index keys: server/batcher.py `_set_row`)."""
    texts = [c.generated for c in table.columns if c.generated is not None]
    for k in table.index_keys:
        texts += [*k.keys, *([k.predicate] if k.predicate else [])]
    names = {c.name for c in table.columns if c.generated is not None}
    for text in texts:
        names.update(column_refs(parse_sql(f"SELECT ({text})")[0].stmt.targetList[0].val))  # type: ignore[union-attr]
    return frozenset(names)


# keys of one statement taken as point writes (IN lists, ANY arrays); more: the general path
MANY_MAX = 1000


def _shape(stmt: A.UpdateStmt | A.DeleteStmt, table: Table) -> _Shape | None:
    returning = returning_columns(stmt, table)
    if stmt.withClause is not None or returning is None:
        return None
    if isinstance(stmt, A.UpdateStmt) and stmt.fromClause:
        return None
    if isinstance(stmt, A.DeleteStmt) and stmt.usingClause:
        return None
    qualifier = stmt.relation.alias.aliasname if stmt.relation.alias else table.name
    position = {c.name: i for i, c in enumerate(table.columns)}

    def column_of(node: Any) -> str | None:
        field = column_field(node, qualifier)
        return field.sval if isinstance(field, A.String) and field.sval in position else None

    pk = table.primary_key
    assert pk is not None
    found: dict[str, Any] = {}
    many: tuple[Any, ...] | None = None
    array = False
    for cond in _conjuncts(stmt.whereClause):
        value = _equal_to(cond)
        if value is None:
            return None
        name = column_of(cond.lexpr)
        if name is None or name in found:
            return None
        kind, node = value
        col = table.columns[position[name]]
        if kind == "any":
            found[name] = node
            many, array = (node,), True
            continue
        nodes = [plain_value(n, col) for n in (node if kind == "in" else (node,))]
        if any(n is None for n in nodes):
            return None
        found[name] = tuple(nodes) if kind == "in" else nodes[0]
        if kind == "in":
            many = found[name]
    named = _named_key(table, set(found))
    if named is None or (many is not None and (len(named) > 1 or named != pk.columns)):
        return None
    if many is not None and not array and len(many) > MANY_MAX:
        return None
    key = tuple((table.column(c), found[c]) for c in named)
    unique = () if named == pk.columns else tuple(position[c] for c in named)
    if isinstance(stmt, A.DeleteStmt):
        return _Shape(key, (), returning, many, array, unique)  # type: ignore[arg-type]
    keyed = {c for k in table.keys for c in k.columns}  # (the general path checks them)
    sets: list[SetItem] = []
    for rt in stmt.targetList:
        if rt.indirection or isinstance(rt.val, A.MultiAssignRef) or rt.name not in position:
            return None
        col = table.columns[position[rt.name]]
        if rt.name in keyed or col.identity or any(s.column is col for s in sets):
            return None
        node = rt.val
        source, op = None, "+"
        if isinstance(node, A.A_Expr) and node.kind == enums.A_Expr_Kind.AEXPR_OP:
            op = node.name[0].sval if len(node.name) == 1 else ""
            left, right = column_of(node.lexpr), column_of(node.rexpr)
            if op in ("+", "*") and left is None and right is not None:  # k + c
                left, node_k = right, node.lexpr
            else:
                node_k = node.rexpr
            if left is None:
                return None
            of = table.columns[position[left]].type.pg
            if op in ("+", "-", "*") and col.type.pg in _INTS:
                if of is not col.type.pg:
                    return None  # PostgreSQL's arithmetic would run in the other type
            elif op in ("+", "-", "*") and col.type.pg is NUMERIC and col.type.precision_scale:
                if of is not NUMERIC or (
                    isinstance(node_k, A.TypeCast) and node_k.typeName.typmods
                ):
                    return None  # (an integer's, or an operand rounded by its cast first)
            elif op != "||" or col.type.pg not in _TEXTS or of not in _TEXTS:
                return None
            source, node = position[left], node_k
        node = plain_value(node, col)
        if node is None:
            return None
        sets.append(SetItem(position[rt.name], col, node, source, op))
    return _Shape(key, tuple(sets), returning, many, array, unique)  # type: ignore[arg-type]


def _named_key(table: Table, columns: set[str]) -> tuple[str, ...] | None:
    """The primary key, or else a UNIQUE key, whose columns are `columns` (their values
    compared exactly in Python: _KEY_TYPES)."""
    pk = table.primary_key
    assert pk is not None
    if set(pk.columns) == columns:
        return pk.columns
    named = (k.columns for k in table.keys if set(k.columns) == columns)
    return next((c for c in named if _comparable(table, c)), None)


def _comparable(table: Table, columns: tuple[str, ...]) -> bool:
    return all(table.column(c).type.pg in _KEY_TYPES for c in columns)  # type: ignore[union-attr]


def _equal_to(cond: Any) -> tuple[str, Any] | None:
    """What `cond` compares its left side with for equality: ("one", v) for `c = v` and
    `c IN (v)` (as Django deletes one object), ("in", (v, ...)) for a longer IN list,
    ("any", v) for `c = ANY(v)`; None for anything else."""
    if not isinstance(cond, A.A_Expr) or len(cond.name) != 1 or cond.name[0].sval != "=":
        return None
    if cond.kind == enums.A_Expr_Kind.AEXPR_OP:
        return "one", cond.rexpr
    if cond.kind == enums.A_Expr_Kind.AEXPR_IN:
        return ("one", cond.rexpr[0]) if len(cond.rexpr) == 1 else ("in", tuple(cond.rexpr))
    if cond.kind == enums.A_Expr_Kind.AEXPR_OP_ANY:
        return "any", cond.rexpr
    return None


def _conjuncts(node: Any) -> list[Any]:
    if isinstance(node, A.BoolExpr) and node.boolop == enums.BoolExprType.AND_EXPR:
        return [c for arg in node.args for c in _conjuncts(arg)]
    return [node] if node is not None else [None]


def names_many(where: Any) -> bool:
    """Does a conjunct of `where` list more than MANY_MAX values (`c IN (v1, ...)`)?
    Such a statement is taken as a bulk write (server/scanned_writes.py)."""
    for cond in _conjuncts(where):
        value = _equal_to(cond)
        if value is not None and value[0] == "in" and len(value[1]) > MANY_MAX:
            return True
    return False


def shaped(stmt: A.UpdateStmt | A.DeleteStmt, table: Table, params: list[Any]) -> bool:
    """Whether the statement has a point write's shape (its values not looked at)."""
    return per_statement(stmt, table, params, _shape) is not None


def point_writes(
    stmt: A.UpdateStmt | A.DeleteStmt,
    table: Table,
    params: list[Any],
    fmt: SessionFormat,
    started: dt.datetime | None = None,
) -> list[PointWrite] | None:
    """The statement as point writes of `table` (eligible): one per distinct key it
    names, in key order; None: the general path. `started`: when its transaction block
    began (now()'s value; None: autocommitted)."""
    shape: _Shape | None = per_statement(stmt, table, params, _shape)
    if shape is None:
        return None
    if table.triggers:
        return None  # (server/triggers.py runs on the general path)
    if table.general_writes_only and any(
        item.column.name in computed_inputs(table) for item in shape.sets
    ):
        return None  # (DuckDB computes index keys and generated values: the general path)
    try:
        if shape.many is None:
            keys = [
                tuple(_key_value(constant(node, params), col, fmt, node) for col, node in shape.key)
            ]
        else:
            keys = _many_keys(shape, params, fmt)
        now = dt.datetime.now(dt.UTC)
        sets = []
        for item in shape.sets:
            v = constant(item.node, params)
            if isinstance(v, Clock):
                if item.source is not None:
                    return None
                sets.append((item, clock_value(v, item.column, started or now, now, fmt)))
                continue
            if item.op == "||" and item.source is not None:
                if not isinstance(v, str | None):
                    return None  # (anything || text: the value's output function)
                sets.append((item, v))  # (a text: not the column's length)
                continue
            if item.source is not None and item.column.type.pg is NUMERIC:
                sets.append((item, _operand(v)))  # (rounded once, with the sum)
                continue
            if item.source is not None and not isinstance(v, str):
                if isinstance(v, bool) or not isinstance(v, int | None):
                    return None  # a fraction is added in numeric, then rounded
                sets.append((item, v))  # a sum out of range fails per row (new_row)
                continue
            sets.append((item, coerce(v, item.column, fmt, item.node)))
    except (NotFast, IndexError):
        return None
    if shape.many is None and None in keys[0]:
        return None
    delete = isinstance(stmt, A.DeleteStmt)
    if shape.unique:  # (the primary key is found by the caller)
        return [PointWrite(table, (), tuple(sets), delete, shape.returning, shape.unique, keys[0])]
    return [PointWrite(table, key, tuple(sets), delete, shape.returning) for key in keys]


def _many_keys(shape: _Shape, params: list[Any], fmt: SessionFormat) -> list[Row]:
    """The distinct keys of an IN list or an `= ANY` array, in order (NULLs match
    nothing); NotFast beyond MANY_MAX."""
    ((col, _),) = shape.key
    assert shape.many is not None
    if shape.array:
        (node,) = shape.many
        values = constant(node, params)
        if not isinstance(values, list) or len(values) > MANY_MAX:
            raise NotFast  # (a literal '{1,2}': the general path)
        nodes = [None] * len(values)
    else:
        values = [constant(n, params) for n in shape.many]
        nodes = list(shape.many)
    found = {_key_value(v, col, fmt, n) for v, n in zip(values, nodes, strict=True)}
    return sorted((k,) for k in found if k is not None)


def _key_value(v: Any, col: Column, fmt: SessionFormat, node: Any) -> Any:
    """A key value compared as PostgreSQL would: an integer with an integer key, a
    string with a text key (anything else, such as 5.0 = an integer, takes the general
    path); a string for an integer key is read as the integer's input."""
    if v is None:
        return None
    if col.type.pg in _INTS:
        if isinstance(v, str):
            v = coerce(v, col, fmt, node)
        if isinstance(v, bool) or not isinstance(v, int):
            raise NotFast
        return v
    if col.type.pg is UUID:
        return coerce(v, col, fmt, node)  # (its canonical text)
    if not isinstance(v, str):
        raise NotFast
    return v
