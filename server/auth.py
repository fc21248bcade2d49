"""Authentication and authorization: roles, passwords, hba rules, privileges.

- Passwords are stored as PostgreSQL stores them: a SCRAM-SHA-256 verifier
  (`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, base64 parts) or an
  `md5` hash; a cleartext password never reaches the catalog, the log or storage.
- The server side of SCRAM-SHA-256 (RFC 5802/7677) follows PostgreSQL's
  auth-scram.c, including SCRAM-SHA-256-PLUS with tls-server-end-point channel
  binding over TLS, and mock authentication for unknown roles (the reply never
  reveals whether a role exists).
- hba rules use pg_hba.conf's syntax (host/hostssl/hostnossl, trust, reject,
  scram-sha-256, md5, password); the first matching rule decides.
- Privileges are PostgreSQL's ACLs on relations and schemas (catalog/objects.py);
  `check()` runs at the start of every statement, with a fast path for superusers.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import logging
import secrets
import stringprep
import struct
import unicodedata
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pglast.ast as A
from headwater.catalog.catalog import SYSTEM_SCHEMAS, Catalog
from headwater.catalog.objects import (
    BOOTSTRAP_ROLE_OID,
    Acl,
    Relation,
    Role,
    Schema,
    Table,
    View,
)
from headwater.server import wire
from pglast import parse_sql
from pglast.enums import (
    GrantTargetType,
    ObjectType,
    OnConflictAction,
    RoleSpecType,
    RoleStmtType,
)

from headwater.errors import (
    DependentObjects,
    DuplicateObject,
    FeatureNotSupported,
    InvalidSchemaName,
    SQLError,
    UndefinedObject,
)

log = logging.getLogger("headwater.auth")

SCRAM_ITERATIONS = 4096
SCRAM_SALT_LEN = 16
SCRAM_NONCE_LEN = 18
AUTH_TIMEOUT = 60.0  # seconds a client has to authenticate (PostgreSQL's authentication_timeout)

# Authentication request codes (the 'R' message)
AUTH_OK, AUTH_CLEARTEXT, AUTH_MD5 = 0, 3, 5
AUTH_SASL, AUTH_SASL_CONTINUE, AUTH_SASL_FINAL = 10, 11, 12

PRIV_LETTERS = {
    "select": "r",
    "insert": "a",
    "update": "w",
    "delete": "d",
    "truncate": "D",
    "references": "x",
    "trigger": "t",
    "usage": "U",
    "create": "C",
}
PRIV_NAMES = {v: k.upper() for k, v in PRIV_LETTERS.items()}
TABLE_ALL = "arwdDxt"
SCHEMA_ALL = "UC"


class PermissionDenied(SQLError):
    sqlstate = "42501"


def fatal(message: str, code: str) -> SQLError:
    return SQLError(message, code, severity="FATAL")


# ---------------------------------------------------------------------------------
# Password verifiers
# ---------------------------------------------------------------------------------
def saslprep(password: str) -> str:
    """RFC 4013 SASLprep as PostgreSQL applies it; on failure the password is used raw."""
    if password.isascii():
        return password
    chars = []
    for ch in password:
        if stringprep.in_table_b1(ch):
            continue
        chars.append(" " if stringprep.in_table_c12(ch) else ch)
    out = unicodedata.normalize("NFKC", "".join(chars))
    if not out:
        return password
    prohibited = (
        stringprep.in_table_c12,
        stringprep.in_table_c21,
        stringprep.in_table_c22,
        stringprep.in_table_c3,
        stringprep.in_table_c4,
        stringprep.in_table_c5,
        stringprep.in_table_c6,
        stringprep.in_table_c7,
        stringprep.in_table_c8,
        stringprep.in_table_c9,
        stringprep.in_table_a1,
    )
    for ch in out:
        if any(p(ch) for p in prohibited):
            return password
    if any(stringprep.in_table_d1(ch) for ch in out):
        if any(stringprep.in_table_d2(ch) for ch in out):
            return password
        if not (stringprep.in_table_d1(out[0]) and stringprep.in_table_d1(out[-1])):
            return password
    return out


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _salted(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", saslprep(password).encode("utf-8"), salt, iterations)


def scram_verifier(
    password: str, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS
) -> str:
    salt = salt if salt is not None else secrets.token_bytes(SCRAM_SALT_LEN)
    salted = _salted(password, salt, iterations)
    stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    server = _hmac(salted, b"Server Key")
    return f"SCRAM-SHA-256${iterations}:{_b64(salt)}${_b64(stored)}:{_b64(server)}"


@dataclass(frozen=True)
class ScramSecret:
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes


def parse_scram(verifier: str | None) -> ScramSecret | None:
    if not verifier or not verifier.startswith("SCRAM-SHA-256$"):
        return None
    try:
        _, rest = verifier.split("$", 1)
        head, keys = rest.split("$", 1)
        iters, salt = head.split(":", 1)
        stored, server = keys.split(":", 1)
        sec = ScramSecret(
            int(iters),
            base64.b64decode(salt, validate=True),
            base64.b64decode(stored, validate=True),
            base64.b64decode(server, validate=True),
        )
    except (ValueError, TypeError):
        return None
    if sec.iterations <= 0 or len(sec.stored_key) != 32 or len(sec.server_key) != 32:
        return None
    return sec


def is_md5(verifier: str | None) -> bool:
    return (
        verifier is not None
        and len(verifier) == 35
        and verifier.startswith("md5")
        and all(c in "0123456789abcdef" for c in verifier[3:])
    )


def encrypt_password(password: str, role: str = "", method: str = "scram-sha-256") -> str:
    """What CREATE/ALTER ROLE ... PASSWORD stores, per password_encryption."""
    if parse_scram(password) is not None or is_md5(password):
        return password  # already hashed by the client (psql's \\password, pg_dump)
    if method == "md5":
        return "md5" + hashlib.md5((password + role).encode("utf-8")).hexdigest()
    return scram_verifier(password)


def check_plain_password(verifier: str | None, user: str, password: str) -> bool:
    sec = parse_scram(verifier)
    if sec is not None:
        salted = _salted(password, sec.salt, sec.iterations)
        stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
        return hmac.compare_digest(stored, sec.stored_key)
    if is_md5(verifier):
        assert verifier is not None
        digest = "md5" + hashlib.md5((password + user).encode("utf-8")).hexdigest()
        return hmac.compare_digest(digest, verifier)
    return False


# ---------------------------------------------------------------------------------
# hba rules
# ---------------------------------------------------------------------------------
METHODS = ("trust", "reject", "scram-sha-256", "md5", "password")
CONN_TYPES = ("host", "hostssl", "hostnossl", "hostgssenc", "hostnogssenc")


@dataclass(frozen=True)
class HbaRule:
    conntype: str
    databases: tuple[str, ...]
    users: tuple[str, ...]
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None  # None: all
    method: str
    line: int = 0
    source: str = "default"

    def matches(
        self,
        addr: ipaddress.IPv4Address | ipaddress.IPv6Address,
        ssl: bool,
        database: str,
        user: str,
        catalog: Catalog,
    ) -> bool:
        if self.conntype == "hostssl" and not ssl:
            return False
        if self.conntype == "hostnossl" and ssl:
            return False
        if self.conntype == "hostgssenc":
            return False
        if self.network is not None:
            if addr.version != self.network.version or addr not in self.network:
                return False
        return _match_db(self.databases, database, user, catalog) and _match_user(
            self.users, user, catalog
        )


def _match_db(names: tuple[str, ...], database: str, user: str, catalog: Catalog) -> bool:
    for n in names:
        if n == "all" or n == database:
            return True
        if n == "sameuser" and database == user:
            return True
        if n in ("samerole", "samegroup"):
            role, group = catalog.role(user), catalog.role(database)
            if role and group and group.oid in memberships(catalog, role.oid, inherit_only=False):
                return True
    return False


def _match_user(names: tuple[str, ...], user: str, catalog: Catalog) -> bool:
    for n in names:
        if n == "all" or n == user:
            return True
        if n.startswith("+"):
            role, group = catalog.role(user), catalog.role(n[1:])
            if role and group and group.oid in memberships(catalog, role.oid, inherit_only=False):
                return True
    return False


def _split_tokens(line: str) -> list[str]:
    """pg_hba.conf fields: whitespace-separated, "quoted" allowed, # starts a comment."""
    out: list[str] = []
    cur = ""
    quoted = False
    in_token = False
    for ch in line:
        if ch == '"':
            quoted = not quoted
            in_token = True
            continue
        if not quoted and ch == "#":
            break
        if not quoted and ch.isspace():
            if in_token:
                out.append(cur)
                cur, in_token = "", False
            continue
        cur += ch
        in_token = True
    if quoted:
        raise ValueError("unterminated quoted string")
    if in_token:
        out.append(cur)
    return out


