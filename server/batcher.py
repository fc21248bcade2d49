"""Group apply for autocommit INSERT ... VALUES of constants and parameters.

Writers are serialised, and each DuckDB statement costs ~0.3-2 ms, so applying
single-row INSERTs one by one caps writes at a few hundred per second whatever the
concurrency. Instead, such INSERTs are coerced to typed rows in Python (the
column's input function, as PostgreSQL applies to an unknown literal), queued,
and applied together: one write-lock turn, one uniqueness query and one DuckDB
INSERT per table per batch, all in the same epoch. A row that breaks a constraint
fails only its own statement; the others commit.

At most MAX_UNDURABLE_BATCHES batches are staged and not yet durable: statements
arriving meanwhile join the next epoch together, which is group commit proper. Each
epoch costs a SlateDB batch and its durability wait (thread hops on both sides)
whatever its size, so with 16 clients ~13-16 statements share one instead of ~1-4.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import logging
import os
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import duckdb
import pglast.ast as A
import pyarrow as pa
import pyarrow.compute as pc
from headwater.catalog.constraints import not_null_violation, unique_violation
from headwater.catalog.objects import Column, IndexKey, Key, Table
from headwater.catalog.pgtypes import SessionFormat, text_decoder
from headwater.catalog.pgtypes.floats import float_text
from headwater.catalog.pgtypes.interval import Interval
from headwater.catalog.types import (
    ARRAY_ELEMENT,
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
    NUMERIC,
    TEXT,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    UUID,
    VARCHAR,
    ColumnType,
    arrow_type,
    invalid_enum_label,
    resolve_type_name,
)
from headwater.planner.syntax import column_field
from headwater.server import fast_index_keys
from headwater.server.constraints import index_key_rows, index_key_values, index_key_violation
from headwater.server.fast_checks import Eval, check_error, compiled
from headwater.server.fast_refs import RefCheck, ref_checks, refs_error
from headwater.server.py_values import canonical, py_list
from headwater.server.ref_counts import Pair, RefCounts, referencing
from headwater.server.waits import Waits, canceled
from headwater.storage.changelog import RID, WEIGHT
from headwater.storage.commit import write_lock_timed_out
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import CURRENT, FROM, LIVE, TO, Replica, physical, quote
from pglast import enums, parse_sql

from headwater.errors import (
    NumericOutOfRange,
    SQLError,
    StringTooLong,
    numeric_overflow,
)

log = logging.getLogger("headwater.batcher")
FLUSH_INTERVAL = 0.02  # seconds staged rows may wait before DuckDB applies them
# Batches staged and not yet durable. While they are written, the next INSERTs queue
# and join one larger epoch: per-epoch work (SlateDB batch, DuckDB apply, thread hops)
# is then shared by many statements instead of a few. With 1, the clients split into
# two halves that alternate (each waits for the other's epoch: ~8 per epoch with 16
# clients, 0.18-0.33x PostgreSQL's TPS); with 2, a batch goes as soon as it is gathered
# and ~all 16 share an epoch (issue 16: 2.5x the TPS, half the CPU per INSERT).
MAX_UNDURABLE_BATCHES = 2
# Then, as PostgreSQL's commit_delay with commit_siblings: when the last batch had
# several statements and fewer are queued, wait this long at most for as many (the
# clients just acknowledged send their next ones), so that ~all clients share an epoch
# rather than two halves alternating (16 clients: ~13-16 rows per epoch instead of ~8).
GATHER_WAIT = 0.002
# Durable epochs waiting for their rows to reach DuckDB beyond which the timer is not
# waited for. Fewer applies is less CPU (each costs ~0.5-1 ms whatever its size; issue
# 16: one per ~2.5 epochs when the committer's in-flight slots waited for them); a
# reader waiting for rows flushes at once anyway (hurry).
MAX_UNAPPLIED_EPOCHS = 32

# Live rows (server/point_writes.py) kept in Python for point UPDATE/DELETE, all tables
# together; a table that would pass it takes the general path.
MAX_LIVE_ROWS = int(os.environ.get("HW_MAX_LIVE_ROWS", "1000000"))
# A table of more rows than this has its live rows read only once point writes keep
# asking for them (LIVE_ROWS_AFTER asks; the general path until then): reading 600 k
# rows took ~3 s, a one-off DELETE by key on the general path ~20 ms (issue 16)
EAGER_LIVE_ROWS = int(os.environ.get("HW_EAGER_LIVE_ROWS", "100000"))
LIVE_ROWS_AFTER = 8
# General transactions' change rows of a table, not yet applied to its live rows, beyond
# which those are read again rather than kept in step (a COPY, a TRUNCATE), unless the
# table holds more live rows than that: reading them again costs more than applying each
# change row (issue 16: a 4,000-row UPDATE of 600 k rows read them all again, ~3 s, at
# the next one)
OBSERVED_ROWS_MAX = 4096

if TYPE_CHECKING:
    from headwater.server.instance import Instance
    from headwater.server.point_writes import PointWrite

INT_RANGES = {
    INT2: (-(2**15), 2**15 - 1),
    INT4: (-(2**31), 2**31 - 1),
    INT8: (-(2**63), 2**63 - 1),
}
INT_NAMES = {INT2: "smallint", INT4: "integer", INT8: "bigint"}
_INT_RANGES_BY_OID = {t.oid: r for t, r in INT_RANGES.items()}


class NotFast(Exception):
    """The statement needs the general INSERT path."""


def coerce(value: Any, col: Column, fmt: SessionFormat, node: Any = None) -> Any:
    """A constant or parameter as a value of the column's type (assignment cast). An
    input error of a string literal (`node`) points at it where the parse kept its
    location, as PostgreSQL's does."""
    if value is None:
        return None
    pg = col.type.pg
    if isinstance(value, str):
        try:
            value = text_decoder(col.type, session=fmt)(value)
        except SQLError as e:
            loc = getattr(node, "location", None)  # (when the parse kept locations)
            if e.position is None and isinstance(node, A.A_Const) and isinstance(loc, int):
                e.position = loc + 1
            raise
    # identity tests: `in` hashes or compares the PgType dataclasses field by field,
    # several µs per value (issue 16: ~7% of a single-row INSERT's CPU)
    if pg is INT4 or pg is INT8 or pg is INT2:
        if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
            raise NotFast
        if not isinstance(value, int):
            value = int(
                decimal.Decimal(value).to_integral_value(
                    decimal.ROUND_HALF_EVEN if isinstance(value, float) else decimal.ROUND_HALF_UP
                )
            )
        lo, hi = _INT_RANGES_BY_OID[pg.oid]
        if not lo <= value <= hi:
            raise NumericOutOfRange(f"{INT_NAMES[pg]} out of range")
        return value
    if pg is NUMERIC:
        if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
            raise NotFast
        d = decimal.Decimal(value) if not isinstance(value, float) else decimal.Decimal(repr(value))
        if not d.is_finite():
            raise NotFast
        return _numeric_in(d, *_numeric_bounds(col))
    if pg is FLOAT8 or pg is FLOAT4:
        if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
            raise NotFast
        return float(value)
    if pg is BOOL:
        if not isinstance(value, bool):
            raise NotFast
        return value
    # BC and infinite dates and timestamps come from the decoders as raw Arrow integers.
    if pg is DATE:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if not isinstance(value, dt.date) or isinstance(value, dt.datetime):
            raise NotFast
        return value
    if pg is TIMESTAMP or pg is TIMESTAMPTZ:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if not isinstance(value, dt.datetime) or (value.tzinfo is None) != (pg is TIMESTAMP):
            raise NotFast
        return value
    if pg is BYTEA:
        if not isinstance(value, bytes):
            raise NotFast
        return value
    if pg is TIME:  # (24:00:00, no datetime.time: the general path)
        if not isinstance(value, dt.time) or value.tzinfo is not None:
            raise NotFast
        return value
    if pg is INTERVAL:  # as DuckDB's Arrow results give it (months and days kept apart)
        if type(value) is not Interval:
            raise NotFast
        return pa.MonthDayNano([value.months, value.days, value.microseconds * 1000])
    if pg is UUID:  # kept as its canonical text, as DuckDB's Arrow results give it
        if not isinstance(value, uuid.UUID):
            raise NotFast
        return str(value)
    if isinstance(value, int | float | decimal.Decimal | bool):
        if pg.category == "S":
            return _number_text(value)
        raise NotFast
    if isinstance(value, list):
        return _coerce_list(value, col, fmt)
    if not isinstance(value, str):
        raise NotFast
    if pg.category == "E":  # an enum: one of its labels (the epoch's apply would fail)
        if value not in pg.labels:
            raise invalid_enum_label(pg, value)
        return value
    n = col.type.typmod - 4 if pg is VARCHAR or pg is BPCHAR else -1  # ColumnType.length
    if n >= 0 and len(value) > n:
        stripped = value.rstrip(" ")
        if len(stripped) > n:
            raise StringTooLong(f"value too long for type {col.type.sql()}")
        value = stripped
    return value


def _numeric_bounds(col: Column) -> tuple[int, int, decimal.Decimal]:
    """A numeric column's precision, scale and the quantum of its scale."""
    p, s = col.type.precision_scale or (38, 16)
    return p, s, decimal.Decimal(1).scaleb(-s)


def _numeric_in(d: decimal.Decimal, p: int, s: int, quantum: decimal.Decimal) -> decimal.Decimal:
    """A finite number rounded to a numeric(p, s) column's scale (22003 if too large)."""
    q = d.quantize(quantum, rounding=decimal.ROUND_HALF_UP)
    if q.adjusted() >= p - s:
        raise numeric_overflow(p, s)
    return q


def numeric_assigned(d: decimal.Decimal, col: Column) -> decimal.Decimal:
    """A finite number assigned to a numeric column: rounded to its scale as PostgreSQL
    rounds (half away from zero; 22003 if too large), without a negative zero."""
    return _numeric(_numeric_in(d, *_numeric_bounds(col)))


_FLOAT8_TEXT = float_text(15, 1)  # float8out, shortest exact (extra_float_digits 1)


def _number_text(value: int | float | decimal.Decimal | bool) -> str:
    """A number as PostgreSQL's output function prints it, assigned to a text column:
    a numeric without exponent (1e3 is 1000), a float8 shortest (1.0 is 1)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return _FLOAT8_TEXT(value).decode()
    return str(value)


# array columns the fast paths take, by element type: the Python values each element
# may be (a list parameter's elements of another kind, text for integers: the general
# path, as PostgreSQL's types would differ)
_LIST_ELEMENTS: dict[str, tuple[type, ...]] = {
    "bool": (bool,),
    **dict.fromkeys(("int2", "int4", "int8"), (int,)),
    **dict.fromkeys(("float4", "float8"), (int, float, decimal.Decimal)),
    **dict.fromkeys(("text", "varchar"), (str,)),
}
_ELEMENT_COLUMNS: dict[str, Column] = {}


def _coerce_list(values: list[Any], col: Column, fmt: SessionFormat) -> list[Any]:
    """A one-dimensional array's elements, each as a value of the element type."""
    element = ARRAY_ELEMENT.get(col.type.pg.name)
    kinds = _LIST_ELEMENTS.get(element.name) if element is not None else None
    if element is None or kinds is None:
        raise NotFast
    ecol = _ELEMENT_COLUMNS.get(element.name)
    if ecol is None:
        ecol = _ELEMENT_COLUMNS[element.name] = Column("element", ColumnType(element), False, None)
    out = []
    for v in values:
        if v is not None and (
            not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds)
        ):
            raise NotFast  # (a list in it: several dimensions)
        out.append(None if v is None else coerce(v, ecol, fmt))
    return out


