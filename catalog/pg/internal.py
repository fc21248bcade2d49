"""Rows of the internal pg_catalog._hw_* relations: what planner/pg_compat.py rewrites
client functions and casts into (visibility, regclass names, definitions, privileges)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from headwater.catalog.catalog import is_temp_schema
from headwater.catalog.identifiers import quote, quote_ident
from headwater.catalog.objects import Index
from headwater.catalog.pg import domains, functions
from headwater.catalog.pg.foreign_keys import constraint_def as fk_def
from headwater.catalog.pg.foreign_keys import fk_rows
from headwater.catalog.pg.oids import check_oid, table_checks
from headwater.catalog.pg.pg_catalog import pg_proc, pg_settings
from headwater.catalog.pg.roles import role_rows
from headwater.catalog.pg.ruleutils import check_def, constraint_def, index_def, view_definition
from headwater.catalog.pg.snapshot import Builder, Builders, indexed_tables, registrar, user_rels
from headwater.catalog.pg.typeinfo import FORMAT_NAMES, TYPE_NAMES, TYPES_BY_OID
from headwater.catalog.version import SERVER_VERSION_TEXT

STARTED = datetime.now(UTC)  # the server process's start: pg_postmaster_start_time()

BUILDERS: Builders = {}
_builder = registrar(BUILDERS)

# Columns of internal relations (used by planner/pg_compat.py rewrites only). Their
# columns start with hw_ so that they never capture a column the rewritten
# function's arguments name (the rows below use the names without the prefix).
INTERNAL: dict[str, tuple[tuple[str, str], ...]] = {
    "_hw_session": (
        ("hw_user_name", "text"),
        ("hw_session_user_name", "text"),
        ("hw_database", "text"),
        ("hw_current_schema", "text"),
        ("hw_schemas", "text[]"),
        ("hw_schemas_implicit", "text[]"),
        ("hw_pid", "integer"),
        ("hw_version", "text"),
        ("hw_temp_schema", "oid"),  # pg_my_temp_schema(): 0 until a temporary table
        ("hw_started", "timestamptz"),
    ),
    # every pg_class row: is it visible on the search path, and its regclass text
    "_hw_relvis": (("hw_oid", "oid"), ("hw_visible", "boolean"), ("hw_display", "text")),
    # every accepted spelling of a relation name ('t', 'public.t', '"T"', ...)
    "_hw_relnames": (("hw_name", "text"), ("hw_folds", "boolean"), ("hw_oid", "oid")),
    # pg_get_indexdef/constraintdef/viewdef text: n = 0 whole, n > 0 a column, -1 pretty
    "_hw_defs": (("hw_oid", "oid"), ("hw_n", "integer"), ("hw_def", "text")),
    # type names accepted by ::regtype and to_regtype()
    "_hw_typnames": (("hw_name", "text"), ("hw_oid", "oid")),
    # format_type(): base name, typmod rule (varchar/bpchar/numeric/plain), '[]' for arrays
    "_hw_typfmt": (
        ("hw_oid", "oid"),
        ("hw_base", "text"),
        ("hw_kind", "text"),
        ("hw_suffix", "text"),
    ),
    # names of schemas, roles and functions by oid: hw_kind is 'namespace', 'role', 'proc'
    "_hw_objnames": (("hw_kind", "text"), ("hw_oid", "oid"), ("hw_name", "text")),
    # privileges the session's role holds on each user table, view and schema; a row
    # with hw_priv '-' marks every object (objects without rows: system ones, all allowed)
    "_hw_privs": (("hw_oid", "oid"), ("hw_priv", "text")),
    # the same for every role that is not a superuser: has_table_privilege('role', ...)
    "_hw_role_privs": (("hw_role", "text"), ("hw_oid", "oid"), ("hw_priv", "text")),
    # current_setting(): lower-case name -> value
    "_hw_settings": (("hw_name", "text"), ("hw_setting", "text")),
}


@_builder("pg_catalog", "_hw_session")
def _hw_session(b: Builder) -> list[dict[str, Any]]:
    path = [s for s in b.session.search_path if s in b.catalog.schemas or s == "pg_catalog"]
    existing = [s for s in path if not is_temp_schema(s)]  # the temporary schema is implicit
    temp = [s for s in path if is_temp_schema(s)]
    implicit = temp + (existing if "pg_catalog" in existing else ["pg_catalog"] + existing)
    return [
        {
            "user_name": b.session.user,
            "session_user_name": b.session.session_user or b.session.user,
            "database": b.session.database,
            "current_schema": existing[0] if existing else None,
            "schemas": existing,
            "schemas_implicit": implicit,
            "pid": b.session.pid,
            "version": SERVER_VERSION_TEXT,
            "temp_schema": b.catalog.schemas[temp[0]].oid if temp else 0,
            "started": STARTED,
        }
    ]


@_builder("pg_catalog", "_hw_relvis")
def _hw_relvis(b: Builder) -> list[dict[str, Any]]:
    vis = b.visible()
    return [
        {
            "oid": r.oid,
            "visible": vis[r.oid],
            "display": quote_ident(r.name)
            if vis[r.oid]
            else f"{quote_ident(r.schema)}.{quote_ident(r.name)}",
        }
        for r in b.relations()
    ]


@_builder("pg_catalog", "_hw_relnames")
def _hw_relnames(b: Builder) -> list[dict[str, Any]]:
    vis = b.visible()
    out = []
    for r in b.relations():
        forms = [(quote(r.schema) + "." + quote(r.name), False)]
        if vis[r.oid]:
            forms.append((quote(r.name), False))
        for s_plain in (True, False):
            for n_plain in (True, False):
                if (s_plain and not _plain(r.schema)) or (n_plain and not _plain(r.name)):
                    continue
                s = r.schema if s_plain else quote(r.schema)
                n = r.name if n_plain else quote(r.name)
                forms.append((f"{s}.{n}", s_plain or n_plain))
                if vis[r.oid] and s_plain:
                    forms.append((n, n_plain))
        seen = set()
        for name, folds in forms:
            if (name, folds) not in seen:
                seen.add((name, folds))
                out.append({"name": name, "folds": folds, "oid": r.oid})
    return out


def _plain(name: str) -> bool:
    return quote_ident(name) == name or (name == name.lower() and '"' not in name)


@_builder("pg_catalog", "_hw_defs")
def _hw_defs(b: Builder) -> list[dict[str, Any]]:
    out = []
    for r, table in indexed_tables(b):
        out.append({"oid": r.oid, "n": 0, "def": index_def(r, table)})
        texts = r.obj.key_texts() if isinstance(r.obj, Index) else map(quote_ident, r.index_cols)
        for i, text in enumerate(texts, start=1):
            out.append({"oid": r.oid, "n": i, "def": text})
        if r.constraint_oid:
            out.append({"oid": r.constraint_oid, "n": 0, "def": constraint_def(r)})
            out.append({"oid": r.constraint_oid, "n": -1, "def": constraint_def(r)})
    for table in b.catalog.tables():
        for n, check in enumerate(table_checks(table)):
            oid = check_oid(table.oid, n)
            tail = "" if check.valid else " NOT VALID"
            out.append({"oid": oid, "n": 0, "def": check_def(table, check.expr) + tail})
            pretty = check_def(table, check.expr, pretty=True) + tail
            out.append({"oid": oid, "n": -1, "def": pretty})
    for f in fk_rows(b):
        text = fk_def(b, f)
        out.extend(({"oid": f.oid, "n": 0, "def": text}, {"oid": f.oid, "n": -1, "def": text}))
    for r in user_rels(b, "v", "m"):
        out.append({"oid": r.oid, "n": 0, "def": view_definition(r, b)})
        out.append({"oid": r.oid, "n": -1, "def": view_definition(r, b, pretty=True)})
    return out + functions.def_rows(b) + domains.def_rows(b)


@_builder("pg_catalog", "_hw_objnames")
def _hw_objnames(b: Builder) -> list[dict[str, Any]]:
    out = [{"kind": "namespace", "oid": o, "name": n} for o, n, _ in b.namespaces()]
    out += [{"kind": "role", "oid": r["oid"], "name": r["rolname"]} for r in role_rows(b)]
    out += [{"kind": "proc", "oid": r["oid"], "name": r["proname"]} for r in pg_proc(b)]
    out += [{"kind": "proc", "oid": f.oid, "name": f.name} for f in functions.functions(b)]
    return out


_TABLE_PRIVS = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
_SEQUENCE_PRIVS = ("SELECT", "UPDATE", "USAGE")

_SCHEMA_PRIVS = ("USAGE", "CREATE")


@_builder("pg_catalog", "_hw_privs")
def _hw_privs(b: Builder) -> list[dict[str, Any]]:
    find = getattr(b.catalog, "role", None)
    role = find(b.session.user) if find is not None else None
    return _privileges(b, role)


@_builder("pg_catalog", "_hw_role_privs")
def _hw_role_privs(b: Builder) -> list[dict[str, Any]]:
    roles = getattr(b.catalog, "roles", {}).values()
    return [{"role": r.name, **row} for r in roles for row in _privileges(b, r)]


def _privileges(b: Builder, role: Any) -> list[dict[str, Any]]:
    """The privileges `role` holds on each user table, view and schema; none listed
    for a superuser, who holds every privilege."""
    if role is None or role.superuser:
        return []
    out = []
    objects: list[tuple[Any, tuple[str, ...]]] = [
        (r, _SEQUENCE_PRIVS if r.kind == "sequence" else _TABLE_PRIVS)
        for r in b.catalog.relations.values()
        if not isinstance(r, Index)
    ]
    objects += [(sch, _SCHEMA_PRIVS) for sch in b.catalog.schemas.values()]
    for obj, privs in objects:
        out.append({"oid": obj.oid, "priv": "-"})
        out += [
            {"oid": obj.oid, "priv": p}
            for p in privs
            if b.session.has_privilege(b.catalog, role.oid, obj, p)
        ]
    return out


@_builder("pg_catalog", "_hw_settings")
def _hw_settings(b: Builder) -> list[dict[str, Any]]:
    return [{"name": r["name"].lower(), "setting": r["setting"]} for r in pg_settings(b)]


@_builder("pg_catalog", "_hw_typnames")
def _hw_typnames(b: Builder) -> list[dict[str, Any]]:
    return list(TYPE_NAMES)


@_builder("pg_catalog", "_hw_typfmt")
def _hw_typfmt(b: Builder) -> list[dict[str, Any]]:
    out = []
    for t in TYPES_BY_OID.values():
        elem = TYPES_BY_OID.get(t.typelem) if t.is_array else None
        base = elem if elem is not None else t
        kind = base.name if base.name in ("varchar", "bpchar", "numeric") else "plain"
        out.append(
            {
                "oid": t.oid,
                "base": FORMAT_NAMES.get(base.name, base.name),
                "kind": kind,
                "suffix": "[]" if elem is not None else "",
            }
        )
    return out