def _network(addr: str, mask: str | None) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    if addr == "all":
        return None
    if addr in ("samehost", "samenet") or not any(c.isdigit() or c == ":" for c in addr[:1]):
        raise ValueError(f'address "{addr}" is not supported (use an IP address with a mask)')
    if "/" in addr:
        return ipaddress.ip_network(addr, strict=False)
    if mask is None:
        raise ValueError(f'address "{addr}" needs a CIDR mask or a mask column')
    ip = ipaddress.ip_address(addr)
    m = ipaddress.ip_address(mask)
    bits = bin(int(m)).count("1")
    return ipaddress.ip_network(f"{ip}/{bits}", strict=False)


def parse_hba(text: str, source: str = "hba") -> list[HbaRule]:
    rules: list[HbaRule] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        try:
            toks = _split_tokens(raw)
            if not toks:
                continue
            conntype = toks[0]
            if conntype == "local":
                continue  # no Unix-domain sockets here
            if conntype not in CONN_TYPES:
                raise ValueError(f'invalid connection type "{conntype}"')
            if len(toks) < 5:
                raise ValueError("end-of-line before authentication method")
            dbs, users, addr = toks[1], toks[2], toks[3]
            rest = toks[4:]
            mask = None
            if "/" not in addr and addr != "all" and rest and rest[0] not in METHODS:
                mask, rest = rest[0], rest[1:]
            if not rest:
                raise ValueError("end-of-line before authentication method")
            method = rest[0]
            if method not in METHODS:
                raise ValueError(f'invalid authentication method "{method}"')
            rules.append(
                HbaRule(
                    conntype,
                    tuple(dbs.split(",")),
                    tuple(users.split(",")),
                    _network(addr, mask),
                    method,
                    lineno,
                    source,
                )
            )
        except ValueError as e:
            raise ValueError(f"{source}, line {lineno}: {e}") from None
    return rules


DEFAULT_HBA = """\
# Headwater's default rules: trust on loopback, SCRAM-SHA-256 everywhere else.
host all all 127.0.0.1/32 trust
host all all ::1/128      trust
host all all 0.0.0.0/0    scram-sha-256
host all all ::/0         scram-sha-256
"""


def load_hba(path: Path | None) -> list[HbaRule]:
    if path is None:
        return parse_hba(DEFAULT_HBA, "default rules")
    return parse_hba(Path(path).read_text(), str(path))


