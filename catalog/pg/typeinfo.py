"""PostgreSQL types as the emulation describes them.

pg_type facts of the specs' types, the type of each spec column (format_type() text such as
'name' or 'text[]'), the names ::regtype accepts and format_type()'s base names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headwater.catalog.pg import specs
from headwater.catalog.types import _ALIASES, BY_NAME


@dataclass(frozen=True)
class TypeRow:
    oid: int
    name: str
    typlen: int
    typbyval: bool
    typalign: str
    typstorage: str
    typcollation: int
    typelem: int
    typcategory: str

    @property
    def is_array(self) -> bool:
        """An array type (`_int4`); int2vector and oidvector are category A too, but
        print as themselves."""
        return self.typcategory == "A" and self.name.startswith("_")


def _type_rows() -> dict[int, TypeRow]:
    cols = specs.TYPE_COLUMNS
    out = {}
    for r in specs.TYPES:
        d = dict(zip(cols, r, strict=True))
        out[int(d["oid"])] = TypeRow(
            int(d["oid"]),
            str(d["typname"]),
            int(d["typlen"]),
            bool(d["typbyval"]),
            str(d["typalign"]),
            str(d["typstorage"]),
            int(d["typcollation"]),
            int(d["typelem"]),
            str(d["typcategory"]),
        )
    return out


TYPES_BY_OID: dict[int, TypeRow] = _type_rows()

# format_type() names (as in specs.RELATIONS) -> (type oid, typmod)
_SPEC_TYPES: dict[str, tuple[int, int]] = {
    "oid": (26, -1),
    "name": (19, -1),
    "text": (25, -1),
    '"char"': (18, -1),
    "boolean": (16, -1),
    "smallint": (21, -1),
    "integer": (23, -1),
    "bigint": (20, -1),
    "real": (700, -1),
    "double precision": (701, -1),
    "regproc": (24, -1),
    "regtype": (2206, -1),
    "xid": (28, -1),
    "pg_node_tree": (194, -1),
    "timestamp with time zone": (1184, -1),
    "interval": (1186, -1),
    "bytea": (17, -1),
    "int2vector": (22, -1),
    "oidvector": (30, -1),
    "anyarray": (2277, -1),
    "pg_lsn": (3220, -1),
    "pg_ndistinct": (3361, -1),
    "pg_dependencies": (3402, -1),
    "pg_mcv_list": (5017, -1),
    "aclitem": (1033, -1),
    # information_schema's domains, shown as their base types
    "sql_identifier": (19, -1),
    "cardinal_number": (23, -1),
    "character_data": (1043, -1),
    "yes_or_no": (1043, 7),
    "time_stamp": (1184, -1),
}

ARRAY_OF = {t.typelem: t.oid for t in TYPES_BY_OID.values() if t.is_array}


def spec_type(t: str) -> tuple[int, int]:
    """(type oid, typmod) of a spec column's format_type() text."""
    if t.endswith("[]"):
        elem, _ = spec_type(t[:-2])
        return ARRAY_OF.get(elem, 0), -1
    return _SPEC_TYPES.get(t, (25, -1))


def _type_names() -> list[dict[str, Any]]:
    """The rows of _hw_typnames: every name ::regtype and to_regtype() accept."""
    out = []
    seen = set()
    for t in TYPES_BY_OID.values():
        for n in (t.name, f"pg_catalog.{t.name}"):
            out.append({"name": n, "oid": t.oid})
            seen.add(n)
    for alias, pg in list(_ALIASES.items()) + [(p.sql_name, p) for p in BY_NAME.values()]:
        if alias not in seen:
            seen.add(alias)
            out.append({"name": alias, "oid": pg.oid})
    return out


TYPE_NAMES = _type_names()

# format_type()'s names of the types it does not show by their typname
FORMAT_NAMES = {
    "bool": "boolean",
    "int2": "smallint",
    "int4": "integer",
    "int8": "bigint",
    "float4": "real",
    "float8": "double precision",
    "char": '"char"',
    "timestamp": "timestamp without time zone",
    "timestamptz": "timestamp with time zone",
    "time": "time without time zone",
    "timetz": "time with time zone",
    "bit": "bit",
    "varbit": "bit varying",
    "interval": "interval",
}