class Clock:
    """now() and its kin: the transaction's start (an autocommitted INSERT is a
    transaction of its own: the time the statement is taken), one value for all of a
    statement's rows; statement_timestamp() the statement's. `kind` is the type the
    call returns."""

    __slots__ = ("kind", "statement")

    def __init__(self, kind: str, statement: bool = False) -> None:
        self.kind = kind
        self.statement = statement


# (a zero-argument call's name, pg_catalog's) -> what it returns
_CLOCK_CALLS = {
    "now": Clock("timestamptz"),
    "transaction_timestamp": Clock("timestamptz"),
    "statement_timestamp": Clock("timestamptz", statement=True),
}
_CLOCK_KEYWORDS = {
    enums.SQLValueFunctionOp.SVFOP_CURRENT_TIMESTAMP: Clock("timestamptz"),
    enums.SQLValueFunctionOp.SVFOP_LOCALTIMESTAMP: Clock("timestamp"),
    enums.SQLValueFunctionOp.SVFOP_CURRENT_DATE: Clock("date"),
}
# column defaults (as pg_get_expr prints them) that read the clock
_CLOCK_DEFAULTS = {
    "now()": _CLOCK_CALLS["now"],
    "transaction_timestamp()": _CLOCK_CALLS["now"],
    "statement_timestamp()": _CLOCK_CALLS["statement_timestamp"],
    "CURRENT_TIMESTAMP": _CLOCK_CALLS["now"],
    "LOCALTIMESTAMP": _CLOCK_KEYWORDS[enums.SQLValueFunctionOp.SVFOP_LOCALTIMESTAMP],
    "CURRENT_DATE": _CLOCK_KEYWORDS[enums.SQLValueFunctionOp.SVFOP_CURRENT_DATE],
}


# defaults computed per row in Python: a version 4 UUID, as its text (how the fast paths
# keep uuid values), as PostgreSQL's gen_random_uuid() makes them
_RANDOM_DEFAULTS: dict[str | None, Callable[[], Any]] = {
    "gen_random_uuid()": lambda: str(uuid.uuid4()),
}
_DEFAULT_NODES: dict[tuple[str, str], Any] = {}  # (default, column type) -> constant_default


def constant_default(col: Column) -> Any:
    """The constant a column's default is (`0`, `true`, `''::text`, `'new'::character
    varying`: pg_get_expr's spellings), as a node `constant` reads; None for any other
    default (an expression, a cast to another type)."""
    if col.default is None:
        return None
    key = (col.default, col.type.sql())
    if key in _DEFAULT_NODES:
        return _DEFAULT_NODES[key]
    try:
        node: Any = parse_sql(f"SELECT {col.default}")[0].stmt.targetList[0].val  # type: ignore[union-attr]
    except Exception:
        node = None
    if (
        isinstance(node, A.TypeCast)
        and isinstance(node.arg, A.A_Const)
        and node.arg.val is not None
    ):
        tn = node.typeName
        try:
            cast = resolve_type_name([n.sval for n in tn.names], [], len(tn.arrayBounds or ()))
        except SQLError:
            cast = None
        node = node.arg if cast is not None and cast.pg is col.type.pg else None
    elif not isinstance(node, A.A_Const) and not (
        isinstance(node, A.A_Expr) and node.lexpr is None and isinstance(node.rexpr, A.A_Const)
    ):
        node = None  # (a negative number is a minus and a constant)
    if len(_DEFAULT_NODES) >= 1024:
        _DEFAULT_NODES.clear()
    _DEFAULT_NODES[key] = node
    return node


def clock_value(
    clock: Clock, col: Column, started: dt.datetime, now: dt.datetime, fmt: SessionFormat
) -> Any:
    """The clock (the transaction's start, or the statement's `now`, both UTC) assigned
    to the column: a timestamptz keeps the instant; timestamp and date are its wall
    time in the session's TimeZone. Other targets (text, a wall time into timestamptz)
    take the general path."""
    at = now if clock.statement else started
    pg = col.type.pg
    if clock.kind == "timestamptz" and pg is TIMESTAMPTZ:
        return at
    local = at.astimezone(fmt.tzinfo).replace(tzinfo=None)
    if pg is DATE:
        return local.date()
    if pg is TIMESTAMP:
        return local if clock.kind != "date" else dt.datetime.combine(local.date(), dt.time())
    raise NotFast


def _numeric(d: Any) -> Any:
    """A numeric constant's value: numeric has no negative zero (-0.0 into a float8
    column is 0, as '-0' is -0)."""
    return d.copy_abs() if isinstance(d, decimal.Decimal) and not d else d


def constant(node: Any, params: list[Any]) -> Any:
    if isinstance(node, A.ParamRef):
        return params[node.number - 1]
    if isinstance(node, A.A_Const):
        if node.isnull:
            return None
        v = node.val
        if isinstance(v, A.Integer):
            return v.ival
        if isinstance(v, A.Float):
            return _numeric(decimal.Decimal(v.fval))
        if isinstance(v, A.String):
            return v.sval
        if isinstance(v, A.Boolean):
            return v.boolval
    if isinstance(node, A.A_Expr) and node.kind == 0 and node.lexpr is None:
        if node.name[0].sval == "-":
            inner = constant(node.rexpr, params)
            if isinstance(inner, int | decimal.Decimal) and not isinstance(inner, bool):
                return _numeric(-inner)
    if isinstance(node, A.SQLValueFunction) and node.op in _CLOCK_KEYWORDS:
        return _CLOCK_KEYWORDS[node.op]
    if (
        isinstance(node, A.FuncCall)
        and not node.args
        and node.agg_order is None
        and node.agg_filter is None
        and node.over is None
        and not node.agg_star
        and len(node.funcname) <= 2
        and (len(node.funcname) == 1 or node.funcname[0].sval == "pg_catalog")
        and node.funcname[-1].sval in _CLOCK_CALLS
    ):
        return _CLOCK_CALLS[node.funcname[-1].sval]
    raise NotFast


ItemReader = Callable[[Any, list[Any]], Any]


def _item_reader(
    col: Column, fmt: SessionFormat, started: dt.datetime, now: dt.datetime, rows: int
) -> ItemReader:
    """How a VALUES item (its node, the parameters) becomes a value of `col`: `constant`
    then `coerce` (the clock's functions: `clock_value`). For statements of many rows the
    common constants, an integer into an integer column, a number into a numeric one,
    a string into a column its decoder reads, take a shorter way to the same value
    (issue 16: a 1,000-row INSERT ... VALUES spent ~9 ms here, ~2 µs a value)."""

    def item(node: Any, params: list[Any]) -> Any:
        v = constant(node, params)
        if isinstance(v, Clock):
            return clock_value(v, col, started, now, fmt)
        return coerce(v, col, fmt, node)

    if rows < MANY_ROWS:
        return item
    pg = col.type.pg
    if pg is INT8 or pg is INT4 or pg is INT2:
        lo, hi = _INT_RANGES_BY_OID[pg.oid]

        def integer(node: Any, params: list[Any]) -> Any:
            if type(node) is A.A_Const and type(v := node.val) is A.Integer and lo <= v.ival <= hi:
                return v.ival
            return item(node, params)

        return integer
    if pg is NUMERIC:
        bounds = _numeric_bounds(col)
        number = decimal.Decimal

        def numeric(node: Any, params: list[Any]) -> Any:
            if type(node) is A.A_Const:
                v = node.val
                if type(v) is A.Float:
                    d = number(v.fval)
                elif type(v) is A.Integer:
                    d = number(v.ival)
                else:
                    return item(node, params)
                return _numeric_in(_numeric(d), *bounds)
            return item(node, params)

        return numeric
    if pg.category == "E" or pg is BPCHAR or (pg is VARCHAR and col.type.typmod != -1):
        return item  # (labels and lengths checked by `coerce`)
    decode = text_decoder(col.type, session=fmt)

    def decoded(node: Any, params: list[Any]) -> Any:
        if type(node) is A.A_Const and type(v := node.val) is A.String:
            try:
                value = decode(v.sval)
            except SQLError:  # `item` raises it again, with its position
                return item(node, params)
            if type(value) is str:  # (text, varchar: what `coerce` returns as is)
                return value
            return coerce(value, col, fmt, node)
        return item(node, params)

    return decoded


MANY_ROWS = 16  # VALUES rows from which `_item_reader` specializes per column


@dataclass(frozen=True)
class _Template:
    """What an INSERT ... VALUES statement's shape says about its rows, worked out once
    per (statement, table): a prepared INSERT then only coerces its parameters (issue
    16: the shape analysis was ~40% of the fast path's Python work per statement)."""

    width: int  # the table's columns
    slots: tuple[tuple[int, Column], ...]  # each VALUES item's column: (position, column)
    rows: tuple[tuple[Any, ...], ...]  # per row, its items' nodes
    defaulted: tuple[tuple[int, Column], ...]  # columns left out that have a default
    not_null: tuple[tuple[int, str], ...]  # NOT NULL columns: (position, name)
    returning: tuple[tuple[str, int], ...]  # RETURNING: (output name, column position)
    skip: str | None = None  # ON CONFLICT DO NOTHING: its arbiter (`_arbiter`)
    # ON CONFLICT (primary key) DO UPDATE: per SET item (position, "excluded", the proposed
    # row's position) / (position, "value", its node) / (position, "add", (the row's
    # position, sign, node)): server/writes.py takes one row as a point write
    upsert: tuple[tuple[int, str, Any], ...] | None = None


class FastRows(NamedTuple):
    """An INSERT's rows, taken in Python, and what its RETURNING list returns of them."""

    rows: list[tuple[Any, ...]]
    returning: tuple[tuple[str, int], ...]  # (output name, column position)
    skip: str | None = None  # ON CONFLICT DO NOTHING: its arbiter (`_arbiter`)
    # ON CONFLICT (primary key) DO UPDATE: its SET items with this execution's values
    upsert: tuple[tuple[int, str, Any], ...] | None = None


# (id(statement), id(function)) -> (statement, table, what `per_statement` worked out:
# None when not fast). Only statements with parameters are kept (a prepared statement's
# tree is the same object at every Execute); the statement is held so that its id is
# not reused while the entry lives.
_TEMPLATES: dict[tuple[int, int], tuple[Any, Table, Any]] = {}
_TEMPLATES_MAX = 1024


ANY_KEY = "*"  # ON CONFLICT DO NOTHING without a target: a row colliding on any key


def _arbiter(clause: A.OnConflictClause, table: Table) -> str | None:
    """The key an ON CONFLICT DO NOTHING skips rows on: ANY_KEY without a target, the
    name of the PRIMARY KEY or UNIQUE constraint its columns or ON CONSTRAINT name;
    None for anything else (DO UPDATE, an expression or partial index's inference: the
    general path, server/writes.py)."""
    if clause.action != enums.OnConflictAction.ONCONFLICT_NOTHING:
        return None
    infer = clause.infer
    if infer is None:
        return ANY_KEY
    if infer.conname:
        return next((k.name for k in table.keys if k.name == infer.conname), None)
    elems = infer.indexElems or ()
    if infer.whereClause is not None or not all(
        isinstance(e, A.IndexElem)
        and e.name
        and e.expr is None
        and not e.collation
        and not e.opclass
        for e in elems
    ):
        return None
    names = {e.name for e in elems}
    return next((k.name for k in table.keys if set(k.columns) == names), None)


