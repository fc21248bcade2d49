"""CREATE DOMAIN, DROP DOMAIN, and what a domain gives the tables that use it.

A domain (catalog/objects.py Domain) is its base type plus NOT NULL, CHECK (VALUE ...)
and a DEFAULT. A column of the domain stores the base type; its ColumnType names the
domain for the catalog (pg_attribute.atttypid, format_type, psql's \\d). When a table
gets such a column (CREATE TABLE, ADD COLUMN, ALTER COLUMN TYPE), `constrained` gives
the table one Check per domain constraint, over the column, marked with the domain's
name: every write path enforces table Checks already, and server/checks.py words their
errors as PostgreSQL words a domain's (`value for domain d violates check constraint
"c"`, `domain d does not allow null values`). The domain's DEFAULT becomes the
column's when it has none of its own (pg_attrdef does not show it, as PostgreSQL does
not). A cast to a domain computes the base type (catalog.type_named); its CHECKs are
not applied there.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pglast.ast as A
from headwater.catalog.catalog import Catalog
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Check, Domain, Relation, Table
from headwater.catalog.types import BY_NAME
from headwater.planner.ddl import type_of
from headwater.planner.relations import deparse
from headwater.planner.syntax import nodes, replaced
from headwater.server.binders import user_types
from headwater.server.checks import failing_sql
from headwater.server.duckdb_calls import fetch
from headwater.server.results import Result
from headwater.server.session import Session, WriteTxn
from headwater.storage.replica import CURRENT, physical, quote
from pglast import parse_sql
from pglast.enums import ConstrType

from headwater.errors import (
    DependentObjects,
    DuplicateObject,
    FeatureNotSupported,
    SQLError,
    UndefinedObject,
)

_REFUSED = {
    ConstrType.CONSTR_PRIMARY: "primary key",
    ConstrType.CONSTR_UNIQUE: "unique",
    ConstrType.CONSTR_FOREIGN: "foreign key",
    ConstrType.CONSTR_EXCLUSION: "exclusion",
}


def create(s: Session, w: WriteTxn, stmt: A.CreateDomainStmt) -> Result:
    cat = w.catalog
    names = [n.sval for n in stmt.domainname]
    schema = cat.creation_schema(names[0] if len(names) == 2 else None, s.search_path())
    name = names[-1]
    taken = cat.resolve_type(schema, name, ()) or cat.resolve_domain(schema, name, ())
    if taken or cat.resolve(schema, name, ()) or (schema == "pg_catalog" and name in BY_NAME):
        raise DuplicateObject(f'type "{name}" already exists')
    base = type_of(stmt.typeName, user_types(s, w))
    if base.domain is not None:
        raise FeatureNotSupported(
            f"a domain over the domain {base.domain.name} is not supported",
            hint="Declare it over the base type, with the constraints of both.",
        )
    not_null, default, checks = False, None, []
    for con in stmt.constraints or ():
        kind = con.contype
        if kind == ConstrType.CONSTR_NOTNULL:
            not_null = True
        elif kind == ConstrType.CONSTR_NULL:
            not_null = False
        elif kind == ConstrType.CONSTR_DEFAULT:
            default = deparse(con.raw_expr)
        elif kind == ConstrType.CONSTR_CHECK:
            checks.append(_check(con, name, {c.name for c in checks}))
        elif kind in _REFUSED:
            raise SQLError(f"{_REFUSED[kind]} constraints not possible for domains", "42601")
        else:
            raise FeatureNotSupported(
                "specifying constraint deferrability not supported for domains"
            )
    oid = cat.allocate_oid()
    domain = Domain(oid, schema, name, base, cat.allocate_oid(), not_null, default, tuple(checks))
    cat.put_domain(domain)
    return Result("CREATE DOMAIN")


def _check(con: A.Constraint, domain: str, taken: set[str]) -> Check:
    """A domain's CHECK: PostgreSQL's name (`d_check`, `d_check1`, ...); VALUE the only
    column it names."""
    for node in _refs(con.raw_expr):
        if [f.sval for f in node.fields if isinstance(f, A.String)] != ["value"]:
            name = ".".join(f.sval for f in node.fields if isinstance(f, A.String))
            raise SQLError(f'column "{name}" does not exist', "42703")
    name, n = con.conname, 0
    while name is None or (con.conname is None and name in taken):
        name = f"{domain}_check" + (str(n) if n else "")
        n += 1
    if name in taken:
        raise DuplicateObject(f'constraint "{name}" for domain "{domain}" already exists')
    return Check(name, deparse(con.raw_expr))


def _refs(node: Any) -> list[A.ColumnRef]:
    return [n for n in nodes(node) if isinstance(n, A.ColumnRef)]


def constrained(table: Table, cat: Catalog) -> Table:
    """`table` with its domain columns' constraints as Checks and, where a column has no
    default, the domain's (the Checks of domains it no longer has go)."""
    if not cat.domains and not any(c.domain for c in table.checks):
        return table
    by_oid = {d.oid: d for d in cat.domains.values()}
    checks = [c for c in table.checks if not c.domain]
    columns = []
    for col in table.columns:
        d = by_oid.get(col.type.domain.oid) if col.type.domain is not None else None
        if d is None:
            columns.append(col)
            continue
        shown = d.pg.sql_name  # (errors qualify it off the search path: not done)
        ref = A.ColumnRef(fields=(A.String(sval=col.name),))
        if d.not_null:
            checks.append(Check("", f"{quote_ident(col.name)} IS NOT NULL", domain=shown))
        for c in d.checks:
            expr = _over(c.expr, ref)
            checks.append(Check(c.name, expr, domain=shown))
        if col.default is None and d.default is not None and not col.generated:
            col = replace(col, default=d.default)
        columns.append(col)
    return replace(table, columns=tuple(columns), checks=tuple(checks))


