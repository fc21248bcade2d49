"""hba rules: who may connect from where, and how they authenticate.

pg_hba.conf's syntax (host/hostssl/hostnossl, trust, reject, scram-sha-256, md5,
password); the first matching rule decides. Without a file (headwater start --hba), DEFAULT_HBA.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from headwater.catalog.catalog import Catalog
from headwater.catalog.privileges import memberships

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