def _upsert_sets(stmt: A.InsertStmt, table: Table) -> tuple[tuple[int, str, Any], ...] | None:
    """An ON CONFLICT DO UPDATE the batcher applies as a point write: its arbiter is the
    primary key (its columns or ON CONSTRAINT), no WHERE, and each SET item gives a
    column of no key, FOREIGN KEY, generated or identity column `EXCLUDED.c`, a
    constant or parameter, or (integer columns) its own value (`t.c`: a bare `c` is
    ambiguous) plus or minus an integer. The items' nodes (`value`, `add`) are read at
    each execution (`_upsert_values`)."""
    clause, pk = stmt.onConflictClause, table.primary_key
    infer = clause.infer
    if clause.action != enums.OnConflictAction.ONCONFLICT_UPDATE or pk is None or infer is None:
        return None
    if clause.whereClause is not None or infer.whereClause is not None:
        return None
    if infer.conname:
        if infer.conname != pk.name:
            return None
    elif {getattr(e, "name", None) for e in infer.indexElems or ()} != set(pk.columns) or any(
        e.expr is not None or e.collation or e.opclass for e in infer.indexElems
    ):
        return None
    names = [c.name for c in table.columns]
    fixed = {c for k in table.keys for c in k.columns} | {
        c for fk in table.foreign_keys for c in fk.columns
    }
    alias = stmt.relation.alias.aliasname if stmt.relation.alias else table.name
    items: list[tuple[int, str, Any]] = []
    for rt in clause.targetList:
        col = table.column(rt.name)
        if col is None or rt.indirection or col.name in fixed or col.generated or col.identity:
            return None
        at, node = names.index(col.name), rt.val
        ref = _column_ref(node)
        if ref is not None and len(ref) == 2 and ref[0] == "excluded" and ref[1] in names:
            items.append((at, "excluded", names.index(ref[1])))
        elif (
            isinstance(node, A.A_Expr)
            and node.kind == enums.A_Expr_Kind.AEXPR_OP
            and node.name[-1].sval in ("+", "-")
            and _column_ref(node.lexpr) == (alias, col.name)  # (bare: ambiguous, 42702)
            and col.type.pg in INT_RANGES
        ):
            sign = 1 if node.name[-1].sval == "+" else -1
            items.append((at, "add", (at, sign, node.rexpr)))
        elif ref is None:
            items.append((at, "value", node))
        else:
            return None
    return tuple(items)


def _column_ref(node: Any) -> tuple[str, ...] | None:
    if not isinstance(node, A.ColumnRef) or not all(isinstance(f, A.String) for f in node.fields):
        return None
    return tuple(f.sval for f in node.fields)


def _upsert_values(
    tpl: _Template,
    table: Table,
    params: list[Any],
    fmt: SessionFormat,
    started: dt.datetime,
    now: dt.datetime,
) -> tuple[tuple[int, str, Any], ...]:
    """The DO UPDATE SET items with this execution's values (NotFast: not constants of
    a kind the batcher applies)."""
    assert tpl.upsert is not None
    out: list[tuple[int, str, Any]] = []
    for at, kind, payload in tpl.upsert:
        col = table.columns[at]
        if kind == "value":
            v = constant(payload, params)
            if isinstance(v, Clock):
                v = clock_value(v, col, started, now, fmt)
            else:
                v = coerce(v, col, fmt, payload)
            out.append((at, kind, v))
        elif kind == "add":
            source, sign, node = payload
            v = constant(node, params)
            if isinstance(v, bool) or not isinstance(v, int | None):
                raise NotFast  # (a fraction is added in numeric, then rounded)
            out.append((at, kind, (source, sign, v)))
        else:
            out.append((at, kind, payload))
    return tuple(out)


def _template(stmt: A.InsertStmt, table: Table) -> _Template | None:
    src = stmt.selectStmt
    skip = _arbiter(stmt.onConflictClause, table) if stmt.onConflictClause else None
    upsert = _upsert_sets(stmt, table) if stmt.onConflictClause and skip is None else None
    if (
        (stmt.onConflictClause is not None and skip is None and upsert is None)
        or stmt.withClause is not None
        or not isinstance(src, A.SelectStmt)
        or not src.valuesLists
        or src.withClause is not None
        or stmt.override  # OVERRIDING ... VALUE: identity columns (planner/sequences.py)
    ):
        return None
    if stmt.cols:
        names = [rt.name for rt in stmt.cols]
        if any(rt.indirection for rt in stmt.cols) or len(set(names)) != len(names):
            return None
        found = [table.column(n) for n in names]
        if any(c is None for c in found):
            return None
        cols: list[Column] = [c for c in found if c is not None]
    else:  # VALUES shorter than the table: its last columns take their defaults
        width = len(src.valuesLists[0])
        if width > len(table.columns):
            return None  # (42601 from the general path)
        cols = list(table.columns)[:width]
    if any(len(values) != len(cols) for values in src.valuesLists):
        return None
    lists = _without_defaults(src.valuesLists, cols)
    if lists is None:
        return None
    cols = [c for j, c in enumerate(cols) if j not in lists[1]]
    if any(c.identity or c.generated is not None for c in cols):
        return None  # a value for an identity or generated column: 428C9 or not
    if table.checks and compiled(table) is None:
        return None  # CHECKs of other shapes are evaluated by the general path
    if _lists_in_keys(table):
        return None  # (key values are kept in sets: a list is no set member)
    returning = returning_columns(stmt, table)
    if returning is None:
        return None
    position = {c.name: i for i, c in enumerate(table.columns)}
    given = {c.name for c in cols}
    rows = []
    for values in lists[0]:
        if A.TypeCast in map(type, values):
            values = [plain_value(node, c) for node, c in zip(values, cols, strict=True)]
            if any(node is None for node in values):
                return None
        rows.append(tuple(values))
    return _Template(
        width=len(table.columns),
        slots=tuple((position[c.name], c) for c in cols),
        rows=tuple(rows),
        defaulted=tuple(
            (position[c.name], c)
            for c in table.columns
            if c.name not in given and c.default is not None
        ),
        not_null=tuple((i, c.name) for i, c in enumerate(table.columns) if c.not_null),
        skip=skip,
        upsert=upsert,
        returning=returning,
    )


def _lists_in_keys(table: Table) -> bool:
    """Whether an array column is in a key, or in a table with unique indexes."""
    lists = {c.name for c in table.columns if c.type.pg.name in ARRAY_ELEMENT}
    keyed = {c for k in table.keys for c in k.columns}
    return bool(lists) and bool(lists & keyed or table.index_keys)


_NULL = A.A_Const(isnull=True)


def _without_defaults(
    lists: Sequence[Sequence[Any]], cols: list[Column]
) -> tuple[Sequence[Sequence[Any]], set[int]] | None:
    """VALUES lists without their DEFAULT items: a column DEFAULT in every row is left
    out (its positions, second), so that it takes its default as an omitted column
    does; DEFAULT in some rows only is NULL for a column without a default, else the
    general path (None)."""
    if not any(A.SetToDefault in map(type, values) for values in lists):
        return lists, set()  # (the common case, read at C speed)
    everywhere = {
        j for j in range(len(cols)) if all(isinstance(v[j], A.SetToDefault) for v in lists)
    }
    out = []
    for values in lists:
        row = []
        for j, (node, c) in enumerate(zip(values, cols, strict=True)):
            if j in everywhere:
                continue
            if isinstance(node, A.SetToDefault):
                if c.default is not None or c.identity or c.generated is not None:
                    return None
                node = _NULL
            row.append(node)
        out.append(row)
    return out, everywhere


def plain_value(node: Any, col: Column) -> Any:
    """The node `constant` reads for a VALUES item of `col`: the item, or the constant
    or parameter under a cast to the column's own type (`$1::numeric`, `'x'::text` or
    `::varchar` into text, as SQLAlchemy and hand-written SQL spell them), which the
    column's assignment gives the same value; None for another cast (the general path:
    a cast to another type, or one that truncates, `::varchar(3)`)."""
    if not isinstance(node, A.TypeCast):
        return node
    tn = node.typeName
    if not isinstance(node.arg, A.ParamRef | A.A_Const) or tn.arrayBounds or tn.pct_type:
        return None
    if tn.typmods and _names(tn)[-1] not in ("numeric", "decimal", "varchar", "bpchar"):
        return None  # (interval '1' minute, time(0), timestamp(3): they round or truncate)
    try:
        mods = [m.val.ival for m in tn.typmods or ()]
        cast = resolve_type_name(_names(tn), mods)
    except (SQLError, AttributeError):
        return None
    pg = col.type.pg
    same = cast.pg is pg and cast.typmod in (-1, col.type.typmod)
    strings = cast.pg in (TEXT, VARCHAR) and cast.typmod == -1 and pg in (TEXT, VARCHAR)
    if not (same or strings) or (cast.typmod != -1 and pg in (VARCHAR, BPCHAR)):
        return None
    return node.arg


def _names(tn: A.TypeName) -> list[str]:
    return [n.sval for n in tn.names]


def returning_columns(stmt: Any, table: Table) -> tuple[tuple[str, int], ...] | None:
    """A RETURNING list of the table's columns (`*`, `c`, `t.c`, `c AS x`: what ORMs
    send for a new row's key) as (output name, column position); None for any other
    expression (the general path evaluates it, or raises PostgreSQL's error)."""
    if stmt.returningClause is None:
        return ()
    qualifier = stmt.relation.alias.aliasname if stmt.relation.alias else table.name
    position = {c.name: i for i, c in enumerate(table.columns)}
    out: list[tuple[str, int]] = []
    for rt in stmt.returningClause.exprs:
        field = None if rt.indirection else column_field(rt.val, qualifier)
        if isinstance(field, A.A_Star) and not rt.name:
            out += [(c.name, i) for i, c in enumerate(table.columns)]
        elif isinstance(field, A.String) and field.sval in position:
            out.append((rt.name or field.sval, position[field.sval]))
        else:
            return None
    return tuple(out)


def per_statement(
    stmt: Any, table: Table, params: list[Any], work_out: Callable[[Any, Table], Any]
) -> Any:
    """`work_out(stmt, table)`, remembered for a statement with parameters (the INSERT
    templates here, server/point_writes.py's shapes: keyed by the tree's id and by the
    function, so that the two never share an entry)."""
    key = (id(stmt), id(work_out))
    hit = _TEMPLATES.get(key)
    if hit is not None and hit[0] is stmt and hit[1] is table:
        return hit[2]
    found = work_out(stmt, table)
    if params:  # a literal statement's tree is parsed anew each time: not worth keeping
        if len(_TEMPLATES) >= _TEMPLATES_MAX:
            _TEMPLATES.clear()
        _TEMPLATES[key] = (stmt, table, found)
    return found


