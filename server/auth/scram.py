"""SCRAM-SHA-256 and SCRAM-SHA-256-PLUS (RFC 5802/7677) on the server side, without I/O.

Follows PostgreSQL's auth-scram.c: verifiers stored as
`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64 parts),
tls-server-end-point channel binding for -PLUS, and mock authentication for unknown
roles (a stable fake salt, so the reply never reveals whether a role exists).
`ScramServer` checks the client's messages and computes the server's; the
exchange (exchange.py) moves them over the wire.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import stringprep
import unicodedata
from dataclasses import dataclass

from headwater.errors import SQLError

SCRAM_ITERATIONS = 4096
SCRAM_SALT_LEN = 16
SCRAM_NONCE_LEN = 18
MECHANISM = "SCRAM-SHA-256"
MECHANISM_PLUS = "SCRAM-SHA-256-PLUS"


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


def verify_password(sec: ScramSecret, password: str) -> bool:
    """A cleartext password (the `password` hba method) against a SCRAM verifier."""
    salted = _salted(password, sec.salt, sec.iterations)
    stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    return hmac.compare_digest(stored, sec.stored_key)


class _Mock:
    """A per-server secret for mock salts: an unknown role gets a stable fake salt."""

    secret = secrets.token_bytes(32)


def _mock_salt(user: str) -> bytes:
    return hashlib.sha256(_Mock.secret + user.encode("utf-8")).digest()[:SCRAM_SALT_LEN]


def scram_error(detail: str) -> SQLError:
    return SQLError("malformed SCRAM message", "08P01", detail=detail, severity="FATAL")


def _attrs(msg: str) -> list[tuple[str, str]]:
    out = []
    for part in msg.split(","):
        if len(part) < 2 or part[1] != "=":
            raise scram_error(f'Expected attribute "=" in "{part}".')
        out.append((part[0], part[2:]))
    return out


class ScramServer:
    """One SCRAM exchange: mechanisms() to offer, select() the client's choice, then
    client_first() and client_final() turn the client's messages into the server's.
    Protocol errors raise FATAL SQLErrors with PostgreSQL's messages."""

    def __init__(self, verifier: str | None, user: str, cbind_hash: bytes | None) -> None:
        sec = parse_scram(verifier)
        self.mock = sec is None  # unknown role or no SCRAM verifier: the proof always fails
        self.secret = sec or ScramSecret(SCRAM_ITERATIONS, _mock_salt(user), b"\0" * 32, b"\0" * 32)
        self.cbind_hash = cbind_hash  # tls-server-end-point data; None without TLS
        self.mechanism = ""
        self._gs2_header = ""
        self._cbind_data = b""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def mechanisms(self) -> bytes:
        """The AuthenticationSASL body: -PLUS first when channel binding is possible."""
        mechs = b""
        if self.cbind_hash is not None:
            mechs += MECHANISM_PLUS.encode("ascii") + b"\0"
        return mechs + MECHANISM.encode("ascii") + b"\0\0"

    def select(self, mechanism: str) -> None:
        if mechanism not in (MECHANISM, MECHANISM_PLUS) or (
            mechanism == MECHANISM_PLUS and self.cbind_hash is None
        ):
            raise SQLError(
                "client selected an invalid SASL authentication mechanism",
                "08P01",
                severity="FATAL",
            )
        self.mechanism = mechanism

    def client_first(self, message: bytes | None) -> bytes:
        """client-first-message (None: the client sent none) -> server-first-message."""
        if message is None:
            raise scram_error("The client sent no initial response.")
        try:
            first = message.decode("utf-8")
        except UnicodeDecodeError:
            raise scram_error("The message is not valid UTF-8.") from None
        # gs2-header: cbind-flag "," [authzid] ","
        parts = first.split(",", 2)
        if len(parts) != 3:
            raise scram_error("Malformed client-first-message.")
        flag, authzid, bare = parts
        if authzid:
            raise scram_error("client uses authorization identity, but it is not supported")
        self._gs2_header = f"{flag},{authzid},"
        if self.mechanism == MECHANISM_PLUS:
            if flag != "p=tls-server-end-point":
                raise scram_error("The client selected SCRAM-SHA-256-PLUS without channel binding.")
            self._cbind_data = self.cbind_hash or b""
        else:
            if flag == "y" and self.cbind_hash is not None:
                raise SQLError(
                    "SCRAM channel binding negotiation error: the client supports channel "
                    "binding but thinks the server does not; this server does support it",
                    "28000",
                    severity="FATAL",
                )
            if flag not in ("n", "y"):
                raise scram_error("The client selected SCRAM-SHA-256 with channel binding data.")
            self._cbind_data = b""
        attrs = _attrs(bare)
        if not attrs or attrs[0][0] == "m":
            raise scram_error("Mandatory extensions are not supported.")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise scram_error("Malformed client-first-message.")
        client_nonce = attrs[1][1]
        if not client_nonce or any(not (0x21 <= ord(c) <= 0x7E) or c == "," for c in client_nonce):
            raise scram_error("The client nonce contains invalid characters.")
        self._client_first_bare = bare
        self._nonce = client_nonce + _b64(secrets.token_bytes(SCRAM_NONCE_LEN))
        sec = self.secret
        self._server_first = f"r={self._nonce},s={_b64(sec.salt)},i={sec.iterations}"
        return self._server_first.encode("ascii")

    def client_final(self, message: bytes) -> bytes | None:
        """client-final-message -> server-final-message, or None if the proof is wrong."""
        try:
            final = message.decode("utf-8")
        except UnicodeDecodeError:
            raise scram_error("The message is not valid UTF-8.") from None
        idx = final.rfind(",p=")
        if idx < 0:
            raise scram_error("Malformed client-final-message: no proof.")
        without_proof = final[:idx]
        fattrs = _attrs(final)
        if len(fattrs) < 3 or fattrs[0][0] != "c" or fattrs[1][0] != "r" or fattrs[-1][0] != "p":
            raise scram_error("Malformed client-final-message.")
        expected_c = _b64(self._gs2_header.encode("utf-8") + self._cbind_data)
        if fattrs[0][1] != expected_c:
            raise SQLError("SCRAM channel binding check failed", "28000", severity="FATAL")
        if fattrs[1][1] != self._nonce:
            raise scram_error("Nonce does not match.")
        try:
            proof = base64.b64decode(fattrs[-1][1], validate=True)
        except ValueError:
            raise scram_error("Malformed proof in client-final-message.") from None
        if len(proof) != 32:
            raise scram_error("Malformed proof in client-final-message.")
        sec = self.secret
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(sec.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        proved = hmac.compare_digest(hashlib.sha256(client_key).digest(), sec.stored_key)
        if self.mock or not proved:
            return None
        server_signature = _hmac(sec.server_key, auth_message)
        return f"v={_b64(server_signature)}".encode("ascii")
