"""Translate DuckDB exceptions into PostgreSQL errors (SQLSTATE and wording).

Queries are bound by Headwater first (relations, views), so what reaches DuckDB
and fails is mostly column binding, casts and arithmetic; the messages below are
PostgreSQL's for those cases. Anything unrecognised keeps DuckDB's text under a
PostgreSQL class that fits the DuckDB exception type.
"""

from __future__ import annotations

import re

import duckdb
from headwater.catalog.types import ENUMS_BY_DUCKDB, invalid_enum_label

from headwater.errors import (
    AmbiguousColumn,
    CardinalityViolation,
    DatatypeMismatch,
    DivisionByZero,
    FeatureNotSupported,
    GroupingError,
    InternalError,
    InvalidTextRepresentation,
    NumericOutOfRange,
    SerializationFailure,
    SQLError,
    SyntaxErr,
    UndefinedColumn,
    UndefinedFunction,
    numeric_overflow,
)

_DUCK_TO_PG_TYPE = {
    "INT8": "smallint",
    "INT16": "smallint",
    "INT32": "integer",
    "INT64": "bigint",
    "INTEGER": "integer",
    "BIGINT": "bigint",
    "SMALLINT": "smallint",
    "DOUBLE": "double precision",
    "FLOAT": "real",
    "BOOL": "boolean",
    "BOOLEAN": "boolean",
    "DATE": "date",
    "TIMESTAMP": "timestamp without time zone",
    "INTERVAL": "interval",
    "TIMESTAMP WITH TIME ZONE": "timestamp with time zone",
    "UUID": "uuid",
}


def _out_of_memory(text: str) -> SQLError:
    """53200, as PostgreSQL reports a failed allocation. DuckDB got here after spilling
    what it can (table data, sorts, joins, aggregates) to its temp directory: what is left
    is state that cannot spill, such as one huge string_agg/array_agg value."""
    m = re.search(r"failed to allocate data of size ([\d.]+ \w+) \(([\d.]+ \w+)/([\d.]+ \w+)", text)
    detail = (
        f"Failed on a request of {m.group(1)} with {m.group(2)} of the server's "
        f"{m.group(3)} memory limit (headwater.memory_limit) in use."
        if m
        else _first_line(text)
    )
    return SQLError(
        "out of memory",
        "53200",
        detail=detail,
        hint="Start the server with a larger headwater start --memory-limit, or make the "
        "statement hold less at once (a LIMIT, fewer rows in one aggregate value).",
    )


def name_statement(err: SQLError, sql: str) -> None:
    """Say which statement ran out of memory (PostgreSQL's log has it as STATEMENT)."""
    if err.sqlstate != "53200" or not sql or "Statement:" in (err.detail or ""):
        return
    text = " ".join(sql.split())
    text = text if len(text) <= 200 else text[:197] + "..."
    err.detail = f"{err.detail} Statement: {text}" if err.detail else f"Statement: {text}"


def _first_line(text: str) -> str:
    text = re.sub(r"^[A-Za-z ]+ Error: ", "", text.strip())
    return text.split("\n")[0].strip()


# A Python UDF that fails with a PostgreSQL error raises it as ValueError(udf_error(e)):
# DuckDB keeps only the exception's text.
_UDF_ERROR = re.compile(r"HWSQLSTATE:(\w{5}):([^\n]*)")


def udf_error(err: SQLError) -> str:
    return f"HWSQLSTATE:{err.sqlstate}:{err.message}"


