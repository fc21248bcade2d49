"""The functions of the extensions CREATE EXTENSION accepts (catalog/extensions.py):
pgcrypto's digest, hmac and gen_random_bytes (gen_random_uuid is PostgreSQL's own), and
uuid-ossp's uuid_generate_v1/v3/v4/v5, uuid_nil and uuid_ns_*. Not here: pgcrypto's
crypt/gen_salt (password hashing) and its PGP functions."""

from __future__ import annotations

import hashlib
import hmac
import os
import uuid
from typing import Any

from headwater.planner.functions import udf
from headwater.planner.functions.nodes import call

_ALGORITHMS = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512")


def _algorithm(name: str) -> str:
    algorithm = name.lower()
    if algorithm not in _ALGORITHMS:
        raise ValueError(f'[SQLSTATE 22023] Cannot use "{name}": No such hash algorithm')
    return algorithm


def _digest(data: bytes, name: str) -> bytes:
    return hashlib.new(_algorithm(name), data).digest()


def _hmac(data: bytes, key: bytes, name: str) -> bytes:
    return hmac.new(key, data, _algorithm(name)).digest()


def _random_bytes(n: int) -> bytes:
    if not 1 <= n <= 1024:
        raise ValueError("[SQLSTATE 39000] Length not in range")
    return os.urandom(n)


_NAMESPACES = {"dns": uuid.NAMESPACE_DNS, "url": uuid.NAMESPACE_URL}
_NAMESPACES |= {"oid": uuid.NAMESPACE_OID, "x500": uuid.NAMESPACE_X500}

MACROS = [
    # text arguments are their UTF-8 bytes, as pgcrypto's text forms take them
    "CREATE OR REPLACE MACRO hw_digest(x BLOB, t VARCHAR) AS hw_digest_bytes(x, t),"
    " (x VARCHAR, t VARCHAR) AS hw_digest_bytes(encode(x), t)",
    "CREATE OR REPLACE MACRO hw_hmac(x BLOB, k BLOB, t VARCHAR) AS hw_hmac_bytes(x, k, t),"
    " (x VARCHAR, k VARCHAR, t VARCHAR) AS hw_hmac_bytes(encode(x), encode(k), t)",
    "CREATE OR REPLACE MACRO hw_uuid_v1() AS CAST(hw_uuid1(0) AS UUID)",
    "CREATE OR REPLACE MACRO hw_uuid_v1mc() AS CAST(hw_uuid1(1) AS UUID)",
    "CREATE OR REPLACE MACRO hw_uuid_v3(ns, name) AS"
    " CAST(hw_uuid_named(3, CAST(ns AS VARCHAR), name) AS UUID)",
    "CREATE OR REPLACE MACRO hw_uuid_v5(ns, name) AS"
    " CAST(hw_uuid_named(5, CAST(ns AS VARCHAR), name) AS UUID)",
    "CREATE OR REPLACE MACRO hw_uuid_nil() AS CAST('00000000-0000-0000-0000-000000000000' AS UUID)",
    *(
        f"CREATE OR REPLACE MACRO hw_uuid_ns_{n}() AS CAST('{u}' AS UUID)"
        for n, u in _NAMESPACES.items()
    ),
]


def _uuid1(multicast: int) -> str:
    """v1: time and node; v1mc: a random multicast node instead of the MAC address."""
    node = (int.from_bytes(os.urandom(6), "big") | (1 << 40)) if multicast else None
    return str(uuid.uuid1(node))


def _uuid_named(version: int, ns: str, name: str) -> str:
    make = uuid.uuid3 if version == 3 else uuid.uuid5
    return str(make(uuid.UUID(ns), name))


def _to(name: str, arity: int) -> Any:
    """The call as `name` (an hw_ function: views that call one stay on DuckDB, as
    engine/spark_executor.py finds them by the prefix)."""
    return lambda args: call(name, *args) if len(args) == arity else None


REWRITES = {
    "digest": _to("hw_digest", 2),
    "hmac": _to("hw_hmac", 3),
    "gen_random_bytes": _to("hw_gen_random_bytes", 1),
    "uuid_generate_v1": _to("hw_uuid_v1", 0),
    "uuid_generate_v1mc": _to("hw_uuid_v1mc", 0),
    "uuid_generate_v3": _to("hw_uuid_v3", 2),
    "uuid_generate_v4": _to("gen_random_uuid", 0),
    "uuid_generate_v5": _to("hw_uuid_v5", 2),
    "uuid_nil": _to("hw_uuid_nil", 0),
    **{f"uuid_ns_{n}": _to(f"hw_uuid_ns_{n}", 0) for n in _NAMESPACES},
}


def install(db: Any) -> None:
    udf.register(db, "hw_digest_bytes", _digest, ["BLOB", "VARCHAR"], "BLOB")
    udf.register(db, "hw_hmac_bytes", _hmac, ["BLOB", "BLOB", "VARCHAR"], "BLOB")
    udf.register(db, "hw_uuid_named", _uuid_named, ["INTEGER", "VARCHAR", "VARCHAR"], "VARCHAR")
    # random: evaluated for each row (side effects), not folded to one value
    udf.register(db, "hw_uuid1", _uuid1, ["INTEGER"], "VARCHAR", volatile=True)
    reg = udf.register
    reg(db, "hw_gen_random_bytes", _random_bytes, ["INTEGER"], "BLOB", volatile=True)
    for sql in MACROS:
        db.execute(sql)
