"""COMMENT ON TABLE | VIEW | MATERIALIZED VIEW | INDEX | SEQUENCE | COLUMN | SCHEMA | TYPE |
DOMAIN | FUNCTION | PROCEDURE | ROUTINE | EXTENSION ... IS '...' | NULL.

A comment is part of the object it describes (catalog/objects.py), so it is renamed,
moved and dropped with it, and is durable with the transaction's catalog changes.
pg_description shows them (catalog/pg/pg_catalog.py), hence obj_description(),
col_description() and psql's \\d+.
"""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.catalog.objects import Relation, replace
from headwater.server import user_functions
from headwater.server.results import Result
from headwater.server.session import Session, WriteTxn
from pglast.enums import ObjectType

from headwater.errors import (
    FeatureNotSupported,
    InvalidSchemaName,
    UndefinedColumn,
    UndefinedObject,
    UndefinedTable,
    WrongObjectType,
)

_RELATION_KINDS = {
    ObjectType.OBJECT_TABLE: "table",
    ObjectType.OBJECT_VIEW: "view",
    ObjectType.OBJECT_MATVIEW: "materialized view",
    ObjectType.OBJECT_INDEX: "index",
    ObjectType.OBJECT_SEQUENCE: "sequence",
}
_ROUTINES = (ObjectType.OBJECT_FUNCTION, ObjectType.OBJECT_PROCEDURE, ObjectType.OBJECT_ROUTINE)


def execute(s: Session, w: WriteTxn, stmt: A.CommentStmt) -> Result:
    """COMMENT ON in the writing transaction `w` (blocking)."""
    cat = w.catalog
    text = stmt.comment or None  # '' removes the comment, as NULL does
    kind = stmt.objtype
    if kind == ObjectType.OBJECT_SCHEMA:
        name = stmt.object.sval
        schema = cat.schemas.get(name)
        if schema is None:
            raise InvalidSchemaName(f'schema "{name}" does not exist')
        cat.replace_schema(replace(schema, comment=text))
        return Result("COMMENT")
    if kind == ObjectType.OBJECT_TYPE:  # an enum (CREATE TYPE)
        names = [n.sval for n in stmt.object.names]
        t = cat.resolve_type(names[0] if len(names) == 2 else None, names[-1], s.search_path())
        if t is None:
            raise UndefinedObject(f'type "{".".join(names)}" does not exist')
        cat.put_type(replace(t, comment=text))
        return Result("COMMENT")
    if kind == ObjectType.OBJECT_DOMAIN:
        names = [n.sval for n in stmt.object.names]
        schema = names[0] if len(names) == 2 else None
        d = cat.resolve_domain(schema, names[-1], s.search_path())
        if d is None:
            raise UndefinedObject(f'type "{".".join(names)}" does not exist')
        cat.put_domain(replace(d, comment=text))
        return Result("COMMENT")
    if kind == ObjectType.OBJECT_EXTENSION:
        ext = cat.extensions.get(stmt.object.sval)
        if ext is None:
            raise UndefinedObject(f'extension "{stmt.object.sval}" does not exist')
        cat.put_extension(replace(ext, comment=text))
        return Result("COMMENT")
    if kind in _ROUTINES:  # CREATE FUNCTION's, CREATE PROCEDURE's
        fn = user_functions.named(s, cat, stmt.object)
        if kind != ObjectType.OBJECT_ROUTINE and (kind == ObjectType.OBJECT_PROCEDURE) != (
            fn.prokind == "p"
        ):
            what = "a procedure" if kind == ObjectType.OBJECT_PROCEDURE else "a function"
            raise WrongObjectType(f"{fn.name}({fn.identity}) is not {what}")
        cat.put_function(replace(fn, comment=text))
        return Result("COMMENT")
    if kind in _RELATION_KINDS:
        rel = _relation(s, w, [n.sval for n in stmt.object])
        want = _RELATION_KINDS[kind]
        if rel.kind != want:
            article = "an" if want == "index" else "a"
            raise WrongObjectType(f'"{rel.name}" is not {article} {want}')
        cat.replace_relation(replace(rel, comment=text))
        return Result("COMMENT")
    if kind == ObjectType.OBJECT_COLUMN:
        names = [n.sval for n in stmt.object]
        if len(names) < 2:
            raise FeatureNotSupported("column name must be qualified")
        rel = _relation(s, w, names[:-1])
        col = rel.column(names[-1])
        if col is None:
            raise UndefinedColumn(f'column "{names[-1]}" of relation "{rel.name}" does not exist')
        cols = tuple(replace(c, comment=text) if c is col else c for c in rel.columns)
        cat.replace_relation(replace(rel, columns=cols))
        return Result("COMMENT")
    raise FeatureNotSupported(
        f"COMMENT ON {kind.name.removeprefix('OBJECT_').replace('_', ' ')} is not supported"
    )


def _relation(s: Session, w: WriteTxn, names: list[Any]) -> Relation:
    schema, name = (names[-2], names[-1]) if len(names) > 1 else (None, names[-1])
    rel = w.catalog.resolve(schema, name, s.search_path())
    if rel is None:
        if schema is not None and schema not in w.catalog.schemas:
            raise InvalidSchemaName(f'schema "{schema}" does not exist')
        raise UndefinedTable(f'relation "{name}" does not exist')
    return rel