def fast_rows(
    stmt: A.InsertStmt,
    table: Table,
    params: list[Any],
    fmt: SessionFormat,
    defaults: Callable[[Column], Callable[[], Any] | None] | None = None,
    started: dt.datetime | None = None,
    generate: Callable[[Table, list[list[Any]]], list[list[Row | None]] | None] | None = None,
) -> FastRows | None:
    """The rows an INSERT ... VALUES adds, if all of them are constants (and its
    RETURNING list, if it returns columns); else None.

    `defaults(column)` gives a function computing the column's default once per row
    (a serial column's nextval: server/sequences.py), or None: the general path
    evaluates it. `started`: when the statement's transaction block began (now()'s
    value); None for an autocommitted statement (now). `generate(table, rows)` fills
    the rows' generated columns and returns their keys of the table's unique indexes
    (None: it cannot; writes.fast_insert); without it a table with either takes the
    general path."""
    computed = table.generated_positions
    if (computed or table.index_keys) and generate is None:
        return None
    tpl: _Template | None = per_statement(stmt, table, params, _template)
    if tpl is None:
        return None
    now = dt.datetime.now(dt.UTC)
    started = started or now
    checks = compiled(table) if table.checks else None
    generated: dict[int, Callable[[], Any]] = {}
    clocked: dict[int, Any] = {}  # defaults of one value for all rows: the clock, constants
    rows = []
    try:
        for i, c in tpl.defaulted:
            clock = _CLOCK_DEFAULTS.get(c.default or "")
            if clock is not None:
                clocked[i] = clock_value(clock, c, started, now, fmt)
                continue
            if c.default in _RANDOM_DEFAULTS:
                generated[i] = _RANDOM_DEFAULTS[c.default]
                continue
            node = constant_default(c)
            if node is not None:  # as if the statement had written it in VALUES
                clocked[i] = coerce(constant(node, []), c, fmt, node)
                continue
            gen = defaults(c) if defaults is not None else None
            if gen is None:
                return None  # defaults can be expressions: the general path evaluates them
            generated[i] = gen
        at = [i for i, _ in tpl.slots]
        read = [_item_reader(col, fmt, started, now, len(tpl.rows)) for _, col in tpl.slots]
        for nodes in tpl.rows:
            row: list[Any] = [None] * tpl.width
            for i, v in clocked.items():
                row[i] = v
            for i, item, node in zip(at, read, nodes, strict=True):
                row[i] = item(node, params)
            for i, name in tpl.not_null:
                if row[i] is None and i not in generated and i not in computed:
                    raise not_null_violation(table, name, row)
            if checks and not generated and not computed:
                _check(table, checks, row)
            rows.append(row)
    except (NotFast, IndexError):
        return None
    for row in rows:  # once every row is known to take the fast path
        for i, gen in generated.items():
            row[i] = gen()
    index_keys: list[list[Row | None]] | None = []
    if computed or table.index_keys:
        assert generate is not None
        index_keys = generate(table, rows)  # (from the other columns, defaults included)
        if index_keys is None:
            return None
        for row in rows:
            for i, name in tpl.not_null:
                if row[i] is None and i in computed:
                    raise not_null_violation(table, name, row)
    if checks and (generated or computed):
        for row in rows:
            _check(table, checks, row)
    out = [tuple(r) for r in rows]
    rows_out = IndexedRows(out, index_keys) if table.index_keys else out
    try:
        upsert = _upsert_values(tpl, table, params, fmt, started, now) if tpl.upsert else None
    except NotFast:
        return None
    return FastRows(rows_out, tpl.returning, tpl.skip, upsert)


class IndexedRows(list[tuple[Any, ...]]):
    """A statement's rows of a table with unique expression or partial indexes, with
    each row's key of each index (`Table.index_keys`' order; None: the index does not
    hold the row), as server/fast_index_keys.py or DuckDB computed them."""

    def __init__(self, rows: Rows, index_keys: list[list[Row | None]]) -> None:
        super().__init__(rows)
        self.index_keys = index_keys


def _check(table: Table, checks: list[tuple[Any, Eval]], row: list[Any]) -> None:
    err = check_error(table, checks, tuple(row))
    if err is not None:
        raise err


def row_ids(first: int, n: int) -> pa.Array:
    """first, first + 1, ..., first + n - 1 in Arrow's C (a COPY's million row ids took
    pa.array(range(...)) ~60-200 ms of Python; for a few rows Python is quicker: 3 µs
    against 12)."""
    if n <= 64:
        return pa.array(range(first, first + n), pa.int64())
    return pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n), start=first - 1)


Rows = list[tuple[Any, ...]]


def rows_table(
    table: Table, rows: Rows, first_rid: int | list[int], weights: list[int] | None = None
) -> pa.Table:
    """Coerced rows as the table's Arrow rows, with row ids from `first_rid` (or these)
    and, given `weights`, the change rows' weight column."""
    rids = (
        pa.array(first_rid, pa.int64())
        if isinstance(first_rid, list)
        else row_ids(first_rid, len(rows))
    )
    arrays = [rids]
    for i, col in enumerate(table.columns):
        arrays.append(pa.array([r[i] for r in rows], arrow_type(col.type)))
    names = [RID] + [c.name for c in table.columns]
    if weights is not None:
        arrays.append(pa.array(weights, pa.int64()))
        names.append(WEIGHT)
    return pa.table(arrays, names=names)


class _Pending:
    """One unit: INSERTs' rows (a statement's, or a transaction block's: per table,
    committed together or not at all) or a point write, and the future of its epoch
    (a plain class: one per statement)."""

    __slots__ = (
        "parts",
        "done",
        "write",
        "rows",
        "staged",
        "row",
        "skip",
        "upsert",
        "queued",
        "waits",
    )

    def __init__(
        self,
        parts: list[tuple[Table, Rows]],
        done: asyncio.Future[int],
        write: PointWrite | None = None,
        rows: list[BlockRow] | None = None,
        staged: Callable[[], None] | None = None,
        waits: Waits | None = None,
    ):
        self.parts = parts
        self.done = done
        self.write = write
        self.rows = rows or []  # a block's point writes
        self.staged = staged  # called once the unit's batch is staged (or failed)
        self.row: Row | None = None  # a point write's new row (a DELETE's old one)
        self.skip: str | None = None  # ON CONFLICT DO NOTHING's arbiter (`_claim_skipping`)
        # ON CONFLICT DO UPDATE of one row: (table, proposed row, SET items) (`_upsert`)
        self.upsert: tuple[Table, Row, tuple[tuple[int, str, Any], ...]] | None = None
        self.queued = 0.0  # the loop's time when it joined the queue (`_lock_writes`)
        # the statement's waits: its lock timeout, its CancelRequest while queued (None:
        # a COMMIT's unit, which waits --write-lock-timeout and is not canceled)
        self.waits = waits


