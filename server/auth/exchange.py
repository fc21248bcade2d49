"""The authentication exchange at startup: the hba rule's method, run over the wire.

After the startup packet the server finds the connection's hba rule (hba.py) and
asks for a cleartext password, an md5 answer or SCRAM messages (scram.py), as
PostgreSQL's auth.c does; any failure is a FATAL error and the connection ends.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from datetime import UTC, datetime
from typing import Any, Protocol

from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Role
from headwater.server.auth.hba import find_rule, load_hba
from headwater.server.auth.passwords import check_md5_answer, check_plain_password
from headwater.server.auth.scram import ScramServer, parse_scram
from headwater.server.pgwire.framing import Reader, read_message
from headwater.server.pgwire.messages import (
    AUTH_CLEARTEXT,
    AUTH_MD5,
    AUTH_SASL,
    AUTH_SASL_CONTINUE,
    AUTH_SASL_FINAL,
    authentication,
)

from headwater.errors import SQLError

log = logging.getLogger("headwater.auth")

AUTH_TIMEOUT = 60.0  # seconds a client has to authenticate (PostgreSQL's authentication_timeout)


class Client(Protocol):
    """What the exchange needs of a connection (server/connection.py's Connection)."""

    instance: Any  # .catalog: the roles
    server: Any  # .hba: the rules in force
    reader: asyncio.StreamReader
    peer_host: str
    tls_active: bool
    tls_end_point: bytes | None  # channel binding data once TLS is up

    def send(self, data: bytes) -> None: ...

    async def flush(self) -> None: ...


def fatal(message: str, code: str) -> SQLError:
    return SQLError(message, code, severity="FATAL")


def _role_valid(role: Role | None) -> bool:
    if role is None or role.valid_until is None:
        return True
    try:
        until = datetime.fromisoformat(role.valid_until)
    except ValueError:
        return False
    return datetime.now(UTC) < until


async def authenticate(conn: Client, user: str, database: str) -> Role:
    """Run the hba rule for this connection; returns the role or raises a FATAL SQLError."""
    try:
        return await asyncio.wait_for(_authenticate(conn, user, database), AUTH_TIMEOUT)
    except TimeoutError:
        raise fatal("canceling authentication due to timeout", "08006") from None


async def _authenticate(conn: Client, user: str, database: str) -> Role:
    catalog: Catalog = conn.instance.catalog
    peer = conn.peer_host
    ssl = conn.tls_active
    rules = getattr(conn.server, "hba", None) or load_hba(None)
    rule = find_rule(rules, peer, ssl, database, user, catalog)
    enc = "SSL encryption" if ssl else "no encryption"
    if rule is None:
        raise fatal(
            f'no pg_hba.conf entry for host "{peer}", user "{user}", database "{database}", {enc}',
            "28000",
        )
    if rule.method == "reject":
        raise fatal(
            f'pg_hba.conf rejects connection for host "{peer}", user "{user}", '
            f'database "{database}", {enc}',
            "28000",
        )
    role = catalog.role(user)
    if rule.method == "trust":
        if role is None:
            raise fatal(f'role "{user}" does not exist', "28000")
    else:
        ok = await _password_exchange(conn, rule.method, user, role)
        # Reload: the role may have changed while the client was answering.
        role = conn.instance.catalog.role(user)
        if not ok or role is None or not _role_valid(role):
            log.info('password authentication failed for user "%s" from %s', user, peer)
            raise fatal(f'password authentication failed for user "{user}"', "28P01")
    if not role.login:
        raise fatal(f'role "{user}" is not permitted to log in', "28000")
    return role


async def _read_password_message(conn: Client) -> Reader:
    kind, r = await read_message(conn.reader)
    if kind != "p":
        raise fatal(f"expected password response, got message type {ord(kind)}", "08P01")
    return r


async def _password_exchange(conn: Client, method: str, user: str, role: Role | None) -> bool:
    verifier = role.password if role is not None else None
    if method == "md5" and not parse_scram(verifier):
        return await _md5_exchange(conn, user, verifier)
    if method == "password":
        conn.send(authentication(AUTH_CLEARTEXT))
        await conn.flush()
        r = await _read_password_message(conn)
        pw = r.cstr()
        if not pw:
            return False
        return check_plain_password(verifier, user, pw)
    return await _scram_exchange(conn, user, verifier)


async def _md5_exchange(conn: Client, user: str, verifier: str | None) -> bool:
    salt = secrets.token_bytes(4)
    conn.send(authentication(AUTH_MD5, salt))
    await conn.flush()
    r = await _read_password_message(conn)
    return check_md5_answer(verifier, salt, r.cstr())


async def _scram_exchange(conn: Client, user: str, verifier: str | None) -> bool:
    scram = ScramServer(verifier, user, conn.tls_end_point if conn.tls_active else None)
    conn.send(authentication(AUTH_SASL, scram.mechanisms()))
    await conn.flush()

    r = await _read_password_message(conn)  # SASLInitialResponse
    mechanism = r.cstr()
    length = r.int32()
    scram.select(mechanism)
    server_first = scram.client_first(r.bytes_(length) if length >= 0 else None)
    conn.send(authentication(AUTH_SASL_CONTINUE, server_first))
    await conn.flush()

    r = await _read_password_message(conn)  # SASLResponse
    server_final = scram.client_final(r.rest())
    if server_final is None:
        return False
    conn.send(authentication(AUTH_SASL_FINAL, server_final))
    return True
