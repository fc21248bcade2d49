"""Stored passwords: what CREATE/ALTER ROLE ... PASSWORD keeps, and checks against it.

Passwords are stored as PostgreSQL stores them: a SCRAM-SHA-256 verifier (scram.py)
or an `md5` hash; a cleartext password never reaches the catalog, the log or storage.
"""

from __future__ import annotations

import hashlib
import hmac

from headwater.server.auth.scram import parse_scram, scram_verifier, verify_password


def is_md5(verifier: str | None) -> bool:
    return (
        verifier is not None
        and len(verifier) == 35
        and verifier.startswith("md5")
        and all(c in "0123456789abcdef" for c in verifier[3:])
    )


def _md5_verifier(password: str, role: str) -> str:
    return "md5" + hashlib.md5((password + role).encode("utf-8")).hexdigest()


def encrypt_password(password: str, role: str = "", method: str = "scram-sha-256") -> str:
    """What CREATE/ALTER ROLE ... PASSWORD stores, per password_encryption."""
    if parse_scram(password) is not None or is_md5(password):
        return password  # already hashed by the client (psql's \\password, pg_dump)
    if method == "md5":
        return _md5_verifier(password, role)
    return scram_verifier(password)


def check_plain_password(verifier: str | None, user: str, password: str) -> bool:
    """A cleartext password (the `password` hba method) against either kind of verifier."""
    sec = parse_scram(verifier)
    if sec is not None:
        return verify_password(sec, password)
    if is_md5(verifier):
        assert verifier is not None
        return hmac.compare_digest(_md5_verifier(password, user), verifier)
    return False


def check_md5_answer(verifier: str | None, salt: bytes, answer: str) -> bool:
    """The md5 method's answer: md5(stored md5 hash + the 4-byte salt we sent)."""
    if not is_md5(verifier):
        return False
    assert verifier is not None
    expected = "md5" + hashlib.md5(verifier[3:].encode("ascii") + salt).hexdigest()
    return hmac.compare_digest(expected, answer)
