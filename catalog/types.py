"""PostgreSQL data types as Headwater knows them: OIDs, wire sizes, storage mapping.

One `PgType` per supported type. The OIDs and lengths are PostgreSQL 15's, so that
RowDescription and pg_type look the same to clients. `duckdb` is how the serving
replica stores a value of the type, `typmod` follows PostgreSQL's encoding
(varchar(n) -> n + 4; numeric(p, s) -> ((p << 16) | s) + 4; -1 when absent).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
from headwater.catalog.identifiers import quote_ident

from headwater.errors import (
    FeatureNotSupported,
    InvalidTextRepresentation,
    SQLError,
    SyntaxErr,
    UndefinedObject,
)

# The largest precision DuckDB's DECIMAL can hold; numeric without a precision is
# stored with this precision and NUMERIC_DEFAULT_SCALE digits after the point.
DUCKDB_MAX_PRECISION = 38
NUMERIC_DEFAULT_SCALE = 16


@dataclass(frozen=True)
class PgType:
    name: str  # PostgreSQL's pg_type.typname
    oid: int
    typlen: int  # -1 for variable length
    array_oid: int
    sql_name: str  # what format_type() prints without a typmod
    category: str  # pg_type.typcategory: N numeric, S string, B bool, D datetime, ...
    # an enum (CREATE TYPE ... AS ENUM, category E): its labels in order, and its schema
    labels: tuple[str, ...] = ()
    schema: str = "pg_catalog"

    def __str__(self) -> str:
        return self.sql_name


def _t(name: str, oid: int, typlen: int, array_oid: int, sql_name: str, cat: str) -> PgType:
    return PgType(name, oid, typlen, array_oid, sql_name, cat)


BOOL = _t("bool", 16, 1, 1000, "boolean", "B")
BYTEA = _t("bytea", 17, -1, 1001, "bytea", "U")
CHAR = _t("char", 18, 1, 1002, '"char"', "Z")
NAME = _t("name", 19, 64, 1003, "name", "S")
INT8 = _t("int8", 20, 8, 1016, "bigint", "N")
INT2 = _t("int2", 21, 2, 1005, "smallint", "N")
INT4 = _t("int4", 23, 4, 1007, "integer", "N")
TEXT = _t("text", 25, -1, 1009, "text", "S")
OID = _t("oid", 26, 4, 1028, "oid", "N")
JSON = _t("json", 114, -1, 199, "json", "U")
FLOAT4 = _t("float4", 700, 4, 1021, "real", "N")
FLOAT8 = _t("float8", 701, 8, 1022, "double precision", "N")
UNKNOWN = _t("unknown", 705, -2, 0, "unknown", "X")
BPCHAR = _t("bpchar", 1042, -1, 1014, "character", "S")
VARCHAR = _t("varchar", 1043, -1, 1015, "character varying", "S")
DATE = _t("date", 1082, 4, 1182, "date", "D")
TIME = _t("time", 1083, 8, 1183, "time without time zone", "D")
TIMESTAMP = _t("timestamp", 1114, 8, 1115, "timestamp without time zone", "D")
TIMESTAMPTZ = _t("timestamptz", 1184, 8, 1185, "timestamp with time zone", "D")
INTERVAL = _t("interval", 1186, 16, 1187, "interval", "T")
NUMERIC = _t("numeric", 1700, -1, 1231, "numeric", "N")
UUID = _t("uuid", 2950, 16, 2951, "uuid", "U")
JSONB = _t("jsonb", 3802, -1, 3807, "jsonb", "U")
# DuckDB's BIT (bit strings of any length) in query results only: not a column type
VARBIT = _t("varbit", 1562, -1, 1563, "bit varying", "V")

ALL_TYPES: tuple[PgType, ...] = (
    BOOL,
    BYTEA,
    CHAR,
    NAME,
    INT8,
    INT2,
    INT4,
    TEXT,
    OID,
    JSON,
    FLOAT4,
    FLOAT8,
    UNKNOWN,
    BPCHAR,
    VARCHAR,
    DATE,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    INTERVAL,
    NUMERIC,
    UUID,
    JSONB,
)
BY_OID: dict[int, PgType] = {t.oid: t for t in ALL_TYPES}
BY_NAME: dict[str, PgType] = {t.name: t for t in ALL_TYPES}

# Arrays of the types above, as query results and parameters (DuckDB lists): columns
# of array type are not supported. typname is PostgreSQL's (`_int4`).
ARRAY_TYPES: dict[str, PgType] = {
    t.name: _t("_" + t.name, t.array_oid, -1, 0, t.sql_name + "[]", "A")
    for t in ALL_TYPES
    if t.array_oid
}
ARRAY_ELEMENT: dict[str, PgType] = {a.name: BY_NAME[e] for e, a in ARRAY_TYPES.items()}
# A stored column's type by its name: a materialized view's columns may be arrays
STORED_TYPES: dict[str, PgType] = {**BY_NAME, **{a.name: a for a in ARRAY_TYPES.values()}}
# The types a parameter may be declared with (Parse's OIDs): the scalars and their arrays
PARAM_TYPES: dict[int, PgType] = {**BY_OID, **{a.oid: a for a in ARRAY_TYPES.values()}}
# pg_index.indkey and friends (system catalogs only). The replica keeps them as DuckDB
# USMALLINT[] / UBIGINT[] lists, which is how results tell them from int2[] / oid[]
# (oid is UINTEGER, so oid[] is UINTEGER[]).
INT2VECTOR = _t("int2vector", 22, -1, 1006, "int2vector", "A")
OIDVECTOR = _t("oidvector", 30, -1, 1013, "oidvector", "A")

# Names a user may write in DDL or a cast, as pglast reports them (pg_catalog names
# after the grammar's normalisation, e.g. "integer" arrives as int4).
_ALIASES: dict[str, PgType] = {
    **BY_NAME,
    "integer": INT4,
    "int": INT4,
    "smallint": INT2,
    "bigint": INT8,
    "boolean": BOOL,
    "real": FLOAT4,
    "float": FLOAT8,
    "double precision": FLOAT8,
    "decimal": NUMERIC,
    "character varying": VARCHAR,
    "character": BPCHAR,
    "string": TEXT,
    "serial": INT4,
    "bigserial": INT8,
    "smallserial": INT2,
    "timestamp without time zone": TIMESTAMP,
    "timestamp with time zone": TIMESTAMPTZ,
    "time without time zone": TIME,
}


@dataclass(frozen=True)
class ColumnType:
    """A type with its modifier, as a column or a cast names it."""

    pg: PgType
    typmod: int = -1
    # a column of a domain (CREATE DOMAIN): the domain, shown by the catalog; values,
    # the wire and comparisons are the base type's (`pg`, `typmod`)
    domain: PgType | None = field(default=None, compare=False)

    @property
    def length(self) -> int | None:
        """n of varchar(n)/char(n), or None."""
        if self.pg in (VARCHAR, BPCHAR) and self.typmod >= 4:
            return self.typmod - 4
        return None

    @property
    def precision_scale(self) -> tuple[int, int] | None:
        if self.pg is NUMERIC and self.typmod >= 4:
            m = self.typmod - 4
            return (m >> 16) & 0xFFFF, m & 0xFFFF
        return None

    def duckdb(self) -> str:
        """The DuckDB type that stores values of this type in the serving replica."""
        return duckdb_type(self)

    def sql(self) -> str:
        """format_type(): how psql and pg_dump print the type."""
        if self.pg in (VARCHAR, BPCHAR) and self.length is not None:
            return f"{self.pg.sql_name}({self.length})"
        ps = self.precision_scale
        if ps is not None:
            return f"numeric({ps[0]},{ps[1]})"
        return self.pg.sql_name

    def __str__(self) -> str:
        return self.sql()


def varchar_typmod(n: int) -> int:
    return n + 4


def numeric_typmod(precision: int, scale: int) -> int:
    return ((precision << 16) | scale) + 4


_DUCKDB_SIMPLE: dict[str, str] = {
    "bool": "BOOLEAN",
    "int2": "SMALLINT",
    "int4": "INTEGER",
    "int8": "BIGINT",
    "float4": "REAL",
    "float8": "DOUBLE",
    "text": "VARCHAR",
    "varchar": "VARCHAR",
    "bpchar": "VARCHAR",
    "name": "VARCHAR",
    "char": "VARCHAR",
    "bytea": "BLOB",
    "date": "DATE",
    "time": "TIME",
    "timestamp": "TIMESTAMP",
    "timestamptz": "TIMESTAMPTZ",
    "interval": "INTERVAL",
    "uuid": "UUID",
    "json": "JSON",
    "jsonb": "JSON",
    "oid": "UINTEGER",
    "unknown": "VARCHAR",
}


# element types of array columns: DuckDB reads their PostgreSQL text as PostgreSQL does
_ARRAY_COLUMN_ELEMENTS = frozenset(
    ("bool", "int2", "int4", "int8", "float4", "float8", "text", "varchar")
    + ("date", "time", "timestamp", "timestamptz", "uuid")
)


def enum_type(schema: str, name: str, oid: int, array_oid: int, labels: tuple[str, ...]) -> PgType:
    """The type of CREATE TYPE name AS ENUM (labels): stored as DuckDB's ENUM of the
    labels, whose positions order it as PostgreSQL's enumsortorder does."""
    # (shown unqualified, as format_type() shows a type the search path finds)
    t = PgType(name, oid, 4, array_oid, quote_ident(name), "E", labels, schema)
    ENUMS_BY_DUCKDB[enum_duckdb(labels)] = t
    return t


