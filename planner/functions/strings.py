"""PostgreSQL 15's string functions DuckDB lacks or computes differently: format,
initcap, quote_literal/quote_nullable, two-argument lpad/rpad, to_hex (lower case,
32 bits for an integer), string_to_array/string_to_table with PostgreSQL's separators,
substring with a negative start, and the errors chr(0) and split_part(..., 0) raise.
Macros over native functions; format and initcap are Python (no native equivalent).
"""

from __future__ import annotations

import re
from typing import Any

import pglast.ast as A
from headwater.planner.functions import text_casts, udf
from headwater.planner.functions.nodes import call, cast, const
from pglast import keywords


def _err(sqlstate: str, message: str) -> str:
    return f"error('[SQLSTATE {sqlstate}] {message}')"


MACROS = [
    # int4, of text as of bytea (DuckDB: octet_length of BLOB and BIT only, as bigint)
    "CREATE OR REPLACE MACRO hw_octet_length(x BLOB) AS CAST(octet_length(x) AS INTEGER),"
    " (x VARCHAR) AS CAST(strlen(x) AS INTEGER)",
    "CREATE OR REPLACE MACRO hw_bit_length(x BLOB) AS CAST(octet_length(x) * 8 AS INTEGER),"
    " (x VARCHAR) AS CAST(strlen(x) * 8 AS INTEGER)",
    # an int4 (or smaller) shows its two's complement in 32 bits
    "CREATE OR REPLACE MACRO hw_to_hex(x) AS lower(to_hex(CASE WHEN x < 0 AND typeof(x) IN"
    " ('INTEGER', 'SMALLINT', 'TINYINT') THEN CAST(x AS BIGINT) + 4294967296"
    " ELSE CAST(x AS BIGINT) END))",
    "CREATE OR REPLACE MACRO hw_quote_literal(x) AS CASE WHEN x IS NULL THEN NULL ELSE"
    " (CASE WHEN contains(CAST(x AS VARCHAR), '\\') THEN 'E' ELSE '' END) || ''''"
    " || replace(replace(CAST(x AS VARCHAR), '''', ''''''), '\\', '\\\\') || '''' END",
    "CREATE OR REPLACE MACRO hw_quote_nullable(x) AS coalesce(hw_quote_literal(x), 'NULL')",
    f"CREATE OR REPLACE MACRO hw_chr(x) AS CASE WHEN x = 0 THEN {_err('54000', 'null character not permitted')}"  # noqa: E501
    " ELSE chr(x) END",
    "CREATE OR REPLACE MACRO hw_split_part(s, d, n) AS CASE WHEN n = 0 THEN "
    + _err("22023", "field position must not be zero")
    + " ELSE split_part(s, d, n) END",
    # NULL separator: one element per character; '' separator: the whole string
    "CREATE OR REPLACE MACRO hw_string_to_array(s, d, n) AS CASE WHEN s IS NULL THEN NULL"
    " WHEN s = '' THEN CAST([] AS VARCHAR[]) ELSE list_transform(CASE WHEN d IS NULL THEN"
    " string_split(s, '') WHEN d = '' THEN [s] ELSE string_split(s, d) END,"
    " lambda e: CASE WHEN e = n THEN NULL ELSE e END) END",
    # substring(s from st for n): characters st .. st + n - 1 that exist
    "CREATE OR REPLACE MACRO hw_substring(s, st, n) AS CASE WHEN n < 0 THEN "
    + _err("22011", "negative substring length not allowed")
    + " ELSE substring(s, greatest(st, 1), greatest(st + n - greatest(st, 1), 0)) END",
]


def _quote_ident(s: str) -> str:
    if re.fullmatch(r"[a-z_][a-z0-9_$]*", s) and s not in _RESERVED:
        return s
    return '"' + s.replace('"', '""') + '"'


# every keyword but the unreserved ones needs quotes, as quote_ident gives them
_RESERVED = frozenset(
    keywords.RESERVED_KEYWORDS | keywords.COL_NAME_KEYWORDS | keywords.TYPE_FUNC_NAME_KEYWORDS
)


