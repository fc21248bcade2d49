"""Session settings (SET/SHOW/RESET) with PostgreSQL 15's names and defaults."""

from __future__ import annotations

from headwater.errors import InvalidParameterValue, UndefinedParameter

SERVER_VERSION = "15.0"
SERVER_VERSION_NUM = "150000"

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
    "work_mem": "4MB",
    "max_connections": "100",
    "transaction_read_only": "off",
    "xmloption": "content",
    "headwater.freshness": "session",
    "headwater.read_after": "0",
    "headwater.freshness_timeout": "120s",  # how long a read waits for lagging views
    "headwater.subscribe_buffer_rows": "100000",  # a slower subscriber is cut off
    "headwater.retention": "1h",  # set at server start (headwater start --retention)
    "password_encryption": "scram-sha-256",  # psql's \password asks for it
}

_CANONICAL = {k.lower(): k for k in DEFAULTS}
_CANONICAL["datestyle"] = "DateStyle"
_CANONICAL["timezone"] = "TimeZone"
_CANONICAL["intervalstyle"] = "IntervalStyle"


def canonical(name: str) -> str:
    key = _CANONICAL.get(name.lower())
    if key is None:
        raise UndefinedParameter(f'unrecognized configuration parameter "{name}"')
    return key


class Settings:
    def __init__(self) -> None:
        self.values: dict[str, str] = dict(DEFAULTS)

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
        if key == "headwater.retention":
            raise InvalidParameterValue(
                f'parameter "{name}" cannot be changed without restarting the server',
                "55P02",
                hint="Start the server with headwater start --retention 2h.",
            )
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
                hint="Available values: session, latest, none.",
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
        self.values[key] = DEFAULTS[key]
        return key

    def search_path(self) -> tuple[str, ...]:
        parts = [p.strip().strip('"') for p in self.values["search_path"].split(",")]
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
