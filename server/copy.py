"""COPY data formats: PostgreSQL text and CSV, to and from rows.

COPY FROM parses the payload into Arrow string columns (pyarrow's CSV reader does the
splitting in C; text-format data block by block as it arrives: `CopyIn`); the table's
types are applied by DuckDB casts in the insert path, exactly as for INSERT. Text-format
backslash escapes are decoded in Python, only in the columns that contain any. COPY ...
TO runs a SELECT (`source_query`).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from pglast import ast as A

from headwater.errors import FeatureNotSupported, SQLError

_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}
_BLANK = re.compile(rb"\s*(?:\\\.\n)?")  # no rows: blanks, perhaps the end marker \.
_ESC_RE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)")


@dataclass
class CopyOptions:
    csv: bool = False
    delimiter: str = "\t"
    null: str = "\\N"
    header: bool = False
    quote: str = '"'
    escape: str = '"'
    freeze: bool = False  # rows written frozen: PostgreSQL's hint, only checked here


def copy_options(stmt: A.CopyStmt) -> CopyOptions:
    opts = CopyOptions()
    explicit_delim = explicit_null = False
    for o in stmt.options or ():
        name = o.defname.lower()
        val = (
            o.arg.sval
            if isinstance(o.arg, A.String)
            else (
                str(o.arg.ival)
                if isinstance(o.arg, A.Integer)
                else (
                    ("true" if o.arg.boolval else "false") if isinstance(o.arg, A.Boolean) else None
                )
            )
        )
        if name == "format":
            if val not in ("text", "csv"):
                raise FeatureNotSupported(f'COPY format "{val}" is not supported')
            opts.csv = val == "csv"
        elif name == "delimiter":
            opts.delimiter, explicit_delim = val or "\t", True
        elif name == "null":
            opts.null, explicit_null = val or "", True
        elif name == "header":
            opts.header = val is None or val.lower() in ("true", "on", "1")
        elif name == "freeze":
            opts.freeze = val is None or val.lower() in ("true", "on", "1")
        elif name == "quote":
            opts.quote = val or '"'
        elif name == "escape":
            opts.escape = val or '"'
        elif name in ("encoding",):
            pass
        else:
            raise FeatureNotSupported(f'COPY option "{name}" is not supported')
    if opts.csv:
        if not explicit_delim:
            opts.delimiter = ","
        if not explicit_null:
            opts.null = ""
    if len(opts.delimiter) != 1:
        raise SQLError("COPY delimiter must be a single one-byte character", "0A000")
    return opts


def _unescape(field: str) -> str:
    def sub(m: re.Match[str]) -> str:
        s = m.group(1)
        if s[0] == "x" and len(s) > 1:
            return chr(int(s[1:], 16))
        if s[0].isdigit():
            return chr(int(s, 8))
        return _ESCAPES.get(s, s)

    return _ESC_RE.sub(sub, field)


def parse_copy(data: bytes, ncols: int, names: list[str], opts: CopyOptions) -> pa.Table:
    """Rows of COPY data as a table of nullable strings named `names`."""
    if _BLANK.fullmatch(data):
        return pa.table({n: pa.array([], pa.string()) for n in names})
    # Text format: no NULL to look for when its marker (\\N by default) is nowhere in the
    # data: the reader compares every field with it otherwise (~1/3 of its time).
    nulls = opts.csv or not opts.null or opts.null.encode() in data
    buf = pa.py_buffer(data)  # slices of it copy nothing (a COPY's payload is ~100 MB)
    if data.endswith(b"\\.\n"):
        buf = buf[:-3]
    if opts.csv:
        parse = pacsv.ParseOptions(
            delimiter=opts.delimiter,
            quote_char=opts.quote,
            double_quote=opts.escape == opts.quote,
            escape_char=False if opts.escape == opts.quote else opts.escape,
            newlines_in_values=True,
        )
        conv = pacsv.ConvertOptions(
            column_types={n: pa.string() for n in names},
            null_values=[opts.null],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        )
    else:
        parse = pacsv.ParseOptions(delimiter=opts.delimiter, quote_char=False, escape_char=False)
        conv = pacsv.ConvertOptions(
            column_types={n: pa.string() for n in names},
            null_values=[opts.null] if nulls else [],
            strings_can_be_null=nulls,
        )
    read = pacsv.ReadOptions(
        column_names=names, skip_rows=1 if opts.header else 0, block_size=16 << 20
    )
    try:
        table = pacsv.read_csv(
            pa.BufferReader(buf), read_options=read, parse_options=parse, convert_options=conv
        )
    except pa.ArrowInvalid as e:
        text = str(e)
        if "Expected" in text and "columns" in text:
            m = re.search(r"Expected (\d+) columns, got (\d+)", text)
            got = int(m.group(2)) if m else 0
            what = (
                "extra data after last expected column"
                if got > ncols
                else "missing data for column"
            )
            raise SQLError(what, "22P04") from None
        raise SQLError(f"invalid COPY data: {text}", "22P04") from None
    if not opts.csv and b"\\" in data:
        table = pa.table([_unescaped(col) for col in table.columns], names=names)
    return table


def _unescaped(col: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
    """A text-format column with its backslash escapes decoded (in Python: only a column
    that has any, once \\N has become NULL)."""
    if not pc.any(pc.match_substring(col, "\\")).as_py():
        return col
    vals = [None if v is None else (_unescape(v) if "\\" in v else v) for v in col.to_pylist()]
    return pa.array(vals, pa.string())


# Text-format data is parsed in blocks of whole lines of about this size as it arrives
# (on a worker thread, while the event loop receives the rest), not all at the end: a
# COPY's parse (~0.1 s per 60 MB; TPC-H's lineitem, ~0.3-1 s per 150 MB) then overlaps
# its receipt instead of following it. Splitting at any newline gives the rows the whole
# payload gives (the reader ends a row at every newline).
BLOCK_BYTES = 8 << 20


class CopyIn:
    """The data of a COPY FROM STDIN, fed chunk by chunk, as one table of strings."""

    def __init__(self, ncols: int, names: list[str], opts: CopyOptions) -> None:
        self.ncols, self.names, self.opts = ncols, names, opts
        self._pending: list[bytes] = []
        self._size = 0
        self._parts: list[asyncio.Future[pa.Table]] = []

    def feed(self, chunk: bytes) -> None:
        self._pending.append(chunk)
        self._size += len(chunk)
        if self.opts.csv or self._size < BLOCK_BYTES:  # CSV: a quoted value may hold newlines
            return
        data = b"".join(self._pending)
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            self._pending = [data]
            return
        rest = data[cut:]
        self._pending, self._size = ([rest] if rest else []), len(rest)
        self._parse(data if cut == len(data) else data[:cut])

    def _parse(self, data: bytes) -> None:
        opts = self.opts if not self._parts else replace(self.opts, header=False)
        loop = asyncio.get_running_loop()
        part = loop.run_in_executor(None, parse_copy, data, self.ncols, self.names, opts)
        part.add_done_callback(_retrieved)  # a COPY abandoned midway logs no lost errors
        self._parts.append(part)

    async def table(self) -> pa.Table:
        """Every row fed; raises the first block's error (22P04, ...)."""
        if self._pending or not self._parts:
            self._parse(b"".join(self._pending))
            self._pending = []
        parts = await asyncio.gather(*self._parts, return_exceptions=True)
        for part in parts:
            if isinstance(part, BaseException):
                raise part
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def _retrieved(part: asyncio.Future[pa.Table]) -> None:
    if not part.cancelled():
        part.exception()