def find_rule(
    rules: list[HbaRule], peer: str, ssl: bool, database: str, user: str, catalog: Catalog
) -> HbaRule | None:
    addr = ipaddress.ip_address(peer.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    for rule in rules:
        if rule.matches(addr, ssl, database, user, catalog):
            return rule
    return None


# ---------------------------------------------------------------------------------
# The authentication exchange (startup)
# ---------------------------------------------------------------------------------
def _auth_request(code: int, data: bytes = b"") -> bytes:
    return wire.msg(b"R", struct.pack("!i", code) + data)


class _Mock:
    """A per-server secret for mock salts: an unknown role gets a stable fake salt."""

    secret = secrets.token_bytes(32)


def _mock_salt(user: str) -> bytes:
    return hashlib.sha256(_Mock.secret + user.encode("utf-8")).digest()[:SCRAM_SALT_LEN]


def _role_valid(role: Role | None) -> bool:
    if role is None or role.valid_until is None:
        return True
    try:
        until = datetime.fromisoformat(role.valid_until)
    except ValueError:
        return False
    return datetime.now(UTC) < until


async def authenticate(conn: Any, user: str, database: str) -> Role:
    """Run the hba rule for this connection; returns the role or raises a FATAL SQLError."""
    try:
        return await asyncio.wait_for(_authenticate(conn, user, database), AUTH_TIMEOUT)
    except TimeoutError:
        raise fatal("canceling authentication due to timeout", "08006") from None


async def _authenticate(conn: Any, user: str, database: str) -> Role:
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


async def _read_password_message(conn: Any) -> wire.Reader:
    kind, r = await wire.read_message(conn.reader)
    if kind != "p":
        raise fatal(f"expected password response, got message type {ord(kind)}", "08P01")
    return r


async def _password_exchange(conn: Any, method: str, user: str, role: Role | None) -> bool:
    verifier = role.password if role is not None else None
    if method == "md5" and not parse_scram(verifier):
        return await _md5_exchange(conn, user, verifier)
    if method == "password":
        conn.send(_auth_request(AUTH_CLEARTEXT))
        await conn.flush()
        r = await _read_password_message(conn)
        pw = r.cstr()
        if not pw:
            return False
        return check_plain_password(verifier, user, pw)
    return await _scram_exchange(conn, user, verifier)


async def _md5_exchange(conn: Any, user: str, verifier: str | None) -> bool:
    salt = secrets.token_bytes(4)
    conn.send(_auth_request(AUTH_MD5, salt))
    await conn.flush()
    r = await _read_password_message(conn)
    answer = r.cstr()
    if not is_md5(verifier):
        return False
    assert verifier is not None
    expected = "md5" + hashlib.md5(verifier[3:].encode("ascii") + salt).hexdigest()
    return hmac.compare_digest(expected, answer)


def _scram_error(detail: str) -> SQLError:
    return SQLError("malformed SCRAM message", "08P01", detail=detail, severity="FATAL")


def _attrs(msg: str) -> list[tuple[str, str]]:
    out = []
    for part in msg.split(","):
        if len(part) < 2 or part[1] != "=":
            raise _scram_error(f'Expected attribute "=" in "{part}".')
        out.append((part[0], part[2:]))
    return out


async def _scram_exchange(conn: Any, user: str, verifier: str | None) -> bool:
    sec = parse_scram(verifier)
    mock = sec is None
    if sec is None:
        sec = ScramSecret(SCRAM_ITERATIONS, _mock_salt(user), b"\0" * 32, b"\0" * 32)
    cbind_hash: bytes | None = conn.tls_end_point if conn.tls_active else None
    mechs = b""
    if cbind_hash is not None:
        mechs += b"SCRAM-SHA-256-PLUS\0"
    mechs += b"SCRAM-SHA-256\0\0"
    conn.send(_auth_request(AUTH_SASL, mechs))
    await conn.flush()

    r = await _read_password_message(conn)
    mechanism = r.cstr()
    length = r.int32()
    if mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-256-PLUS") or (
        mechanism == "SCRAM-SHA-256-PLUS" and cbind_hash is None
    ):
        raise fatal("client selected an invalid SASL authentication mechanism", "08P01")
    if length < 0:
        raise _scram_error("The client sent no initial response.")
    try:
        first = r.bytes_(length).decode("utf-8")
    except UnicodeDecodeError:
        raise _scram_error("The message is not valid UTF-8.") from None
    # gs2-header: cbind-flag "," [authzid] ","
    parts = first.split(",", 2)
    if len(parts) != 3:
        raise _scram_error("Malformed client-first-message.")
    flag, authzid, bare = parts
    if authzid:
        raise _scram_error("client uses authorization identity, but it is not supported")
    gs2_header = f"{flag},{authzid},"
    if mechanism == "SCRAM-SHA-256-PLUS":
        if flag != "p=tls-server-end-point":
            raise _scram_error("The client selected SCRAM-SHA-256-PLUS without channel binding.")
        cbind_data = cbind_hash or b""
    else:
        if flag == "y" and cbind_hash is not None:
            raise fatal(
                "SCRAM channel binding negotiation error: the client supports channel binding "
                "but thinks the server does not; this server does support it",
                "28000",
            )
        if flag not in ("n", "y"):
            raise _scram_error("The client selected SCRAM-SHA-256 with channel binding data.")
        cbind_data = b""
    attrs = _attrs(bare)
    if not attrs or attrs[0][0] == "m":
        raise _scram_error("Mandatory extensions are not supported.")
    if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
        raise _scram_error("Malformed client-first-message.")
    client_nonce = attrs[1][1]
    if not client_nonce or any(not (0x21 <= ord(c) <= 0x7E) or c == "," for c in client_nonce):
        raise _scram_error("The client nonce contains invalid characters.")
    nonce = client_nonce + _b64(secrets.token_bytes(SCRAM_NONCE_LEN))
    server_first = f"r={nonce},s={_b64(sec.salt)},i={sec.iterations}"
    conn.send(_auth_request(AUTH_SASL_CONTINUE, server_first.encode("ascii")))
    await conn.flush()

    r = await _read_password_message(conn)
    try:
        final = r.rest().decode("utf-8")
    except UnicodeDecodeError:
        raise _scram_error("The message is not valid UTF-8.") from None
    idx = final.rfind(",p=")
    if idx < 0:
        raise _scram_error("Malformed client-final-message: no proof.")
    without_proof = final[:idx]
    fattrs = _attrs(final)
    if len(fattrs) < 3 or fattrs[0][0] != "c" or fattrs[1][0] != "r" or fattrs[-1][0] != "p":
        raise _scram_error("Malformed client-final-message.")
    expected_c = _b64(gs2_header.encode("utf-8") + cbind_data)
    if fattrs[0][1] != expected_c:
        raise fatal("SCRAM channel binding check failed", "28000")
    if fattrs[1][1] != nonce:
        raise _scram_error("Nonce does not match.")
    try:
        proof = base64.b64decode(fattrs[-1][1], validate=True)
    except ValueError:
        raise _scram_error("Malformed proof in client-final-message.") from None
    if len(proof) != 32:
        raise _scram_error("Malformed proof in client-final-message.")
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    client_signature = _hmac(sec.stored_key, auth_message)
    client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
    if mock or not hmac.compare_digest(hashlib.sha256(client_key).digest(), sec.stored_key):
        return False
    server_signature = _hmac(sec.server_key, auth_message)
    conn.send(_auth_request(AUTH_SASL_FINAL, f"v={_b64(server_signature)}".encode("ascii")))
    return True