class _LiveRows:
    """A table's live rows by primary key, each with its row id, for point writes:
    exact while the write lock is held (every staged batch and `observe` keep it).
    Change them with `put` and `drop`, which keep the UNIQUE keys' indexes in step."""

    __slots__ = ("table", "key", "rows", "_unique")

    def __init__(self, table: Table) -> None:
        self.table = table
        names = [c.name for c in table.columns]
        pk = table.primary_key
        assert pk is not None
        self.key = tuple(names.index(c) for c in pk.columns)
        self.rows: dict[tuple[Any, ...], tuple[int, tuple[Any, ...]]] = {}
        # a UNIQUE key's column positions -> its values -> the row's primary key; built
        # at the first `find` by that key (most tables are never looked up so)
        self._unique: dict[tuple[int, ...], dict[Row, Row]] = {}

    def key_of(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(row[i] for i in self.key)

    def put(self, key: Row, rid: int, row: Row) -> None:
        old = self.rows.get(key)
        if old is not None and self._unique:
            self._unindex(key, old[1])
        self.rows[key] = (rid, row)
        for at, index in self._unique.items():
            values = tuple(row[i] for i in at)
            if None not in values:
                index[values] = key

    def drop(self, key: Row) -> None:
        _, row = self.rows.pop(key)
        if self._unique:
            self._unindex(key, row)

    def replace(self, gone: Iterable[tuple[int, Row]], added: dict[Row, tuple[int, Row]]) -> None:
        """A general transaction's changes: the rows of `gone` (row id, key) go if still
        held in that version, then `added` (key -> (row id, row)) are put; without
        UNIQUE indexes to keep, by dict operations in C (issue 16: 4,000 UPDATEd rows
        of a big table a row at a time took ~30 ms)."""
        rows = self.rows
        if self._unique:
            for rid, key in gone:
                held = rows.get(key)
                if held is not None and held[0] == rid:
                    self.drop(key)
            for key, (rid, row) in added.items():
                self.put(key, rid, row)
            return
        for rid, key in gone:
            if key not in added:  # (else replaced below)
                held = rows.get(key)
                if held is not None and held[0] == rid:
                    del rows[key]
        rows.update(added)

    def _unindex(self, key: Row, row: Row) -> None:
        # only if it still points here: another row may hold the values by now (a
        # general transaction's changes come in any order)
        for at, index in self._unique.items():
            values = tuple(row[i] for i in at)
            if index.get(values) == key:
                del index[values]

    def find(self, at: tuple[int, ...], values: Row) -> Row | None:
        """The primary key of the live row whose columns at `at` (a UNIQUE key's) hold
        `values`; None if none does."""
        index = self._unique.get(at)
        if index is None:
            index = self._unique[at] = {}
            for key, (_, row) in self.rows.items():
                v = tuple(row[i] for i in at)
                if None not in v:
                    index[v] = key
        return index.get(values)


def _key_values(table: Table, rows: Rows) -> list[tuple[Key | IndexKey, list[tuple[Any, ...]]]]:
    """Per unique key and unique index of the table, the rows' values of it (without
    those with a NULL, which collide with nothing; an index's: of the rows it holds)."""
    return [(key, [k for k in keys if k is not None]) for key, keys in _row_keys(table, rows)]


def _row_keys(table: Table, rows: Rows) -> list[tuple[Key | IndexKey, list[Row | None]]]:
    """Per unique key and unique index of the table, each row's value of it (None: it
    collides with nothing)."""
    out: list[tuple[Key | IndexKey, list[Row | None]]] = []
    names = [c.name for c in table.columns]
    for key in table.keys:
        idx = [names.index(c) for c in key.columns]
        values = [tuple(r[i] for i in idx) for r in rows]
        out.append((key, [None if None in k else k for k in values]))
    if table.index_keys:  # (only fast_rows gives rows of such a table)
        assert isinstance(rows, IndexedRows), "rows of a table with unique indexes"
        out += zip(table.index_keys, rows.index_keys, strict=True)
    return out


def _key_set(key: Key | IndexKey) -> str:
    """The name of a key's set of values: an index's definition is in it (DROP INDEX and
    CREATE UNIQUE INDEX of the same name on something else leave no stale set)."""
    if isinstance(key, Key):
        return key.name
    return f"{key.name}\x00{key.keys}\x00{key.predicate}"


def _violation(key: Key | IndexKey, values: Row, table: Table) -> SQLError:
    if isinstance(key, Key):
        return unique_violation(key, values, table)
    return index_key_violation(key, values)


def _duplicate(
    values: list[tuple[Any, ...]], *taken: set[tuple[Any, ...]]
) -> tuple[Any, ...] | None:
    """A value already in one of `taken`, or repeated in `values`; None if none is."""
    dup = next((k for k in values if any(k in t for t in taken)), None)
    if dup is None and len(set(values)) != len(values):
        dup = next(k for k in values if values.count(k) > 1)
    return dup


Row = tuple[Any, ...]


class BlockRow(NamedTuple):
    """A transaction block's point write of one row, staged until COMMIT."""

    table: Table
    key: Row  # its primary key's values
    rid: int
    read: Row  # the committed row the block read
    new: Row | None  # the block's row (None: deleted)


class StagedWrites:
    """A transaction block's fast-path INSERTs (server/writes.py fast_insert) and point
    writes (`fast_point`: each row's new version, under its row lock), kept in the
    session until COMMIT hands them to the batcher as one unit, or until another
    statement of the block needs them in its writing transaction (writes.apply_staged).
    A block of only such statements (what ORMs send to save an object; pgbench's
    TPC-B) then costs the write lock nothing while the client is between statements.
    An autocommitted point write of several keys (`IN (...)`, `= ANY($1)`) gathers its
    rows in one of its own, handed to the batcher as one unit (writes._point_rows)."""

    def __init__(self) -> None:
        self.parts: list[tuple[Table, Rows]] = []
        self.keys: dict[tuple[int, str], set[Row]] = {}  # the parts' key values
        self.rows: dict[tuple[int, Row], BlockRow] = {}  # (table oid, key) -> point write

    def __bool__(self) -> bool:
        return bool(self.parts or self.rows)

    def add(self, table: Table, rows: Rows) -> None:
        self.parts.append((table, rows))
        for key, values in _key_values(table, rows):
            self.keys.setdefault((table.oid, _key_set(key)), set()).update(values)

    def inserted(self, oid: int) -> bool:
        return any(t.oid == oid for t, _ in self.parts)

    def written(self, oid: int) -> bool:
        return any(k[0] == oid for k in self.rows)

    def deleted(self, oid: int) -> bool:
        """Did the block's point writes delete a row of the table? (Its key values are
        not free for the block's INSERTs yet: the key sets hold them until COMMIT.)"""
        return any(k[0] == oid and r.new is None for k, r in self.rows.items())

    def inserted_key(self, table: Table, key: Row) -> bool:
        """Did the block's staged INSERTs take this primary key of the table?"""
        pk = table.primary_key
        return pk is not None and key in self.keys.get((table.oid, pk.name), ())

    def overlay(self, table: Table, rows: list[Row]) -> list[Row]:
        """`rows` of `table` (read at the block's epoch) as the block's point writes
        left them: they change no key column, so no other row starts to match."""
        pk = table.primary_key
        if pk is None or not self.written(table.oid):
            return rows
        names = [c.name for c in table.columns]
        idx = [names.index(c) for c in pk.columns]
        out = []
        for r in rows:
            staged = self.rows.get((table.oid, tuple(r[i] for i in idx)))
            if staged is None:
                out.append(r)
            elif staged.new is not None:
                out.append(staged.new)
        return out

    def mark(self) -> tuple[int, dict[tuple[int, Row], BlockRow]]:
        return len(self.parts), dict(self.rows)

    def truncate(self, mark: tuple[int, dict[tuple[int, Row], BlockRow]]) -> None:
        """Back to what `mark` saw (ROLLBACK TO SAVEPOINT; row locks stay held)."""
        n, self.rows = mark[0], dict(mark[1])
        kept, self.parts, self.keys = self.parts[:n], [], {}
        for table, rows in kept:
            self.add(table, rows)


class InsertBatcher:
    """Fast-path INSERTs: checked against in-memory key sets, applied to DuckDB per epoch.

    A batch takes the write lock only for Python work (key checks, row ids, joining
    the epoch). Its rows reach DuckDB in `flush()`, which the committer runs while
    the epoch's SlateDB write is in flight (so before the epoch becomes visible) and
    which a general writer runs before it reads the current state.
    """

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self._queue: list[_Pending] = []
        self._wake = asyncio.Event()
        self._undurable = asyncio.Semaphore(MAX_UNDURABLE_BATCHES)
        # while _gather waits: (how many statements it waits for, what it awaits)
        self._gathering: tuple[int, asyncio.Future[None]] | None = None
        self._last_batch = 0
        self._task: asyncio.Task[None] | None = None
        self._cur: duckdb.DuckDBPyConnection | None = None
        # (epoch, table, versions to add, row ids whose live versions end at epoch)
        self._unapplied: list[tuple[int, Table, pa.Table, list[int] | None]] = []
        self._staged_lock = threading.Lock()  # guards _unapplied only (held for microseconds)
        self._apply_lock = threading.Lock()  # one DuckDB apply at a time, in staging order
        # epoch -> staged batches not yet in DuckDB (guarded by _staged_lock). An open
        # epoch takes batches before and after a flush, so "applied up to epoch E" is
        # only true once no batch of an epoch <= E is left.
        self._unapplied_epochs: Counter[int] = Counter()
        # (table oid, key name) -> live key values; built on first use from DuckDB
        self._keys: dict[tuple[int, str], set[tuple[Any, ...]]] = {}
        # table oid -> its live rows, for point writes; loaded on first use
        self._live: dict[int, _LiveRows] = {}
        # general transactions' change rows of tables whose live rows are held, not yet
        # applied to them: applied when the live rows are next asked for (`_live_rows`)
        self._unobserved: dict[int, list[pa.Table]] = {}
        self._too_big: dict[int, Table] = {}  # tables beyond MAX_LIVE_ROWS when loaded
        self._live_asks: Counter[int] = Counter()  # big tables' asks for their live rows
        # referencing tables' FOREIGN KEY values, for DELETEs of referenced rows
        self.refs = RefCounts(instance.table)
        # table oid -> an epoch no version in DuckDB began after (a flush's or a general
        # commit's; none known after a restart or an ALTER): a version retired at a later
        # epoch was not born at it, so the flush need not look
        self._born_upto: dict[int, int] = {}
        # Staged rows reach DuckDB lazily: at most every FLUSH_INTERVAL, or at once
        # when a reader waits for them (read-your-writes) or a general writer starts.
        self._staged_epoch = 0  # newest epoch with staged rows
        self.applied_epoch = 0  # every staged row of epochs <= this is in DuckDB
        self._urgent = asyncio.Event()
        self._waiting = 0  # epochs the committer waits for in applied()
        self._applied = asyncio.Condition()
        self._flusher: asyncio.Task[None] | None = None

    async def insert(
        self,
        parts: list[tuple[Table, Rows]],
        rows: list[BlockRow] | None = None,
        staged: Callable[[], None] | None = None,
        waits: Waits | None = None,
    ) -> int:
        """Insert each part's rows into its table and set a block's point-written
        `rows`, all or none (a unique key taken by then fails the whole: 23505; a row
        changed since the block read it, 40001); returns the epoch once it is durable.
        `staged()` is called once the unit is staged or failed; `waits`: the statement's
        (`_withdraw`)."""
        loop = asyncio.get_running_loop()
        return await self._submit(_Pending(parts, loop.create_future(), None, rows, staged, waits))

    async def upsert(
        self,
        table: Table,
        row: Row,
        sets: tuple[tuple[int, str, Any], ...],
        staged: Callable[[], None] | None = None,
        waits: Waits | None = None,
    ) -> tuple[Row, int]:
        """An autocommitted INSERT of one row ... ON CONFLICT (primary key) DO UPDATE, at
        the batcher's turn (`_upsert`): the row inserted or updated, and its epoch."""
        p = _Pending([], asyncio.get_running_loop().create_future(), staged=staged, waits=waits)
        p.upsert = (table, row, sets)
        epoch = await self._submit(p)
        assert p.row is not None
        return p.row, epoch

    async def insert_skipping(
        self,
        table: Table,
        rows: Rows,
        skip: str,
        staged: Callable[[], None] | None = None,
        waits: Waits | None = None,
    ) -> tuple[Rows, int]:
        """An autocommitted INSERT ... ON CONFLICT DO NOTHING: the rows it inserted (the
        others collided on its arbiter `skip`: `_claim_skipping`) and its epoch once
        durable (0: none inserted). `staged()` is called once the unit is staged or failed."""
        loop = asyncio.get_running_loop()
        p = _Pending([(table, rows)], loop.create_future(), staged=staged, waits=waits)
        p.skip = skip
        epoch = await self._submit(p)
        return p.parts[0][1], epoch

    async def point(
        self,
        write: PointWrite,
        staged: Callable[[], None] | None = None,
        waits: Waits | None = None,
    ) -> tuple[Row | None, int]:
        """A point UPDATE or DELETE (server/point_writes.py) at the batcher's turn;
        returns the row it changed (its new version; a DELETE's old one), None when it
        found none, and its epoch once durable (0: none)."""
        loop = asyncio.get_running_loop()
        p = _Pending([], loop.create_future(), write, None, staged, waits)
        epoch = await self._submit(p)
        return p.row, epoch

    async def ensure_live(self, table: Table) -> bool:
        """Read the table's live rows if they are not (under the write lock); False when
        they are too many to keep."""
        if self._live_rows(table.oid) is None and self.point_writable(table):
            committer = self.instance.committer
            assert committer is not None
            async with committer.write_lock:
                if self._live_rows(table.oid) is None:
                    await self._read(live=[table.oid])
        return self._live_rows(table.oid) is not None

    def live_current(self, table: Table) -> bool:
        """Are the table's live rows read (`ensure_live`), with no general transaction's
        changes still to apply to them?"""
        return table.oid not in self._unobserved and self._live_rows(table.oid) is not None

    def holds_key(self, table: Table, key: Key, values: Row) -> bool:
        """Is `values` taken in the table's unique `key` (live, or claimed by a unit
        staged before)? After `load_keys`."""
        return values in self._keys.get((table.oid, _key_set(key)), ())

    def live_row(self, table: Table, key: Row) -> tuple[int, Row] | None:
        """The table's live row of `key` with its row id (after `ensure_live`)."""
        live = self._live_rows(table.oid)
        return None if live is None else live.rows.get(key)

    def find(self, table: Table, at: tuple[int, ...], values: Row) -> Row | None:
        """The primary key of the table's live row whose UNIQUE key columns (positions
        `at`) hold `values`, None if none does (after `ensure_live`)."""
        live = self._live_rows(table.oid)
        return None if live is None else live.find(at, values)

    def pending_rows(self, table: Table) -> tuple[list[int], list[tuple[int, Row]]]:
        """Changes to `table` staged but not in DuckDB yet (the flush applies them): the
        row ids whose version there is not current, and the current versions (row id,
        row) of those that still exist. Needs the table's live rows (`ensure_live`)."""
        live = self._live_rows(table.oid)
        assert live is not None
        with self._staged_lock:
            work = [(rows, gone) for _, t, rows, gone in self._unapplied if t.oid == table.oid]
        stale: set[int] = set()
        keys: set[Row] = set()
        names = [c.name for c in live.table.columns]
        for rows, gone in work:
            stale.update(gone or ())
            stale.update(py_list(rows.column(RID)))
            keys.update(zip(*(py_list(rows.column(names[i])) for i in live.key), strict=True))
        current = [e for e in map(live.rows.get, keys) if e is not None and e[0] in stale]
        return sorted(stale), current

    def point_writable(self, table: Table) -> bool:
        """False for a table whose live rows were too many to keep (until it changes)."""
        return self._too_big.get(table.oid) is not table

    async def _submit(self, p: _Pending) -> int:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="insert-batcher")
        p.queued = asyncio.get_running_loop().time()
        self._queue.append(p)
        self._wake.set()
        g = self._gathering
        if g is not None and len(self._queue) >= g[0] and not g[1].done():
            g[1].set_result(None)
        waits = p.waits
        if waits is None:
            return await p.done
        waits.on_interrupt = lambda: self._withdraw(p)
        try:
            return await p.done
        finally:
            waits.on_interrupt = None

    def _withdraw(self, p: _Pending, error: SQLError | None = None) -> None:
        """A unit still queued leaves the queue and fails (a CancelRequest: 57014), its
        row locks go; one taken into a batch is committed (PostgreSQL's COMMIT is not
        canceled either)."""
        if p in self._queue:
            self._queue.remove(p)
            p.done.set_exception(error or canceled())
            _staged([p])

    async def _lock_writes(self, lock: asyncio.Lock) -> bool:
        """Take the write lock for the next batch (False: no unit is left to write).
        While a writing transaction holds it (a block's, between its statements), each
        queued unit that has waited for it its statement's lock timeout (lock_timeout,
        else `--write-lock-timeout`) fails with 55P03, as a general writer does after as
        long, instead of waiting with no end (a wait for durability or key sets before
        this one does not count); a canceled one leaves (`_withdraw`)."""
        if not lock.locked():  # (the common case: no task for wait_for)
            await lock.acquire()
            return True
        loop = asyncio.get_running_loop()
        started = loop.time()

        def timeout(p: _Pending) -> float:
            return p.waits.lock_timeout() if p.waits else self.instance.config.write_lock_timeout

        while self._queue:
            due = min(max(p.queued, started) + timeout(p) for p in self._queue)
            try:  # (in slices: units queued meanwhile are looked at when one ends)
                await asyncio.wait_for(lock.acquire(), min(max(due - loop.time(), 0.0), 0.05))
                return True
            except TimeoutError:
                now = loop.time()
                for p in list(self._queue):
                    if max(p.queued, started) + timeout(p) <= now:
                        error = write_lock_timed_out(timeout(p))
                        self._withdraw(p, p.waits.lock_timed_out(error) if p.waits else error)
        return False

    async def _run(self) -> None:
        committer = self.instance.committer
        assert committer is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._queue:
                continue
            # A unit that holds row locks goes at once when a writer waits for one, without
            # waiting for a durability slot or for more statements
            slot = not (
                self.instance.key_locks.contended and any(p.staged is not None for p in self._queue)
            )
            if slot:
                await self._undurable.acquire()
            if self._last_batch >= 2 and len(self._queue) < self._last_batch and slot:
                await self._gather(self._last_batch)
            self._last_batch = len(self._queue)
            if not await self._lock_writes(committer.write_lock):
                if slot:
                    self._undurable.release()
                continue
            try:
                batch, self._queue = self._queue, []
                tables = {t.oid for p in batch for t in _tables(p) if t.keys or t.index_keys}
                tables |= {fk.ref_table for p in batch for t in _tables(p) for fk in t.foreign_keys}
                missing = [oid for oid in tables if not self._has_keys(oid)]
                unread = {
                    p.write.table.oid
                    for p in batch
                    if p.write is not None and self._live_rows(p.write.table.oid) is None
                }
                uncounted = self.refs.missing(
                    [pair for p in batch for t in _deleted_from(p) for pair in self._referencing(t)]
                )
                try:
                    if missing or unread or uncounted:
                        await self._read(missing, list(unread), uncounted)
                except Exception as e:
                    if slot:
                        self._undurable.release()
                    err = translate(e)
                    for p in batch:
                        p.done.set_exception(err)
                    _staged(batch)
                    continue
                epoch = committer.begin_stamp()
                try:
                    changes, failures, merge = self._stage(batch, epoch)
                finally:
                    _staged(batch)  # row locks go: the next writer reads these rows
                durable = (
                    committer.end_stamp(epoch, changes, merge=merge)
                    if changes
                    else committer.end_stamp(epoch, None)
                )
            finally:
                committer.write_lock.release()
            for p in batch:
                if id(p) in failures:
                    p.done.set_exception(failures[id(p)])
            ok = [p for p in batch if id(p) not in failures]
            if durable is None:  # nothing changed (point writes that found no row)
                if slot:
                    self._undurable.release()
                for p in ok:
                    p.done.set_result(0)
            else:
                ack = self._acknowledge(ok, durable, epoch, slot)
                asyncio.get_running_loop().create_task(ack)

    async def _gather(self, expected: int) -> None:
        """Wait up to GATHER_WAIT for `expected` statements to be queued (one future and
        one timer per epoch: `insert` resolves it when the count is reached)."""
        loop = asyncio.get_running_loop()
        enough: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(GATHER_WAIT, lambda: enough.done() or enough.set_result(None))
        self._gathering = (expected, enough)
        try:
            await enough
        finally:
            self._gathering = None
            timer.cancel()

    async def _acknowledge(
        self, batch: list[_Pending], durable: asyncio.Future[None], epoch: int, slot: bool
    ) -> None:
        try:
            await durable
        except Exception as e:
            for p in batch:
                p.done.set_exception(e)
            return
        finally:
            if slot:
                self._undurable.release()
        for p in batch:
            p.done.set_result(epoch)

    # -- key sets ---------------------------------------------------------------------
    def _has_keys(self, oid: int) -> bool:
        table = self.instance.table(oid)
        return table is not None and all(
            (oid, _key_set(k)) in self._keys for k in (*table.keys, *table.index_keys)
        )

    async def _read(
        self, oids: Sequence[int] = (), live: Sequence[int] = (), refs: Sequence[Pair] = ()
    ) -> None:
        """Read the key sets of `oids`, the live rows of `live` and the reference counts
        of `refs` (under the write lock: nothing changes meanwhile), once staged rows are
        in DuckDB: `flush_now` also tells the committer, which may wait for those rows'
        epochs (a bare flush left a quiet server's epoch unreadable until the next
        write)."""
        await self.flush_now()
        await asyncio.to_thread(self._read_now, oids, live, refs)

    def _read_now(self, oids: Sequence[int], live: Sequence[int], refs: Sequence[Pair]) -> None:
        cur = self._cursor()
        for table, fk in refs:
            self.refs.load(cur, table, fk)
        for oid in live:
            table = self.instance.table(oid)
            if table is not None:
                self._load_rows(cur, table)
        for oid in oids:
            table = self.instance.table(oid)
            if table is None:
                continue
            for key in table.keys:
                cols = ", ".join(quote(c) for c in key.columns)
                found = cur.execute(
                    f"SELECT {cols} FROM {Replica.scan(table, CURRENT)} AS t"
                ).to_arrow_table()
                rows = zip(*(py_list(c) for c in found.columns), strict=True)
                self._keys[(oid, key.name)] = {canonical(r) for r in rows if None not in r}
            for ikey in table.index_keys:
                held = index_key_rows(table, ikey, Replica.scan(table, CURRENT))
                found = cur.execute(held).to_arrow_table()
                rows = zip(*(py_list(c) for c in found.columns), strict=True)
                self._keys[(oid, _key_set(ikey))] = {canonical(r) for r in rows}

    def _load_rows(self, cur: duckdb.DuckDBPyConnection, table: Table) -> None:
        t = physical(table.oid)
        row = cur.execute(f"SELECT count(*) FROM {t} WHERE {CURRENT}").fetchone()
        held = sum(len(lr.rows) for lr in self._live.values())
        if row is None or row[0] + held > MAX_LIVE_ROWS:
            self._too_big[table.oid] = table
            return
        if row[0] > EAGER_LIVE_ROWS:
            self._live_asks[table.oid] += 1
            if self._live_asks[table.oid] <= LIVE_ROWS_AFTER:
                return  # (not yet: the general path)
        rows = cur.execute(f"SELECT * FROM {Replica.scan_with_rid(table)} AS t").to_arrow_table()
        live = _LiveRows(table)
        live.rows = _keyed_rows(live, rows)
        self._live[table.oid] = live
        self._unobserved.pop(table.oid, None)  # (they are in the rows read)

    def _live_rows(self, oid: int) -> _LiveRows | None:
        """The table's live rows, if read and its definition is unchanged since, with
        the general transactions' changes committed since applied."""
        live = self._live.get(oid)
        if live is not None and live.table is not self.instance.table(oid):
            self._drop_live(oid)
            return None
        return None if live is None else self._observed(oid, live)

    def _observed(self, oid: int, live: _LiveRows) -> _LiveRows:
        for changes in self._unobserved.pop(oid, ()):
            _observe_rows(live, changes)
        return live

    def _drop_live(self, oid: int) -> None:
        self._unobserved.pop(oid, None)
        self._live.pop(oid, None)

    def observe(self, changes: dict[int, pa.Table], epoch: int) -> None:
        """Keep key sets and live rows in step with a general transaction's committed
        changes (of `epoch`)."""
        for oid, rows in changes.items():
            if oid in self._born_upto:
                self._born_upto[oid] = max(self._born_upto[oid], epoch)
            table = self.instance.table(oid)
            if table is None:
                continue
            self.refs.observe(oid, rows, rows.num_rows <= OBSERVED_ROWS_MAX)
            live = self._live.get(oid)
            if live is not None:  # applied when a point write next needs them (~12 µs a row)
                queued = self._unobserved.setdefault(oid, [])
                queued.append(rows)
                if sum(t.num_rows for t in queued) > max(OBSERVED_ROWS_MAX, len(live.rows)):
                    self._drop_live(oid)  # read again at the next point write
            if table.index_keys:
                self._observe_index_keys(table, rows)
            for key in table.keys:
                keys = self._keys.get((oid, key.name))
                if keys is None:
                    continue
                cols = [py_list(rows.column(c)) for c in key.columns]
                weights = rows.column(WEIGHT).to_pylist()
                for i, w in enumerate(weights):  # retractions first: an UPDATE may keep its key
                    if w < 0:
                        keys.discard(tuple(c[i] for c in cols))
                for i, w in enumerate(weights):
                    if w > 0:
                        k = tuple(c[i] for c in cols)
                        if None not in k:
                            keys.add(k)

    def _observe_index_keys(self, table: Table, changes: pa.Table) -> None:
        """Keep the unique indexes' key sets in step with `changes` where Python computes
        their keys (server/fast_index_keys.py); else they are read again when needed (a
        scan of the table)."""
        names = [(table.oid, _key_set(k)) for k in table.index_keys]
        if not any(n in self._keys for n in names):
            return
        weights = changes.column(WEIGHT).to_pylist()
        cols = [py_list(changes.column(c.name)) for c in table.columns]
        rows = list(zip(*cols, strict=True))
        gone = fast_index_keys.key_values(
            table, [r for r, w in zip(rows, weights, strict=True) if w < 0]
        )
        added = fast_index_keys.key_values(
            table, [r for r, w in zip(rows, weights, strict=True) if w > 0]
        )
        for i, name in enumerate(names):
            keys = self._keys.get(name)
            if keys is None:
                continue
            if gone is None or added is None:
                del self._keys[name]
                continue
            keys.difference_update(gone[i])  # (first: an UPDATE may keep its key)
            keys.update(k for k in added[i] if k is not None)

    def forget(self, oids: set[int] | None = None) -> None:
        """Drop key sets (of dropped tables, or all after a storage failure)."""
        self.refs.forget(oids)
        if oids is None:
            self._keys.clear()
            self._live.clear()
            self._unobserved.clear()
            self._too_big.clear()
            self._live_asks.clear()
            self._born_upto.clear()
            return
        for k in [k for k in self._keys if k[0] in oids]:
            del self._keys[k]
        for oid in oids:
            self._drop_live(oid)
            self._too_big.pop(oid, None)
            self._live_asks.pop(oid, None)
            self._born_upto.pop(oid, None)

    # -- staging and applying -------------------------------------------------------------
    def _stage(
        self, batch: list[_Pending], epoch: int
    ) -> tuple[dict[int, pa.Table], dict[int, SQLError], set[int]]:
        """Take the batch's units in order (a point write sees the rows of the units
        before it); returns the change rows per table, the units that failed, and the
        tables whose change rows must be consolidated with the epoch's others (a row
        changed by point writes of two batches that share the epoch)."""
        failures: dict[int, SQLError] = {}
        inserts: dict[int, tuple[Table, Rows]] = {}  # tables without live rows
        # tables with live rows: key -> (row id, row) before the batch (None: no row)
        touched: dict[int, dict[tuple[Any, ...], tuple[int, tuple[Any, ...]] | None]] = {}
        for p in batch:
            err = self._changed(p)
            if err is None and p.write is not None:
                err = self._point(p, touched)
            elif err is None and p.upsert is not None:
                err = self._upsert(p, touched)
            elif err is None:
                err = self._verify(p) or self._claim(p)
                if err is None:
                    err = self._refs(p)
                    if err is not None:
                        self._unclaim(p)
            if err is not None:
                failures[id(p)] = err
                continue
            for table, key, rid, before, new in p.rows:  # (tables the parts do not insert into)
                self._set_row(self._held(table.oid), key, (rid, before), new, touched)
            for table, rows in p.parts:
                self.refs.add(table, rows, 1)
                live = self._live_rows(table.oid)
                if live is None:
                    inserts.setdefault(table.oid, (table, []))[1].extend(rows)
                    continue
                first = self.instance.allocate_rids(len(rows))
                before = touched.setdefault(table.oid, {})
                for i, row in enumerate(rows):
                    key = live.key_of(row)
                    before.setdefault(key, None)  # else deleted earlier in the batch
                    live.put(key, first + i, row)
        changes: dict[int, pa.Table] = {}
        for oid, (table, rows) in inserts.items():
            if not rows:
                continue
            changes[oid] = rows_table(
                table, rows, self.instance.allocate_rids(len(rows)), [1] * len(rows)
            )
            self._unapply(epoch, table, changes[oid].drop_columns([WEIGHT]), None)
        for oid, before in touched.items():
            live = self._held(oid)
            old: list[tuple[int, tuple[Any, ...]]] = []
            added: list[tuple[int, tuple[Any, ...]]] = []
            for key, was in before.items():
                now = live.rows.get(key)
                if was != now:
                    old += [was] if was is not None else []
                    added += [now] if now is not None else []
            if not old and not added:
                continue
            table = live.table
            both = old + added  # (one Arrow table: ~30 µs each for a few rows)
            changes[oid] = rows_table(
                table,
                [r for _, r in both],
                [rid for rid, _ in both],
                [-1] * len(old) + [1] * len(added),
            )
            new = changes[oid].slice(len(old)).drop_columns([WEIGHT])
            self._unapply(epoch, table, new, [rid for rid, _ in old])
        for oid in touched:  # grown past the limit by INSERTs: the general path from now
            live = self._held(oid)
            if len(live.rows) > MAX_LIVE_ROWS:
                self._too_big[oid] = live.table
                self._drop_live(oid)
        return changes, failures, set(touched)

    def _unapply(self, epoch: int, table: Table, rows: pa.Table, retired: list[int] | None) -> None:
        with self._staged_lock:
            self._unapplied.append((epoch, table, rows, retired))
            self._staged_epoch = max(self._staged_epoch, epoch)
            self._unapplied_epochs[epoch] += 1

    def _held(self, oid: int) -> _LiveRows:
        """The table's live rows, known to be held, the changes since applied."""
        return self._observed(oid, self._live[oid])

    def _changed(self, p: _Pending) -> SQLError | None:
        tables = _tables(p)
        for table in tables:
            current = self.instance.table(table.oid)
            # (a catalog copy shares the Table objects it did not change: `is` first,
            # the field-by-field comparison only after DDL)
            if current is None or (current is not table and current != table):
                # dropped or altered since the statement was planned
                return SQLError(
                    f'relation "{table.name}" changed during the statement; retry', "40001"
                )
        return None

    def _claim(self, p: _Pending) -> SQLError | None:
        """Claim the unit's key values, unless one collides with the tables or another
        unit's (then nothing of it is claimed)."""
        if p.skip is not None:
            return self._claim_skipping(p)
        claimed: list[tuple[set[tuple[Any, ...]], tuple[Any, ...]]] = []
        for table, rows in p.parts:
            for key, values in _key_values(table, rows):
                live = self._keys[(table.oid, _key_set(key))]
                dup = _duplicate(values, live)
                if dup is not None:
                    for s_, k in claimed:  # undo what the unit's other keys claimed
                        s_.discard(k)
                    return _violation(key, dup, table)
                live.update(values)
                claimed.extend((live, k) for k in values)
        return None

    def _claim_skipping(self, p: _Pending) -> SQLError | None:
        """ON CONFLICT DO NOTHING: claim the rows' keys in their order, leaving out each
        row whose arbiter key a live row or a row kept before it has (PostgreSQL skips
        it); a collision on another key fails the unit (23505). The unit keeps the
        rows it inserts."""
        ((table, rows),) = p.parts
        keyed = [(k, self._keys[(table.oid, _key_set(k))], v) for k, v in _row_keys(table, rows)]
        kept: list[int] = []
        claimed: list[tuple[set[Row], Row]] = []
        for i in range(len(rows)):
            taken = [(k, v[i]) for k, live, v in keyed if v[i] is not None and v[i] in live]
            if any(p.skip in (ANY_KEY, k.name) for k, _ in taken):
                continue
            if taken:
                for live, value in claimed:
                    live.discard(value)
                return _violation(taken[0][0], taken[0][1], table)
            for _, live, v in keyed:
                if v[i] is not None:
                    live.add(v[i])
                    claimed.append((live, v[i]))
            kept.append(i)
        out: Rows = [rows[i] for i in kept]
        if isinstance(rows, IndexedRows):
            out = IndexedRows(out, [[keys[i] for i in kept] for keys in rows.index_keys])
        p.parts = [(table, out)]
        return None

    def _unclaim(self, p: _Pending) -> None:
        """Free the key values `_claim` took for the unit (they were all new)."""
        for table, rows in p.parts:
            for key, values in _key_values(table, rows):
                self._keys[(table.oid, _key_set(key))].difference_update(values)

    def _present(self, check: RefCheck, values: Row) -> bool:
        return values in self._keys.get((check.ref.oid, check.key), ())

    def _ref_checks(self, table: Table) -> list[RefCheck]:
        checks = ref_checks(table, self.instance.catalog.by_oid)
        if checks is None:  # a referenced table changed since the statement was planned
            raise SQLError(f'relation "{table.name}" changed during the statement; retry', "40001")
        return checks

    def _refs(self, p: _Pending) -> SQLError | None:
        """23503 for the unit's first new row whose FOREIGN KEY finds no key (the rows
        claimed before it count: a parent and its child in one unit pass)."""
        try:
            for table, rows in p.parts:
                if table.foreign_keys:
                    checks = self._ref_checks(table)
                    for row in rows:
                        err = refs_error(table, checks, row, self._present)
                        if err is not None:
                            return err
            for table, _, _, before, new in p.rows:
                if table.foreign_keys and new is not None:
                    checks = self._ref_checks(table)
                    err = refs_error(table, checks, new, self._present, before)
                    if err is not None:
                        return err
        except SQLError as e:
            return e
        return None

    def refs_error(
        self,
        table: Table,
        row: Row,
        before: Row | None,
        staged: StagedWrites,
        own: dict[tuple[int, str], set[Row]] | None = None,
    ) -> SQLError | None:
        """A block's new row against the key sets, the block's staged keys and `own` (the
        statement's), after `load_keys` of the referenced tables."""

        deleted: dict[int, set[Row]] = {}  # per check: worked out once per row checked

        def present(check: RefCheck, values: Row) -> bool:
            key = (check.ref.oid, check.key)
            gone = deleted.get(id(check))
            if gone is None:
                gone = deleted[id(check)] = _deleted_keys(staged, check)
            if values in gone:
                return False
            return any(values in keys.get(key, ()) for keys in (self._keys, staged.keys, own or {}))

        return refs_error(table, self._ref_checks(table), row, present, before)

    async def load_refs(self, pairs: list[Pair]) -> None:
        """Count the referencing values of `pairs` that are not (under the write lock)."""
        if not self.refs.missing(pairs):
            return
        committer = self.instance.committer
        assert committer is not None
        async with committer.write_lock:
            missing = self.refs.missing(pairs)
            if missing:
                await self._read(refs=missing)

    async def load_keys(self, tables: Sequence[int]) -> None:
        """Read the key sets of `tables` that are not (under the write lock)."""
        if all(self._has_keys(oid) for oid in tables):
            return
        committer = self.instance.committer
        assert committer is not None
        async with committer.write_lock:  # no general writer commits while they load
            missing = [oid for oid in tables if not self._has_keys(oid)]
            if missing:
                await self._read(missing)

    def _point(
        self,
        p: _Pending,
        touched: dict[int, dict[Row, tuple[int, Row] | None]],
    ) -> SQLError | None:
        """Apply a point write to the table's live rows."""
        w = p.write
        assert w is not None
        live = self._live_rows(w.table.oid)
        if live is None:  # too many rows to keep: the general path (server/writes.py)
            return SQLError(f'relation "{w.table.name}" is read whole; retry', "40001")
        if w.unique and live.find(w.unique, w.by) != (w.key or None):
            # another row holds the values by now (a general transaction moved them)
            return SQLError(f'a key of "{w.table.name}" moved to another row; retry', "40001")
        entry = live.rows.get(w.key)
        if entry is None:
            return None
        if (
            w.delete
            and self.refs.referenced(w.table, entry[1], self._referencing(w.table)) is not False
        ):
            # referenced (or not counted): the statement retries on the general path,
            # which takes the referencing rows' action
            return SQLError(f'a row of "{w.table.name}" is referenced; retry', "40001")
        try:
            new = None if w.delete else w.new_row(entry[1])
            if new is not None and w.table.foreign_keys:
                checks = self._ref_checks(w.table)
                err = refs_error(w.table, checks, new, self._present, entry[1])
                if err is not None:
                    return err
        except SQLError as e:
            return e
        self._set_row(live, w.key, entry, new, touched)
        p.row = entry[1] if new is None else new
        return None

    def _upsert(
        self, p: _Pending, touched: dict[int, dict[Row, tuple[int, Row] | None]]
    ) -> SQLError | None:
        """INSERT ... ON CONFLICT (primary key) DO UPDATE of one row: the proposed row if
        its key is free (checked as an INSERT's: its other keys, FOREIGN KEYs), else the
        live row with the SET items applied (as a point UPDATE: NOT NULL, CHECKs)."""
        assert p.upsert is not None
        table, row, sets = p.upsert
        live = self._live_rows(table.oid)
        if live is None:  # too many rows to keep: the general path (server/writes.py)
            return SQLError(f'relation "{table.name}" is read whole; retry', "40001")
        key = live.key_of(row)
        entry = live.rows.get(key)
        if entry is None:
            keyed = _key_values(table, [row])
            for k, values in keyed:
                dup = _duplicate(values, self._keys[(table.oid, _key_set(k))])
                if dup is not None:
                    return _violation(k, dup, table)
            if table.foreign_keys:
                err = refs_error(table, self._ref_checks(table), row, self._present, None)
                if err is not None:
                    return err
            for k, values in keyed:
                self._keys[(table.oid, _key_set(k))].update(values)
            touched.setdefault(table.oid, {}).setdefault(key, None)
            live.put(key, self.instance.allocate_rids(1), row)
            self.refs.add(table, [row], 1)
            p.row = row
            return None
        try:
            new = upserted_row(table, entry[1], row, sets)
        except SQLError as e:
            return e
        self._set_row(live, key, entry, new, touched)
        p.row = new
        return None

    def _verify(self, p: _Pending) -> SQLError | None:
        """A block's point-written rows are still the rows it read (their row locks
        guarantee it; a general writer that raced them would be caught here)."""
        for table, key, rid, before, new in p.rows:
            live = self._live_rows(table.oid)
            if live is None or live.rows.get(key) != (rid, before):
                return SQLError("could not serialize access due to concurrent update", "40001")
            if (
                new is None
                and self.refs.referenced(table, before, self._referencing(table)) is not False
            ):
                # (referenced since the block's DELETE by another session's new row)
                return SQLError("could not serialize access due to concurrent update", "40001")
        return None

    def _referencing(self, table: Table) -> list[Pair]:
        """The FOREIGN KEYs referencing `table` ([] when they cannot be counted: a DELETE
        from such a table never reaches the batcher)."""
        return referencing(self.instance.catalog, table) or []

    def _set_row(
        self,
        live: _LiveRows,
        key: Row,
        entry: tuple[int, Row],
        new: Row | None,
        touched: dict[int, dict[Row, tuple[int, Row] | None]],
    ) -> None:
        """The live row `entry` of `key` becomes `new` (None: deleted, its unique key
        values free again)."""
        oid = live.table.oid
        touched.setdefault(oid, {}).setdefault(key, entry)
        rid, row = entry
        self.refs.add(live.table, [row], -1)
        if new is not None:
            self.refs.add(live.table, [new], 1)
            live.put(key, rid, new)
            return
        live.drop(key)
        names = [c.name for c in live.table.columns]
        for k in live.table.keys:
            values = self._keys.get((oid, k.name))
            v = tuple(row[names.index(c)] for c in k.columns)
            if values is not None and None not in v:
                values.discard(v)
        index_sets = [self._keys.get((oid, _key_set(k))) for k in live.table.index_keys]
        if any(s_ is not None for s_ in index_sets):
            for held, keys in zip(index_sets, self._index_keys_of(live.table, row), strict=True):
                if held is not None:
                    held.difference_update(keys)  # (a None among them: not there)

    def _index_keys_of(self, table: Table, row: Row) -> list[list[Row | None]]:
        """The row's keys of the table's unique indexes: Python's, or (a value that is
        not ASCII, a key of another shape: rare) DuckDB's, at once on a cursor of its own."""
        keys = fast_index_keys.key_values(table, [list(row)])
        if keys is not None:
            return keys
        with self.instance.replica.cursor() as cur:
            return index_key_values(table, [list(row)], cur)

    async def check_keys(self, table: Table, rows: Rows, staged: StagedWrites) -> None:
        """23505 if the rows take a key that is live or staged in their transaction block,
        23503 if one finds no referenced key there (a unit can still fail at COMMIT: a
        concurrent writer may take the key first, or delete the referenced one)."""
        refs = [fk.ref_table for fk in table.foreign_keys]
        keyed = bool(table.keys or table.index_keys)
        if not keyed and not refs:
            return
        await self.load_keys([table.oid, *refs] if keyed else refs)
        for key, values in _key_values(table, rows):
            dup = _duplicate(
                values,
                self._keys.get((table.oid, _key_set(key)), set()),
                staged.keys.get((table.oid, _key_set(key)), set()),
            )
            if dup is not None:
                raise _violation(key, dup, table)
        if table.foreign_keys:
            own = {(table.oid, _key_set(k)): set(v) for k, v in _key_values(table, rows)}
            for row in rows:  # (a row may reference one of the statement's own)
                err = self.refs_error(table, row, None, staged, own)
                if err is not None:
                    raise err

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        if self._cur is None:
            self._cur = self.instance.replica.cursor()
        return self._cur

    async def applied(self, epoch: int) -> None:
        """Wait until the staged rows of `epoch` are in DuckDB (the committer, once per
        epoch). No hurry (the timer flushes), unless many epochs are waiting here. Also
        with materialized views: their stage reads the spool, not DuckDB, and a read
        that needs the epoch hurries the flush (epoch_choice.await_own_writes); a flush
        per epoch, as there was with views, cost 4 writers a third of their INSERTs."""
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(
                self._flush_loop(), name="flusher"
            )
        self._waiting += 1
        try:
            if self._waiting >= MAX_UNAPPLIED_EPOCHS and self._unapplied_up_to(epoch):
                self._urgent.set()
            async with self._applied:
                await self._applied.wait_for(lambda: not self._unapplied_up_to(epoch))
        finally:
            self._waiting -= 1

    def _unapplied_up_to(self, epoch: int) -> bool:
        with self._staged_lock:
            return any(e <= epoch for e in self._unapplied_epochs)

    async def flush_now(self) -> None:
        """Apply staged rows before a general writer reads the current state."""
        upto = await asyncio.to_thread(self.flush)
        async with self._applied:
            self.applied_epoch = max(self.applied_epoch, upto)
            self._applied.notify_all()

    def hurry(self) -> None:
        """Someone is waiting to read staged rows: flush now."""
        self._urgent.set()

    async def _flush_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._urgent.wait(), FLUSH_INTERVAL)
            except TimeoutError:
                pass
            self._urgent.clear()
            with self._staged_lock:
                if not self._unapplied_epochs:
                    continue
            try:
                upto = await asyncio.to_thread(self.flush)
            except Exception:
                log.exception("applying staged rows to the replica failed")
                continue
            async with self._applied:
                self.applied_epoch = max(self.applied_epoch, upto)
                self._applied.notify_all()

    def flush(self) -> int:
        """Apply every staged row to DuckDB (blocking; any thread); returns the epoch covered."""
        with self._apply_lock:
            with self._staged_lock:
                # the rows stay in _unapplied until DuckDB has them: a scanned write
                # reading meanwhile (pending_rows, then DuckDB) must not miss them
                work, upto = list(self._unapplied), self._staged_epoch
            if not work:
                return upto
            cur = self._cursor()
            # one INSERT per table, whatever the number of epochs (each row keeps its own)
            grouped: dict[tuple[int, tuple[str, ...]], list[_Staged]] = {}
            tables: dict[tuple[int, tuple[str, ...]], Table] = {}
            for epoch, table, rows, retired in work:
                key = (table.oid, tuple(rows.column_names))
                grouped.setdefault(key, []).append((epoch, rows, retired))
                tables[key] = table
            retiring = any(retired for _, _, _, retired in work)
            several = len(grouped) > 1 or retiring  # else one INSERT, atomic by itself
            if several:
                cur.execute("BEGIN TRANSACTION")
            try:
                for key, parts in grouped.items():
                    if self.instance.table(key[0]) is None:
                        continue  # dropped meanwhile
                    born = self._born_upto.get(key[0], LIVE)  # (unknown: any epoch)
                    newest = _apply_versions(cur, tables[key], parts, born)
                    if newest:
                        self._born_upto[key[0]] = newest
                if several:
                    cur.execute("COMMIT")
            except BaseException:
                if several:
                    cur.execute("ROLLBACK")
                raise  # (kept for the next flush: their epochs stay unreadable)
            with self._staged_lock:
                done = {id(w) for w in work}
                self._unapplied = [w for w in self._unapplied if id(w) not in done]
                self._unapplied_epochs.subtract(e for e, _, _, _ in work)
                self._unapplied_epochs += Counter()  # drops the epochs now at zero
            return upto

    def discard_unapplied(self) -> None:
        with self._staged_lock:
            self._unapplied = []
            self._unapplied_epochs.clear()


