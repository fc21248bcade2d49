"""Roles in pg_catalog: pg_authid, pg_roles, pg_shadow, pg_user, pg_auth_members;
owner names and ACL text for the other relations."""

from __future__ import annotations

import datetime as dt
from typing import Any

from headwater.catalog.pg.oids import SUPERUSER_OID
from headwater.catalog.pg.snapshot import Builder, Builders, registrar
from headwater.catalog.privileges import OBJTYPE_ALL

BUILDERS: Builders = {}
_builder = registrar(BUILDERS)

# PostgreSQL 15's predefined roles (not shown by \du, named by pg_get_userbyid).
_PREDEFINED_ROLES = (
    (3373, "pg_monitor"),
    (3374, "pg_read_all_settings"),
    (3375, "pg_read_all_stats"),
    (3377, "pg_stat_scan_tables"),
    (4200, "pg_signal_backend"),
    (4544, "pg_checkpoint"),
    (4569, "pg_read_server_files"),
    (4570, "pg_write_server_files"),
    (4571, "pg_execute_server_program"),
    (6171, "pg_database_owner"),
    (6181, "pg_read_all_data"),
    (6182, "pg_write_all_data"),
)


def role_rows(b: Builder) -> list[dict[str, Any]]:
    """The catalog's roles (CREATE ROLE) and PostgreSQL's predefined roles."""
    out = []
    roles = getattr(b.catalog, "roles", None) or {}
    if not roles:  # a catalog without roles: the session user is the superuser
        out.append(_role_row(SUPERUSER_OID, b.session.user, super_=True, login=True))
    for r in sorted(roles.values(), key=lambda r: r.oid):
        row = _role_row(r.oid, r.name, super_=r.superuser, login=r.login)
        bootstrap = r.oid == SUPERUSER_OID
        row.update(
            rolinherit=r.inherit,
            rolcreaterole=r.createrole or bootstrap,
            rolcreatedb=r.createdb or bootstrap,
            rolreplication=bootstrap,
            rolbypassrls=bootstrap,
            rolpassword=r.password,
            rolvaliduntil=_timestamp(r.valid_until),
            member_of=r.member_of,
        )
        out.append(row)
    for oid, name in _PREDEFINED_ROLES:
        out.append(_role_row(oid, name, super_=False, login=False))
    return out


def _role_row(oid: int, name: str, *, super_: bool, login: bool) -> dict[str, Any]:
    return {
        "oid": oid,
        "rolname": name,
        "rolsuper": super_,
        "rolinherit": True,
        "rolcreaterole": super_,
        "rolcreatedb": super_,
        "rolcanlogin": login,
        "rolreplication": super_,
        "rolbypassrls": super_,
        "rolconnlimit": -1,
        "member_of": (),
    }


def _timestamp(text: str | None) -> Any:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return None


def owner_name(b: Builder, oid: int) -> str:
    for r in role_rows(b):
        if r["oid"] == oid:
            return str(r["rolname"])
    return f"unknown (OID={oid})"


def acl(b: Builder, obj: Any) -> list[str] | None:
    """relacl / nspacl of a catalog object (None: no GRANT yet, PostgreSQL's NULL)."""
    if obj is None or not getattr(obj, "acl", None):
        return None
    return b.session.acl_items(b.catalog, obj)


@_builder("pg_catalog", "pg_auth_members")
def _pg_auth_members(b: Builder) -> list[dict[str, Any]]:
    return [
        {"roleid": m, "member": r["oid"], "grantor": SUPERUSER_OID, "admin_option": False}
        for r in role_rows(b)
        for m in r["member_of"]
    ]


@_builder("pg_catalog", "pg_authid")
def _pg_authid(b: Builder) -> list[dict[str, Any]]:
    return role_rows(b)


@_builder("pg_catalog", "pg_roles")
def _pg_roles(b: Builder) -> list[dict[str, Any]]:
    return [{**r, "rolpassword": "********"} for r in role_rows(b)]


@_builder("pg_catalog", "pg_shadow")
def _pg_shadow(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "usename": r["rolname"],
            "usesysid": r["oid"],
            "usecreatedb": r["rolcreatedb"],
            "usesuper": r["rolsuper"],
            "userepl": r["rolreplication"],
            "usebypassrls": r["rolbypassrls"],
            "passwd": r.get("rolpassword"),
            "valuntil": r.get("rolvaliduntil"),
        }
        for r in role_rows(b)
        if r["rolcanlogin"]
    ]


@_builder("pg_catalog", "pg_user")
def _pg_user(b: Builder) -> list[dict[str, Any]]:
    return [{**r, "passwd": "********"} for r in _pg_shadow(b)]


@_builder("pg_catalog", "pg_default_acl")
def _pg_default_acl(b: Builder) -> list[dict[str, Any]]:
    """ALTER DEFAULT PRIVILEGES' entries, their ACL as aclitem[] text (the role that
    owns the entry is each item's grantor)."""
    cat = b.catalog
    roles = getattr(cat, "roles", {})

    def name(oid: int) -> str:
        r = roles.get(oid)
        return "" if oid == 0 else (r.name if r is not None else str(oid))

    out = []
    for d in getattr(cat, "default_acls", {}).values():
        schema = cat.schemas.get(d.schema) if d.schema else None
        order = OBJTYPE_ALL[d.objtype]
        items = [
            f"{name(g)}={''.join(c for c in order if c in letters)}/{name(d.role)}"
            for g, letters in d.acl
        ]
        out.append(
            {
                "oid": d.oid,
                "defaclrole": d.role,
                "defaclnamespace": schema.oid if schema is not None else 0,
                "defaclobjtype": d.objtype,
                "defaclacl": items,
            }
        )
    return out
