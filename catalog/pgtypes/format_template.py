"""PostgreSQL's formatting templates (formatting.c's parse_format): the patterns of
to_char/to_date/to_timestamp (DCH) and of to_char/to_number for numbers (NUM), each
template parsed once into nodes (cached) that the formatters of datetime_format.py and
number_format.py walk for every value."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from headwater.errors import SQLError


def invalid_format(message: str, detail: str | None = None) -> SQLError:
    return SQLError(message, "22007", detail=detail)


# -- template parsing (parse_format) ----------
# Keywords in PostgreSQL's order: the first one that prefixes the rest of the template wins.
DCH_KEYWORDS = (
    "A.D. A.M. AD AM B.C. BC CC DAY DDD DD DY Day Dy D FF1 FF2 FF3 FF4 FF5 FF6 FX HH24 HH12 HH"
    " IDDD ID IW IYYY IYY IY I J MI MM MONTH MON MS Month Mon OF P.M. PM Q RM SSSSS SSSS SS"
    " TZH TZM TZ US WW W Y,YYY YYYY YYY YY Y a.d. a.m. ad am b.c. bc cc day ddd dd dy d ff1"
    " ff2 ff3 ff4 ff5 ff6 fx hh24 hh12 hh iddd id iw iyyy iyy iy i j mi mm month mon ms of"
    " p.m. pm q rm sssss ssss ss tz us ww w y,yyy yyyy yyy yy y"
).split()
NUM_KEYWORDS = (
    ", . 0 9 B C D EEEE FM G L MI PL PR RN SG SP S TH V b c d eeee fm g l mi pl pr rn sg sp s th v"
).split()
# Keywords whose value is digits (a to_date field ends where the next one starts).
DCH_DIGIT = frozenset(
    "CC DDD DD D FF1 FF2 FF3 FF4 FF5 FF6 HH24 HH12 HH IDDD ID IW IYYY IYY IY I J MI MM MS"
    " Q SSSSS SSSS SS TZH TZM US WW W Y,YYY YYYY YYY YY Y".split()
)


def is_separator(c: str) -> bool:
    """is_separator_char: printable ASCII that is neither a letter, a digit nor a space."""
    return c.isascii() and c.isprintable() and not c.isalnum() and not c.isspace()


@dataclass(frozen=True)
class Node:
    kind: str  # "action", "char", "space", "separator"
    text: str  # the keyword (canonical upper form in `key`), or the character
    key: str = ""  # for actions: the keyword as PostgreSQL names it (case kept)
    fm: bool = False
    tm: bool = False
    th: str = ""  # "TH", "th" or ""
    sp: bool = False

    @property
    def upper(self) -> str:
        return self.key.upper()


@lru_cache(maxsize=256)
def parse_format(fmt: str, numeric: bool) -> tuple[Node, ...]:
    keywords = NUM_KEYWORDS if numeric else DCH_KEYWORDS
    nodes: list[Node] = []
    i, n = 0, len(fmt)
    while i < n:
        fm = tm = False
        if not numeric:
            while fmt.startswith(("FM", "fm", "TM", "tm"), i):
                if fmt[i] in "Ff":
                    fm = True
                else:
                    tm = True
                i += 2
        kw = next((k for k in keywords if fmt.startswith(k, i)), None) if i < n else None
        if kw is not None:
            i += len(kw)
            th, sp = "", False
            if not numeric and i < n:
                if fmt.startswith(("TH", "th"), i):
                    th = fmt[i : i + 2]
                    i += 2
                elif fmt.startswith("SP", i):
                    sp = True
                    i += 2
            nodes.append(Node("action", kw, kw, fm, tm, th, sp))
            continue
        if i >= n:
            break
        c = fmt[i]
        if c == '"':
            i += 1
            while i < n:
                if fmt[i] == '"':
                    i += 1
                    break
                if fmt[i] == "\\" and i + 1 < n:
                    i += 1
                nodes.append(Node("char", fmt[i]))
                i += 1
            continue
        if c == "\\" and i + 1 < n and fmt[i + 1] == '"':
            i += 1
            c = '"'
        if not numeric and is_separator(c):
            nodes.append(Node("separator", c))
        elif c.isspace():
            nodes.append(Node("space", c))
        else:
            nodes.append(Node("char", c))
        i += 1
    return tuple(nodes)


def ordinal_suffix(num: str, upper: bool) -> str:
    """get_th: the English ordinal suffix of the number's last digit."""
    last = num[-1] if num else ""
    if not last.isdigit():
        raise SQLError(f'"{num}" is not a number', "22P02")
    if len(num) > 1 and num[-2] == "1":
        last = "0"
    s = {"1": "st", "2": "nd", "3": "rd"}.get(last, "th")
    return s.upper() if upper else s
