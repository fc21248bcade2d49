"""Whole Arrow columns in PostgreSQL's output formats, for result sets.

A result of many rows is encoded a column at a time where Arrow's kernels give
exactly PostgreSQL's output: in text, integers, strings, booleans, ISO dates and
timestamps of years 1-9999 (timestamptz when the session's TimeZone is UTC) and
numerics at their column's scale; in binary, integers, floats, booleans,
strings, dates and timestamps of years 1-9999. `column_encoder` returns None for any
other column (floats in text, intervals, arrays, BC dates, ...): the caller encodes
those value by value with the registry's encoders (registry.py), which stay the
definition of every format; tests/test_result_encoding.py compares both on the same
values.

    enc = column_encoder(pa.int32(), ColumnType(INT4), binary=False, session=s)
    enc(pa.array([1, None, -3], pa.int32()))   # binary array [b"1", None, b"-3"]
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from headwater.catalog.pgtypes.numeric import QUOTIENT_PRECISIONS
from headwater.catalog.pgtypes.session import SessionFormat
from headwater.catalog.types import (
    BOOL,
    DATE,
    FLOAT4,
    FLOAT8,
    INT2,
    INT4,
    INT8,
    JSON,
    NAME,
    NUMERIC,
    TEXT,
    TIMESTAMP,
    TIMESTAMPTZ,
    UNKNOWN,
    VARCHAR,
    ColumnType,
)

ColumnEncoder = Callable[[pa.Array], pa.Array | None]  # None: not here (a value out of range)

_STRINGS = {TEXT.oid, VARCHAR.oid, NAME.oid, UNKNOWN.oid, JSON.oid}
_INT_WIDTH = {INT2.oid: ">i2", INT4.oid: ">i4", INT8.oid: ">i8"}
_FLOAT_WIDTH = {FLOAT4.oid: ">f4", FLOAT8.oid: ">f8"}
# years 1-9999, where Arrow's ISO text and PostgreSQL's agree (and no infinities)
_DAYS = (-719_162, 2_932_896)  # 0001-01-01 and 9999-12-31, days since 1970
_MICROS = (-62_135_596_800_000_000, 253_402_300_799_999_999)
_PG_EPOCH_DAYS = 10_957  # 2000-01-01, PostgreSQL's binary epoch, in days since 1970
_PG_EPOCH_MICROS = _PG_EPOCH_DAYS * 86_400_000_000


def column_encoder(
    arrow_type: pa.DataType, ct: ColumnType, *, binary: bool, session: SessionFormat
) -> ColumnEncoder | None:
    """A function encoding a whole column of `arrow_type` (a result column PostgreSQL
    types `ct`) into a binary array of each value's bytes (NULLs kept), or None
    when this column's values go through the per-value encoders."""
    oid = ct.pg.oid
    if oid in _STRINGS and _is_string(arrow_type):
        return _as_binary
    if binary:
        return _binary_encoder(arrow_type, ct)
    if oid in _INT_WIDTH and pa.types.is_integer(arrow_type):
        return _text_cast
    if oid == BOOL.oid and pa.types.is_boolean(arrow_type):
        return lambda a: _as_binary(pc.if_else(a, "t", "f"))
    if oid == DATE.oid and pa.types.is_date32(arrow_type) and session.datestyle.startswith("ISO"):
        return lambda a: _text_cast(a) if _within(a.view(pa.int32()), _DAYS) else None
    if (
        oid in (TIMESTAMP.oid, TIMESTAMPTZ.oid)
        and _micros(arrow_type)
        and session.datestyle.startswith("ISO")
        and (oid == TIMESTAMP.oid or session.timezone == "UTC")
    ):
        zone = "+00" if oid == TIMESTAMPTZ.oid else ""

        def timestamp(a: pa.Array) -> pa.Array | None:
            raw = a.view(pa.int64())
            if not _within(raw, _MICROS):
                return None
            text = pc.cast(raw.view(pa.timestamp("us")), pa.string())  # 6 fraction digits
            text = pc.replace_substring_regex(text, r"\.?0+$", "")  # PostgreSQL trims them
            return _as_binary(pc.binary_join_element_wise(text, zone, "") if zone else text)

        return timestamp
    if oid == NUMERIC.oid and pa.types.is_decimal(arrow_type):
        ps = ct.precision_scale
        # a column's scale is its values' text scale (unconstrained or quotient
        # numerics are trimmed or rescaled per value: numeric.py); Arrow writes an
        # exponent below 1e-6, as Java's BigDecimal does, hence scales up to 6
        if ps is not None and ps[0] not in QUOTIENT_PRECISIONS and ps[1] == arrow_type.scale <= 6:
            return _text_cast
    return None


