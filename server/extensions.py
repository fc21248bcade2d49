"""CREATE EXTENSION and DROP EXTENSION, for the extensions whose functions Headwater
provides (catalog/extensions.py): migrations start with `CREATE EXTENSION IF NOT EXISTS
"uuid-ossp"` or pgcrypto. The functions are there whether or not the extension was
created (PostgreSQL's appear with it); the catalog entry is what pg_extension lists."""

from __future__ import annotations

import re
from dataclasses import replace

import pglast.ast as A
from headwater.catalog.catalog import Catalog
from headwater.catalog.extensions import AVAILABLE, BUILT_IN
from headwater.catalog.objects import Column, Extension, Relation
from headwater.server.results import Result
from headwater.server.session import Session, WriteTxn
from pglast.enums import DropBehavior

from headwater.errors import (
    DependentObjects,
    DuplicateObject,
    FeatureNotSupported,
    SQLError,
    UndefinedObject,
)


def create(s: Session, w: WriteTxn, stmt: A.CreateExtensionStmt) -> Result:
    name = stmt.extname
    cat = w.catalog
    if name == BUILT_IN or name in cat.extensions:
        if stmt.if_not_exists:
            return Result(
                "CREATE EXTENSION", notices=[f'extension "{name}" already exists, skipping']
            )
        raise DuplicateObject(f'extension "{name}" already exists')
    available = AVAILABLE.get(name)
    if available is None:
        raise FeatureNotSupported(
            f'extension "{name}" is not available',
            hint="Headwater provides the functions of: "
            + ", ".join(sorted(n for n in AVAILABLE if n != BUILT_IN))
            + ".",
        )
    options = {o.defname: o.arg for o in stmt.options or ()}
    version = options.get("new_version")
    if version is not None and version.sval != available.version:
        raise SQLError(
            f'extension "{name}" has no installation script nor update path for version'
            f' "{version.sval}"',
            "22023",
        )
    schema_arg = options.get("schema")
    if schema_arg is not None:
        schema = schema_arg.sval
        if schema not in cat.schemas:
            raise SQLError(f'schema "{schema}" does not exist', "3F000")
    else:
        schema = cat.creation_schema(None, s.search_path())
    ext = Extension(cat.allocate_oid(), name, schema, available.version, comment=available.comment)
    cat.put_extension(ext)
    return Result("CREATE EXTENSION")


# the signatures PostgreSQL's dependency messages print (digest and hmac: their text forms)
_SIGNATURES = {
    "digest": "(text,text)",
    "hmac": "(text,text,text)",
    "gen_random_bytes": "(integer)",
    "uuid_generate_v3": "(uuid,text)",
    "uuid_generate_v5": "(uuid,text)",
}


def _users(cat: Catalog, ext: Extension) -> list[tuple[str, Relation, Column | None]]:
    """What names a function of `ext`, as PostgreSQL's DROP describes it (column defaults
    and generation expressions, CHECKs, views: it records each as depending on the
    function), with the relation and, for a column's, the column."""
    calls = re.compile(r"\b(" + "|".join(AVAILABLE[ext.name].functions) + r")\s*\(")
    out: list[tuple[str, Relation, Column | None]] = []

    def on(text: str | None) -> str:
        m = calls.search(text or "")
        return f" depends on function {m.group(1)}{_SIGNATURES.get(m.group(1), '()')}" if m else ""

    for rel in sorted(cat.relations.values(), key=lambda r: r.oid):
        for col in rel.columns:
            if why := on(col.default) or on(col.generated):
                what = f"default value for column {col.name} of table {rel.name}"
                out.append((what + why, rel, col))
        for check in getattr(rel, "checks", ()):
            if why := on(check.expr):
                out.append((f"constraint {check.name} on table {rel.name}{why}", rel, None))
        if why := on(getattr(rel, "definition", None)):
            out.append((f"{rel.kind} {rel.name}{why}", rel, None))
    return out


def _without_defaults(cat: Catalog, users: list[tuple[str, Relation, Column | None]]) -> None:
    """CASCADE: the column defaults go (PostgreSQL drops them); other users are refused."""
    for _, rel, col in users:
        if col is None or col.generated:
            raise FeatureNotSupported(
                f"DROP EXTENSION ... CASCADE would drop {rel.kind} {rel.name}",
                hint="Drop or change it first.",
            )
    for rel in {rel.oid: rel for _, rel, _ in users}.values():
        named = {col.name for _, r, col in users if r.oid == rel.oid and col is not None}
        columns = tuple(replace(c, default=None) if c.name in named else c for c in rel.columns)
        cat.replace_relation(replace(rel, columns=columns))


def drop(w: WriteTxn, stmt: A.DropStmt) -> Result:
    cat = w.catalog
    found = []
    notices: list[str | SQLError] = []
    for obj in stmt.objects:
        name = obj.sval
        if name == BUILT_IN:
            raise FeatureNotSupported(f'extension "{name}" is built in and cannot be dropped')
        if name not in cat.extensions:
            if not stmt.missing_ok:
                raise UndefinedObject(f'extension "{name}" does not exist')
            notices.append(f'extension "{name}" does not exist, skipping')
            continue
        found.append(cat.extensions[name])
    for ext in found:
        users = _users(cat, ext)
        lines = [line for line, _, _ in users]
        if users and stmt.behavior != DropBehavior.DROP_CASCADE:
            raise DependentObjects(
                f"cannot drop extension {ext.name} because other objects depend on it",
                detail="\n".join(lines),
                hint="Use DROP ... CASCADE to drop the dependent objects too.",
            )
        if users:
            _without_defaults(cat, users)
            notices.extend(f"drop cascades to {line.split(' depends on ')[0]}" for line in lines)
        cat.drop_extension(ext)
    return Result("DROP EXTENSION", notices=notices)