def domain_type(schema: str, name: str, oid: int, array_oid: int, base: PgType) -> PgType:
    """The PgType the catalog shows for a domain (its values are `base`'s)."""
    return PgType(name, oid, base.typlen, array_oid, quote_ident(name), base.category, (), schema)


def type_display(t: PgType, search_path: tuple[str, ...] | list[str]) -> str:
    """format_type()'s name of `t`: a CREATE TYPE's is schema-qualified unless the
    search path reaches its schema."""
    if t.schema == "pg_catalog" or t.schema in search_path:
        return t.sql_name
    return f"{quote_ident(t.schema)}.{t.sql_name}"


def enum_duckdb(labels: tuple[str, ...]) -> str:
    """DuckDB's type of an enum's values, written as DuckDB prints it (`ENUM('a', 'b')`)."""
    return "ENUM(" + ", ".join("'" + lb.replace("'", "''") + "'" for lb in labels) + ")"


def invalid_enum_label(t: PgType | None, label: str) -> SQLError:
    """PostgreSQL's error for a label the enum `t` does not have."""
    name = t.sql_name if t is not None else "enum"
    return InvalidTextRepresentation(f'invalid input value for enum {name}: "{label}"')


# DuckDB's ENUM(...) types -> the enums they store, for the types of query results and
# for error messages (the last enum created with those labels wins)
ENUMS_BY_DUCKDB: dict[str, PgType] = {}