def _quote_literal(s: str) -> str:
    body = "'" + s.replace("'", "''").replace("\\", "\\\\") + "'"
    return ("E" + body) if "\\" in s else body


def _format(fmt: str | None, args: list[str | None] | None) -> str | None:
    """PostgreSQL's format(): %s %I %L with positions (n$), widths and '-'."""
    if fmt is None:
        return None
    args = args or []
    out: list[str] = []
    i, nxt, n = 0, 0, len(fmt)
    while i < n:
        c = fmt[i]
        i += 1
        if c != "%":
            out.append(c)
            continue
        if i >= n:
            raise ValueError("[SQLSTATE 22023] unterminated format() type specifier")
        if fmt[i] == "%":
            out.append("%")
            i += 1
            continue
        j = i
        while j < n and fmt[j].isdigit():
            j += 1
        pos = None
        if j < n and fmt[j] == "$" and j > i:
            pos = int(fmt[i:j])
            i = j + 1
        minus = False
        if i < n and fmt[i] == "-":
            minus, i = True, i + 1
        width: int | None = None
        if i < n and fmt[i] == "*":
            i += 1
            if nxt >= len(args):
                raise ValueError("[SQLSTATE 22023] too few arguments for format()")
            w = args[nxt]
            nxt += 1
            width = int(w) if w is not None else 0
            if width < 0:
                minus, width = True, -width
        else:
            j = i
            while j < n and fmt[j].isdigit():
                j += 1
            if j > i:
                width = int(fmt[i:j])
            i = j
        if i >= n:
            raise ValueError("[SQLSTATE 22023] unterminated format() type specifier")
        kind = fmt[i]
        i += 1
        if kind not in "sIL":
            raise ValueError(f'[SQLSTATE 22023] unrecognized format() type specifier "{kind}"')
        idx = pos - 1 if pos is not None else nxt
        if idx >= len(args):
            raise ValueError("[SQLSTATE 22023] too few arguments for format()")
        nxt = idx + 1
        v = args[idx]
        if kind == "s":
            text = "" if v is None else v
        elif kind == "I":
            if v is None:
                raise ValueError(
                    "[SQLSTATE 22004] null values cannot be formatted as an SQL identifier"
                )
            text = _quote_ident(v)
        else:
            text = "NULL" if v is None else _quote_literal(v)
        if width:
            text = text.ljust(width) if minus else text.rjust(width)
        out.append(text)
    return "".join(out)


def _initcap(s: str) -> str:
    """C locale: an ASCII letter or digit after a non-alphanumeric starts a word."""
    out, prev = [], False
    for ch in s:
        alnum = ch.isascii() and ch.isalnum()
        if ch.isascii():
            ch = ch.lower() if prev else ch.upper()
        out.append(ch)
        prev = alnum
    return "".join(out)


def _parse_ident(s: str, strict: bool) -> list[str]:
    """parse_ident: a qualified name's parts, unquoted (case folded unless quoted)."""
    parts, i, n = [], 0, len(s)
    bad = f'[SQLSTATE 22023] string is not a valid identifier: "{s}"'
    while True:
        while i < n and s[i].isspace():
            i += 1
        if i < n and s[i] == '"':
            j, buf = i + 1, []
            while True:
                k = s.find('"', j)
                if k < 0:
                    raise ValueError(bad)
                buf.append(s[j:k])
                if s[k + 1 : k + 2] == '"':
                    buf.append('"')
                    j = k + 2
                    continue
                break
            parts.append("".join(buf))
            i = k + 1
        else:
            m = re.compile(r"[A-Za-z_\x80-\uffff][A-Za-z0-9_$\x80-\uffff]*").match(s, i)
            if m is None:
                raise ValueError(bad)
            parts.append(m.group(0).lower())
            i = m.end()
        while i < n and s[i].isspace():
            i += 1
        if i < n and s[i] == ".":
            i += 1
            continue
        if i < n and strict:
            raise ValueError(bad)
        return parts