# DuckDB's casts to DECIMAL(p,s) that fail: of a number, of a string, of a double
_DECIMAL_CAST = re.compile(
    r'(?:Could not cast value (\S+) to|Could not convert string "(.*)" to'
    r'|Casting value "(.*)" to type) DECIMAL\((\d+),(\d+)\)'
)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def translate(exc: Exception) -> SQLError:
    if isinstance(exc, SQLError):
        return exc
    # (a cast of a column Headwater named: INSERT ... VALUES casts its columns once)
    text = re.sub(r" when casting from source column _hw_\w+", "", str(exc))
    msg = _first_line(text)
    m = _UDF_ERROR.search(text)
    if m:
        return SQLError(m.group(2).strip(), m.group(1))

    # a function Headwater defines raised PostgreSQL's error (planner/functions/)
    m = re.search(r"\[SQLSTATE ([0-9A-Z]{5})\] ([^\n]*)", text)
    if m:
        return SQLError(m.group(2), m.group(1))
    # a macro Headwater defines (planner/functions/) for no type of the argument given
    m = re.search(r"Macro (\w+)\(\) (does not support the supplied arguments|has multiple)", text)
    if m:
        name = m.group(1)
        name = "extract" if name.startswith("hw_extract_") else name.removeprefix("hw_")
        if m.group(2).startswith("has"):
            return SQLError(f"function {name} is not unique", "42725")
        return UndefinedFunction(
            f"function {name} does not exist",
            hint="No function matches the given name and argument types. "
            "You might need to add explicit type casts.",
        )
    if isinstance(exc, duckdb.OutOfMemoryException) or text.startswith("Out of Memory Error"):
        return _out_of_memory(text)

    m = re.search(r'Referenced column "([^"]+)" not found', text)
    if m:
        return UndefinedColumn(f'column "{m.group(1)}" does not exist')
    m = re.search(r'Column "([^"]+)" referenced that exists in the SELECT clause', text)
    if m:
        return UndefinedColumn(f'column "{m.group(1)}" does not exist')
    m = re.search(r'Referenced table "([^"]+)" not found', text)
    if m:
        return SQLError(f'missing FROM-clause entry for table "{m.group(1)}"', "42P01")
    m = re.search(r'Values list "([^"]+)" does not have a column named "([^"]+)"', text)
    if m:
        return UndefinedColumn(f"column {m.group(1)}.{m.group(2)} does not exist")
    if "combining JOIN type must be INNER or LEFT for a LATERAL reference" in text:
        return SQLError(  # (PostgreSQL names the table the reference is to)
            "invalid reference to FROM-clause entry of a LATERAL subquery",
            "42P10",
            detail="The combining JOIN type must be INNER or LEFT for a LATERAL reference.",
        )
    m = re.search(r'column "([^"]+)" must appear in the GROUP BY clause', text)
    if m:
        return GroupingError(
            f'column "{m.group(1)}" must appear in the GROUP BY clause '
            "or be used in an aggregate function"
        )
    if "In a DISTINCT aggregate, ORDER BY expressions must appear in the argument list" in text:
        return SQLError(
            "in an aggregate with DISTINCT, ORDER BY expressions must appear in argument list",
            "42P10",
        )
    m = re.search(r'Ambiguous reference to column name "([^"]+)"', text)
    if m:
        return AmbiguousColumn(f'column reference "{m.group(1)}" is ambiguous')
    m = _DECIMAL_CAST.search(msg)
    if m:  # an assignment or a cast to a numeric(p, s)
        value = next(v for v in m.group(1, 2, 3) if v is not None)
        precision, scale = m.group(4, 5)
        if _NUMBER.fullmatch(value.strip()):  # (else not a number at all)
            return numeric_overflow(int(precision), int(scale))
        return InvalidTextRepresentation(f'invalid input syntax for type numeric: "{value}"')
    m = re.search(r"Could not convert string '(.*)' to (ENUM\(.*\))", msg)
    if m:  # a label the enum does not have
        return invalid_enum_label(ENUMS_BY_DUCKDB.get(m.group(2)), m.group(1))
    m = re.search(r"Could not convert string '(.*)' to (\w+)", text)
    if m:
        pg = _DUCK_TO_PG_TYPE.get(m.group(2).upper(), m.group(2).lower())
        return InvalidTextRepresentation(f'invalid input syntax for type {pg}: "{m.group(1)}"')
    if "Division by zero" in text:
        return DivisionByZero("division by zero")
    if isinstance(exc, duckdb.OutOfRangeException) or "out of range" in text.lower():
        if "DECIMAL" in msg:  # (not in the query text DuckDB quotes after it)
            return NumericOutOfRange("numeric field overflow")
        m = re.search(r"of (INT\d+|INTEGER|BIGINT|SMALLINT)", text)
        kind = _DUCK_TO_PG_TYPE.get(m.group(1), "integer") if m else "integer"
        return NumericOutOfRange(f"{kind} out of range")
    if "more than one row returned by a subquery" in text.lower():  # DuckDB's, or the IR's error()
        return CardinalityViolation(
            "more than one row returned by a subquery used as an expression"
        )
    m = re.search(r"(?:Scalar|Aggregate|Table) Function with name (\w+) does not exist", text)
    if m:
        return UndefinedFunction(
            f"function {m.group(1)} does not exist",
            hint="No function matches the given name and argument types. "
            "You might need to add explicit type casts.",
        )
    m = re.search(r"No function matches the given name and argument types '([^']+)'", text)
    if m:
        return UndefinedFunction(
            f"function {m.group(1)} does not exist",
            hint="You might need to add explicit type casts.",
        )
    if "Conflict on" in text or "TransactionContext Error: Catalog write-write conflict" in text:
        return SerializationFailure("could not serialize access due to concurrent update")
    if isinstance(exc, duckdb.ParserException):
        return SyntaxErr(msg)
    m = re.search(r"Failed to cast value to (?:numerical|boolean): (.)", msg)
    if m:  # a jsonb value that is not a number (boolean) cast to one
        kind = {'"': "string", "{": "object", "[": "array", "t": "boolean", "f": "boolean"}
        return SQLError(f"cannot cast jsonb {kind.get(m.group(1), 'value')} to type", "22023")
    if isinstance(exc, duckdb.ConversionException):
        return InvalidTextRepresentation(msg)
    if isinstance(exc, duckdb.BinderException):
        if (
            "Cannot compare values of type" in text
            or "Cannot mix values of type" in text
            or ("implicit cast" in text.lower())
        ):
            return SQLError(msg, "42883")
        return SQLError(msg, "42601" if "syntax" in text.lower() else "42703")
    if isinstance(exc, duckdb.CatalogException):
        return SQLError(msg, "42704")
    if isinstance(exc, duckdb.NotImplementedException):
        return FeatureNotSupported(msg)
    if isinstance(exc, duckdb.InvalidInputException):
        return _invalid_input(msg)
    if isinstance(exc, duckdb.TypeMismatchException):
        return DatatypeMismatch(msg)
    if isinstance(exc, duckdb.InterruptException):
        return SQLError("canceling statement due to user request", "57014")
    return InternalError(msg)


# RE2's errors for a pattern (DuckDB's regexp functions), as PostgreSQL's 2201B
_RE2_ERRORS = re.compile(
    r"^(missing \]|missing \)|unexpected \)|invalid escape sequence|bad repetition operator"
    r"|missing argument to repetition operator|invalid character class|invalid nested"
    r" repetition operator|trailing \\|invalid perl operator|invalid repetition size"
    r"|invalid named capture group|bad character class range|invalid character class range)"
)


def _invalid_input(msg: str) -> SQLError:
    """DuckDB's invalid input errors that have a SQLSTATE of their own in PostgreSQL."""
    m = re.match(r"Cannot (AND|OR|XOR) bit strings of different sizes", msg)
    if m:
        return SQLError(f"cannot {m.group(1)} bit strings of different sizes", "22026")
    if _RE2_ERRORS.match(msg):
        return SQLError(f"invalid regular expression: {msg}", "2201B")
    m = re.match(r"Window (ROWS|RANGE|GROUPS) (PRECEDING|FOLLOWING) expression cannot be neg", msg)
    if m:
        return SQLError("frame starting offset must not be negative", "22013")
    return SQLError(msg, "22023")