_Staged = tuple[int, pa.Table, "list[int] | None"]  # (epoch, versions added, row ids retired)


def _apply_versions(
    cur: duckdb.DuckDBPyConnection, table: Table, parts: list[_Staged], born: int
) -> int:
    """A table's staged changes, in staging order, into DuckDB: one INSERT of every new
    version (each with its epoch) and, for point writes, an UPDATE of the live versions
    they retired. A version added and retired within the parts gets its end here (and
    is left out if it ends in the epoch it began: no epoch sees it). `born`: an epoch no
    version in DuckDB began after (LIVE: unknown); only a version retired at an epoch up
    to it is looked for among those born then. Returns that epoch after this (0:
    still unknown)."""
    newest = max([0 if born == LIVE else born] + [e for e, t, _ in parts if t.num_rows])
    if not any(retired for _, _, retired in parts):
        if all(e == parts[0][0] for e, _, _ in parts):
            Replica.insert_versions(
                cur, table, pa.concat_tables([t for _, t, _ in parts]), parts[0][0]
            )
            return newest
    versions: list[list[int]] = []  # [from, to, part, row]
    open_at: dict[int, int] = {}  # row id -> its version added here and still open
    in_duckdb: dict[int, list[int]] = {}  # epoch -> row ids whose DuckDB version ends then
    for i, (epoch, rows, retired) in enumerate(parts):
        for rid in retired or ():
            v = open_at.pop(rid, None)
            if v is None:
                in_duckdb.setdefault(epoch, []).append(rid)
            else:
                versions[v][1] = epoch
        for j, rid in enumerate(rows.column(RID).to_pylist()):
            open_at[rid] = len(versions)
            versions.append([epoch, LIVE, i, j])
    for epoch in [e for e in in_duckdb if e <= born]:  # it may have begun then
        Replica.retire_versions(cur, table, pa.array(in_duckdb.pop(epoch), pa.int64()), epoch)
    if in_duckdb:
        Replica.retire_at(cur, table, in_duckdb)
    kept = [v for v in versions if v[0] != v[1]]
    if not kept:
        return newest
    offsets = [0]
    for _, rows, _ in parts:
        offsets.append(offsets[-1] + rows.num_rows)
    every = pa.concat_tables([t for _, t, _ in parts])
    rows = every.take(pa.array([offsets[p] + j for _, _, p, j in kept], pa.int64()))
    rows = rows.append_column(FROM, pa.array([f for f, _, _, _ in kept], pa.int64()))
    rows = rows.append_column(TO, pa.array([t for _, t, _, _ in kept], pa.int64()))
    Replica.insert_versions(cur, table, rows, None)
    return newest


