"""CREATE TABLE and friends: pglast statements to catalog objects (no side effects)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pglast.ast as A
from headwater.catalog.objects import Check, Column, Key, Table
from headwater.catalog.types import ARRAY_ELEMENT, ColumnType, UserTypes, resolve_type_name
from headwater.planner.foreign_keys import make_object_name
from headwater.planner.relations import deparse
from headwater.planner.syntax import nodes
from headwater.storage.replica import HIDDEN
from pglast import parse_sql
from pglast.enums import ConstrType

from headwater.errors import (
    DuplicateColumn,
    DuplicateObject,
    FeatureNotSupported,
    InvalidColumnReference,
    SQLError,
    UndefinedColumn,
)

# FOREIGN KEYs need the referenced table: planner/foreign_keys.py adds them
_IGNORED_CONSTRAINTS = {ConstrType.CONSTR_NULL, ConstrType.CONSTR_FOREIGN}


def type_of(tn: A.TypeName, user: UserTypes | None = None) -> ColumnType:
    names = [n.sval for n in tn.names]
    mods: list[int] = []
    for m in tn.typmods or ():
        if isinstance(m, A.A_Const) and isinstance(m.val, A.Integer):
            mods.append(m.val.ival)
        else:
            raise FeatureNotSupported(f"type modifier {deparse(m)} is not supported")
    bounds = len(tn.arrayBounds) if tn.arrayBounds else 0
    return resolve_type_name(names, mods, bounds, user)


def _key_name(table: str, cols: list[str], primary: bool) -> str:
    """PostgreSQL's name for a key's index: table_pkey, table_col1_col2_key (shortened
    to 63 bytes as makeObjectName does)."""
    if primary:
        return make_object_name(table, None, "pkey")
    return make_object_name(table, "_".join(cols), "key")


def column_refs(node: Any) -> list[str]:
    """The column names an expression refers to, in order of appearance."""
    out: list[str] = []
    for n in nodes(node):
        if isinstance(n, A.ColumnRef):
            last = n.fields[-1]
            if isinstance(last, A.String) and last.sval not in out:
                out.append(last.sval)
    return out


def check_name(table: str, column: str | None, taken: set[str]) -> str:
    """PostgreSQL's ChooseConstraintName for a CHECK: table_column_check, then 1, 2, ..."""
    name, n = make_object_name(table, column, "check"), 0
    while name in taken:
        n += 1
        name = make_object_name(table, column, f"check{n}")
    return name


def check_from(con: A.Constraint, table: str, names: set[str], taken: set[str]) -> Check:
    """A CHECK constraint of CREATE TABLE or ALTER TABLE ADD; its columns must exist."""
    if con.is_no_inherit:
        raise FeatureNotSupported("NO INHERIT CHECK constraints are not supported")
    refs = column_refs(con.raw_expr)
    for c in refs:
        if c not in names:
            raise UndefinedColumn(f'column "{c}" does not exist')
    name = con.conname or check_name(table, refs[0] if len(refs) == 1 else None, taken)
    if name in taken:
        raise DuplicateObject(f'check constraint "{name}" already exists')
    taken.add(name)
    return Check(name, deparse(con.raw_expr), valid=not con.skip_validation)


def check_key_columns(columns: Sequence[Column], key: Sequence[str]) -> None:
    """A PRIMARY KEY or UNIQUE key on an array column is not supported (point writes and
    key sets hold keys as scalars)."""
    for c in columns:
        if c.name in key and c.type.pg.name in ARRAY_ELEMENT:
            raise FeatureNotSupported(
                f'a PRIMARY KEY or UNIQUE constraint on the array column "{c.name}" '
                "is not supported"
            )


