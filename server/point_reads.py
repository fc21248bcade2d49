"""Point reads outside DuckDB: `SELECT cols FROM t WHERE key = $1 [AND ...]`.

A SELECT of plain columns of one table, whose WHERE is equalities covering exactly a
PRIMARY KEY or UNIQUE key (parameters or integer/string constants), outside a writing
transaction and without AS OF, is answered from the replica's key index
(storage/key_index.py) at the epoch the statement reads (epoch_choice.read_epoch):
a dict lookup instead of ~0.35 ms of DuckDB per read. A miss reads the key's rows in
DuckDB once (with the epoch their version began) and remembers them. The values are
the Python values DuckDB hands the DuckDB path (Arrow's conversion), the columns those
of the table, so the rows, their encoding and the RowDescription are the same as that
path's (tests/test_point_reads.py compares them, types and concurrent writes).

Anything else returns None and takes the general path: views, joins, expressions,
ORDER BY/LIMIT, temporary tables (their changes have no epoch record to keep the
index exact), key values of another type than the column's (int for integer keys,
str for text and varchar keys), and the first read of a shape while an ALTER is in
flight.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pglast.ast as A
from headwater.catalog.catalog import Catalog, is_temp_schema
from headwater.catalog.objects import Table
from headwater.catalog.types import TEXT, VARCHAR
from headwater.planner.output_types import output_sources
from headwater.planner.scope import Item, Scope, find_relation, may_be_system
from headwater.server import epoch_choice, reads
from headwater.server.batcher import INT_RANGES
from headwater.server.results import Field, Result, rows_of
from headwater.server.session import Session
from headwater.server.settings import setting_ms
from headwater.server.waits import Waits
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import Replica
from pglast.enums import A_Expr_Kind, BoolExprType

_TEXTS = (TEXT, VARCHAR)
# casts a parameter may carry (SQL PREPARE types its parameters so): none truncates
_PARAM_CASTS = frozenset({"int2", "int4", "int8", "text", "varchar"})
SPECS = 256  # statement trees whose recognition is remembered


@dataclass
class PointRead:
    """A recognised point read: the table, the key, where each key value comes from."""

    table: Table
    key: tuple[str, ...]  # the key's columns, in the key's order
    sources: tuple[tuple[bool, Any], ...]  # per key column: (True, $n) or (False, constant)
    ranges: tuple[tuple[int, int] | None, ...]  # per key column: an integer's range, or
    # None for text (checked per execution: identity and tuples, no PgType hashing)
    out: tuple[int, ...]  # the output columns' positions in the table
    fields: list[Field]  # the RowDescription (shared by every result; never changed)
    sql: str  # the miss's DuckDB read (Replica.key_lookup)
    duckdb: Any = None  # `sql` parsed once
    seconds: float | None = None  # CPU its last miss took in DuckDB (None: not run yet)
    whole: bool = field(init=False)

    def __post_init__(self) -> None:
        self.whole = self.out == tuple(range(len(self.table.columns)))

    def project(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        if self.whole:
            return rows
        out = self.out
        return [tuple([r[i] for i in out]) for r in rows]


_NOT_SERVED = object()
_NO_VIEWS: set[int] = set()  # (never changed)
# statement tree id -> (tree, catalog, search_path setting, temporary schema, recognition)
_specs: OrderedDict[int, tuple[Any, Catalog, str, str | None, PointRead | None]] = OrderedDict()


async def serve(s: Session, waits: Waits, stmt: Any, params: list[Any]) -> Result | None:
    """The result of `stmt` if it is a point read (server/queries.py), else None."""
    if s.write is not None or s.instance.reshaping:
        return None
    spec = point_read(s, stmt)
    if spec is None:
        return None
    values = key_values(spec, params)
    if values is _NOT_SERVED:
        return None
    rows: list[tuple[Any, ...]] = []
    if values is not None:
        epoch = await epoch_choice.read_epoch(s, waits, _NO_VIEWS)
        found = s.instance.replica.keys.rows(spec.table, spec.key, values, epoch)
        rows = found if found is not None else await _miss(s, spec, values, epoch)
        if s.staged:  # the block's own point writes (over_staged)
            rows = s.staged.overlay(spec.table, rows)
    out = spec.project(rows)
    return Result(f"SELECT {len(out)}", spec.fields, out)


def own_row(s: Session, stmt: Any, params: list[Any]) -> Result | None:
    """A point read by primary key of a row the block's point writes staged: its
    staged version (or none), without waiting for the committed state."""
    if not s.staged.rows or s.write is not None:
        return None
    spec = point_read(s, stmt)
    if spec is None:
        return None
    pk = spec.table.primary_key
    values = key_values(spec, params)
    if pk is None or pk.columns != spec.key or values is None or values is _NOT_SERVED:
        return None
    staged = s.staged.rows.get((spec.table.oid, values))
    if staged is None:
        return None
    out = spec.project([staged.new] if staged.new is not None else [])
    return Result(f"SELECT {len(out)}", spec.fields, out)


def over_staged(s: Session, stmt: Any, params: list[Any]) -> bool:
    """Whether `serve` answers `stmt` in a block with staged writes, which it shows
    (a point read of a table the block staged no INSERT into)."""
    if s.write is not None or s.instance.reshaping:
        return False
    spec = point_read(s, stmt)
    return (
        spec is not None
        and not s.staged.inserted(spec.table.oid)
        and key_values(spec, params) is not _NOT_SERVED
    )


def point_read(s: Session, stmt: Any) -> PointRead | None:
    """`stmt` as a point read (remembered per statement tree, catalog and search_path:
    the setting and the temporary schema, which with the catalog make s.search_path())."""
    catalog, setting, temp = s.catalog, s.settings.values["search_path"], s.temp_schema
    hit = _specs.get(id(stmt))
    if (
        hit is not None
        and hit[0] is stmt
        and hit[1] is catalog
        and hit[2] == setting
        and hit[3] == temp
    ):
        return hit[4]
    spec = recognise(stmt, catalog, s.search_path())
    _specs[id(stmt)] = (stmt, catalog, setting, temp, spec)
    _specs.move_to_end(id(stmt))
    while len(_specs) > SPECS:
        _specs.popitem(last=False)
    return spec


def recognise(stmt: Any, catalog: Catalog, path: tuple[str, ...]) -> PointRead | None:
    if not isinstance(stmt, A.SelectStmt) or not _plain(stmt):
        return None
    rv = stmt.fromClause[0]
    if not isinstance(rv, A.RangeVar) or (rv.alias is not None and rv.alias.colnames):
        return None
    if rv.catalogname is not None or may_be_system(catalog, rv, path):
        return None
    table = find_relation(catalog, rv, path)
    if not isinstance(table, Table) or is_temp_schema(table.schema) or not table.keys:
        return None
    sources = output_sources(stmt, catalog, path)
    if not sources or any(src is None or src.table_oid != table.oid for src in sources):
        return None
    names = _output_names(stmt, table)
    if names is None or len(names) != len(sources) or len(set(names)) != len(names):
        return None  # (DuckDB may rename duplicate output names)
    alias = rv.alias.aliasname if rv.alias else rv.relname
    scope: Scope[str] = Scope([Item(alias, [(c.name, c.name) for c in table.columns])])
    given = _equalities(stmt.whereClause, scope)
    if given is None:
        return None
    key = next((k for k in table.keys if set(k.columns) == set(given)), None)
    if key is None:
        return None
    kinds = [table.column(c).type.pg for c in key.columns]  # type: ignore[union-attr]
    if any(k not in INT_RANGES and k not in _TEXTS for k in kinds):
        return None
    fields = [
        Field(n, src.column.type, src.table_oid, src.attnum)
        for n, src in zip(names, sources, strict=True)
        if src is not None
    ]
    return PointRead(
        table,
        key.columns,
        tuple(given[c] for c in key.columns),
        tuple(INT_RANGES.get(k) for k in kinds),
        tuple(src.attnum - 1 for src in sources if src is not None),
        fields,
        Replica.key_lookup(table, key.columns),
    )


def _plain(stmt: A.SelectStmt) -> bool:
    return (
        not stmt.op
        and stmt.withClause is None
        and stmt.intoClause is None
        and not stmt.distinctClause
        and not stmt.groupClause
        and stmt.havingClause is None
        and not stmt.windowClause
        and not stmt.valuesLists
        and not stmt.sortClause
        and stmt.limitCount is None
        and stmt.limitOffset is None
        and not stmt.lockingClause
        and bool(stmt.targetList)
        and stmt.fromClause is not None
        and len(stmt.fromClause) == 1
        and stmt.whereClause is not None
    )


def _output_names(stmt: A.SelectStmt, table: Table) -> list[str] | None:
    names: list[str] = []
    for rt in stmt.targetList:
        val = rt.val
        if not isinstance(val, A.ColumnRef):
            return None
        if isinstance(val.fields[-1], A.A_Star):
            names.extend(c.name for c in table.columns)
        else:
            names.append(rt.name or val.fields[-1].sval)
    return names


def _equalities(node: Any, scope: Scope[str]) -> dict[str, tuple[bool, Any]] | None:
    """Column -> where its value comes from, for a WHERE of `col = value` conjuncts."""
    if isinstance(node, A.BoolExpr):
        if node.boolop != BoolExprType.AND_EXPR:
            return None
        out: dict[str, tuple[bool, Any]] = {}
        for arg in node.args:
            part = _equalities(arg, scope)
            if part is None or out.keys() & part.keys():
                return None
            out.update(part)
        return out
    if not isinstance(node, A.A_Expr) or node.kind != A_Expr_Kind.AEXPR_OP or len(node.name) != 1:
        return None
    if node.name[0].sval != "=":
        return None
    for col, val in ((node.lexpr, node.rexpr), (node.rexpr, node.lexpr)):
        if isinstance(col, A.ColumnRef) and not isinstance(col.fields[-1], A.A_Star):
            fields = [f.sval for f in col.fields]
            hits = scope.candidates(fields) if len(fields) <= 2 else []
            source = _value_source(val)
            if len(hits) == 1 and source is not None:
                return {hits[0]: source}
    return None


def _value_source(node: Any) -> tuple[bool, Any] | None:
    if isinstance(node, A.TypeCast) and isinstance(node.arg, A.ParamRef):
        tn = node.typeName
        if tn.typmods or tn.arrayBounds or tn.names[-1].sval not in _PARAM_CASTS:
            return None
        node = node.arg
    if isinstance(node, A.ParamRef):
        return (True, node.number)
    if isinstance(node, A.A_Const):
        if node.isnull:
            return (False, None)
        if isinstance(node.val, A.Integer):
            return (False, node.val.ival)
        if isinstance(node.val, A.String):
            return (False, node.val.sval)
    return None


def key_values(spec: PointRead, params: list[Any]) -> Any:
    """The key's values for this execution; None when no row can match (a NULL, an
    integer out of the column's range); _NOT_SERVED when the value's type is not the
    column's (the general path applies PostgreSQL's coercions)."""
    values = []
    empty = False
    for (is_param, src), bounds in zip(spec.sources, spec.ranges, strict=True):
        if is_param:
            if not 0 < src <= len(params):
                return _NOT_SERVED
            v = params[src - 1]
        else:
            v = src
        if v is None:
            empty = True
        elif bounds is None:
            if type(v) is not str:
                return _NOT_SERVED
        elif type(v) is not int:
            return _NOT_SERVED
        else:
            empty = empty or not bounds[0] <= v <= bounds[1]
        values.append(v)
    return None if empty else tuple(values)


async def _miss(
    s: Session, spec: PointRead, values: tuple[Any, ...], epoch: int
) -> list[tuple[Any, ...]]:
    """Read the key's rows in DuckDB (where server/reads.py would run it) and remember
    them; now and then the whole table's (storage/key_index.py BULK_AFTER)."""
    keys = s.instance.replica.keys
    if keys.missed(spec.table, spec.key):
        found = await asyncio.to_thread(_all_rows, s.cursor(), spec, epoch)
        keys.fill_all(spec.table, spec.key, epoch, found)
        if values in found:
            return found[values][1]
    last = spec.seconds
    if last is not None and setting_ms(s.settings.values.get("statement_timeout", "0")):
        last = max(last, reads.INLINE)  # never on the event loop: the timer could not stop it
    rows, since, spec.seconds = await reads.run(last, _lookup, s.cursor(), spec, values, epoch)
    keys.fill(spec.table, spec.key, values, epoch, since, rows)
    return rows


