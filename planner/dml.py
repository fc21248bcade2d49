"""INSERT/UPDATE/DELETE as DuckDB queries that compute their change rows.

A write never modifies the replica by itself: these queries compute the rows to
add (new versions) and the row ids to retire, and the transaction applies them
(storage/replica.py) after the constraint checks, so that the same rows become the
epoch's change log. The target table is read in the writer's current state.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import Any

import pglast.ast as A
import pyarrow as pa
from headwater.catalog.objects import Column, Table
from headwater.catalog.pgtypes.arrays import parse_array_literal
from headwater.catalog.pgtypes.bytea import bytea_in
from headwater.catalog.pgtypes.integers import bool_in
from headwater.catalog.types import (
    ARRAY_ELEMENT,
    BOOL,
    BYTEA,
    DUCKDB_MAX_PRECISION,
    INT2,
    INT4,
    INT8,
    JSONB,
    NUMERIC,
    NUMERIC_DEFAULT_SCALE,
)
from headwater.planner import constant_lists, pg_compat
from headwater.planner.naming import name_targets
from headwater.planner.pg_compat import check_array_literal, dated_constant, duckdb_list_text
from headwater.planner.relations import Binder, deparse
from headwater.planner.scope import column_types
from headwater.planner.sequences import check_identity_update, identity_defaults
from headwater.planner.syntax import nodes
from headwater.storage.changelog import RID
from headwater.storage.replica import CURRENT, physical, quote
from pglast import parse_sql
from pglast.enums import BoolExprType

from headwater.errors import FeatureNotSupported, SQLError, UndefinedColumn


def _col_name(i: int) -> str:
    return f"_hw_c{i}"


def pg_spellings(stmt: Any, catalog: Any, search_path: list[str]) -> None:
    """PostgreSQL's spellings in a write, as SELECT has them (interval '1' minute,
    pg_catalog.timezone(...), x::varchar(3), ...), in place; string constants stay as
    written."""
    col_types = column_types(stmt, catalog, search_path)
    pg_compat.rewrite(stmt, array_literals=False, column_types=col_types)


def to_column_sql(sql: str, col: Column) -> str:
    """A value cast to a column's type; jsonb input normalizes (keys sorted, spacing)."""
    if col.type.pg is JSONB:
        return f"CAST(hw_jsonb_in(CAST(({sql}) AS VARCHAR)) AS JSON)"
    return f"CAST(({sql}) AS {col.type.duckdb()})"


def default_sql(col: Column, binder: Binder) -> str:
    if col.default is None:
        return f"CAST(NULL AS {col.type.duckdb()})"
    stmt = parse_sql(f"SELECT {col.default}")[0].stmt
    # PostgreSQL's spellings ('{}'::jsonb, 'ok'::mood), as the statement's own values get them
    types = column_types(stmt, binder.catalog, binder.search_path)
    pg_compat.rewrite(stmt, array_literals=False, column_types=types)
    return cast_sql(stmt.targetList[0].val, col, binder)  # (`tags text[] DEFAULT '{}'`)


def cast_sql(expr: Any, col: Column, binder: Binder) -> str:
    if isinstance(expr, A.SetToDefault):
        return default_sql(col, binder)
    if isinstance(expr, A.A_Const) and isinstance(expr.val, A.String):
        if col.type.pg.name in ARRAY_ELEMENT:  # SET tags = '{a,b}'
            return to_column_sql(_text_literal(expr.val.sval, col), col)
        expr = dated_constant(expr, col.type.pg.name)  # SET d = '01/02/2020'
    return to_column_sql(binder.to_sql(expr), col)


def target_columns(table: Table, cols: Any) -> list[Column]:
    if not cols:
        return list(table.columns)
    out: list[Column] = []
    for rt in cols:
        if rt.indirection:
            raise FeatureNotSupported(
                "assigning to a field or subscript of a column is not supported"
            )
        c = table.column(rt.name)
        if c is None:
            raise UndefinedColumn(f'column "{rt.name}" of relation "{table.name}" does not exist')
        if c in out:
            raise SQLError(f'column "{c.name}" specified more than once', "42701")
        out.append(c)
    return out


@dataclass
class InsertPlan:
    sql: str  # yields the rows to insert: the table's columns, in order, cast
    source: str | None  # the INSERT ... SELECT query, whose width must be checked
    width: int  # number of target columns
    values: pa.Table | None = None  # the VALUES constants `sql` reads as VALUES_TABLE


