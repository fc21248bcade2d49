"""The extensions CREATE EXTENSION accepts: those whose functions Headwater provides
(planner/functions/extension_funcs.py). plpgsql is there from the start, as in
PostgreSQL (DO blocks: server/do_blocks.py; trigger functions: planner/plpgsql.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Available:
    version: str
    relocatable: bool
    comment: str
    functions: tuple[str, ...] = ()  # what a default or a view may depend on


AVAILABLE = {
    "pgcrypto": Available(
        "1.3", True, "cryptographic functions", ("digest", "hmac", "gen_random_bytes")
    ),
    "plpgsql": Available("1.0", False, "PL/pgSQL procedural language"),
    "uuid-ossp": Available(
        "1.1",
        True,
        "generate universally unique identifiers (UUIDs)",
        (
            *("uuid_generate_v1", "uuid_generate_v1mc", "uuid_generate_v3", "uuid_generate_v4"),
            *("uuid_generate_v5", "uuid_nil", "uuid_ns_dns", "uuid_ns_url", "uuid_ns_oid"),
            "uuid_ns_x500",
        ),
    ),
}
BUILT_IN = "plpgsql"
PLPGSQL_OID = 13568  # pg_extension's row of the built-in one