def duckdb_type(ct: ColumnType) -> str:
    if ct.pg.category == "E":
        return enum_duckdb(ct.pg.labels)
    if ct.pg is NUMERIC:
        ps = ct.precision_scale
        if ps is None:
            return f"DECIMAL({DUCKDB_MAX_PRECISION},{NUMERIC_DEFAULT_SCALE})"
        return f"DECIMAL({ps[0]},{ps[1]})"
    element = ARRAY_ELEMENT.get(ct.pg.name)
    if element is not None:  # a materialized view's array_agg column: a DuckDB list
        return f"{_DUCKDB_SIMPLE[element.name]}[]"
    return _DUCKDB_SIMPLE[ct.pg.name]


# The Arrow type that carries each type's values into DuckDB (the INSERT batcher's rows,
# the pg_catalog emulation's tables); any other type travels as text, which DuckDB
# casts to the column's type.
_ARROW_SIMPLE: dict[PgType, pa.DataType] = {
    BOOL: pa.bool_(),
    INT2: pa.int16(),
    INT4: pa.int32(),
    INT8: pa.int64(),
    FLOAT4: pa.float32(),
    FLOAT8: pa.float64(),
    DATE: pa.date32(),
    TIMESTAMP: pa.timestamp("us"),
    TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
    TIME: pa.time64("us"),
    INTERVAL: pa.month_day_nano_interval(),
    BYTEA: pa.binary(),
}