VALUES_TABLE = "_hw_values"
ARROW_MIN_ROWS = 8  # fewer VALUES rows are cheaper as SQL than as a registered table


def constants_table(rows: list[Any], width: int) -> pa.Table | None:
    """VALUES rows of constants as Arrow, column `_hw_c{i}` of the kind its constants
    share (text, bigint, boolean, or a decimal wide enough for all of them, as DuckDB
    types such literals), so that casting the column casts each value as casting the
    literal would; None when a column mixes kinds or holds anything else. Converting
    the constants once costs ~1 ms per 1,000 rows; SQL with a cast per value cost
    DuckDB ~150 ms to bind, and the deparser ~50 µs per value."""
    columns = []
    for i in range(width):
        column = [row[i] for row in rows]
        kinds = {_kind(v) for v in column}
        kinds.discard(None)
        if len(kinds) > 1 or A.Node in kinds:
            return None
        kind = kinds.pop() if kinds else None
        if kind is A.String:
            arr = pa.array([None if v.isnull else v.val.sval for v in column], pa.string())
        elif kind is A.Integer:
            arr = pa.array([None if v.isnull else _integer(v.val) for v in column], pa.int64())
        elif kind is A.Boolean:
            arr = pa.array([None if v.isnull else v.val.boolval for v in column], pa.bool_())
        elif kind is A.Float:
            nums = [None if v.isnull else decimal.Decimal(v.val.fval) for v in column]
            shapes = [n.as_tuple() for n in nums if n is not None]
            scale = max(0, *(-int(t.exponent) for t in shapes))
            # digits before the point (0.06 has none), then the scale after it
            digits = max(0, *(len(t.digits) + int(t.exponent) for t in shapes)) + scale
            if digits > 38:
                return None
            arr = pa.array(nums, pa.decimal128(max(digits, 1), scale))
        else:
            arr = pa.nulls(len(column))
        columns.append(arr)
    return pa.table(columns, names=[_col_name(i) for i in range(width)])


def _kind(node: Any) -> type | None:
    """A constant's kind for constants_table (None: NULL; A.Node: not one it takes).
    Integers past 32 bits are Float nodes: bigint when they fit; a decimal constant
    with an exponent is a double in DuckDB, not taken."""
    if not isinstance(node, A.A_Const):
        return A.Node
    if node.isnull:
        return None
    v = node.val
    if isinstance(v, A.Float):
        text = v.fval.lstrip("-")
        if not text.replace(".", "", 1).isdigit():
            return A.Node
        if "." not in text:
            return A.Integer if -(2**63) <= int(v.fval) < 2**63 else A.Node
        return A.Float
    kind = type(v)
    return kind if kind in (A.String, A.Integer, A.Boolean) else A.Node


def _integer(v: Any) -> int:
    return v.ival if isinstance(v, A.Integer) else int(v.fval)


def _value_sql(expr: Any, col: Column, binder: Binder) -> str:
    """cast_sql, with a constant printed as pglast's RawStream prints it (there is
    nothing to bind in it; the deparser costs ~50 µs per value)."""
    literal = None
    if isinstance(expr, A.A_Const):
        v = expr.val
        if expr.isnull:
            literal = "NULL"
        elif isinstance(v, A.String):
            literal = _text_literal(v.sval, col)
        elif isinstance(v, A.Integer):
            _check_assignable(col, "integer")
            literal = str(v.ival)
        elif isinstance(v, A.Float):
            _check_assignable(
                col, "numeric" if "." in v.fval or "e" in v.fval.lower() else "bigint"
            )
            literal = v.fval
        elif isinstance(v, A.Boolean):
            literal = "TRUE" if v.boolval else "FALSE"
    return cast_sql(expr, col, binder) if literal is None else to_column_sql(literal, col)


def _text_literal(text: str, col: Column) -> str:
    """A string constant as SQL for a column, read as `_input_value` reads it."""
    value = _input_value(text, col)
    if isinstance(value, bytes):
        return f"from_hex('{value.hex()}')"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    return "'" + value.replace("'", "''") + "'"


def _input_type(col: Column) -> pa.DataType | None:
    """What `_input_value` gives for the column's type; None where DuckDB's cast of the
    text reads as PostgreSQL's input function does."""
    if col.type.pg.name in ARRAY_ELEMENT:
        return pa.string()
    return pa.binary() if col.type.pg is BYTEA else pa.bool_() if col.type.pg is BOOL else None


