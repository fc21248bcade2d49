"""SQL errors carried from any layer up to the wire as a PostgreSQL ErrorResponse.

Every error a client can see is an `SQLError` with a SQLSTATE, so the server never
has to guess a code from a message. Layers raise the named subclasses below.
"""

from __future__ import annotations


class SQLError(Exception):
    """An error reported to the client with a SQLSTATE (PostgreSQL's error fields)."""

    sqlstate = "XX000"
    severity = "ERROR"

    def __init__(
        self,
        message: str,
        sqlstate: str | None = None,
        *,
        detail: str | None = None,
        hint: str | None = None,
        position: int | None = None,
        severity: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if sqlstate is not None:
            self.sqlstate = sqlstate
        if severity is not None:
            self.severity = severity
        self.detail = detail
        self.hint = hint
        self.position = position  # 1-based character offset into the statement
        self.context: str | None = None  # CONTEXT lines (PL/pgSQL: where it was raised)
        self.internal_query: str | None = None  # the statement `position` points into
        self.internal_position: int | None = None  # (one a DO block ran)

    def __str__(self) -> str:
        return self.message


def _kind(name: str, code: str) -> type[SQLError]:
    return type(name, (SQLError,), {"sqlstate": code})


SyntaxErr = _kind("SyntaxErr", "42601")
UndefinedTable = _kind("UndefinedTable", "42P01")
UndefinedColumn = _kind("UndefinedColumn", "42703")
UndefinedObject = _kind("UndefinedObject", "42704")
UndefinedFunction = _kind("UndefinedFunction", "42883")
InvalidSchemaName = _kind("InvalidSchemaName", "3F000")
DuplicateTable = _kind("DuplicateTable", "42P07")
DuplicateSchema = _kind("DuplicateSchema", "42P06")
DuplicateObject = _kind("DuplicateObject", "42710")
DuplicateColumn = _kind("DuplicateColumn", "42701")
DatatypeMismatch = _kind("DatatypeMismatch", "42804")
WrongObjectType = _kind("WrongObjectType", "42809")
DependentObjects = _kind("DependentObjects", "2BP01")
UniqueViolation = _kind("UniqueViolation", "23505")
NotNullViolation = _kind("NotNullViolation", "23502")
InvalidTextRepresentation = _kind("InvalidTextRepresentation", "22P02")
DivisionByZero = _kind("DivisionByZero", "22012")
NumericOutOfRange = _kind("NumericOutOfRange", "22003")
StringTooLong = _kind("StringTooLong", "22001")
InFailedTransaction = _kind("InFailedTransaction", "25P02")
ActiveTransaction = _kind("ActiveTransaction", "25001")
NoActiveTransaction = _kind("NoActiveTransaction", "25P01")
SerializationFailure = _kind("SerializationFailure", "40001")
FeatureNotSupported = _kind("FeatureNotSupported", "0A000")
ProtocolViolation = _kind("ProtocolViolation", "08P01")
InvalidCatalogName = _kind("InvalidCatalogName", "3D000")
InvalidParameterValue = _kind("InvalidParameterValue", "22023")
UndefinedParameter = _kind("UndefinedParameter", "42704")
InvalidCursorName = _kind("InvalidCursorName", "34000")
InvalidPreparedStatement = _kind("InvalidPreparedStatement", "26000")
DuplicatePreparedStatement = _kind("DuplicatePreparedStatement", "42P05")
QueryCanceled = _kind("QueryCanceled", "57014")
AdminShutdown = _kind("AdminShutdown", "57P01")
DiskFull = _kind("DiskFull", "53100")
IOError_ = _kind("IOError_", "58030")
InsufficientPrivilege = _kind("InsufficientPrivilege", "42501")  # also an unwritable file
UndefinedFile = _kind("UndefinedFile", "58P01")
LockNotAvailable = _kind("LockNotAvailable", "55P03")
GroupingError = _kind("GroupingError", "42803")
AmbiguousColumn = _kind("AmbiguousColumn", "42702")
InvalidColumnReference = _kind("InvalidColumnReference", "42P10")
CardinalityViolation = _kind("CardinalityViolation", "21000")
InvalidDatetimeFormat = _kind("InvalidDatetimeFormat", "22007")
DatetimeFieldOverflow = _kind("DatetimeFieldOverflow", "22008")
InternalError = _kind("InternalError", "XX000")


def numeric_overflow(precision: int, scale: int) -> SQLError:
    """PostgreSQL's error for a value too large for numeric(precision, scale)."""
    digits = precision - scale
    limit = f"10^{digits}" if digits else "1"  # (PostgreSQL prints 10^0 as 1)
    return NumericOutOfRange(
        "numeric field overflow",
        detail=f"A field with precision {precision}, scale {scale} must round to an "
        f"absolute value less than {limit}.",
    )


def utf8(raw: bytes) -> str:
    """`raw` as text, or PostgreSQL's 22021 naming the bytes of the first bad character
    (as many as its lead byte announces, as report_invalid_encoding prints them)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        lead, size = raw[e.start], 1
        for n, shift, pattern in ((2, 5, 0b110), (3, 4, 0b1110), (4, 3, 0b11110)):
            if lead >> shift == pattern:
                size = n
        bad = " ".join(f"0x{b:02x}" for b in raw[e.start : e.start + size])
        raise SQLError(f'invalid byte sequence for encoding "UTF8": {bad}', "22021") from None