# ---------------------------------------------------------------------------------
# Memberships and privilege checks
# ---------------------------------------------------------------------------------
def memberships(catalog: Catalog, oid: int, inherit_only: bool = True) -> set[int]:
    """The role, every role it is a member of (through INHERIT roles), and PUBLIC (0)."""
    out = {0, oid}
    stack = [oid]
    roles = catalog.roles
    while stack:
        r = roles.get(stack.pop())
        if r is None or (inherit_only and not r.inherit):
            continue
        for m in r.member_of:
            if m not in out:
                out.add(m)
                stack.append(m)
    return out


def _owner(obj: Relation | Schema) -> int:
    return obj.owner or BOOTSTRAP_ROLE_OID


def has_priv(obj: Relation | Schema, letter: str, roles: set[int]) -> bool:
    if _owner(obj) in roles:
        return True
    return any(g in roles and letter in p for g, p in obj.acl)


def is_superuser(catalog: Catalog, oid: int) -> bool:
    r = catalog.roles.get(oid)
    return r is not None and r.superuser


def has_privilege(catalog: Catalog, role_oid: int, obj: Relation | Schema, privs: str) -> bool:
    """has_table_privilege / has_schema_privilege: privs are names ('SELECT, INSERT')
    or letters; true if the role holds any of them (PostgreSQL's semantics)."""
    if is_superuser(catalog, role_oid):
        return True
    letters = ""
    for p in privs.split(","):
        p = p.strip().lower().removesuffix(" with grant option")
        letters += PRIV_LETTERS.get(p, p if len(p) == 1 else "")
    roles = memberships(catalog, role_oid)
    return any(has_priv(obj, letter, roles) for letter in letters)


def acl_items(catalog: Catalog, obj: Relation | Schema) -> list[str] | None:
    """PostgreSQL's aclitem[] text for relacl / nspacl (None: the default, NULL)."""
    if not obj.acl:
        return None

    def name(oid: int) -> str:
        r = catalog.roles.get(oid)
        return "" if oid == 0 else (r.name if r is not None else str(oid))

    owner = name(_owner(obj))
    order = TABLE_ALL if isinstance(obj, Relation) else SCHEMA_ALL
    items = [f"{owner}={order}/{owner}"]
    for grantee, letters in obj.acl:
        shown = "".join(c for c in order if c in letters)
        items.append(f"{name(grantee)}={shown}/{owner}")
    return items


SUPERUSER_ONLY = ("pg_authid", "pg_shadow")

_VIEW_REFS: dict[tuple[int, str], list[tuple[str | None, str]]] = {}


def _range_vars(node: Any, ctes: frozenset[str], out: list[Any], skip: Any = None) -> None:
    """Every RangeVar that names a relation (not a CTE), as planner/relations.py binds."""
    if isinstance(node, tuple | list):
        for n in node:
            _range_vars(n, ctes, out, skip)
        return
    if not isinstance(node, A.Node):
        return
    if isinstance(node, A.RangeVar):
        if node is not skip and not (node.schemaname is None and node.relname in ctes):
            out.append(node)
        return
    wc = getattr(node, "withClause", None)
    if isinstance(wc, A.WithClause) and wc.ctes:
        ctes = ctes | {c.ctename for c in wc.ctes}
    for attr in node:
        _range_vars(getattr(node, attr), ctes, out, skip)


def _view_refs(view: View) -> list[tuple[str | None, str]]:
    key = (view.oid, view.definition)
    refs = _VIEW_REFS.get(key)
    if refs is None:
        found: list[Any] = []
        try:
            _range_vars(parse_sql(view.definition)[0].stmt, frozenset(), found)
        except Exception:
            found = []
        refs = [(rv.schemaname, rv.relname) for rv in found]
        if len(_VIEW_REFS) > 4096:
            _VIEW_REFS.clear()
        _VIEW_REFS[key] = refs
    return refs


