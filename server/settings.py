"""Session settings (SET/SHOW/RESET) with PostgreSQL 15's names and defaults."""

from __future__ import annotations

import functools
import re
from argparse import ArgumentTypeError
from typing import Any

from headwater.catalog.version import SERVER_VERSION, SERVER_VERSION_NUM

from headwater.errors import InvalidParameterValue, SQLError, UndefinedParameter

# Parameters a client is told about at startup and whenever they change
# (PostgreSQL's GUC_REPORT set).
REPORTED = (
    "application_name",
    "client_encoding",
    "DateStyle",
    "default_transaction_read_only",
    "in_hot_standby",
    "integer_datetimes",
    "IntervalStyle",
    "is_superuser",
    "server_encoding",
    "server_version",
    "session_authorization",
    "standard_conforming_strings",
    "TimeZone",
)

DEFAULTS: dict[str, str] = {
    "application_name": "",
    "client_encoding": "UTF8",
    "DateStyle": "ISO, MDY",
    "default_transaction_read_only": "off",
    "in_hot_standby": "off",
    "integer_datetimes": "on",
    "IntervalStyle": "postgres",
    "is_superuser": "on",
    "server_encoding": "UTF8",
    "server_version": SERVER_VERSION,
    "server_version_num": SERVER_VERSION_NUM,
    "session_authorization": "headwater",
    "standard_conforming_strings": "on",
    "TimeZone": "UTC",
    "extra_float_digits": "1",
    "search_path": '"$user", public',
    "client_min_messages": "notice",
    "default_transaction_isolation": "read committed",
    "transaction_isolation": "read committed",
    "statement_timeout": "0",
    "lock_timeout": "0",
    "idle_in_transaction_session_timeout": "0",
    "bytea_output": "hex",
    "max_identifier_length": "63",
    "datestyle": "ISO, MDY",
    "geqo": "on",
    "jit": "off",
    "row_security": "on",
    "synchronous_commit": "on",
    "lc_messages": "C",
    "lc_monetary": "C",
    "lc_numeric": "C",
    "lc_time": "C",
    "work_mem": "4MB",  # at session start: the server's memory limit (see server_wide)
    "max_connections": "100",
    "transaction_read_only": "off",
    "xmloption": "content",
    # set by pg_dump's scripts; accepted and shown (no tablespaces or access methods)
    "check_function_bodies": "on",
    "default_tablespace": "",
    "default_table_access_method": "heap",
    "default_with_oids": "off",
    # reads see every acknowledged write (PostgreSQL's read committed); session / none
    # are the opt-in cheaper modes (docs/time.md)
    "headwater.freshness": "latest",
    "headwater.read_after": "0",
    "headwater.freshness_timeout": "120s",  # how long a read waits for lagging views
    "headwater.subscribe_buffer_rows": "100000",  # a slower subscriber is cut off
    "headwater.retention": "1h",  # set at server start (headwater start --retention)
    "headwater.memory_limit": "",  # set at server start (headwater start --memory-limit)
    "headwater.max_message_size": "64MB",  # headwater start --max-message-size
    "headwater.executor": "auto",  # headwater start --executor
    "fsync": "on",  # headwater start --fsync
    "password_encryption": "scram-sha-256",  # psql's \password asks for it
    "role": "none",  # SET ROLE (server/auth/roles.py set_role): none is the session's own
}

_CANONICAL = {k.lower(): k for k in DEFAULTS}
_CANONICAL["datestyle"] = "DateStyle"
_CANONICAL["timezone"] = "TimeZone"
_CANONICAL["intervalstyle"] = "IntervalStyle"


# Parameters fixed when the server starts: SET names the `headwater start` option instead.
SERVER_OPTIONS = {
    "max_connections": "--max-connections 200",
    "headwater.retention": "--retention 2h",
    "headwater.memory_limit": "--memory-limit 8GB",
    "headwater.max_message_size": "--max-message-size 256MB",
    "headwater.executor": "--executor spark",
    "fsync": "--fsync off",
}


# client_min_messages: the levels below it are not sent (INFO always is)
_MESSAGE_LEVELS = "debug5 debug4 debug3 debug2 debug1 log notice warning error".split()


def shows(settings: Settings, severity: str) -> bool:
    """Whether a notice of `severity` ('NOTICE', 'WARNING', 'DEBUG', ...) reaches the
    client under its client_min_messages."""
    level = severity.lower()
    if level == "info":
        return True
    level = "debug1" if level == "debug" else level
    floor = str(settings.values.get("client_min_messages", "notice")).lower()
    if level not in _MESSAGE_LEVELS or floor not in _MESSAGE_LEVELS:
        return True
    return _MESSAGE_LEVELS.index(level) >= _MESSAGE_LEVELS.index(floor)


def canonical(name: str) -> str:
    key = _CANONICAL.get(name.lower())
    if key is None:
        raise UndefinedParameter(f'unrecognized configuration parameter "{name}"')
    return key