def _all_rows(
    cur: duckdb.DuckDBPyConnection, spec: PointRead, epoch: int
) -> dict[tuple[Any, ...], tuple[int, list[tuple[Any, ...]]]]:
    """Every key value's rows at `epoch`, with the epoch the newest of them began."""
    try:
        table = cur.execute(Replica.rows_at(spec.table), [epoch]).to_arrow_table()
    except duckdb.Error as e:
        raise translate(e) from None
    names = [c.name for c in spec.table.columns]
    idx = [names.index(c) for c in spec.key]
    found: dict[tuple[Any, ...], tuple[int, list[tuple[Any, ...]]]] = {}
    for since, *row in rows_of(table):
        k = tuple(row[i] for i in idx)
        if None in k:  # matches no key value
            continue
        had = found.get(k)
        if had is None:
            found[k] = (since, [tuple(row)])
        else:
            had[1].append(tuple(row))
            found[k] = (max(had[0], since), had[1])
    return found


def _lookup(
    cur: duckdb.DuckDBPyConnection, spec: PointRead, values: tuple[Any, ...], epoch: int
) -> tuple[list[tuple[Any, ...]], int, float]:
    """(rows, the epoch the newest of them began, CPU seconds), as reads.fetch measures."""
    t0 = time.thread_time()
    w0 = time.perf_counter()
    try:
        if spec.duckdb is None:
            spec.duckdb = cur.extract_statements(spec.sql)[0]
        table = cur.execute(spec.duckdb, [*values, epoch]).to_arrow_table()
    except duckdb.Error as e:
        raise translate(e) from None
    found = rows_of(table)
    since = max((r[0] for r in found), default=epoch)
    rows = [r[1:] for r in found]
    cpu = time.thread_time() - t0
    waited = time.perf_counter() - w0 >= reads.INLINE_WALL
    return rows, since, max(cpu, reads.INLINE) if waited else cpu