def _input_value(text: str, col: Column) -> str | bool | bytes:
    """A string constant for a column read with PostgreSQL's input function where
    DuckDB's cast reads otherwise: an array's '{a,"b c"}' as DuckDB's list text,
    boolean's 'off' as a bool, bytea's '\\x0102' as bytes; other text unchanged."""
    element = ARRAY_ELEMENT.get(col.type.pg.name)
    if element is not None:
        return list_text(text, element.name)
    if col.type.pg is BYTEA:
        return bytea_in(text)
    if col.type.pg is BOOL:
        return bool_in(text)
    return text


def list_text(text: str, element: str) -> str:
    """PostgreSQL's array input ('{1,2}') as DuckDB's list input, which the column's
    cast reads; PostgreSQL's errors for a malformed one (22P02) or a bad element."""
    check_array_literal(text, [element])
    elements = parse_array_literal(text)
    assert elements is not None  # (else check_array_literal raised)
    if any(isinstance(e, list) for e in elements):
        raise FeatureNotSupported("multidimensional arrays are not supported in columns")
    return duckdb_list_text(elements)


def _check_assignable(col: Column, source: str) -> None:
    """A number assigned to a boolean column: PostgreSQL has no assignment cast (42804)."""
    if col.type.pg is BOOL:
        raise SQLError(
            f'column "{col.name}" is of type boolean but expression is of type {source}',
            "42804",
            hint="You will need to rewrite or cast the expression.",
        )


def _typed_constants(values: pa.Table, targets: list[Column]) -> pa.Table:
    """constants_table's string columns for array, boolean and bytea targets, read by
    `_input_value`."""
    for i, col in enumerate(targets):
        arr = values.column(i)
        read = _input_type(col)
        if read is not None and pa.types.is_string(arr.type):
            texts = arr.to_pylist()
            new = pa.array([None if t is None else _input_value(t, col) for t in texts], read)
        elif col.type.pg is BOOL and (
            pa.types.is_integer(arr.type) or pa.types.is_decimal(arr.type)
        ):
            _check_assignable(col, "integer" if pa.types.is_integer(arr.type) else "numeric")
            continue
        else:
            continue
        values = values.set_column(i, values.field(i).name, new)
    return values


def insert_rows_sql(
    stmt: A.InsertStmt, table: Table, binder: Binder, width: int | None = None
) -> InsertPlan:
    """`width`: without a column list, the values fill the first `width` columns and
    the rest take their defaults (PostgreSQL); VALUES gives its own width."""
    targets = target_columns(table, stmt.cols)
    src = stmt.selectStmt
    if isinstance(src, A.SelectStmt) and src.valuesLists:
        if len({len(row) for row in src.valuesLists}) > 1:
            raise SQLError("VALUES lists must all be the same length", "42601")
        _no_aggregates(src.valuesLists)
    if not stmt.cols:
        if width is None and isinstance(src, A.SelectStmt) and src.valuesLists:
            width = len(src.valuesLists[0])
        if width is not None and width < len(targets):
            targets = targets[:width]
    by_name: dict[str, str] = {}
    inner = ""
    if src is None:  # DEFAULT VALUES
        source = "(SELECT 1)"
    elif isinstance(src, A.SelectStmt) and src.valuesLists and not src.withClause:
        for row in src.valuesLists:
            if len(row) > len(targets):
                raise SQLError("INSERT has more expressions than target columns", "42601")
            if len(row) < len(targets):
                raise SQLError("INSERT has more target columns than expressions", "42601")
        values = (
            constants_table(src.valuesLists, len(targets))
            if len(src.valuesLists) >= ARROW_MIN_ROWS
            else None
        )
        if values is not None:  # cast once per column, from Arrow: no SQL per value
            values = _typed_constants(values, targets)
            given = {c.name: i for i, c in enumerate(targets)}
            for name in identity_defaults(stmt, targets):  # OVERRIDING USER VALUE
                given.pop(name, None)
            select = ", ".join(
                (
                    to_column_sql(f"_hw_src.{_col_name(given[c.name])}", c)
                    if c.name in given
                    else default_sql(c, binder)
                )
                + f" AS {quote(c.name)}"
                for c in table.columns
            )
            sql = f"SELECT {select} FROM {VALUES_TABLE} AS _hw_src"
            return InsertPlan(sql, None, len(targets), values)
        rows = [
            "("
            + ", ".join(_value_sql(v, c, binder) for v, c in zip(row, targets, strict=True))
            + ")"
            for row in src.valuesLists
        ]
        names = ", ".join(_col_name(i) for i in range(len(targets)))
        source = f"(VALUES {', '.join(rows)}) AS _hw_src({names})"
        by_name = {c.name: f"_hw_src.{_col_name(i)}" for i, c in enumerate(targets)}
    else:
        _input_literals(src, targets)
        inner = binder.to_sql(src)
        names = ", ".join(_col_name(i) for i in range(len(targets)))
        source = f"(SELECT * FROM ({inner}) AS _hw_q) AS _hw_src({names})"
        by_name = {
            c.name: to_column_sql(f"_hw_src.{_col_name(i)}", c) for i, c in enumerate(targets)
        }
    for name in identity_defaults(stmt, targets):  # OVERRIDING USER VALUE
        by_name.pop(name, None)
    select = ", ".join(
        f"{by_name.get(c.name) or default_sql(c, binder)} AS {quote(c.name)}" for c in table.columns
    )
    inner_sql = inner if src is not None and source.startswith("(SELECT * FROM") else None
    return InsertPlan(f"SELECT {select} FROM {source}", inner_sql, len(targets))


