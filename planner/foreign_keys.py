"""FOREIGN KEY constraints of CREATE TABLE and ALTER TABLE: pglast Constraint nodes to
catalog ForeignKeys, with PostgreSQL's names and errors (no side effects; enforcement
is server/foreign_keys.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pglast.ast as A
from headwater.catalog.catalog import is_temp_schema
from headwater.catalog.objects import ForeignKey, Relation, Table, replace
from pglast.enums import ConstrType

from headwater.errors import DuplicateObject, FeatureNotSupported, SQLError, UndefinedColumn

NAMEDATALEN = 64

# confupdtype / confdeltype letters, as pg_get_constraintdef and information_schema say them
ACTION_WORDS = {
    "a": "NO ACTION",
    "r": "RESTRICT",
    "c": "CASCADE",
    "n": "SET NULL",
    "d": "SET DEFAULT",
}


def _clip(name: str, nbytes: int) -> str:
    """The longest prefix of `name` within `nbytes` bytes of UTF-8 (pg_mbcliplen)."""
    out = name.encode()[:nbytes]
    return out.decode(errors="ignore")


def make_object_name(name1: str, name2: str | None, label: str) -> str:
    """PostgreSQL's makeObjectName: name1_name2_label, the longer of name1 and name2
    shortened until the whole fits in NAMEDATALEN - 1 bytes."""
    overhead = len(label) + 1 + (1 if name2 else 0)
    avail = NAMEDATALEN - 1 - overhead
    n1, n2 = len(name1.encode()), len(name2.encode()) if name2 else 0
    while n1 + n2 > avail:
        if n1 > n2:
            n1 -= 1
        else:
            n2 -= 1
    parts = [_clip(name1, n1)]
    if name2:
        parts.append(_clip(name2, n2))
    parts.append(label)
    return "_".join(parts)


def choose_name(table: str, columns: Iterable[str], taken: set[str]) -> str:
    """ChooseConstraintName for a foreign key: table_col1_col2_fkey, then fkey1, fkey2, ...
    avoiding every constraint name of the schema (`taken`)."""
    joined = ""
    for c in columns:  # ChooseForeignKeyConstraintNameAddition
        if joined:
            joined += "_"
        joined += c
        if len(joined.encode()) >= NAMEDATALEN:
            break
    n = 0
    while True:
        label = "fkey" if n == 0 else f"fkey{n}"
        name = make_object_name(table, joined, label)
        if name not in taken:
            return name
        n += 1


def foreign_key_from(
    con: A.Constraint,
    table: Table,
    column: str | None,
    resolve: Callable[[A.RangeVar], Relation],
    own_names: set[str],
    schema_names: set[str],
) -> ForeignKey:
    """A FOREIGN KEY of `table` (a column constraint of `column`, or a table constraint).
    `resolve` finds the referenced relation (`table` itself when it names the table being
    created); `own_names` are the table's constraint names, `schema_names` every
    constraint name of its schema (a generated name avoids them; both get the new one)."""
    if con.deferrable or con.initdeferred:
        raise FeatureNotSupported("DEFERRABLE foreign key constraints are not supported")
    if con.fk_matchtype == "p":
        raise FeatureNotSupported("MATCH PARTIAL not yet implemented")
    cols = [column] if column is not None else [a.sval for a in con.fk_attrs or ()]
    for c in cols:
        if table.column(c) is None:
            raise UndefinedColumn(
                f'column "{c}" referenced in foreign key constraint does not exist'
            )
    rv = con.pktable
    ref = table if rv.relname == table.name and rv.schemaname in (None, table.schema) else None
    if ref is None:
        ref = resolve(rv)
    if not isinstance(ref, Table):
        raise SQLError(f'referenced relation "{ref.name}" is not a table', "42809")
    if is_temp_schema(ref.schema) != is_temp_schema(table.schema):
        kind = "temporary" if is_temp_schema(table.schema) else "permanent"
        raise SQLError(f"constraints on {kind} tables may reference only {kind} tables", "42P16")
    if con.pk_attrs:
        ref_cols = [a.sval for a in con.pk_attrs]
        for c in ref_cols:
            if ref.column(c) is None:
                raise UndefinedColumn(
                    f'column "{c}" referenced in foreign key constraint does not exist'
                )
        if not any(
            set(k.columns) == set(ref_cols) and len(k.columns) == len(ref_cols) for k in ref.keys
        ):
            raise SQLError(
                "there is no unique constraint matching given keys for referenced table"
                f' "{ref.name}"',
                "42830",
            )
    else:
        pk = ref.primary_key
        if pk is None:
            raise SQLError(f'there is no primary key for referenced table "{ref.name}"', "42704")
        ref_cols = list(pk.columns)
    if len(cols) != len(ref_cols):
        raise SQLError(
            "number of referencing and referenced columns for foreign key disagree", "42830"
        )
    if con.conname is not None:
        if con.conname in own_names:
            raise DuplicateObject(
                f'constraint "{con.conname}" for relation "{table.name}" already exists'
            )
        name = con.conname
    else:
        name = choose_name(table.name, cols, schema_names)
    for c, r in zip(cols, ref_cols, strict=True):
        _check_types(table, c, ref, r, name)
    own_names.add(name)
    schema_names.add(name)
    return ForeignKey(
        name,
        tuple(cols),
        ref.oid,
        tuple(ref_cols),
        on_delete=con.fk_del_action or "a",
        on_update=con.fk_upd_action or "a",
        match=con.fk_matchtype or "s",
        valid=not con.skip_validation,
    )


_NUMERIC = {"int2", "int4", "int8", "numeric", "float4", "float8"}
_TEXT = {"text", "varchar", "bpchar"}


def _check_types(table: Table, col: str, ref: Table, ref_col: str, name: str) -> None:
    """42804 when the columns' types have no equality operator between them."""
    a, b = table.column(col), ref.column(ref_col)
    assert a is not None and b is not None
    ta, tb = a.type.pg.name, b.type.pg.name
    if ta == tb or {ta, tb} <= _NUMERIC or {ta, tb} <= _TEXT:
        return
    raise SQLError(
        f'foreign key constraint "{name}" cannot be implemented',
        "42804",
        detail=f'Key columns "{col}" and "{ref_col}" are of incompatible types: '
        f"{a.type.sql()} and {b.type.sql()}.",
    )