def _deleted_keys(staged: StagedWrites, check: RefCheck) -> set[Row]:
    """The values of `check`'s referenced key in the rows the block deleted."""
    out: set[Row] = set()
    for r in staged.rows.values():
        if r.new is None and r.table.oid == check.ref.oid:
            key = next(k for k in r.table.keys if k.name == check.key)
            names = [c.name for c in r.table.columns]
            out.add(tuple(r.read[names.index(c)] for c in key.columns))
    return out


def _deleted_from(p: _Pending) -> list[Table]:
    """The tables a unit deletes rows of by point writes."""
    out = [r.table for r in p.rows if r.new is None]
    return out + [p.write.table] if p.write is not None and p.write.delete else out


def upserted_row(
    table: Table, old: Row, proposed: Row, sets: tuple[tuple[int, str, Any], ...]
) -> Row:
    """A DO UPDATE's new version of `old` (each item reads the old row and EXCLUDED, the
    proposed row); PostgreSQL's error for a sum out of range, a NULL in a NOT NULL
    column or a failed CHECK."""
    new = list(old)
    for at, kind, v in sets:
        if kind == "excluded":
            new[at] = proposed[v]
        elif kind == "value":
            new[at] = v
        else:
            source, sign, k = v
            base = old[source]
            new[at] = None if base is None or k is None else base + sign * k
            pg = table.columns[at].type.pg
            if new[at] is not None and not INT_RANGES[pg][0] <= new[at] <= INT_RANGES[pg][1]:
                raise NumericOutOfRange(f"{INT_NAMES[pg]} out of range")
    for i, col in enumerate(table.columns):
        if col.not_null and new[i] is None:
            raise not_null_violation(table, col.name, new)
    row = tuple(new)
    if table.checks:
        err = check_error(table, compiled(table) or [], row)
        if err is not None:
            raise err
    return row


