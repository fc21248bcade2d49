"""Every type's codecs, one record per type OID, and the lookups the server calls.

A record holds four factories, PostgreSQL's typoutput, typsend, typinput and
typreceive: each builds the codec for one column type (its typmod) and session, so the
per-value path is one call with no type dispatch. Types without a decoder of their own
(int2vector, oidvector) take their parameters as text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from headwater.catalog import types as T
from headwater.catalog.pgtypes.arrays import array_in, array_out, array_recv, array_send
from headwater.catalog.pgtypes.bits import bit_bin, bit_in, bit_recv, bit_text
from headwater.catalog.pgtypes.bytea import bytea_bin, bytea_in, bytea_text
from headwater.catalog.pgtypes.codec import (
    F4,
    F8,
    I16,
    I32,
    I64,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    U32,
    Decoder,
    Encoder,
    as_str,
    fixed_recv,
)
from headwater.catalog.pgtypes.datetimes import (
    date_bin,
    date_in,
    date_recv,
    date_text,
    time_bin,
    time_in,
    time_recv,
    time_text,
    timestamp_bin,
    timestamp_in,
    timestamp_text,
    timestamptz_bin,
    timestamptz_text,
    ts_recv,
)
from headwater.catalog.pgtypes.floats import float4_recv, float_in, float_text
from headwater.catalog.pgtypes.integers import (
    bool_bin,
    bool_in,
    bool_recv,
    bool_text,
    int2vector_bin,
    int_in,
    int_text,
    oid_in,
    oidvector_bin,
    vector_text,
)
from headwater.catalog.pgtypes.interval import (
    interval_bin,
    interval_in,
    interval_recv,
    interval_text,
)
from headwater.catalog.pgtypes.jsonb import json_in, jsonb_bin, jsonb_in, jsonb_recv, jsonb_text
from headwater.catalog.pgtypes.numeric import numeric_bin, numeric_in, numeric_recv, numeric_text
from headwater.catalog.pgtypes.session import DEFAULT_SESSION, SessionFormat
from headwater.catalog.pgtypes.text import (
    bpchar_in,
    bpchar_out,
    char_bin,
    char_in,
    char_recv,
    name_in,
    string_in,
    string_out,
    string_recv,
    varchar_in,
    via_text,
)
from headwater.catalog.pgtypes.uuids import uuid_bin, uuid_in, uuid_recv, uuid_text
from headwater.catalog.types import ARRAY_TYPES, BY_NAME, ColumnType, PgType

EncoderFactory = Callable[[ColumnType, SessionFormat], Encoder]
DecoderFactory = Callable[[ColumnType, SessionFormat], Decoder]


@dataclass(frozen=True)
class TypeCodecs:
    """The four codec factories of one type."""

    text_out: EncoderFactory  # typoutput
    binary_out: EncoderFactory  # typsend
    text_in: DecoderFactory  # typinput
    binary_in: DecoderFactory  # typreceive


def _always(codec: Callable[[Any], Any]) -> Callable[[ColumnType, SessionFormat], Any]:
    """The factory of a codec that depends on neither typmod nor session."""
    return lambda ct, s: codec


_STRING = TypeCodecs(
    text_out=_always(string_out),
    binary_out=_always(string_out),
    text_in=_always(string_in),
    binary_in=_always(string_recv),
)
# What a type without a record of its own gets (every PgType has one today).
_UNREGISTERED = TypeCodecs(
    text_out=_always(string_out),
    binary_out=_always(string_out),
    text_in=_always(as_str),
    binary_in=_always(string_recv),
)

CODECS: dict[int, TypeCodecs] = {
    T.BOOL.oid: TypeCodecs(
        text_out=_always(bool_text),
        binary_out=_always(bool_bin),
        text_in=_always(bool_in),
        binary_in=_always(bool_recv),
    ),
    T.INT2.oid: TypeCodecs(
        text_out=_always(int_text),
        binary_out=_always(I16.pack),
        text_in=lambda ct, s: int_in("smallint", -(2**15), 2**15 - 1),
        binary_in=lambda ct, s: fixed_recv(I16, "smallint"),
    ),
    T.INT4.oid: TypeCodecs(
        text_out=_always(int_text),
        binary_out=_always(I32.pack),
        text_in=lambda ct, s: int_in("integer", INT32_MIN, INT32_MAX),
        binary_in=lambda ct, s: fixed_recv(I32, "integer"),
    ),
    T.INT8.oid: TypeCodecs(
        text_out=_always(int_text),
        binary_out=_always(I64.pack),
        text_in=lambda ct, s: int_in("bigint", INT64_MIN, INT64_MAX),
        binary_in=lambda ct, s: fixed_recv(I64, "bigint"),
    ),
    T.OID.oid: TypeCodecs(
        text_out=_always(int_text),
        binary_out=_always(U32.pack),
        text_in=_always(oid_in),
        binary_in=lambda ct, s: fixed_recv(U32, "oid"),
    ),
    T.FLOAT4.oid: TypeCodecs(
        text_out=lambda ct, s: float_text(6, s.extra_float_digits),
        binary_out=_always(F4.pack),
        text_in=lambda ct, s: float_in("real", True),
        binary_in=_always(float4_recv),
    ),
    T.FLOAT8.oid: TypeCodecs(
        text_out=lambda ct, s: float_text(15, s.extra_float_digits),
        binary_out=_always(F8.pack),
        text_in=lambda ct, s: float_in("double precision", False),
        binary_in=lambda ct, s: fixed_recv(F8, "double precision"),
    ),
    T.NUMERIC.oid: TypeCodecs(
        text_out=lambda ct, s: numeric_text(ct),
        binary_out=lambda ct, s: numeric_bin(ct),
        text_in=lambda ct, s: numeric_in(ct),
        binary_in=lambda ct, s: numeric_recv(ct),
    ),
    T.TEXT.oid: _STRING,
    T.UNKNOWN.oid: _STRING,
    T.VARCHAR.oid: TypeCodecs(
        text_out=_always(string_out),
        binary_out=_always(string_out),
        text_in=lambda ct, s: varchar_in(ct),
        binary_in=lambda ct, s: via_text(varchar_in(ct)),
    ),
    T.BPCHAR.oid: TypeCodecs(
        text_out=lambda ct, s: bpchar_out(ct),
        binary_out=lambda ct, s: bpchar_out(ct),
        text_in=lambda ct, s: bpchar_in(ct),
        binary_in=lambda ct, s: via_text(bpchar_in(ct)),
    ),
    T.NAME.oid: TypeCodecs(
        text_out=_always(string_out),
        binary_out=_always(string_out),
        text_in=_always(name_in),
        binary_in=lambda ct, s: via_text(name_in),
    ),
    T.CHAR.oid: TypeCodecs(
        text_out=_always(string_out),
        binary_out=_always(char_bin),
        text_in=_always(char_in),
        binary_in=_always(char_recv),
    ),
    T.BYTEA.oid: TypeCodecs(
        text_out=lambda ct, s: bytea_text(s),
        binary_out=_always(bytea_bin),
        text_in=_always(bytea_in),
        binary_in=_always(bytes),
    ),
    T.VARBIT.oid: TypeCodecs(
        text_out=_always(bit_text),
        binary_out=_always(bit_bin),
        text_in=_always(bit_in),
        binary_in=_always(bit_recv),
    ),
    T.JSON.oid: TypeCodecs(
        text_out=_always(string_out),
        binary_out=_always(string_out),
        text_in=_always(json_in),
        binary_in=lambda ct, s: via_text(json_in),
    ),
    T.JSONB.oid: TypeCodecs(
        text_out=_always(jsonb_text),
        binary_out=_always(jsonb_bin),
        text_in=_always(jsonb_in),
        binary_in=_always(jsonb_recv),
    ),
    T.UUID.oid: TypeCodecs(
        text_out=_always(uuid_text),
        binary_out=_always(uuid_bin),
        text_in=_always(uuid_in),
        binary_in=_always(uuid_recv),
    ),
    T.DATE.oid: TypeCodecs(
        text_out=_always(date_text),
        binary_out=_always(date_bin),
        text_in=lambda ct, s: date_in(s),
        binary_in=_always(date_recv),
    ),
    T.TIME.oid: TypeCodecs(
        text_out=_always(time_text),
        binary_out=_always(time_bin),
        text_in=_always(time_in),
        binary_in=_always(time_recv),
    ),
    T.TIMESTAMP.oid: TypeCodecs(
        text_out=_always(timestamp_text),
        binary_out=_always(timestamp_bin),
        text_in=lambda ct, s: timestamp_in(s, False),
        binary_in=lambda ct, s: ts_recv(False),
    ),
    T.TIMESTAMPTZ.oid: TypeCodecs(
        text_out=lambda ct, s: timestamptz_text(s),
        binary_out=_always(timestamptz_bin),
        text_in=lambda ct, s: timestamp_in(s, True),
        binary_in=lambda ct, s: ts_recv(True),
    ),
    T.INTERVAL.oid: TypeCodecs(
        text_out=lambda ct, s: interval_text(s),
        binary_out=_always(interval_bin),
        text_in=_always(interval_in),
        binary_in=_always(interval_recv),
    ),
    T.INT2VECTOR.oid: TypeCodecs(
        text_out=_always(vector_text),
        binary_out=_always(int2vector_bin),
        text_in=_always(as_str),
        binary_in=_always(string_recv),
    ),
    T.OIDVECTOR.oid: TypeCodecs(
        text_out=_always(vector_text),
        binary_out=_always(oidvector_bin),
        text_in=_always(as_str),
        binary_in=_always(string_recv),
    ),
}


def _array_codecs(elem: PgType) -> TypeCodecs:
    """An array type's codecs: its element's codec applied to each item."""
    elem_ct = ColumnType(elem)
    return TypeCodecs(
        text_out=lambda ct, s: array_out(text_encoder(elem_ct, session=s)),
        binary_out=lambda ct, s: array_send(elem.oid, binary_encoder(elem_ct, session=s)),
        text_in=lambda ct, s: array_in(text_decoder(elem_ct, session=s)),
        binary_in=lambda ct, s: array_recv(
            elem.oid, elem.sql_name, binary_decoder(elem_ct, session=s)
        ),
    )


CODECS.update({array.oid: _array_codecs(BY_NAME[e]) for e, array in ARRAY_TYPES.items()})


# Cached: callers may ask per value; ColumnType and SessionFormat are frozen.
@lru_cache(maxsize=4096)
def text_encoder(ct: ColumnType, *, session: SessionFormat = DEFAULT_SESSION) -> Encoder:
    """A function turning a non-NULL value of `ct` into PostgreSQL's text output."""
    return CODECS.get(ct.pg.oid, _UNREGISTERED).text_out(ct, session)