def _binary_encoder(arrow_type: pa.DataType, ct: ColumnType) -> ColumnEncoder | None:
    oid = ct.pg.oid
    if oid in _INT_WIDTH and pa.types.is_integer(arrow_type):
        return lambda a: _fixed(a, _INT_WIDTH[oid])
    if oid in _FLOAT_WIDTH and pa.types.is_floating(arrow_type):
        return lambda a: _fixed(a, _FLOAT_WIDTH[oid])
    if oid == BOOL.oid and pa.types.is_boolean(arrow_type):
        return lambda a: _fixed(a, "u1")
    if oid == NUMERIC.oid and pa.types.is_decimal128(arrow_type):
        ps = ct.precision_scale
        if ps is not None and ps[0] not in QUOTIENT_PRECISIONS and ps[1] == arrow_type.scale:
            return lambda a: _numeric_send(a, arrow_type.scale)
    if oid == DATE.oid and pa.types.is_date32(arrow_type):

        def date(a: pa.Array) -> pa.Array | None:
            if not _within(a.view(pa.int32()), _DAYS):
                return None
            return _fixed(a, ">i4", lambda v: v.astype(np.int32) - _PG_EPOCH_DAYS)

        return date
    if oid in (TIMESTAMP.oid, TIMESTAMPTZ.oid) and _micros(arrow_type):

        def timestamp(a: pa.Array) -> pa.Array | None:
            raw = a.view(pa.int64())
            if not _within(raw, _MICROS):
                return None
            return _fixed(raw, ">i8", lambda v: v - _PG_EPOCH_MICROS)

        return timestamp
    return None


def _micros(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) and t.unit == "us"


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _as_binary(a: pa.Array) -> pa.Array:
    if pa.types.is_string_view(a.type):
        a = a.cast(pa.large_string())
    return a.cast(pa.large_binary() if pa.types.is_large_string(a.type) else pa.binary())


def _text_cast(a: pa.Array) -> pa.Array:
    return _as_binary(pc.cast(a, pa.string()))


def _within(raw: pa.Array, bounds: tuple[int, int]) -> bool:
    """Whether every non-NULL value of an integer array lies within `bounds`."""
    if raw.null_count == len(raw):
        return True
    mm = pc.min_max(raw)
    return bounds[0] <= mm["min"].as_py() and mm["max"].as_py() <= bounds[1]


def _fixed(
    a: pa.Array, dtype: str, convert: Callable[[np.ndarray], np.ndarray] | None = None
) -> pa.Array:
    """Fixed-width big-endian values as a binary array (NULLs keep no bytes)."""
    values = a.fill_null(False if pa.types.is_boolean(a.type) else 0).to_numpy(zero_copy_only=False)
    if convert is not None:
        values = convert(values)
    width = np.dtype(dtype).itemsize
    data = np.ascontiguousarray(values.astype(dtype)).view(np.uint8)
    valid = _valid(a)
    if a.null_count:  # a NULL's slot keeps no bytes
        data = data.reshape(len(a), width)[valid].reshape(-1)
    return _binary(a, valid * width, data)


def _valid(a: pa.Array) -> np.ndarray:
    return a.is_valid().to_numpy(zero_copy_only=False) if a.null_count else np.ones(len(a), bool)


def _binary(a: pa.Array, sizes: np.ndarray, data: np.ndarray) -> pa.Array:
    """A binary array of `a`'s length and NULLs: value i is the next sizes[i] bytes of
    `data` (0 for a NULL)."""
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int32)
    validity = a.is_valid().buffers()[1] if a.null_count else None
    return pa.Array.from_buffers(
        pa.binary(), len(a), [validity, pa.py_buffer(offsets), pa.py_buffer(data)], a.null_count
    )


_GROUPS = 5  # base-10000 digit groups of an aligned value below 10**18
_POW = np.array([10_000**k for k in range(_GROUPS)], dtype=np.int64)


def _numeric_send(a: pa.Array, scale: int) -> pa.Array | None:
    """numeric_send of decimals whose unscaled values are below 10**15 (else None):
    ndigits, weight, sign, dscale, then the base-10000 digit groups from the first
    to the last nonzero one (numeric.py `_numeric_send`, a column at a time)."""
    n = len(a)
    words = np.frombuffer(a.buffers()[1], dtype="<i8")[2 * a.offset : 2 * (a.offset + n)]
    low, high = words[0::2], words[1::2]
    valid = _valid(a)
    low = np.where(valid, low, 0)
    if np.any(np.where(valid, high, 0) != (low >> 63)) or np.any(np.abs(low) >= 10**15):
        return None
    pad = -scale % 4
    aligned = np.abs(low) * 10**pad
    groups = (aligned[:, None] // _POW) % 10_000  # [:, k]: the group of weight k - frac
    nonzero = groups != 0
    hi = _GROUPS - 1 - np.argmax(nonzero[:, ::-1], axis=1)  # most significant nonzero
    lo = np.argmax(nonzero, axis=1)
    zero = ~nonzero.any(axis=1)
    ndigits = np.where(zero, 0, hi - lo + 1)
    weight = np.where(zero, 0, hi - (scale + pad) // 4)
    sign = np.where(low < 0, 0x4000, 0)
    k = np.arange(_GROUPS - 1, -1, -1)  # groups most significant first
    keep = (k <= hi[:, None]) & (k >= lo[:, None]) & ~zero[:, None]
    head = np.stack([ndigits, weight, sign, np.full(n, scale)], axis=1)
    table = np.concatenate([head, groups[:, ::-1]], axis=1)
    mask = np.concatenate([np.ones((n, 4), bool), keep], axis=1) & valid[:, None]
    data = table[mask].astype(">u2").view(np.uint8)
    return _binary(a, np.where(valid, 8 + 2 * ndigits, 0), data)