@functools.cache
def arrow_type(ct: ColumnType) -> pa.DataType:
    """The Arrow type of the values of `ct` (numeric(p, s): decimal128(p, s)).

    >>> arrow_type(ColumnType(INT4)), arrow_type(ColumnType(NUMERIC, numeric_typmod(6, 2)))
    (DataType(int32), Decimal128Type(decimal128(6, 2)))
    """
    if ct.pg is NUMERIC:
        p, s = ct.precision_scale or (DUCKDB_MAX_PRECISION, NUMERIC_DEFAULT_SCALE)
        return pa.decimal128(p, s)
    element = ARRAY_ELEMENT.get(ct.pg.name)
    if element is not None:  # as DuckDB's Arrow results give a list column (its "l")
        return pa.list_(pa.field("l", arrow_type(ColumnType(element))))
    return _ARROW_SIMPLE.get(ct.pg, pa.string())


def type_named(name: str) -> PgType | None:
    """The type a name (`integer`, `int4`, `timestamp with time zone`, ...) stands for."""
    return _ALIASES.get(name)


# A user type's PgType by its name as written (schema-qualified or not), or None
# the database's own types by name: an enum's PgType, a domain's ColumnType (DDL only)
UserTypes = Callable[[list[str]], "PgType | ColumnType | None"]


def resolve_type_name(
    names: list[str], mods: list[int], array_bounds: int = 0, user: UserTypes | None = None
) -> ColumnType:
    """Turn a type as written (`names` qualified, modifiers) into a ColumnType; `user`
    finds the database's own types (enums).

    >>> resolve_type_name(["pg_catalog", "varchar"], [10]).sql()
    'character varying(10)'
    """
    if array_bounds:  # int[], int[][] (one type: PostgreSQL ignores the dimensions)
        element = resolve_type_name(names, mods, user=user)
        array = ARRAY_TYPES.get(element.pg.name)
        # (the elements' modifiers, varchar(3)[], would go unchecked: refused)
        if array is None or element.pg.name not in _ARRAY_COLUMN_ELEMENTS or mods:
            raise FeatureNotSupported(
                f"type {element.sql()}[] is not supported",
                hint="Arrays of text, varchar, integers, floats, booleans, dates, times,"
                " timestamps and uuid are, without a length.",
            )
        return ColumnType(array)
    name = names[-1].lower()
    own = user(names) if user is not None else None
    if own is not None and (len(names) > 1 or name not in _ALIASES):
        if mods:
            shown = own.domain.name if isinstance(own, ColumnType) and own.domain else own
            raise SyntaxErr(f'type modifier is not allowed for type "{shown}"')
        return own if isinstance(own, ColumnType) else ColumnType(own)  # a domain's
    if len(names) > 1 and names[0] not in ("pg_catalog",):
        raise UndefinedObject(f'type "{".".join(names)}" does not exist')
    pg = _ALIASES.get(name)
    if pg is None:
        raise UndefinedObject(f'type "{name}" does not exist')
    if pg in (VARCHAR, BPCHAR):
        if mods:
            if mods[0] < 1:
                raise FeatureNotSupported(f"length for type {pg.name} must be at least 1")
            return ColumnType(pg, varchar_typmod(mods[0]))
        # char without a length is char(1), as in PostgreSQL
        return ColumnType(pg, varchar_typmod(1) if pg is BPCHAR else -1)
    if pg is NUMERIC and mods:
        precision = mods[0]
        scale = mods[1] if len(mods) > 1 else 0
        if not 1 <= precision <= 1000:
            raise FeatureNotSupported(f"NUMERIC precision {precision} must be between 1 and 1000")
        if precision > DUCKDB_MAX_PRECISION:
            raise FeatureNotSupported(
                f"numeric({precision},{scale}): precision above {DUCKDB_MAX_PRECISION} "
                "is not supported; use numeric(38,s) or double precision"
            )
        if not 0 <= scale <= precision:
            raise FeatureNotSupported(
                f"NUMERIC scale {scale} must be between 0 and precision {precision}"
            )
        return ColumnType(pg, numeric_typmod(precision, scale))
    if pg is FLOAT8 and name == "float" and mods:
        return ColumnType(FLOAT4 if mods[0] <= 24 else FLOAT8)
    return ColumnType(pg)