class Checker:
    """Privilege checks for one statement by one (non-superuser) role."""

    def __init__(self, catalog: Catalog, role_oid: int, search_path: tuple[str, ...]) -> None:
        self.cat = catalog
        self.role_oid = role_oid
        self.search_path = search_path
        self._roles: dict[int, set[int]] = {}

    def roles_of(self, oid: int) -> set[int]:
        got = self._roles.get(oid)
        if got is None:
            got = self._roles[oid] = memberships(self.cat, oid)
        return got

    def superuser(self, oid: int) -> bool:
        return is_superuser(self.cat, oid)

    # -- building blocks ------------------------------------------------------------
    def schema_usage(self, name: str, as_role: int) -> None:
        schema = self.cat.schemas.get(name)
        if schema is None or self.superuser(as_role):
            return
        if not has_priv(schema, "U", self.roles_of(as_role)):
            raise PermissionDenied(f"permission denied for schema {name}")

    def relation(
        self, schema: str | None, name: str, letters: str, as_role: int, depth: int = 0
    ) -> Relation | None:
        rel = None if schema in SYSTEM_SCHEMAS else self.cat.resolve(schema, name, self.search_path)
        if rel is None:
            # a system relation, or missing (binding reports it); password verifiers
            # are for superusers only, as in PostgreSQL
            if name in SUPERUSER_ONLY and schema in (None, "pg_catalog"):
                if not self.superuser(as_role):
                    raise PermissionDenied(f"permission denied for table {name}")
            return None
        if self.superuser(as_role):
            return rel
        self.schema_usage(rel.schema, as_role)
        roles = self.roles_of(as_role)
        for letter in letters:
            if not has_priv(rel, letter, roles):
                raise PermissionDenied(f"permission denied for {rel.kind} {rel.name}")
        if isinstance(rel, View) and "r" in letters and depth < 32:
            # A view reads its relations with its owner's privileges, as in PostgreSQL.
            for s, n in _view_refs(rel):
                self.relation(s, n, "r", _owner(rel), depth + 1)
        return rel

    def reads(self, node: Any, skip: Any = None) -> None:
        found: list[Any] = []
        _range_vars(node, frozenset(), found, skip)
        for rv in found:
            self.relation(rv.schemaname, rv.relname, "r", self.role_oid)

    def create_in(self, schema: str | None) -> None:
        try:
            name = self.cat.creation_schema(schema, self.search_path)
        except SQLError:
            return  # executing the statement reports it
        s = self.cat.schemas[name]
        if not has_priv(s, "C", self.roles_of(self.role_oid)):
            raise PermissionDenied(f"permission denied for schema {name}")

    def owns(self, obj: Relation | Schema) -> bool:
        return self.superuser(self.role_oid) or _owner(obj) in self.roles_of(self.role_oid)

    def must_own(self, obj: Relation | Schema) -> None:
        if self.owns(obj):
            return
        if isinstance(obj, Relation):
            # The owner of the schema may drop what is in it.
            schema = self.cat.schemas.get(obj.schema)
            if schema is not None and self.owns(schema):
                return
            raise PermissionDenied(f"must be owner of {obj.kind} {obj.name}")
        raise PermissionDenied(f"must be owner of schema {obj.name}")

    # -- statements -----------------------------------------------------------------
    def statement(self, stmt: Any) -> None:
        if isinstance(stmt, A.SelectStmt):
            self.reads(stmt)
        elif isinstance(stmt, A.InsertStmt):
            letters = "a"
            oc = stmt.onConflictClause
            if oc is not None and oc.action == OnConflictAction.ONCONFLICT_UPDATE:
                letters += "wr"
            if _returning(stmt):
                letters += "r"
            self.target(stmt.relation, letters)
            self.reads(stmt, skip=stmt.relation)
        elif isinstance(stmt, A.UpdateStmt):
            reads = stmt.whereClause is not None or _returning(stmt)
            reads = reads or _has_column_ref(tuple(t.val for t in stmt.targetList or ()))
            self.target(stmt.relation, "w" + ("r" if reads else ""))
            self.reads(stmt, skip=stmt.relation)
        elif isinstance(stmt, A.DeleteStmt):
            reads = stmt.whereClause is not None or _returning(stmt)
            self.target(stmt.relation, "d" + ("r" if reads else ""))
            self.reads(stmt, skip=stmt.relation)
        elif isinstance(stmt, A.TruncateStmt):
            for rv in stmt.relations:
                self.target(rv, "D")
        elif isinstance(stmt, A.CreateStmt):
            self.create_in(stmt.relation.schemaname)
        elif isinstance(stmt, A.ViewStmt):
            self.create_in(stmt.view.schemaname)
            existing = self.cat.resolve(stmt.view.schemaname, stmt.view.relname, self.search_path)
            if existing is not None and stmt.replace:
                self.must_own(existing)
        elif isinstance(stmt, A.CreateTableAsStmt):
            self.create_in(stmt.into.rel.schemaname)
            self.reads(stmt.query)
        elif isinstance(stmt, A.IndexStmt):
            rel = self.cat.resolve(
                stmt.relation.schemaname, stmt.relation.relname, self.search_path
            )
            if rel is not None:
                self.schema_usage(rel.schema, self.role_oid)
                self.must_own(rel)
        elif isinstance(stmt, A.CreateSchemaStmt):
            raise PermissionDenied("permission denied for database headwater")
        elif isinstance(stmt, A.DropStmt):
            self.drop(stmt)
        elif isinstance(stmt, PASS_THROUGH):
            return
        else:
            self.reads(stmt)  # anything else may not read what the role may not

    def target(self, rv: A.RangeVar, letters: str) -> None:
        self.relation(rv.schemaname, rv.relname, letters, self.role_oid)

    def drop(self, stmt: A.DropStmt) -> None:
        if stmt.removeType == ObjectType.OBJECT_SCHEMA:
            for obj in stmt.objects:
                s = self.cat.schemas.get(obj.sval)
                if s is not None:
                    self.must_own(s)
            return
        for obj in stmt.objects:
            if not isinstance(obj, tuple | list):
                continue
            names = [n.sval for n in obj if isinstance(n, A.String)]
            if not names:
                continue
            schema, name = (names[-2], names[-1]) if len(names) > 1 else (None, names[-1])
            rel = self.cat.resolve(schema, name, self.search_path)
            if rel is not None:
                self.schema_usage(rel.schema, self.role_oid)
                self.must_own(rel)


def _returning(stmt: Any) -> bool:
    rc = getattr(stmt, "returningClause", None)
    return rc is not None and bool(rc.exprs)


def _has_column_ref(node: Any) -> bool:
    if isinstance(node, tuple | list):
        return any(_has_column_ref(n) for n in node)
    if isinstance(node, A.ColumnRef):
        return True
    if isinstance(node, A.Node):
        return any(_has_column_ref(getattr(node, a)) for a in node)
    return False


ROLE_STMTS = (
    A.CreateRoleStmt,
    A.AlterRoleStmt,
    A.DropRoleStmt,
    A.GrantStmt,
    A.GrantRoleStmt,
)
PASS_THROUGH = ROLE_STMTS + (
    A.TransactionStmt,
    A.VariableSetStmt,
    A.VariableShowStmt,
    A.DiscardStmt,
    A.CopyStmt,  # checked by check_copy_in / as the SELECT it becomes
)


def check(session: Any, stmt: Any) -> None:
    """Raise 42501 unless the session's role may run `stmt`. Superusers: two lookups."""
    cat = session.catalog
    role = cat.roles.get(session.role_oid)
    if role is not None and role.superuser:
        return
    Checker(cat, session.role_oid, session.search_path()).statement(stmt)