@lru_cache(maxsize=4096)
def binary_encoder(ct: ColumnType, *, session: SessionFormat = DEFAULT_SESSION) -> Encoder:
    """A function turning a non-NULL value of `ct` into PostgreSQL's binary (send) format."""
    return CODECS.get(ct.pg.oid, _UNREGISTERED).binary_out(ct, session)


@lru_cache(maxsize=4096)
def text_decoder(ct: ColumnType, *, session: SessionFormat = DEFAULT_SESSION) -> Decoder:
    """A function parsing a parameter in text format (str or UTF-8 bytes) into the
    Python representation, raising PostgreSQL's errors for bad input. `session`
    supplies the TimeZone for timestamptz input without a zone and the DateStyle
    field order."""
    return CODECS.get(ct.pg.oid, _UNREGISTERED).text_in(ct, session)


@lru_cache(maxsize=4096)
def binary_decoder(ct: ColumnType, *, session: SessionFormat = DEFAULT_SESSION) -> Decoder:
    """A function parsing a parameter in binary format (bytes) into the Python
    representation, validating it like PostgreSQL's receive functions."""
    return CODECS.get(ct.pg.oid, _UNREGISTERED).binary_in(ct, session)


def parse_literal(ct: ColumnType, text: str, *, session: SessionFormat = DEFAULT_SESSION) -> Any:
    """The value of a literal `'text'::ct` (slow path: builds the decoder each call)."""
    return text_decoder(ct, session=session)(text)
