"""FOREIGN KEY constraints as pg_constraint, pg_get_constraintdef() and
information_schema show them (rows added by pg_catalog.py, internal.py and
information_schema.py)."""

from __future__ import annotations

from dataclasses import dataclass

from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import ForeignKey, Index, Table
from headwater.catalog.pg.oids import derived_oid, foreign_key_oid
from headwater.catalog.pg.snapshot import Builder, user_rels

_ACTIONS = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}


@dataclass(frozen=True)
class FkRow:
    table: Table
    fk: ForeignKey
    oid: int
    ref: Table
    key_name: str  # the referenced table's unique constraint (or unique index)
    index_oid: int  # ... and the index behind it (pg_constraint.conindid)
    nsp_oid: int


def fk_rows(b: Builder) -> list[FkRow]:
    """Every foreign key of the tables the session may see, by table oid then name."""
    visible = {r.oid for r in user_rels(b, "r")}
    nsp = {s.name: s.oid for s in b.catalog.schemas.values()}
    out = []
    for table in sorted(b.catalog.tables(), key=lambda t: t.oid):
        if table.oid not in visible:
            continue
        for n, fk in enumerate(sorted(table.foreign_keys, key=lambda f: f.name)):
            ref = b.catalog.by_oid(fk.ref_table)
            if not isinstance(ref, Table):
                continue
            key_name, index_oid = _referenced_key(b, ref, fk)
            out.append(
                FkRow(
                    table,
                    fk,
                    foreign_key_oid(table.oid, n),
                    ref,
                    key_name,
                    index_oid,
                    nsp.get(table.schema, 0),
                )
            )
    return out


def _referenced_key(b: Builder, ref: Table, fk: ForeignKey) -> tuple[str, int]:
    want = set(fk.ref_columns)
    indexes = {
        r.name: r.oid
        for r in b.catalog.relations.values()
        if isinstance(r, Index) and r.table_oid == ref.oid
    }
    for n, key in enumerate(ref.keys):
        if set(key.columns) == want:
            return key.name, indexes.get(key.name, derived_oid(ref.oid, 0, n))
    return "", 0


def constraint_def(b: Builder, row: FkRow) -> str:
    """pg_get_constraintdef() of a foreign key (the referenced table qualified when the
    search path does not find it by its name alone)."""
    fk = row.fk
    cols = ", ".join(quote_ident(c) for c in fk.columns)
    ref_cols = ", ".join(quote_ident(c) for c in fk.ref_columns)
    found = b.catalog.resolve(None, row.ref.name, tuple(b.session.search_path))
    name = quote_ident(row.ref.name)
    if found is None or found.oid != row.ref.oid:
        name = f"{quote_ident(row.ref.schema)}.{name}"
    text = f"FOREIGN KEY ({cols}) REFERENCES {name}({ref_cols})"
    if fk.match == "f":
        text += " MATCH FULL"
    if fk.on_update != "a":
        text += f" ON UPDATE {_ACTIONS[fk.on_update]}"
    if fk.on_delete != "a":
        text += f" ON DELETE {_ACTIONS[fk.on_delete]}"
    if not fk.valid:
        text += " NOT VALID"
    return text


def action_word(letter: str) -> str:
    return _ACTIONS[letter]