def table_from_create(
    stmt: A.CreateStmt, oid: int, schema: str, user: UserTypes | None = None
) -> Table:
    name = stmt.relation.relname
    if stmt.inhRelations or stmt.partspec or stmt.ofTypename:
        raise FeatureNotSupported(
            "table inheritance, partitioning and typed tables are not supported"
        )
    columns: list[Column] = []
    keys: list[Key] = []
    not_null: set[str] = set()
    checks: list[A.Constraint] = []  # checked once every column is known

    def add_key(cols: list[str], primary: bool, conname: str | None) -> None:
        if primary and any(k.primary for k in keys):
            raise SQLError(f'multiple primary keys for table "{name}" are not allowed', "42P16")
        keys.append(Key(conname or _key_name(name, cols, primary), tuple(cols), primary))
        if primary:
            not_null.update(cols)

    for elt in stmt.tableElts or ():
        if isinstance(elt, A.ColumnDef):
            cname = elt.colname
            if cname in HIDDEN:
                raise FeatureNotSupported(f'column name "{cname}" is reserved by Headwater')
            if any(c.name == cname for c in columns):
                raise DuplicateColumn(f'column "{cname}" specified more than once')
            ctype = type_of(elt.typeName, user)
            default: str | None = None
            generated: str | None = None
            nn = False
            if elt.typeName.names[-1].sval in ("serial", "bigserial", "smallserial"):
                raise FeatureNotSupported(
                    "serial columns are not supported yet",
                    hint="Use an integer column and supply the values.",
                )
            for con in elt.constraints or ():
                kind = con.contype
                if kind == ConstrType.CONSTR_NOTNULL:
                    nn = True
                elif kind == ConstrType.CONSTR_DEFAULT:
                    default = deparse(con.raw_expr)
                elif kind == ConstrType.CONSTR_GENERATED:
                    generated = generation_expression(con, cname)
                elif kind == ConstrType.CONSTR_PRIMARY:
                    add_key([cname], True, con.conname)
                elif kind == ConstrType.CONSTR_UNIQUE:
                    add_key([cname], False, con.conname)
                elif kind == ConstrType.CONSTR_CHECK:
                    checks.append(con)
                elif kind in _IGNORED_CONSTRAINTS:
                    pass
                else:
                    raise FeatureNotSupported(
                        f"{_constraint_word(kind)} constraints are not supported"
                    )
            if default is not None and generated is not None:
                raise SQLError(
                    f'both default and generation expression specified for column "{cname}"'
                    f' of table "{name}"',
                    "42601",
                )
            columns.append(Column(cname, ctype, nn, default, generated=generated))
        elif isinstance(elt, A.Constraint):
            cols = [k.sval for k in elt.keys or ()]
            if elt.contype in (ConstrType.CONSTR_PRIMARY, ConstrType.CONSTR_UNIQUE):
                add_key(cols, elt.contype == ConstrType.CONSTR_PRIMARY, elt.conname)
            elif elt.contype == ConstrType.CONSTR_CHECK:
                checks.append(elt)
            elif elt.contype in _IGNORED_CONSTRAINTS:
                pass
            else:
                raise FeatureNotSupported(
                    f"{_constraint_word(elt.contype)} constraints are not supported"
                )
        else:
            raise FeatureNotSupported(f"{type(elt).__name__} in CREATE TABLE is not supported")
    names = {c.name for c in columns}
    for k in keys:
        for c in k.columns:
            if c not in names:
                raise UndefinedColumn(f'column "{c}" named in key does not exist')
        check_key_columns(columns, k.columns)
        if len(set(k.columns)) != len(k.columns):
            raise InvalidColumnReference(
                f"column appears twice in {'primary key' if k.primary else 'unique'} constraint"
            )
    seen: set[str] = set()
    for k in keys:
        if k.name in seen:
            raise DuplicateObject(f'relation "{k.name}" already exists')
        seen.add(k.name)
    columns = [replace(c, not_null=c.not_null or c.name in not_null) for c in columns]
    check_generated(columns)
    taken: set[str] = set()
    made = [check_from(con, name, names, taken) for con in checks]
    return Table(oid, schema, name, tuple(columns), tuple(keys), checks=tuple(made))


def generation_expression(con: A.Constraint, column: str) -> str:
    """GENERATED ALWAYS AS (expr) STORED's expression text (PostgreSQL 15 has no other
    kind of generated column)."""
    if con.generated_kind != "s":
        raise FeatureNotSupported(
            f'generated column "{column}": only STORED generated columns are supported'
        )
    return deparse(con.raw_expr)


def check_generated(columns: Sequence[Column]) -> None:
    """A generation expression may not use another generated column (42P17)."""
    generated = {c.name for c in columns if c.generated is not None}
    for c in columns:
        if c.generated is None:
            continue
        for ref in column_refs(parse_sql(f"SELECT ({c.generated})")[0].stmt.targetList[0].val):
            if ref in generated:
                raise SQLError(
                    f'cannot use generated column "{ref}" in column generation expression',
                    "42P17",
                    detail="A generated column cannot reference another generated column.",
                )


def _constraint_word(kind: Any) -> str:
    return {
        ConstrType.CONSTR_CHECK: "CHECK",
        ConstrType.CONSTR_FOREIGN: "FOREIGN KEY",
        ConstrType.CONSTR_EXCLUSION: "EXCLUDE",
        ConstrType.CONSTR_GENERATED: "generated column",
        ConstrType.CONSTR_IDENTITY: "identity column",
    }.get(kind, str(kind))


def constraint_word(kind: Any) -> str:
    """How an error names a kind of constraint (FOREIGN KEY, EXCLUDE, ...)."""
    return _constraint_word(kind)