def _no_aggregates(lists: Any) -> None:
    """PostgreSQL's errors for an aggregate or window call in VALUES (outside a
    subquery); DuckDB's said "INSERT statement cannot contain aggregates!" as 42703."""
    for n in nodes(lists, skip=A.SubLink):
        if not isinstance(n, A.FuncCall):
            continue
        if n.over is not None:
            raise SQLError("window functions are not allowed in VALUES", "42P20")
        if n.agg_star or n.funcname[-1].sval.lower() in pg_compat.AGGREGATES:
            raise SQLError("aggregate functions are not allowed in VALUES", "42803")


def _input_literals(src: Any, targets: list[Column]) -> None:
    """A SELECT's string constants for array, boolean and bytea columns ('{a,b}', 'off',
    '\\x01') as DuckDB reads them, in place: PostgreSQL reads an unknown literal in an
    INSERT's SELECT list with the column's input function (DuckDB's cast differs)."""
    if not isinstance(src, A.SelectStmt) or src.op != 0 or not src.targetList:
        return
    for rt, col in zip(src.targetList, targets, strict=False):
        v = rt.val
        if not (isinstance(v, A.A_Const) and isinstance(v.val, A.String)):
            continue
        value = _input_value(v.val.sval, col)
        if isinstance(value, bool):
            rt.val = A.A_Const(val=A.Boolean(boolval=value))
        elif isinstance(value, bytes):
            hexed = A.A_Const(val=A.String(sval=value.hex()))
            rt.val = A.FuncCall(funcname=(A.String(sval="from_hex"),), args=(hexed,))
        elif value != v.val.sval:
            rt.val = A.A_Const(val=A.String(sval=value))


def target_rows(table: Table) -> str:
    """The target's current rows, with their row ids."""
    cols = ", ".join(quote(c.name) for c in table.columns)
    sep = ", " if cols else ""
    return f"(SELECT {RID}{sep}{cols} FROM {physical(table.oid)} WHERE {CURRENT})"


def target_scan(table: Table, alias: str) -> str:
    return f"{target_rows(table)} AS {quote(alias)}"


@dataclass
class Selection:
    """SQL of a query over the target: rid, old columns, then new columns (UPDATE),
    then each FROM / USING item's row as a struct (`extras`: their aliases; only when
    RETURNING needs them)."""

    sql: str
    alias: str
    extras: tuple[str, ...] = ()


_ONE = "_hw_one"


def _from_and_where(
    table: Table, alias: str, extra_from: Any, where: Any, binder: Binder, target: str | None
) -> str:
    """` FROM <target> AS alias[, <FROM / USING items>][ WHERE ...]`, bound as one
    query as PostgreSQL scopes it: the items may be joins, subqueries, VALUES, and
    name the target's alias in WHERE."""
    one = A.ResTarget(name=_ONE, val=A.A_Const(val=A.Integer(ival=1)))
    if not extra_from:
        where = _key_sets(table, alias, where)
    rows = target_rows(table) if target is None else target
    sql = _bind_over(binder, rows, alias, (one,), extra_from, where)
    prefix = f"SELECT 1 AS {_ONE} "
    assert sql.startswith(prefix), sql
    return " " + sql[len(prefix) :]