class Settings:
    def __init__(self) -> None:
        self.values: dict[str, str] = dict(DEFAULTS)
        self.defaults: dict[str, str] = DEFAULTS  # what RESET restores (see server_wide)
        self.notices: list[SQLError] = []  # sent before the next ReadyForQuery
        self._at_begin: dict[str, str] | None = None  # values when the block began
        self._before_local: dict[str, str] = {}  # SET LOCAL's, what they replaced

    def server_wide(self, instance: Any) -> None:
        """The values the server's options fixed, as SHOW reports and RESET restores them."""
        cfg = instance.config
        memory = format_size(instance.replica.memory_limit)
        fixed = {
            "max_connections": str(cfg.max_connections),
            "headwater.retention": f"{cfg.retention:g}s",
            # One DuckDB memory limit serves every sort, hash and aggregate of every session
            # (beyond it they spill to disk): the closest thing Headwater has to work_mem.
            "work_mem": memory,
            "headwater.memory_limit": memory,
            "headwater.max_message_size": format_size(cfg.max_message_size),
            "headwater.executor": cfg.executor,
            "fsync": "on" if cfg.fsync else "off",
        }
        self.defaults = {**DEFAULTS, **fixed}
        self.values.update(fixed)

    def begin(self) -> None:
        """A transaction block starts: a ROLLBACK undoes the SETs made in it."""
        self._at_begin = dict(self.values)

    def end(self, *, committed: bool) -> None:
        """The block ends: its SETs stay if it committed, else the values at BEGIN return
        (PostgreSQL's GUC rollback); its SET LOCALs end either way."""
        if not committed and self._at_begin is not None:
            self.values.clear()
            self.values.update(self._at_begin)
        else:
            self.values.update(self._before_local)
        self._at_begin = None
        self._before_local = {}

    def set_local(self, name: str, value: str) -> str:
        """SET LOCAL in a transaction block: the value until the block ends."""
        key = canonical(name)
        before = self.values.get(key)
        key = self.set(name, value)
        if before is not None:
            self._before_local.setdefault(key, before)
        return key

    def take_notices(self) -> list[SQLError]:
        out, self.notices = self.notices, []
        return out

    def get(self, name: str) -> str:
        return self.values[canonical(name)]

    def set(self, name: str, value: str) -> str:
        key = canonical(name)
        if key in (
            "server_version",
            "server_version_num",
            "server_encoding",
            "integer_datetimes",
            "max_identifier_length",
            "in_hot_standby",
        ):
            raise InvalidParameterValue(f'parameter "{name}" cannot be changed', "55P02")
        if key in SERVER_OPTIONS:
            raise InvalidParameterValue(
                f'parameter "{name}" cannot be changed without restarting the server',
                "55P02",
                hint=f"Start the server with headwater start {SERVER_OPTIONS[key]}.",
            )
        if key == "work_mem":
            self._work_mem(value)
            return key
        if key == "client_encoding" and value.upper().replace("-", "") not in ("UTF8", "UNICODE"):
            raise InvalidParameterValue(f'invalid value for parameter "client_encoding": "{value}"')
        if key == "client_encoding":
            value = "UTF8"
        if key == "TimeZone":
            value = _check_timezone(value)
        if key == "DateStyle":
            value = _datestyle(value)
        if key == "extra_float_digits":
            try:
                n = int(value)
            except ValueError:
                raise InvalidParameterValue(
                    f'invalid value for parameter "extra_float_digits": "{value}"'
                ) from None
            if not -15 <= n <= 3:
                raise InvalidParameterValue(
                    f'{n} is outside the valid range for parameter "extra_float_digits" (-15 .. 3)'
                )
        if key == "headwater.freshness" and value not in ("session", "latest", "none"):
            raise InvalidParameterValue(
                f'invalid value for parameter "headwater.freshness": "{value}"',
                hint="Available values: latest, session, none.",
            )
        if key == "headwater.read_after" and not value.isdigit():
            raise InvalidParameterValue(
                f'invalid value for parameter "headwater.read_after": "{value}"',
                hint="A freshness token is an epoch number: SELECT headwater_write_fence().",
            )
        if key == "headwater.subscribe_buffer_rows" and not value.isdigit():
            raise InvalidParameterValue(
                f'invalid value for parameter "headwater.subscribe_buffer_rows": "{value}"'
            )
        if key == "headwater.freshness_timeout":
            seconds(value, key)
        self.values[key] = value
        if key == "DateStyle":
            self.values["datestyle"] = value
        return key

    def reset(self, name: str) -> str:
        key = canonical(name)
        self.values[key] = self.defaults[key]
        return key

    def _work_mem(self, value: str) -> None:
        """SET work_mem: checked as PostgreSQL checks it, then answered with a notice, not
        applied: DuckDB's memory limit is one for the whole replica, not per session or
        per operation. Refusing (55P02) would break the many scripts and BI tools that
        SET work_mem before a big query; ignoring it silently would mislead."""
        wanted = parse_size(value, "work_mem")
        kb = wanted >> 10
        if not 64 <= kb <= 2147483647:
            raise InvalidParameterValue(
                f'{kb} kB is outside the valid range for parameter "work_mem" (64 .. 2147483647)'
            )
        limit = self.defaults["work_mem"]
        over = wanted > parse_size(limit, "work_mem")
        self.notices.append(
            SQLError(
                f"SET work_mem has no effect: query memory is one server-wide limit ({limit})",
                "01000" if over else "00000",
                severity="WARNING" if over else "NOTICE",
                detail="Every sort, hash and aggregate of every session shares "
                "headwater.memory_limit and spills to disk beyond it; SHOW work_mem reports it.",
                hint=f"To give queries more memory, start the server with headwater start "
                f"--memory-limit {format_size(wanted)}."
                if over
                else None,
            )
        )

    def search_path(self) -> tuple[str, ...]:
        return _search_path(self.values["search_path"])


