"""Oids and kinds of PostgreSQL 15's built-in objects, and oids Headwater derives."""

from __future__ import annotations

from typing import Any

PG_CATALOG_OID = 11
INFORMATION_SCHEMA_OID = 13207
SUPERUSER_OID = 10  # the bootstrap superuser
DATABASE_OWNER_ROLE_OID = 6171  # pg_database_owner: owns schema public in PostgreSQL 15
DATABASE_OID = 16384
HEAP_AM = 2
BTREE_AM = 403
UTF8_ENCODING = 6

# relkind per catalog object kind. A new kind of relation (materialized views) is
# one entry here; pg_matviews lists every relation whose relkind is 'm'.
RELKIND: dict[str, str] = {
    "table": "r",
    "view": "v",
    "index": "i",
    "materialized view": "m",
    "materialized_view": "m",
    "sequence": "S",
}


def derived_oid(table_oid: int, kind: int, n: int) -> int:
    """Oids of objects Headwater's catalog has no oid for, derived from their table's:
    kind 0 the index behind key n, 1 the constraint of key n, 2 the default of column n."""
    slot = kind * 64 + n if kind < 2 else 128 + (n % 128)
    return 2_000_000_000 + (table_oid - 16384) * 256 + slot


def table_checks(table: Any) -> list[Any]:
    """A table's own CHECK constraints in name order (a domain's, on its columns, are
    the domain's: pg_constraint lists them under the domain)."""
    return sorted((c for c in table.checks if not c.domain), key=lambda c: c.name)


def check_oid(table_oid: int, n: int) -> int:
    """The pg_constraint oid of a table's CHECK constraint n (0-based, name order)."""
    return 1_900_000_000 + (table_oid - 16384) * 64 + n


def foreign_key_oid(table_oid: int, n: int) -> int:
    """The pg_constraint oid of a table's FOREIGN KEY n (0-based, name order)."""
    return 1_800_000_000 + (table_oid - 16384) * 64 + n