def from_create(
    stmt: A.CreateStmt,
    table: Table,
    resolve: Callable[[A.RangeVar], Relation],
    schema_names: set[str],
) -> Table:
    """`table` (from planner/ddl.table_from_create) with the FOREIGN KEYs of `stmt`,
    named after its keys and checks, in the order written."""
    own = {k.name for k in table.keys} | {c.name for c in table.checks}
    names = schema_names | own
    made: list[ForeignKey] = []
    for elt in stmt.tableElts or ():
        if isinstance(elt, A.ColumnDef):
            for con in elt.constraints or ():
                if con.contype == ConstrType.CONSTR_FOREIGN:
                    made.append(foreign_key_from(con, table, elt.colname, resolve, own, names))
        elif isinstance(elt, A.Constraint) and elt.contype == ConstrType.CONSTR_FOREIGN:
            made.append(foreign_key_from(elt, table, None, resolve, own, names))
    if not made:
        return table
    return replace(table, foreign_keys=tuple(made))


def referencing(tables: Iterable[Table], oid: int) -> list[tuple[Table, ForeignKey]]:
    """The foreign keys (and their tables) that reference table `oid`, in creation
    order (by table oid, then as each table lists them), as their triggers fire."""
    out = [
        (t.oid, i, t, fk)
        for t in tables
        for i, fk in enumerate(t.foreign_keys)
        if fk.ref_table == oid
    ]
    return [(t, fk) for _, _, t, fk in sorted(out, key=lambda p: p[:2])]
