"""The session settings that change how values are printed and parsed."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from functools import cached_property, lru_cache

from headwater.catalog.pgtypes.timezones import resolve_timezone


@dataclass(frozen=True)
class SessionFormat:
    """The session GUCs that affect value formats (defaults are PostgreSQL's)."""

    timezone: str = "UTC"
    extra_float_digits: int = 1
    datestyle: str = "ISO, MDY"
    intervalstyle: str = "postgres"
    bytea_output: str = "hex"

    @cached_property
    def tzinfo(self) -> _dt.tzinfo:
        return resolve_timezone(self.timezone)

    @cached_property
    def date_order(self) -> str:
        """'MDY', 'DMY' or 'YMD': how ambiguous input like 01/02/03 is read."""
        return date_order(self.datestyle)


@lru_cache(maxsize=64)
def date_order(datestyle: str) -> str:
    """The input order a DateStyle value sets: 'MDY', 'DMY' or 'YMD'."""
    s = datestyle.upper()
    for order in ("DMY", "YMD", "MDY"):
        if order in s:
            return order
    if "EURO" in s or "GERMAN" in s:
        return "DMY"
    return "MDY"


DEFAULT_SESSION = SessionFormat()
