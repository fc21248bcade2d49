"""PostgreSQL 15's regular-expression functions: regexp_match, regexp_matches (a set of
text[]), regexp_count, regexp_instr, regexp_like, regexp_substr, substring(s from re),
and regexp_replace where DuckDB's RE2 cannot follow PostgreSQL (lookaround, \\m \\M \\y,
the x and n flags, \\& in the replacement, a start position or an occurrence).

PostgreSQL's ARE is translated to Python's `re` (close to it: lookaround, backrefs).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from headwater.planner.functions import udf
from headwater.planner.functions.nodes import call, cast, const, text_of

_CLASSES = {
    "alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z", "lower": "a-z",
    "space": r"\s", "xdigit": "0-9a-fA-F", "word": r"\w", "blank": r" \t",
    "punct": r"!-/:-@\[-`{-~", "cntrl": r"\x00-\x1f\x7f", "print": r"\x20-\x7e",
    "graph": r"\x21-\x7e",
}  # fmt: skip
_ESCAPES = {"m": r"\b(?=\w)", "M": r"\b(?<=\w)", "y": r"\b", "Y": r"\B", "Z": r"\Z"}


def _error(message: str) -> ValueError:
    return ValueError(f"[SQLSTATE 2201B] invalid regular expression: {message}")


@functools.lru_cache(maxsize=256)
def compile_are(pattern: str, flags: str = "") -> re.Pattern[str]:
    """A PostgreSQL regular expression with its flags as a compiled Python pattern."""
    opts = re.S
    quote = False
    for f in flags:
        if f == "i":
            opts |= re.I
        elif f == "c":
            opts &= ~re.I
        elif f in "nw":
            opts = (opts & ~re.S) | re.M if f == "n" else opts | re.M
        elif f == "p":
            opts &= ~re.S
        elif f == "s":
            opts = (opts | re.S) & ~re.M
        elif f == "x":
            opts |= re.X
        elif f == "q":
            quote = True
        elif f in "gbet":
            pass
        else:
            raise ValueError(f'[SQLSTATE 22023] invalid regular expression option: "{f}"')
    if quote:
        return re.compile(re.escape(pattern), opts)
    out, i, n, in_bracket = [], 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if not in_bracket and e in _ESCAPES:
                out.append(_ESCAPES[e])
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_bracket:
            if pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                if end > 0 and pattern[i + 2 : end] in _CLASSES:
                    out.append(_CLASSES[pattern[i + 2 : end]])
                    i = end + 2
                    continue
            if c == "]" and not (out and out[-1] in ("[", "[^")):
                in_bracket = False
            elif c == "[":
                c = r"\["
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_bracket = True
            if pattern.startswith("[^", i):
                out.append("[^")
                i += 2
                if i < n and pattern[i] == "]":
                    out.append(r"\]")
                    i += 1
                continue
            out.append("[")
            i += 1
            if i < n and pattern[i] == "]":
                out.append(r"\]")
                i += 1
            continue
        if c == "$" and not opts & re.M:
            out.append(r"\Z")
        else:
            out.append(c)
        i += 1
    if in_bracket:
        raise _error("brackets [] not balanced")
    try:
        return re.compile("".join(out), opts)
    except re.error as e:
        msg = str(e)
        if "parenthes" in msg:
            raise _error("parentheses () not balanced") from None
        raise _error("invalid escape \\ sequence" if "escape" in msg else msg) from None


def _groups(m: re.Match[str]) -> list[str | None]:
    return list(m.groups()) if m.re.groups else [m.group(0)]


def _match(s: str, p: str, flags: str) -> list[str | None] | None:
    if "g" in flags:
        raise ValueError('[SQLSTATE 22023] regexp_match() does not support the "global" option')
    m = compile_are(p, flags).search(s)
    return _groups(m) if m else None


def _matches(s: str, p: str, flags: str) -> list[list[str | None]]:
    rx = compile_are(p, flags)
    if "g" in flags:
        return [_groups(m) for m in rx.finditer(s)]
    m = rx.search(s)
    return [_groups(m)] if m else []


def _start(start: int) -> int:
    if start < 1:
        raise ValueError(f'[SQLSTATE 22023] invalid value for parameter "start": {start}')
    return start - 1


def _nth(s: str, p: str, start: int, n: int, flags: str) -> re.Match[str] | None:
    if n < 1:
        raise ValueError(f'[SQLSTATE 22023] invalid value for parameter "n": {n}')
    for k, m in enumerate(compile_are(p, flags).finditer(s, _start(start)), 1):
        if k == n:
            return m
    return None


def _count(s: str, p: str, start: int, flags: str) -> int:
    return sum(1 for _ in compile_are(p, flags).finditer(s, _start(start)))


def _instr(s: str, p: str, start: int, n: int, endopt: int, flags: str, sub: int) -> int:
    m = _nth(s, p, start, n, flags)
    if m is None or sub > m.re.groups:
        return 0
    if m.group(sub) is None:
        return 0
    return (m.end(sub) if endopt else m.start(sub)) + 1


def _substr(s: str, p: str, start: int, n: int, flags: str, sub: int) -> str | None:
    m = _nth(s, p, start, n, flags)
    if m is None or sub > m.re.groups:
        return None
    return m.group(sub)


def _like(s: str, p: str, flags: str) -> bool:
    return compile_are(p, flags).search(s) is not None


def _re_substring(s: str, p: str) -> str | None:
    m = compile_are(p).search(s)
    if m is None:
        return None
    return m.group(1) if m.re.groups else m.group(0)


def _replacement(r: str) -> Any:
    def expand(m: re.Match[str]) -> str:
        out, i = [], 0
        while i < len(r):
            c = r[i]
            if c == "\\" and i + 1 < len(r):
                e = r[i + 1]
                if e.isdigit():
                    g = int(e)
                    out.append((m.group(g) or "") if g <= m.re.groups else "")
                elif e == "&":
                    out.append(m.group(0))
                else:
                    out.append(e)
                i += 2
                continue
            out.append(c)
            i += 1
        return "".join(out)

    return expand


def _replace(s: str, p: str, r: str, start: int, n: int, flags: str) -> str:
    """n: 0 replaces every match, k the k-th only."""
    rx = compile_are(p, flags)
    expand = _replacement(r)
    out, last = [], 0
    for k, m in enumerate(rx.finditer(s, _start(start)), 1):
        if n and k != n:
            continue
        out.append(s[last : m.start()])
        out.append(expand(m))
        last = m.end()
        if n:
            break
    out.append(s[last:])
    return "".join(out)


def similar_to_regex(pattern: str, escape: str | None = "\\") -> str:
    """A SIMILAR TO pattern as a regular expression (to be matched in full); the
    escape-double-quote separators become ASCII 0x1f, the three parts' boundary."""
    if escape is not None and len(escape) > 1:
        raise ValueError("[SQLSTATE 22025] invalid escape string")
    out, i, n, in_bracket = [], 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if escape and c == escape and i + 1 < n:
            e = pattern[i + 1]
            out.append("\x1f" if e == '"' else re.escape(e))
            i += 2
            continue
        if in_bracket:
            in_bracket = c != "]"
            out.append(c)
        elif c == "[":
            in_bracket = True
            out.append(c)
        elif c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        elif c in ".^$\\":
            out.append("\\" + c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _similar_escape(pattern: str, escape: str | None) -> str:
    return similar_to_regex(pattern, escape).replace("\x1f", "")


def _similar_substring(s: str, pattern: str, escape: str) -> str | None:
    parts = similar_to_regex(pattern, escape).split("\x1f")
    if len(parts) == 1:
        rx = f"(?:{parts[0]})"
    elif len(parts) == 3:
        rx = f"(?:{parts[0].replace('.*', '.*?')})({parts[1]})(?:{parts[2]})"
    else:
        raise ValueError(
            "[SQLSTATE 2201B] SQL regular expression may not contain more than two"
            " escape-double-quote separators"
        )
    m = re.fullmatch(rx, s, re.S)
    if m is None:
        return None
    return m.group(1) if len(parts) == 3 else m.group(0)


def rewrite_similar_to_escape(args: list[Any]) -> Any:
    esc = cast(args[1], "text") if len(args) == 2 else const("\\")
    return call("hw_similar_escape", _text(args[0]), esc)


def _flags(node: Any | None) -> Any:
    return cast(node, "text") if node is not None else const("")


def _text(node: Any) -> Any:
    return cast(node, "text")


def rewrite_match(args: list[Any]) -> Any:
    if len(args) not in (2, 3):
        return None
    f = _flags(args[2] if len(args) == 3 else None)
    return call("hw_re_match", _text(args[0]), _text(args[1]), f)


def rewrite_matches(args: list[Any]) -> Any:
    if len(args) not in (2, 3):
        return None
    f = _flags(args[2] if len(args) == 3 else None)
    return call("unnest", call("hw_re_matches", _text(args[0]), _text(args[1]), f))


def rewrite_count(args: list[Any]) -> Any:
    if not 2 <= len(args) <= 4:
        return None
    start = args[2] if len(args) > 2 else const(1)
    return call("hw_re_count", _text(args[0]), _text(args[1]), start,
                _flags(args[3] if len(args) > 3 else None))  # fmt: skip


def rewrite_instr(args: list[Any]) -> Any:
    if not 2 <= len(args) <= 7:
        return None
    d = [const(1), const(1), const(0), const(""), const(0)]
    rest = list(args[2:]) + d[len(args) - 2 :]
    return call("hw_re_instr", _text(args[0]), _text(args[1]), rest[0], rest[1], rest[2],
                _flags(rest[3]), rest[4])  # fmt: skip


def rewrite_substr(args: list[Any]) -> Any:
    if not 2 <= len(args) <= 6:
        return None
    d = [const(1), const(1), const(""), const(0)]
    rest = list(args[2:]) + d[len(args) - 2 :]
    return call("hw_re_substr", _text(args[0]), _text(args[1]), rest[0], rest[1],
                _flags(rest[2]), rest[3])  # fmt: skip


def rewrite_like(args: list[Any]) -> Any:
    if len(args) not in (2, 3):
        return None
    f = _flags(args[2] if len(args) == 3 else None)
    return call("hw_re_like", _text(args[0]), _text(args[1]), f)


_RE2_UNSAFE = re.compile(r"\(\?[=!<]|\\[mMyY]")


def rewrite_replace(args: list[Any]) -> Any:
    """Python's re where RE2 would differ; DuckDB's regexp_replace otherwise."""
    if not 3 <= len(args) <= 6:
        return None
    pattern, repl = text_of(args[1]), text_of(args[2])
    flags = text_of(args[3]) if len(args) == 4 else ""
    native = (
        len(args) <= 4
        and pattern is not None
        and flags is not None
        and not _RE2_UNSAFE.search(pattern)
        and not set(flags) & set("xnpwq")
        and (repl is None or "\\&" not in repl)
    )
    if native:
        return None
    if len(args) == 4:  # (s, p, r, flags): g replaces all, else the first
        start, n, f = const(1), None, args[3]
    else:
        start = args[3] if len(args) > 3 else const(1)
        n = args[4] if len(args) > 4 else None
        f = args[5] if len(args) > 5 else None
    if n is None:
        n = call("hw_re_global", _flags(f)) if f is not None else const(1)
    return call("hw_re_replace", _text(args[0]), _text(args[1]), _text(args[2]), start, n,
                _flags(f))  # fmt: skip


REWRITES = {
    "regexp_match": rewrite_match,
    "regexp_matches": rewrite_matches,
    "regexp_count": rewrite_count,
    "regexp_instr": rewrite_instr,
    "regexp_substr": rewrite_substr,
    "regexp_like": rewrite_like,
    "regexp_replace": rewrite_replace,
    "similar_to_escape": rewrite_similar_to_escape,
}


def install(db: Any) -> None:
    V, I = "VARCHAR", "INTEGER"  # noqa: E741
    db.execute(
        "CREATE OR REPLACE MACRO hw_re_global(f) AS CASE WHEN contains(f, 'g') THEN 0 ELSE 1 END"
    )
    udf.register(db, "hw_re_match", _match, [V, V, V], "VARCHAR[]")
    udf.register(db, "hw_re_matches", _matches, [V, V, V], "VARCHAR[][]")
    udf.register(db, "hw_re_count", _count, [V, V, I, V], I)
    udf.register(db, "hw_re_instr", _instr, [V, V, I, I, I, V, I], I)
    udf.register(db, "hw_re_substr", _substr, [V, V, I, I, V, I], V)
    udf.register(db, "hw_re_like", _like, [V, V, V], "BOOLEAN")
    udf.register(db, "hw_re_replace", _replace, [V, V, V, I, I, V], V)
    udf.register(db, "hw_re_substring", _re_substring, [V, V], V)
    udf.register(db, "hw_similar_escape", _similar_escape, [V, V], V, strict=False)
    udf.register(db, "hw_similar_substring", _similar_substring, [V, V, V], V)