def _unistr(s: str) -> str:
    """\\XXXX, \\+XXXXXX, \\uXXXX, \\UXXXXXXXX and \\\\ as in PostgreSQL's unistr."""
    out, i, n = [], 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if s[i + 1 : i + 2] == "\\":
            out.append("\\")
            i += 2
            continue
        for prefix, digits in (("+", 6), ("u", 4), ("U", 8), ("", 4)):
            if s.startswith(prefix, i + 1):
                hexs = s[i + 1 + len(prefix) : i + 1 + len(prefix) + digits]
                if len(hexs) == digits and all(h in "0123456789abcdefABCDEF" for h in hexs):
                    out.append(chr(int(hexs, 16)))
                    i += 1 + len(prefix) + digits
                    break
        else:
            raise ValueError("[SQLSTATE 22P02] invalid Unicode escape")
    return "".join(out)


def _normalize(s: str, form: str) -> str:
    import unicodedata

    if form.upper() not in ("NFC", "NFD", "NFKC", "NFKD"):
        raise ValueError(f'[SQLSTATE 22023] invalid normalization form: "{form}"')
    return unicodedata.normalize(form.upper(), s)  # type: ignore[arg-type]


def _is_normalized(s: str, form: str) -> bool:
    return _normalize(s, form) == s


def _to_ascii(s: str) -> str:
    raise ValueError("[SQLSTATE 0A000] encoding conversion from UTF8 to ASCII not supported")


def _text_arg(node: Any) -> Any:
    """An argument as PostgreSQL's text output (booleans as t/f, numbers as the wire
    prints them: planner/functions/text_casts.py)."""
    return call(text_casts.OUT_NAME, node)


# calls whose value is text already: not wrapped again (the macros name their argument
# in each branch: wrapping nested calls would copy the innermost exponentially often)
_TEXT_CALLS = frozenset(
    {"concat", "concat_ws", "hw_format", "hw_format0", text_casts.NAME, text_casts.OUT_NAME}
)


def _concat_arg(node: Any) -> Any:
    """concat()'s argument as PostgreSQL prints it (DuckDB: 'true', '1e+15' as
    '1000000000000000.0'), unless it is text already: a string constant, a parameter,
    a || chain, a call returning text."""
    if isinstance(node, A.ParamRef):
        return node
    if isinstance(node, A.A_Const) and isinstance(node.val, A.String):
        return node
    if isinstance(node, A.A_Expr) and [n.sval for n in node.name or ()] == ["||"]:
        return node
    if isinstance(node, A.FuncCall) and node.funcname[-1].sval.lower() in _TEXT_CALLS:
        return node
    return _text_arg(node)


def _concat(name: str, kept: int) -> Any:
    """concat(...) / concat_ws(sep, ...) with its arguments after the first `kept` as
    text; None once they are (the rewrite's own call comes back here)."""

    def rewrite(args: list[Any]) -> Any:
        texts = [_concat_arg(a) for a in args[kept:]]
        if all(t is a for t, a in zip(texts, args[kept:], strict=True)):
            return None
        return call(name, *args[:kept], *texts)

    return rewrite


def rewrite_format(args: list[Any]) -> Any:
    if not args:
        return None
    rest = [_text_arg(a) for a in args[1:]]
    if not rest:
        return call("hw_format0", args[0])
    return call("hw_format", args[0], call("list_value", *rest))


def _pad(name: str) -> Any:
    def rewrite(args: list[Any]) -> Any:
        return call(name, args[0], args[1], const(" ")) if len(args) == 2 else None

    return rewrite


def _string_to_array(args: list[Any]) -> Any:
    if len(args) not in (2, 3):
        return None
    null = args[2] if len(args) == 3 else cast(const(None), "text")
    return call("hw_string_to_array", args[0], cast(args[1], "text"), null)