@functools.lru_cache(maxsize=256)
def _search_path(raw: str) -> tuple[str, ...]:
    """The schemas of a search_path value (memoised: a statement asks several times)."""
    parts = [p.strip().strip('"') for p in raw.split(",")]
    return tuple(p for p in parts if p and p != "$user")


def _check_timezone(value: str) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    v = value.strip()
    if v.upper() in ("UTC", "GMT", "Z"):
        return "UTC" if v.upper() != "GMT" else "GMT"
    if v.lower() == "local":
        return "UTC"
    try:
        ZoneInfo(v)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidParameterValue(f'invalid value for parameter "TimeZone": "{value}"') from None
    return v


def _datestyle(value: str) -> str:
    parts = [p.strip().upper() for p in value.split(",")]
    out_style = "ISO"
    order = "MDY"
    for p in parts:
        if p in ("ISO", "POSTGRES", "SQL", "GERMAN"):
            out_style = p if p == "ISO" else p.capitalize()
        elif p in ("MDY", "DMY", "YMD", "US", "EURO", "EUROPEAN", "NONEURO", "NONEUROPEAN"):
            order = {
                "US": "MDY",
                "NONEURO": "MDY",
                "NONEUROPEAN": "MDY",
                "EURO": "DMY",
                "EUROPEAN": "DMY",
            }.get(p, p)
        elif p:
            raise InvalidParameterValue(f'invalid value for parameter "DateStyle": "{value}"')
    if out_style != "ISO":
        raise InvalidParameterValue(
            f'DateStyle "{value}" is not supported', hint="Headwater prints dates in ISO style."
        )
    return f"{out_style}, {order}"


_UNITS = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def seconds(value: str, name: str) -> float:
    """A duration setting ('500ms', '30s', '1h'; a bare number is seconds)."""
    v = value.strip().lower()
    num = v.rstrip("abcdefghijklmnopqrstuvwxyz").strip()
    unit = v[len(num) :].strip() or "s"
    try:
        return float(num) * _UNITS[unit]
    except (ValueError, KeyError):
        raise InvalidParameterValue(
            f'invalid value for parameter "{name}": "{value}"',
            hint='Valid units for this parameter are "ms", "s", "min", "h", and "d".',
        ) from None


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


# -- sizes ----------------------------------------------------------------------------
_SIZE_UNITS = {"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([A-Za-z]*)\s*")


def parse_size(value: str, name: str, unit: str = "kB", *, strict: bool = True) -> int:
    """Bytes in a memory setting: a number with one of PostgreSQL's units (B, kB, MB, GB, TB;
    1024-based; a bare number is in `unit`). strict: the units' case matters, as in
    PostgreSQL's SET; otherwise (command-line options) 'mb' and 'MiB' are accepted too."""
    m = _SIZE.fullmatch(value)
    suffix = m.group(2) if m else ""
    if not strict and len(suffix) == 3 and suffix[1:].lower() == "ib":
        suffix = suffix[0] + "B"  # MiB, GiB: DuckDB's spelling of PostgreSQL's MB, GB
    if not strict:
        suffix = {u.lower(): u for u in _SIZE_UNITS}.get(suffix.lower(), suffix)
    factor = _SIZE_UNITS.get(suffix or unit)
    if m is None or factor is None:
        raise InvalidParameterValue(
            f'invalid value for parameter "{name}": "{value}"',
            hint='Valid units for this parameter are "B", "kB", "MB", "GB", and "TB".',
        )
    return int(float(m.group(1)) * factor)


def format_size(n: int) -> str:
    """A size as SHOW prints it: the largest of PostgreSQL's units that divides it."""
    for unit, factor in reversed(_SIZE_UNITS.items()):
        if n and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


def size_option(low: int, high: int | None = None) -> Any:
    """An argparse type for a `headwater start` size option ('64MB'; bytes if bare)."""

    def size(text: str) -> int:
        try:
            n = parse_size(text, "size", "B", strict=False)
        except SQLError:
            raise ArgumentTypeError(
                f"invalid size {text!r}: use a number and B, kB, MB or GB"
            ) from None
        if n < low or (high is not None and n > high):
            most = f" and at most {format_size(high)}" if high is not None else ""
            raise ArgumentTypeError(f"{text} is out of range: at least {format_size(low)}{most}")
        return n

    return size