def _exact_with_bigint(col: Column) -> bool:
    """Does DuckDB compare the column with a bigint exactly (integers; a decimal whose
    scale leaves room for 19 digits: else the two compare as doubles)?"""
    if col.type.pg in (INT2, INT4, INT8):
        return True
    if col.type.pg is NUMERIC:
        ps = col.type.precision_scale
        return (ps[1] if ps is not None else NUMERIC_DEFAULT_SCALE) <= DUCKDB_MAX_PRECISION - 19
    return False


def _key_sets(table: Table, alias: str, where: Any) -> Any:
    """`where` with each of its conjuncts `column [NOT] IN (<many integers>)` on a numeric
    column of the target as one array constant (planner/constant_lists.py): the usual
    shape of a batch of keys. A new tree: the caller's is not changed."""
    conjuncts = where.args if _is_and(where) else (where,)
    new = tuple(_key_set(table, alias, c) for c in conjuncts)
    if all(a is b for a, b in zip(new, conjuncts, strict=True)):
        return where
    return A.BoolExpr(boolop=BoolExprType.AND_EXPR, args=new) if _is_and(where) else new[0]


def _is_and(node: Any) -> bool:
    return isinstance(node, A.BoolExpr) and node.boolop == BoolExprType.AND_EXPR


def _key_set(table: Table, alias: str, node: Any) -> Any:
    if not constant_lists.long_in_list(node) or not isinstance(node.lexpr, A.ColumnRef):
        return node
    names = [f.sval if isinstance(f, A.String) else None for f in node.lexpr.fields]
    if len(names) == 2 and names[0] == alias:
        names = names[1:]
    col = table.column(names[0]) if len(names) == 1 and names[0] is not None else None
    if col is None or not _exact_with_bigint(col):
        return node
    keys = constant_lists.integers(node.rexpr)
    if keys is None:
        return node
    negated = [n.sval for n in node.name] == ["<>"]
    return constant_lists.key_set(node.lexpr, negated, keys)


def _bind_over(
    binder: Binder, rows_sql: str, alias: str, targets: Any, items: Any, where: Any
) -> str:
    """`SELECT targets FROM <rows_sql> AS alias[, items][ WHERE where]` bound as one
    query: the target's rows stand in the tree as a placeholder relation (the Binder's
    own form) that binding leaves alone."""
    key = f"__hw{binder.nonce}_{len(binder.subs)}__"
    binder.subs[key] = rows_sql
    target = A.RangeVar(relname=key, inh=True, relpersistence="p", alias=A.Alias(aliasname=alias))
    query = A.SelectStmt(
        targetList=targets, fromClause=(target, *(items or ())), whereClause=where, op=0
    )
    return binder.expand(deparse(binder.bind(query, frozenset({key}))))


def from_aliases(items: Any) -> tuple[str, ...]:
    """The names the FROM / USING items of an UPDATE or DELETE give their rows (what
    RETURNING may name): each relation's alias or name, each subquery's alias."""
    out: list[str] = []
    for item in items or ():
        if isinstance(item, A.JoinExpr) and item.alias is None:
            out += from_aliases((item.larg, item.rarg))
        elif getattr(item, "alias", None) is not None:
            out.append(item.alias.aliasname)
        elif isinstance(item, A.RangeVar):
            out.append(item.relname)
        else:
            raise FeatureNotSupported(
                "RETURNING with this FROM item of UPDATE or DELETE is not supported"
            )
    return tuple(out)


def _extras(stmt: Any, items: Any) -> tuple[tuple[str, ...], str]:
    """The FROM items' aliases RETURNING may name, and the select list of their rows."""
    if not items or stmt.returningClause is None:
        return (), ""
    aliases = from_aliases(items)
    return aliases, "".join(f", {quote(a)} AS _hw_f{i}" for i, a in enumerate(aliases))