# DuckDB result type -> PostgreSQL type, for query results whose type the planner
# did not pin down itself.
def from_duckdb(dtype: str) -> ColumnType:
    d = dtype.upper()
    if d in ("USMALLINT[]", "UBIGINT[]"):
        return ColumnType(INT2VECTOR if d == "USMALLINT[]" else OIDVECTOR)
    if d.endswith("[]"):
        base = d
        while base.endswith("[]"):  # PostgreSQL's arrays of any dimension share one type
            base = base[:-2]
        elem = None if base.endswith("]") else ARRAY_TYPES.get(from_duckdb(base).pg.name)
        return ColumnType(elem) if elem is not None else ColumnType(TEXT)
    if d.startswith("DECIMAL"):
        inner = d[d.index("(") + 1 : d.index(")")]
        p, s = (int(x) for x in inner.split(","))
        return ColumnType(NUMERIC, numeric_typmod(p, s))
    base = d.split("(")[0]
    if base == "ENUM":
        enum = ENUMS_BY_DUCKDB.get(dtype)
        return ColumnType(enum if enum is not None else TEXT)
    mapping = {
        "BOOLEAN": BOOL,
        "TINYINT": INT2,
        "SMALLINT": INT2,
        "INTEGER": INT4,
        "BIGINT": INT8,
        "HUGEINT": NUMERIC,
        "UTINYINT": INT2,
        "USMALLINT": INT4,
        "UINTEGER": OID,  # PostgreSQL has no unsigned types: only oid is stored so
        "UBIGINT": NUMERIC,
        "UHUGEINT": NUMERIC,
        "FLOAT": FLOAT4,
        "REAL": FLOAT4,
        "DOUBLE": FLOAT8,
        "VARCHAR": TEXT,
        "BLOB": BYTEA,
        "DATE": DATE,
        "TIME": TIME,
        "TIMESTAMP": TIMESTAMP,
        "TIMESTAMP WITH TIME ZONE": TIMESTAMPTZ,
        "TIMESTAMPTZ": TIMESTAMPTZ,  # (catalog/types.py duckdb_type spells it so)
        "TIMESTAMP_S": TIMESTAMP,
        "TIMESTAMP_MS": TIMESTAMP,
        "TIMESTAMP_NS": TIMESTAMP,
        "INTERVAL": INTERVAL,
        "UUID": UUID,
        "JSON": JSONB,
        "BIT": VARBIT,
        '"NULL"': TEXT,
        "NULL": TEXT,
    }
    pg = mapping.get(base)
    if pg is None:
        return ColumnType(TEXT)  # lists, structs, maps: shown as text
    return ColumnType(pg)
