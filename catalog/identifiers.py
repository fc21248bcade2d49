"""Identifier quoting, said once: `quote` for the SQL Headwater generates (always
quoted, so any name is safe), `quote_ident` as PostgreSQL's quote_ident() prints names
to users (quoted only when needed)."""

from __future__ import annotations

from pglast import keywords


def quote(ident: str) -> str:
    """`ident` as a quoted identifier: `a"b` -> `"a""b"`."""
    return '"' + ident.replace('"', '""') + '"'


def quote_ident(name: str) -> str:
    """PostgreSQL's quote_ident(): quoted unless a plain lower-case non-keyword
    (`abc` -> `abc`, `Abc` -> `"Abc"`, `select` -> `"select"`)."""
    simple = (
        bool(name)
        and (name[0].islower() or name[0] == "_")
        and all(c.islower() or c.isdigit() or c in "_$" for c in name)
        and name.isascii()
    )
    if simple and (name not in _KEYWORDS or name in keywords.UNRESERVED_KEYWORDS):
        return name
    return quote(name)


_KEYWORDS = frozenset(
    keywords.RESERVED_KEYWORDS
    | keywords.COL_NAME_KEYWORDS
    | keywords.TYPE_FUNC_NAME_KEYWORDS
    | keywords.UNRESERVED_KEYWORDS
)
