"""CREATE DOMAIN's rows: pg_type (typtype 'd', and its array type) and pg_constraint's
rows of its CHECKs (contypid), which psql's \\dD and pg_dump read (the names ::regtype
and format_type() know it by: enums.py's, for both); the domain: catalog/objects.py."""

from __future__ import annotations

from typing import Any

from headwater.catalog.objects import BOOTSTRAP_ROLE_OID, Column, Domain, Relation
from headwater.catalog.pg.column_default import expr_display
from headwater.catalog.pg.ruleutils import check_def
from headwater.catalog.pg.snapshot import Builder
from pglast import ast as A
from pglast import parse_sql
from pglast.stream import RawStream

_VALUE = "_hw_domain_value"  # VALUE while a CHECK is printed as a table's


def domains(b: Builder) -> list[Domain]:
    return sorted(getattr(b.catalog, "domains", {}).values(), key=lambda d: d.oid)


def constraint_oid(domain: Domain, n: int) -> int:
    """The pg_constraint oid of a domain's CHECK n (0-based, in declaration order)."""
    return 1_950_000_000 + (domain.oid - 16384) * 64 + n


def pg_type_rows(b: Builder) -> list[dict[str, Any]]:
    out = []
    for d in domains(b):
        common = {
            "typnamespace": b.nsp_oid(d.schema),
            "typowner": d.owner or BOOTSTRAP_ROLE_OID,
            "typispreferred": False,
            "typisdefined": True,
            "typdelim": ",",
            "typrelid": 0,
            "typndims": 0,
            "typcollation": 0,
            "typdefaultbin": None,
            "typacl": None,
            "typcategory": d.base.pg.category,
        }
        out.append(
            common
            | {
                "oid": d.oid,
                "typname": d.name,
                "typlen": d.base.pg.typlen,
                "typbyval": 0 < d.base.pg.typlen <= 8,
                "typtype": "d",
                "typsubscript": "-",
                "typelem": 0,
                "typarray": d.array_oid,
                "typinput": "domain_in",
                "typoutput": f"{d.base.pg.name}out",
                "typreceive": "domain_recv",
                "typsend": f"{d.base.pg.name}send",
                "typmodin": "-",
                "typmodout": "-",
                "typanalyze": "-",
                "typalign": "i",
                "typstorage": "p" if d.base.pg.typlen > 0 else "x",
                "typnotnull": d.not_null,
                "typbasetype": d.base.pg.oid,
                "typtypmod": d.base.typmod,
                "typdefault": expr_display(Column("", d.base, default=d.default)),
            }
        )
        out.append(
            common
            | {
                "oid": d.array_oid,
                "typname": "_" + d.name,
                "typlen": -1,
                "typbyval": False,
                "typtype": "b",
                "typcategory": "A",
                "typsubscript": "array_subscript_handler",
                "typelem": d.oid,
                "typarray": 0,
                "typinput": "array_in",
                "typoutput": "array_out",
                "typreceive": "array_recv",
                "typsend": "array_send",
                "typmodin": "-",
                "typmodout": "-",
                "typanalyze": "array_typanalyze",
                "typalign": "i",
                "typstorage": "x",
                "typnotnull": False,
                "typbasetype": 0,
                "typtypmod": -1,
                "typdefault": None,
            }
        )
    return out


def constraint_rows(b: Builder, defaults: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            **defaults,
            "oid": constraint_oid(d, n),
            "conname": c.name,
            "connamespace": b.nsp_oid(d.schema),
            "contype": "c",
            "convalidated": True,
            "conrelid": 0,
            "contypid": d.oid,
            "conindid": 0,
            "connoinherit": False,
            "conkey": None,
        }
        for d in domains(b)
        for n, c in enumerate(d.checks)
    ]


def def_rows(b: Builder) -> list[dict[str, Any]]:
    """pg_get_constraintdef() of each domain CHECK: `CHECK ((VALUE > 0))`."""
    out = []
    for d in domains(b):
        holder = Relation(0, "", "", (Column(_VALUE, d.base),))
        for n, c in enumerate(d.checks):
            expr = _renamed_value(c.expr)
            for key, pretty in ((0, False), (-1, True)):
                text = check_def(holder, expr, pretty=pretty).replace(_VALUE, "VALUE")
                out.append({"oid": constraint_oid(d, n), "n": key, "def": text})
    return out


def _renamed_value(expr: str) -> str:
    """A domain CHECK's text with VALUE named as the placeholder column."""
    tree = parse_sql(f"SELECT ({expr})")[0].stmt.targetList[0].val
    stack: list[Any] = [tree]
    while stack:
        n = stack.pop()
        if isinstance(n, tuple | list):
            stack.extend(n)
        elif isinstance(n, A.ColumnRef) and [getattr(f, "sval", None) for f in n.fields] == [
            "value"
        ]:
            n.fields = (A.String(sval=_VALUE),)
        elif isinstance(n, A.Node):
            stack.extend(getattr(n, attr) for attr in n)
    return RawStream()(tree)