def check_copy_in(session: Any, rv: A.RangeVar) -> None:
    cat = session.catalog
    if is_superuser(cat, session.role_oid):
        return
    Checker(cat, session.role_oid, session.search_path()).target(rv, "a")


def check_owner(session: Any, rel: Relation) -> None:
    cat = session.catalog
    if is_superuser(cat, session.role_oid):
        return
    Checker(cat, session.role_oid, session.search_path()).must_own(rel)


# ---------------------------------------------------------------------------------
# Role and privilege statements (run inside the writing transaction, like DDL)
# ---------------------------------------------------------------------------------
def _role_name(spec: A.RoleSpec, session: Any, catalog: Catalog) -> str:
    t = spec.roletype
    if t == RoleSpecType.ROLESPEC_CSTRING:
        return spec.rolename
    if t in (
        RoleSpecType.ROLESPEC_CURRENT_USER,
        RoleSpecType.ROLESPEC_SESSION_USER,
        RoleSpecType.ROLESPEC_CURRENT_ROLE,
    ):
        r = catalog.roles.get(session.role_oid)
        return r.name if r is not None else session.user
    raise SQLError('role "public" does not exist', "42704")


def _lookup_role(catalog: Catalog, name: str) -> Role:
    r = catalog.role(name)
    if r is None:
        raise UndefinedObject(f'role "{name}" does not exist')
    return r


def _parse_valid_until(value: str) -> str | None:
    v = value.strip()
    if v.lower() == "infinity":
        return None
    try:
        ts = datetime.fromisoformat(v.replace(" ", "T", 1) if " " in v[:11] else v)
    except ValueError:
        raise SQLError(
            f'invalid input syntax for type timestamp with time zone: "{value}"', "22007"
        ) from None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.isoformat()


_ROLE_FLAGS = {
    "canlogin": "login",
    "superuser": "superuser",
    "createrole": "createrole",
    "createdb": "createdb",
    "inherit": "inherit",
}
_IGNORED_OPTIONS = ("connectionlimit", "isreplication", "bypassrls", "sysid")