def _over(expr: str, ref: A.ColumnRef) -> str:
    """A domain CHECK's expression with VALUE replaced by the column."""
    node = parse_sql(f"SELECT ({expr})")[0].stmt.targetList[0].val

    def swap(n: A.Node) -> Any:
        if isinstance(n, A.ColumnRef) and [f.sval for f in n.fields if isinstance(f, A.String)] == [
            "value"
        ]:
            return A.ColumnRef(fields=ref.fields)
        return None

    return deparse(replaced(node, swap))


def users(w: WriteTxn, oid: int) -> list[tuple[Relation, Any]]:
    """The columns of relations of the domain `oid`."""
    return [
        (r, c)
        for r in w.catalog.relations.values()
        for c in r.columns
        if c.type.domain is not None and c.type.domain.oid == oid
    ]


def dependents(used: list[tuple[Relation, Any]], type_name: str) -> list[str]:
    """DROP's detail lines, in PostgreSQL's order (dependents by oid, a table's columns
    last first): a table's columns one by one, a view as a whole."""
    lines = dict(zip((_order(r, c) for r, c in used), _lines(used, type_name), strict=True))
    return [lines[k] for k in sorted(lines)]


def _order(r: Relation, c: Any) -> tuple[int, int]:
    return (r.oid, -(r.columns.index(c) + 1)) if isinstance(r, Table) else (r.oid, 0)


def _lines(used: list[tuple[Relation, Any]], type_name: str) -> list[str]:
    return [
        f"column {c.name} of table {r.name} depends on type {type_name}"
        if isinstance(r, Table)
        else f"{r.kind} {r.name} depends on type {type_name}"
        for r, c in used
    ]


def find(s: Session, w: WriteTxn, names: list[str], missing_ok: bool = False) -> Domain | None:
    schema = names[0] if len(names) == 2 else None
    d = w.catalog.resolve_domain(schema, names[-1], s.search_path())
    if d is None and not missing_ok:
        raise UndefinedObject(f'type "{".".join(names)}" does not exist')
    return d


def drop(s: Session, w: WriteTxn, stmt: A.DropStmt) -> Result:
    """DROP DOMAIN [IF EXISTS] name [, ...]: refused while a column has one of them
    (CASCADE would drop those columns: not done)."""
    notices: list[Any] = []
    dropping: list[Domain] = []
    for tn in stmt.objects:
        names = [n.sval for n in tn.names]
        d = find(s, w, names, missing_ok=bool(stmt.missing_ok))
        if d is None:
            notices.append(f'type "{".".join(names)}" does not exist, skipping')
        else:
            dropping.append(d)
    lines: dict[tuple[int, int], str] = {}  # PostgreSQL's order: see dependents
    for d in dropping:
        used = users(w, d.oid)
        lines.update(zip((_order(r, c) for r, c in used), _lines(used, d.name), strict=True))
    if lines:
        detail = "\n".join(lines[k] for k in sorted(lines))
        if stmt.behavior:
            raise FeatureNotSupported(
                "DROP DOMAIN ... CASCADE would drop columns: not supported",
                detail=detail,
                hint="Drop or alter those columns first.",
            )
        one = len(stmt.objects) == 1
        raise DependentObjects(
            f"cannot drop type {dropping[0].name} because other objects depend on it"
            if one
            else "cannot drop desired object(s) because other objects depend on them",
            detail=detail,
            hint="Use DROP ... CASCADE to drop the dependent objects too.",
        )
    for d in dropping:
        w.catalog.drop_domain(d)
    return Result("DROP DOMAIN", notices=notices)