def _tables(p: _Pending) -> list[Table]:
    """The tables a unit writes."""
    out = [t for t, _ in p.parts] + [r.table for r in p.rows]
    out += [p.upsert[0]] if p.upsert is not None else []
    return out + [p.write.table] if p.write is not None else out


def _staged(batch: list[_Pending]) -> None:
    for p in batch:
        if p.staged is not None:
            p.staged()


def _observe_rows(live: _LiveRows, changes: pa.Table) -> None:
    """A general transaction's committed change rows into a table's live rows."""
    gone = changes.filter(pc.less(changes.column(WEIGHT), 0))
    keys = zip(*(py_list(gone.column(live.table.columns[i].name)) for i in live.key), strict=True)
    added = changes.filter(pc.greater(changes.column(WEIGHT), 0))
    live.replace(zip(gone.column(RID).to_pylist(), keys, strict=True), _keyed_rows(live, added))


def _keyed_rows(live: _LiveRows, rows: pa.Table) -> dict[Row, tuple[int, Row]]:
    """Rows (_hw_rid and the table's columns) as `live.rows` holds them: key -> (row
    id, row), each column converted once and the dict built in C (a row at a time,
    `put` took ~5 µs a row: 3 s for 600 k; issue 16)."""
    columns = [py_list(rows.column(c.name)) for c in live.table.columns]
    keys = zip(*(columns[i] for i in live.key), strict=True)
    held = zip(rows.column(RID).to_pylist(), zip(*columns, strict=True), strict=True)
    return dict(zip(keys, held, strict=True))
