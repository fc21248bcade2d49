"""The rows CREATE TYPE ... AS ENUM adds to the system catalogs: pg_enum's labels, and
each enum's (and its array type's) rows in pg_type and the type-name relations that
::regtype and format_type() read (catalog/pg/internal.py). Those four are otherwise
static (catalog/pg/tables.py appends these to them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headwater.catalog.objects import BOOTSTRAP_ROLE_OID, Domain, UserType
from headwater.catalog.pg import domains
from headwater.catalog.pg.snapshot import Builder, Builders, registrar
from headwater.catalog.types import type_display

BUILDERS: Builders = {}
_builder = registrar(BUILDERS)


def label_oid(type_oid: int, n: int) -> int:
    """The pg_enum oid of an enum's label n (0-based, in order)."""
    return 1_700_000_000 + (type_oid - 16384) * 1024 + n


def _types(b: Builder) -> list[UserType]:
    return sorted(b.catalog.types.values(), key=lambda t: t.oid)


@_builder("pg_catalog", "pg_enum")
def _pg_enum(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "oid": label_oid(t.oid, n),
            "enumtypid": t.oid,
            "enumsortorder": float(n + 1),
            "enumlabel": label,
        }
        for t in _types(b)
        for n, label in enumerate(t.labels)
    ]


def _pg_type(b: Builder) -> list[dict[str, Any]]:
    out = []
    for t in _types(b):
        common = {
            "typnamespace": b.nsp_oid(t.schema),
            "typowner": t.owner or BOOTSTRAP_ROLE_OID,
            "typispreferred": False,
            "typisdefined": True,
            "typdelim": ",",
            "typrelid": 0,
            "typmodin": "-",
            "typmodout": "-",
            "typalign": "i",
            "typnotnull": False,
            "typbasetype": 0,
            "typtypmod": -1,
            "typndims": 0,
            "typcollation": 0,
            "typdefaultbin": None,
            "typdefault": None,
            "typacl": None,
        }
        out.append(
            common
            | {
                "oid": t.oid,
                "typname": t.name,
                "typlen": 4,
                "typbyval": True,
                "typtype": "e",
                "typcategory": "E",
                "typsubscript": "-",
                "typelem": 0,
                "typarray": t.array_oid,
                "typinput": "enum_in",
                "typoutput": "enum_out",
                "typreceive": "enum_recv",
                "typsend": "enum_send",
                "typanalyze": "-",
                "typstorage": "p",
            }
        )
        out.append(
            common
            | {
                "oid": t.array_oid,
                "typname": "_" + t.name,
                "typlen": -1,
                "typbyval": False,
                "typtype": "b",
                "typcategory": "A",
                "typsubscript": "array_subscript_handler",
                "typelem": t.oid,
                "typarray": 0,
                "typinput": "array_in",
                "typoutput": "array_out",
                "typreceive": "array_recv",
                "typsend": "array_send",
                "typanalyze": "array_typanalyze",
                "typstorage": "x",
            }
        )
    return out


def _named(b: Builder) -> list[UserType | Domain]:
    """The database's own types: enums and domains (whose pg_type rows: domains.py)."""
    return [*_types(b), *domains.domains(b)]


def _type_names(b: Builder) -> list[dict[str, Any]]:
    out = []
    for t in _named(b):
        names = ((t.name, t.oid), (t.name + "[]", t.array_oid), ("_" + t.name, t.array_oid))
        for name, oid in names:
            out.append({"name": name, "oid": oid})
            out.append({"name": f"{t.schema}.{name}", "oid": oid})
    return out


def _type_formats(b: Builder) -> list[dict[str, Any]]:
    out = []
    for t in _named(b):
        base = type_display(t.pg, b.session.search_path)
        out.append({"oid": t.oid, "base": base, "kind": "plain", "suffix": ""})
        out.append({"oid": t.array_oid, "base": base, "kind": "plain", "suffix": "[]"})
    return out


# rows appended to the static relations when the catalog has enums or domains
APPENDED: dict[tuple[str, str], Callable[[Builder], list[dict[str, Any]]]] = {
    ("pg_catalog", "pg_type"): lambda b: _pg_type(b) + domains.pg_type_rows(b),
    ("pg_catalog", "_hw_typnames"): _type_names,
    ("pg_catalog", "_hw_typfmt"): _type_formats,
}