def alter(s: Session, w: WriteTxn, stmt: A.AlterDomainStmt) -> Result:
    """ALTER DOMAIN: ADD CONSTRAINT c CHECK (...) [NOT VALID], DROP CONSTRAINT [IF EXISTS],
    VALIDATE CONSTRAINT, SET / DROP DEFAULT, SET / DROP NOT NULL; the tables with a
    column of the domain take the change, their live rows checked against what it adds."""
    cat = w.catalog
    d = find(s, w, [n.sval for n in stmt.typeName])
    assert d is not None
    kind, added = stmt.subtype, None
    if kind == "C":
        con = stmt.def_
        if con.contype != ConstrType.CONSTR_CHECK:
            raise FeatureNotSupported("only CHECK constraints can be added to a domain")
        added = replace(
            _check(con, d.name, {c.name for c in d.checks}), valid=not con.skip_validation
        )
        new = replace(d, checks=(*d.checks, added))
    elif kind == "X":
        if all(c.name != stmt.name for c in d.checks):
            message = f'constraint "{stmt.name}" of domain "{d.name}" does not exist'
            if stmt.missing_ok:
                return Result("ALTER DOMAIN", notices=[f"{message}, skipping"])
            raise UndefinedObject(message)
        new = replace(d, checks=tuple(c for c in d.checks if c.name != stmt.name))
    elif kind == "V":
        check = next((c for c in d.checks if c.name == stmt.name), None)
        if check is None:
            raise UndefinedObject(f'constraint "{stmt.name}" of domain "{d.name}" does not exist')
        added = replace(check, valid=True)
        new = replace(d, checks=tuple(added if c is check else c for c in d.checks))
    elif kind == "T":
        new = replace(d, default=deparse(stmt.def_) if stmt.def_ is not None else None)
    else:  # "O" SET NOT NULL, "N" DROP NOT NULL
        new = replace(d, not_null=kind == "O")
    cat.put_domain(new)
    for rel in {r.oid: r for r, _ in users(w, d.oid)}.values():
        if not isinstance(rel, Table):
            continue
        columns = tuple(
            replace(c, default=new.default)
            if c.type.domain is not None and c.type.domain.oid == d.oid and c.default == d.default
            else c
            for c in rel.columns
        )
        table = constrained(replace(rel, columns=columns), cat)
        _validate(
            w,
            table,
            new,
            added if added is not None and added.valid else None,
            kind == "O" and not d.not_null,
        )
        cat.replace_relation(table)
    return Result("ALTER DOMAIN")


def _validate(w: WriteTxn, table: Table, d: Domain, check: Check | None, not_null: bool) -> None:
    """The live rows of `table` hold what ALTER DOMAIN adds (PostgreSQL's errors)."""
    live = f"(SELECT * FROM {physical(table.oid)} WHERE {CURRENT})"
    for col in table.columns:
        if col.type.domain is None or col.type.domain.oid != d.oid:
            continue
        if not_null:
            hit, _ = fetch(w.cur, f"SELECT 1 FROM {live} WHERE {quote(col.name)} IS NULL LIMIT 1")
            if hit.num_rows:
                raise SQLError(
                    f'column "{col.name}" of table "{table.name}" contains null values', "23502"
                )
        if check is not None:
            over = Check(
                check.name, _over(check.expr, A.ColumnRef(fields=(A.String(sval=col.name),)))
            )
            hit, _ = fetch(w.cur, f"SELECT 1 FROM ({failing_sql(over, table, live)}) LIMIT 1")
            if hit.num_rows:
                raise SQLError(
                    f'column "{col.name}" of table "{table.name}" contains values that violate'
                    " the new constraint",
                    "23514",
                )