def _substring(args: list[Any]) -> Any:
    from headwater.planner.functions.nodes import text_of

    if len(args) == 2 and text_of(args[1]) is not None:
        return call("hw_re_substring", args[0], args[1])  # substring(s from 'regex')
    if len(args) == 3 and text_of(args[2]) is not None:  # substring(s similar p escape e)
        return call("hw_similar_substring", args[0], args[1], args[2])
    if len(args) == 3 and text_of(args[1]) is None:
        return call("hw_substring", args[0], args[1], args[2])
    return None


def _simple(name: str, arity: int) -> Any:
    def rewrite(args: list[Any]) -> Any:
        return call(name, *args) if len(args) == arity else None

    return rewrite


def _int4(name: str, arity: int) -> Any:
    """A call of DuckDB's `name` as integer: PostgreSQL's length, strpos & co. return
    int4 (DuckDB's BIGINT reached clients as int8: a JDBC getObject is a Long)."""
    return lambda a: cast(call(name, *a), "int4") if len(a) == arity else None


REWRITES = {
    "length": _int4("len", 1),  # (bytea's and bit's first)
    "char_length": _int4("len", 1),
    "character_length": _int4("len", 1),
    "strpos": _int4("instr", 2),
    "position": _int4("instr", 2),  # position(b IN a) is position(a, b)
    "format": rewrite_format,
    "concat": _concat("concat", 0),
    "concat_ws": _concat("concat_ws", 1),
    "initcap": _simple("hw_initcap", 1),
    "quote_ident": _simple("hw_quote_ident", 1),
    "parse_ident": lambda a: call("hw_parse_ident", a[0], a[1] if len(a) > 1 else const(True)),
    "unistr": _simple("hw_unistr", 1),
    "normalize": lambda a: call("hw_normalize", a[0], a[1] if len(a) > 1 else const("NFC")),
    "is_normalized": lambda a: call("hw_is_normalized", a[0], a[1] if len(a) > 1 else const("NFC")),
    "to_ascii": lambda a: call("hw_to_ascii", a[0]) if len(a) == 1 else None,
    "octet_length": _simple("hw_octet_length", 1),  # (bytea's first)
    "bit_length": _simple("hw_bit_length", 1),
    "lpad": _pad("lpad"),
    "rpad": _pad("rpad"),
    "to_hex": _simple("hw_to_hex", 1),
    "quote_literal": _simple("hw_quote_literal", 1),
    "quote_nullable": _simple("hw_quote_nullable", 1),
    "chr": _simple("hw_chr", 1),
    "split_part": _simple("hw_split_part", 3),
    "string_to_array": _string_to_array,
    "string_to_table": lambda a: (
        call("unnest", s) if (s := _string_to_array(a)) is not None else None
    ),
    "substring": _substring,
    "substr": lambda a: call("hw_substring", *a) if len(a) == 3 else None,
}


def install(db: Any) -> None:
    for sql in MACROS:
        db.execute(sql)
    udf.register(db, "hw_format", _format, ["VARCHAR", "VARCHAR[]"], "VARCHAR", strict=False)
    db.execute("CREATE OR REPLACE MACRO hw_format0(f) AS hw_format(f, CAST([] AS VARCHAR[]))")
    udf.register(db, "hw_initcap", _initcap, ["VARCHAR"], "VARCHAR")
    udf.register(db, "hw_quote_ident", _quote_ident, ["VARCHAR"], "VARCHAR")
    udf.register(db, "hw_parse_ident", _parse_ident, ["VARCHAR", "BOOLEAN"], "VARCHAR[]")
    udf.register(db, "hw_unistr", _unistr, ["VARCHAR"], "VARCHAR")
    udf.register(db, "hw_normalize", _normalize, ["VARCHAR", "VARCHAR"], "VARCHAR")
    udf.register(db, "hw_is_normalized", _is_normalized, ["VARCHAR", "VARCHAR"], "BOOLEAN")
    udf.register(db, "hw_to_ascii", _to_ascii, ["VARCHAR"], "VARCHAR")