def update_sql(
    stmt: A.UpdateStmt, table: Table, binder: Binder, target: str | None = None
) -> Selection:
    """The rows an UPDATE matches, old and new; `target`: the SQL of the target's rows
    (by default its current rows in the replica, `target_rows`)."""
    alias = stmt.relation.alias.aliasname if stmt.relation.alias else table.name
    assignments: dict[str, str] = {}
    for rt in stmt.targetList:
        col = table.column(rt.name)
        if col is None:
            raise UndefinedColumn(f'column "{rt.name}" of relation "{table.name}" does not exist')
        if rt.indirection:
            raise FeatureNotSupported(
                "assigning to a field or subscript of a column is not supported"
            )
        val = rt.val
        if isinstance(val, A.MultiAssignRef):
            if not isinstance(val.source, A.RowExpr):
                raise FeatureNotSupported("UPDATE ... SET (cols) = (SELECT ...) is not supported")
            val = val.source.args[val.colno - 1]
        if col.name in assignments:
            raise SQLError(f'multiple assignments to same column "{col.name}"', "42601")
        check_identity_update(col, val)
        assignments[col.name] = cast_sql(val, col, binder)
    a = quote(alias)
    old = ", ".join(f"{a}.{quote(c.name)}" for c in table.columns)
    new = ", ".join(assignments.get(c.name, f"{a}.{quote(c.name)}") for c in table.columns)
    body = _from_and_where(table, alias, stmt.fromClause, stmt.whereClause, binder, target)
    aliases, rows = _extras(stmt, stmt.fromClause)
    return Selection(f"SELECT {a}.{RID}, {old}, {new}{rows}{body}", alias, aliases)


def delete_sql(
    stmt: A.DeleteStmt, table: Table, binder: Binder, target: str | None = None
) -> Selection:
    """The rows a DELETE matches; `target` as for update_sql."""
    alias = stmt.relation.alias.aliasname if stmt.relation.alias else table.name
    a = quote(alias)
    cols = ", ".join(f"{a}.{quote(c.name)}" for c in table.columns)
    sep = ", " if cols else ""
    body = _from_and_where(table, alias, stmt.usingClause, stmt.whereClause, binder, target)
    aliases, rows = _extras(stmt, stmt.usingClause)
    return Selection(f"SELECT {a}.{RID}{sep}{cols}{rows}{body}", alias, aliases)


def returning_sql(
    returning: Any, rows_name: str, alias: str, binder: Binder, extras: tuple[str, ...] = ()
) -> str:
    """RETURNING evaluated over the affected rows, registered as `rows_name`: the
    target's columns; with `extras` (UPDATE ... FROM, DELETE ... USING) the target's
    row as the struct column `_hw_t` and each FROM item's as `_hw_f<i>`, seen under
    its alias `extras[i]`."""
    _unqualify(returning, alias)
    if extras:  # * is the target's columns, then each FROM item's (PostgreSQL)
        returning = tuple(
            t
            for rt in returning
            for t in (
                [
                    A.ResTarget(val=A.ColumnRef(fields=(A.String(sval=a), A.A_Star())))
                    for a in (alias, *extras)
                ]
                if _is_star(rt)
                else [rt]
            )
        )
    sel = A.SelectStmt(targetList=returning, op=0)
    name_targets(sel)
    targets = binder.to_sql(sel)
    assert targets.upper().startswith("SELECT ")
    if not extras:
        return f"{targets} FROM {rows_name} AS {quote(alias)}"
    joins = "".join(
        f" CROSS JOIN LATERAL (SELECT unnest(_hw_p.{struct})) AS {quote(a)}"
        for struct, a in [("_hw_t", alias), *((f"_hw_f{i}", a) for i, a in enumerate(extras))]
    )
    return f"{targets} FROM {rows_name} AS _hw_p{joins}"


def returning_shape_sql(stmt: Any, rows_sql: str, alias: str, binder: Binder) -> str:
    """A query with the columns of `stmt`'s RETURNING (for Describe), the target read
    as `rows_sql` (no rows needed); UPDATE ... FROM and DELETE ... USING join their
    items, as the statement will."""
    returning = stmt.returningClause.exprs
    items = getattr(stmt, "fromClause", None) or getattr(stmt, "usingClause", None)
    if not items:
        return returning_sql(returning, rows_sql, alias, binder)
    _unqualify(returning, alias)
    sel = A.SelectStmt(targetList=returning, op=0)
    name_targets(sel)
    return _bind_over(binder, rows_sql, alias, sel.targetList, items, None)


def _is_star(rt: Any) -> bool:
    v = rt.val
    return isinstance(v, A.ColumnRef) and len(v.fields) == 1 and isinstance(v.fields[0], A.A_Star)


def _unqualify(node: Any, alias: str) -> None:
    """`schema.table.column` in RETURNING (SQLAlchemy writes it) -> `table.column`."""
    if isinstance(node, A.ColumnRef):
        f = node.fields
        if len(f) == 3 and isinstance(f[1], A.String) and f[1].sval == alias:
            node.fields = f[1:]
    elif isinstance(node, A.Node):
        for name in node:
            _unqualify(getattr(node, name), alias)
    elif isinstance(node, tuple):
        for c in node:
            _unqualify(c, alias)