def _text_field(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _csv_field(v: str, opts: CopyOptions) -> str:
    if v == "" or any(c in v for c in (opts.delimiter, opts.quote, "\n", "\r")) or v == opts.null:
        return opts.quote + v.replace(opts.quote, opts.quote * 2) + opts.quote
    return v


def format_copy_row(values: list[str | None], opts: CopyOptions) -> bytes:
    if opts.csv:
        out = [opts.null if v is None else _csv_field(v, opts) for v in values]
    else:
        out = [opts.null if v is None else _text_field(v) for v in values]
    return (opts.delimiter.join(out) + "\n").encode("utf-8")


def header_row(names: list[str], opts: CopyOptions) -> bytes:
    return format_copy_row(list(names), opts)


__all__ = [
    "CopyIn",
    "CopyOptions",
    "copy_options",
    "parse_copy",
    "format_copy_row",
    "header_row",
    "Any",
]


def source_query(stmt: A.CopyStmt) -> A.SelectStmt:
    """The SELECT whose rows COPY ... TO sends: COPY (SELECT ...) or COPY table [(cols)]."""
    if stmt.query is not None:
        query = stmt.query
        if not isinstance(query, A.SelectStmt):
            raise FeatureNotSupported("COPY (statement) TO supports SELECT only")
        return query
    targets = (
        [A.ResTarget(val=A.ColumnRef(fields=(A.String(sval=a.sval),))) for a in stmt.attlist]
        if stmt.attlist
        else [A.ResTarget(val=A.ColumnRef(fields=(A.A_Star(),)))]
    )
    return A.SelectStmt(targetList=targets, fromClause=(stmt.relation,), op=0)