def _role_options(
    options: Any, role: str, encryption: str, notices: list[str]
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Changes to a role from CREATE/ALTER ROLE options; (fields, IN ROLE, ROLE members)."""
    fields: dict[str, Any] = {}
    in_roles: list[str] = []
    members: list[str] = []
    seen: set[str] = set()
    for opt in options or ():
        name = opt.defname
        if name in seen:
            raise SQLError("conflicting or redundant options", "42601")
        seen.add(name)
        if name in _ROLE_FLAGS:
            fields[_ROLE_FLAGS[name]] = bool(opt.arg.boolval)
        elif name == "password":
            if opt.arg is None:
                fields["password"] = None
            else:
                pw = _string_option(opt, "PASSWORD")
                if pw == "":
                    notices.append("empty string is not a valid password, clearing password")
                    fields["password"] = None
                else:
                    fields["password"] = encrypt_password(pw, role, encryption)
        elif name == "validUntil":
            fields["valid_until"] = _parse_valid_until(_string_option(opt, "VALID UNTIL"))
        elif name == "addroleto":
            in_roles = [r.rolename for r in opt.arg]
        elif name in ("rolemembers", "adminmembers"):
            members += [r.rolename for r in opt.arg]
        elif name in _IGNORED_OPTIONS:
            continue
        else:
            raise FeatureNotSupported(f"role option {name} is not supported")
    return fields, in_roles, members


def _string_option(opt: A.DefElem, what: str) -> str:
    if not isinstance(opt.arg, A.String):
        raise SQLError(f"{what} takes a string constant", "42601")
    return str(opt.arg.sval)


def _check_role_name(name: str) -> None:
    if name == "public" or name == "none":
        raise SQLError(f'role name "{name}" is reserved', "42939")
    if name.startswith("pg_"):
        raise SQLError(
            f'role name "{name}" is reserved',
            "42939",
            detail='Role names starting with "pg_" are reserved.',
        )


def _would_cycle(catalog: Catalog, member: Role, group: Role) -> bool:
    """Granting `group` to `member` makes a cycle if group is (or is in) member."""
    return member.oid in memberships(catalog, group.oid, inherit_only=False)


def _add_membership(catalog: Catalog, member: Role, group: Role, notices: list[str]) -> None:
    member = catalog.roles[member.oid]
    if group.oid in member.member_of:
        notices.append(f'role "{member.name}" is already a member of role "{group.name}"')
        return
    if member.oid == group.oid:
        raise SQLError(f'role "{group.name}" cannot be a member of itself', "0LP01")
    if _would_cycle(catalog, member, group):
        raise SQLError(f'role "{group.name}" is a member of role "{member.name}"', "0LP01")
    catalog.put_role(replace(member, member_of=member.member_of + (group.oid,)))


def execute(executor: Any, w: Any, stmt: Any) -> Any:
    """CREATE/ALTER/DROP ROLE, GRANT/REVOKE: catalog writes in the transaction `w`."""
    from headwater.server.executor import Result

    s = executor.s
    cat: Catalog = w.catalog
    me = cat.roles.get(s.role_oid)
    superuser = me is not None and me.superuser
    createrole = superuser or (me is not None and me.createrole)
    notices: list[str] = []
    encryption = s.settings.values.get("password_encryption", "scram-sha-256")

    if isinstance(stmt, A.CreateRoleStmt):
        name = stmt.role
        if not createrole:
            raise PermissionDenied("permission denied to create role")
        _check_role_name(name)
        if cat.role(name) is not None:
            raise DuplicateObject(f'role "{name}" already exists')
        fields, in_roles, members = _role_options(stmt.options, name, encryption, notices)
        if fields.get("superuser") and not superuser:
            raise PermissionDenied("must be superuser to create superusers")
        login = stmt.stmt_type == RoleStmtType.ROLESTMT_USER
        role = Role(cat.allocate_oid(), name, **{"login": login, **fields})
        cat.put_role(role)
        for g in in_roles:
            _add_membership(cat, role, _lookup_role(cat, g), notices)
        for m in members:
            _add_membership(cat, _lookup_role(cat, m), role, notices)
        return Result("CREATE ROLE", notices=notices)

    if isinstance(stmt, A.AlterRoleStmt):
        name = _role_name(stmt.role, s, cat)
        role = _lookup_role(cat, name)
        fields, in_roles, members = _role_options(stmt.options, name, encryption, notices)
        if in_roles or members:
            raise FeatureNotSupported("use GRANT and REVOKE to change role memberships")
        if not superuser:
            if role.superuser or "superuser" in fields:
                raise PermissionDenied(
                    "must be superuser to alter superuser roles or change superuser attribute"
                )
            own_password = role.oid == s.role_oid and set(fields) <= {"password"}
            if not createrole and not own_password:
                raise PermissionDenied("permission denied")
        if role.oid == BOOTSTRAP_ROLE_OID and fields.get("superuser") is False:
            raise PermissionDenied(
                "permission denied to alter role",
                detail="The bootstrap user must have the SUPERUSER attribute.",
            )
        cat.put_role(replace(role, **fields))
        return Result("ALTER ROLE", notices=notices)

    if isinstance(stmt, A.DropRoleStmt):
        if not createrole:
            raise PermissionDenied("permission denied to drop role")
        for spec in stmt.roles:
            name = _role_name(spec, s, cat)
            role = cat.role(name)
            if role is None:
                if stmt.missing_ok:
                    notices.append(f'role "{name}" does not exist, skipping')
                    continue
                raise UndefinedObject(f'role "{name}" does not exist')
            if role.oid == s.role_oid:
                raise SQLError("current user cannot be dropped", "55006")
            if role.oid == BOOTSTRAP_ROLE_OID:
                raise DependentObjects(
                    f"cannot drop role {name} because it is required by the database system"
                )
            if role.superuser and not superuser:
                raise PermissionDenied("must be superuser to drop superusers")
            _check_no_dependents(cat, role)
            for other in list(cat.roles.values()):
                if role.oid in other.member_of:
                    cat.put_role(
                        replace(other, member_of=tuple(m for m in other.member_of if m != role.oid))
                    )
            cat.drop_role(role)
        return Result("DROP ROLE", notices=notices)

    if isinstance(stmt, A.GrantRoleStmt):
        if stmt.opt:
            raise FeatureNotSupported("WITH ADMIN OPTION is not supported")
        for ap in stmt.granted_roles:
            group = _lookup_role(cat, ap.priv_name)
            if not createrole or (group.superuser and not superuser):
                raise PermissionDenied(f'must have admin option on role "{group.name}"')
            for spec in stmt.grantee_roles:
                member = _lookup_role(cat, _role_name(spec, s, cat))
                if stmt.is_grant:
                    _add_membership(cat, member, group, notices)
                else:
                    member = cat.roles[member.oid]
                    if group.oid not in member.member_of:
                        notices.append(
                            f'role "{member.name}" has not been granted membership in role '
                            f'"{group.name}" by role "{me.name if me else s.user}"'
                        )
                        continue
                    cat.put_role(
                        replace(
                            member, member_of=tuple(m for m in member.member_of if m != group.oid)
                        )
                    )
        return Result("GRANT ROLE" if stmt.is_grant else "REVOKE ROLE", notices=notices)

    if isinstance(stmt, A.GrantStmt):
        return _grant(executor, cat, stmt, notices)
    raise FeatureNotSupported(f"{type(stmt).__name__} is not supported")


def _check_no_dependents(cat: Catalog, role: Role) -> None:
    lines = []
    for sch in cat.schemas.values():
        if _owner(sch) == role.oid:
            lines.append(f"owner of schema {sch.name}")
        if any(g == role.oid for g, _ in sch.acl):
            lines.append(f"privileges for schema {sch.name}")
    for rel in cat.relations.values():
        if _owner(rel) == role.oid and rel.kind != "index":
            lines.append(
                f"owner of {rel.kind} {rel.qualified if rel.schema != 'public' else rel.name}"
            )
        if any(g == role.oid for g, _ in rel.acl):
            lines.append(f"privileges for {rel.kind} {rel.name}")
    if lines:
        raise DependentObjects(
            f'role "{role.name}" cannot be dropped because some objects depend on it',
            detail="\n".join(lines),
        )


def _privileges(stmt: A.GrantStmt, all_letters: str, kind: str) -> str:
    if not stmt.privileges:
        return all_letters
    out = ""
    for ap in stmt.privileges:
        if ap.cols:
            raise FeatureNotSupported("column privileges are not supported")
        letter = PRIV_LETTERS.get(ap.priv_name)
        if letter is None or letter not in all_letters:
            raise SQLError(f"invalid privilege type {ap.priv_name.upper()} for {kind}", "0LP01")
        out += letter
    return out


def _merge(acl: Acl, grantee: int, letters: str, grant: bool) -> Acl:
    entries = dict(acl)
    have = entries.get(grantee, "")
    if grant:
        new = have + "".join(c for c in letters if c not in have)
    else:
        new = "".join(c for c in have if c not in letters)
    if new:
        entries[grantee] = new
    else:
        entries.pop(grantee, None)
    return tuple(sorted(entries.items()))


def _grant(executor: Any, cat: Catalog, stmt: A.GrantStmt, notices: list[str]) -> Any:
    from headwater.server.executor import Result

    s = executor.s
    tag = "GRANT" if stmt.is_grant else "REVOKE"
    if stmt.grant_option:
        raise FeatureNotSupported("WITH GRANT OPTION is not supported")
    grantees: list[int] = []
    for spec in stmt.grantees:
        if spec.roletype == RoleSpecType.ROLESPEC_PUBLIC:
            grantees.append(0)
        else:
            grantees.append(_lookup_role(cat, _role_name(spec, s, cat)).oid)
    checker = Checker(cat, s.role_oid, s.search_path())

    if stmt.objtype == ObjectType.OBJECT_DATABASE:
        letters = _privileges(stmt, "CcT", "database") if stmt.privileges else "cT"
        for obj in stmt.objects:
            if obj.sval != "headwater":
                raise SQLError(f'database "{obj.sval}" does not exist', "3D000")
        if "C" in letters:
            raise FeatureNotSupported(
                "CREATE ON DATABASE is not supported: superusers create schemas"
            )
        return Result(tag)  # CONNECT and TEMPORARY: everyone has them

    if stmt.objtype == ObjectType.OBJECT_SCHEMA:
        letters = _privileges(stmt, SCHEMA_ALL, "schema")
        for obj in stmt.objects:
            schema = cat.schemas.get(obj.sval)
            if schema is None:
                raise InvalidSchemaName(f'schema "{obj.sval}" does not exist')
            if not checker.owns(schema):
                raise PermissionDenied(f"permission denied for schema {schema.name}")
            acl = schema.acl
            for g in grantees:
                acl = _merge(acl, g, letters, stmt.is_grant)
            cat.replace_schema(replace(schema, acl=acl))
        return Result(tag)

    if stmt.objtype != ObjectType.OBJECT_TABLE:
        raise FeatureNotSupported(
            f"GRANT on {stmt.objtype.name.removeprefix('OBJECT_').lower()} is not supported"
        )
    letters = _privileges(stmt, TABLE_ALL, "table")
    rels: list[Relation] = []
    if stmt.targtype == GrantTargetType.ACL_TARGET_ALL_IN_SCHEMA:
        for obj in stmt.objects:
            if obj.sval not in cat.schemas:
                raise InvalidSchemaName(f'schema "{obj.sval}" does not exist')
            rels += [
                r
                for r in cat.relations.values()
                if r.schema == obj.sval and isinstance(r, Table | View)
            ]
    elif stmt.targtype == GrantTargetType.ACL_TARGET_OBJECT:
        for rv in stmt.objects:
            rels.append(cat.get_relation(rv.schemaname, rv.relname, s.search_path()))
    else:
        raise FeatureNotSupported("ALTER DEFAULT PRIVILEGES is not supported")
    for rel in rels:
        if rel.kind == "index":
            raise SQLError(f'"{rel.name}" is an index', "42809")
        if not checker.owns(rel):
            raise PermissionDenied(f"permission denied for {rel.kind} {rel.name}")
        acl = rel.acl
        for g in grantees:
            acl = _merge(acl, g, letters, stmt.is_grant)
        cat.replace_relation(replace(rel, acl=acl))
    return Result(tag)


# ---------------------------------------------------------------------------------
# pg_cancel_backend / pg_terminate_backend
# ---------------------------------------------------------------------------------
SIGNAL_FUNCTIONS = ("pg_cancel_backend", "pg_terminate_backend")


def signal_call(stmt: A.SelectStmt, params: list[Any]) -> tuple[str, int | None] | None:
    """`SELECT pg_cancel_backend(pid)` (a constant or a parameter): (function, pid)."""
    if stmt.fromClause or not stmt.targetList or len(stmt.targetList) != 1:
        return None
    val = stmt.targetList[0].val
    if not isinstance(val, A.FuncCall) or len(val.args or ()) not in (1, 2):
        return None
    names = [n.sval for n in val.funcname]
    if names[-1] not in SIGNAL_FUNCTIONS or (len(names) > 1 and names[0] != "pg_catalog"):
        return None
    arg = val.args[0]
    while isinstance(arg, A.TypeCast):
        arg = arg.arg
    if isinstance(arg, A.A_Const):
        if arg.isnull:
            return names[-1], None
        if isinstance(arg.val, A.Integer):
            return names[-1], arg.val.ival
        if isinstance(arg.val, A.String) and arg.val.sval.strip().lstrip("-").isdigit():
            return names[-1], int(arg.val.sval)
        return None
    if isinstance(arg, A.ParamRef) and 0 < arg.number <= len(params):
        v = params[arg.number - 1]
        return (names[-1], int(v)) if isinstance(v, int | str) and str(v).isdigit() else None
    return None


def signal_backend(executor: Any, func: str, pid: int | None) -> Any:
    from headwater.catalog.types import BOOL, ColumnType
    from headwater.server.executor import Field, Result

    field_ = [Field(func, ColumnType(BOOL))]
    if pid is None:
        return Result("SELECT 1", field_, [(None,)])
    s = executor.s
    server = getattr(executor.instance, "server", None)
    conn = server.sessions.get(pid) if server is not None else None
    if conn is None or conn.session is None:
        return Result(
            "SELECT 1",
            field_,
            [(False,)],
            notices=[f"PID {pid} is not a PostgreSQL server process"],
        )
    cat = s.catalog
    if not is_superuser(cat, s.role_oid):
        target = conn.session.role_oid
        if is_superuser(cat, target):
            what = "cancel query" if func == "pg_cancel_backend" else "terminate process"
            raise PermissionDenied(f"must be a superuser to {what} of superuser")
        if target not in memberships(cat, s.role_oid):
            what = (
                "query is being canceled"
                if func == "pg_cancel_backend"
                else ("process is being terminated")
            )
            raise PermissionDenied(
                f"must be a member of the role whose {what} or member of pg_signal_backend"
            )
    if func == "pg_cancel_backend":
        conn.cancel()
    else:
        asyncio.get_running_loop().call_soon(conn.terminate)
    return Result("SELECT 1", field_, [(True,)])


# ---------------------------------------------------------------------------------
# statement_timeout, idle_in_transaction_session_timeout
# ---------------------------------------------------------------------------------
_UNITS_MS = {
    "us": 0.001,
    "ms": 1.0,
    "s": 1000.0,
    "min": 60_000.0,
    "h": 3_600_000.0,
    "d": 86_400_000.0,
}


def setting_ms(value: str) -> float:
    """A time setting in milliseconds ('0' = off); PostgreSQL's default unit is ms."""
    v = value.strip().strip("'").lower()
    num = v.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = v[len(num) :].strip() or "ms"
    try:
        return max(0.0, float(num) * _UNITS_MS[unit])
    except (ValueError, KeyError):
        return 0.0
