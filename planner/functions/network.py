"""inet and cidr: PostgreSQL's network address types, kept as their text (DuckDB's inet
extension is not installed here), and their functions and containment operators as
Python functions (the ipaddress module).

The text is PostgreSQL's output form: an inet shows its netmask only when it does not
cover just the host (192.168.1.5, 192.168.1.5/24), a cidr always (192.168.1.0/24).
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pglast.ast as A
from headwater.planner.functions import udf
from headwater.planner.functions.nodes import call

Interface = ipaddress.IPv4Interface | ipaddress.IPv6Interface
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _error(message: str) -> ValueError:
    return ValueError(f"[SQLSTATE 22P02] {message}")


def _parse(text: str, kind: str = "inet") -> Interface:
    try:
        return ipaddress.ip_interface(text.strip())
    except ValueError:
        raise _error(f'invalid input syntax for type {kind}: "{text}"') from None


def _full(iface: Interface) -> bool:
    return iface.network.prefixlen == iface.network.max_prefixlen


def _inet_text(iface: Interface) -> str:
    return str(iface.ip) if _full(iface) else str(iface)


def _inet(text: str) -> str:
    return _inet_text(_parse(text))


def _cidr(text: str) -> str:
    iface = _parse(text, "cidr")
    if "/" not in text:  # cidr '10.1' style short forms are not taken here
        return str(iface.network)
    if iface.ip != iface.network.network_address:
        raise _error(f'invalid cidr value: "{text}"')
    return str(iface.network)


def _host(text: str) -> str:
    return str(_parse(text).ip)


def _masklen(text: str) -> int:
    return _parse(text).network.prefixlen


def _netmask(text: str) -> str:
    return str(_parse(text).network.netmask)


def _hostmask(text: str) -> str:
    return str(_parse(text).network.hostmask)


def _family(text: str) -> int:
    return _parse(text).version


def _broadcast(text: str) -> str:
    iface = _parse(text)
    net = iface.network
    return f"{net.broadcast_address}/{net.prefixlen}"


def _network(text: str) -> str:
    return str(_parse(text).network)


def _abbrev(text: str) -> str:
    """abbrev(cidr): trailing zero octets of an IPv4 network dropped (10.1/16)."""
    iface = _parse(text)
    if iface.version != 4 or _full(iface):
        return _inet_text(iface)
    net = iface.network
    octets = str(net.network_address).split(".")
    keep = max(1, (net.prefixlen + 7) // 8)
    return f"{'.'.join(octets[:keep])}/{net.prefixlen}"


def _text(text: str) -> str:
    """text(inet): the address with its netmask always."""
    return str(_parse(text))


def _contains(outer: str, inner: str, strict: bool) -> bool:
    """inner << outer (strict) or inner <<= outer."""
    a, b = _parse(inner).network, _parse(outer).network
    a_ip = _parse(inner).ip
    if a.version != b.version:
        return False
    if strict and a.prefixlen <= b.prefixlen:
        return False
    if a.prefixlen < b.prefixlen:
        return False
    return a_ip in b


def _within(inner: str, outer: str) -> bool:
    return _contains(outer, inner, True)


def _within_eq(inner: str, outer: str) -> bool:
    return _contains(outer, inner, False)


def _overlaps(a: str, b: str) -> bool:
    na, nb = _parse(a).network, _parse(b).network
    return na.version == nb.version and (na.overlaps(nb))


_FUNCS = {
    "host": "hw_inet_host",
    "masklen": "hw_inet_masklen",
    "netmask": "hw_inet_netmask",
    "hostmask": "hw_inet_hostmask",
    "family": "hw_inet_family",
    "broadcast": "hw_inet_broadcast",
    "network": "hw_inet_network",
    "abbrev": "hw_inet_abbrev",
}


def _rewrite(target: str) -> Any:
    def rewrite(args: list[Any]) -> Any:
        return call(target, *args) if len(args) == 1 else None

    return rewrite


REWRITES = {name: _rewrite(target) for name, target in _FUNCS.items()}

# inner << outer and friends, for operands cast to inet or cidr
_OPERATORS = {
    "<<": ("hw_inet_within", False),
    "<<=": ("hw_inet_within_eq", False),
    ">>": ("hw_inet_within", True),
    ">>=": ("hw_inet_within_eq", True),
    "&&": ("hw_inet_overlaps", False),
}


def is_network(node: Any) -> bool:
    if isinstance(node, A.TypeCast):
        names = [n.sval.lower() for n in node.typeName.names if isinstance(n, A.String)]
        return names[-1:] in (["inet"], ["cidr"])
    return isinstance(node, A.FuncCall) and "".join(
        n.sval for n in node.funcname[-1:] if isinstance(n, A.String)
    ) in ("hw_inet", "hw_cidr")


def rewrite_operator(op: str, left: Any, right: Any) -> Any | None:
    if op not in _OPERATORS or not (is_network(left) or is_network(right)):
        return None
    name, swap = _OPERATORS[op]
    return call(name, right, left) if swap else call(name, left, right)


def cast(type_name: str, arg: Any) -> Any | None:
    """x::inet, x::cidr: the text checked and in PostgreSQL's output form."""
    if type_name == "inet":
        return call("hw_inet", arg)
    if type_name == "cidr":
        return call("hw_cidr", arg)
    return None


def install(db: Any) -> None:
    V = "VARCHAR"
    for name, fn in (
        ("hw_inet", _inet),
        ("hw_cidr", _cidr),
        ("hw_inet_host", _host),
        ("hw_inet_netmask", _netmask),
        ("hw_inet_hostmask", _hostmask),
        ("hw_inet_broadcast", _broadcast),
        ("hw_inet_network", _network),
        ("hw_inet_abbrev", _abbrev),
        ("hw_inet_text", _text),
    ):
        udf.register(db, name, fn, [V], V)
    udf.register(db, "hw_inet_masklen", _masklen, [V], "INTEGER")
    udf.register(db, "hw_inet_family", _family, [V], "INTEGER")
    for name, fn in (
        ("hw_inet_within", _within),
        ("hw_inet_within_eq", _within_eq),
        ("hw_inet_overlaps", _overlaps),
    ):
        udf.register(db, name, fn, [V, V], "BOOLEAN")
