"""PostgreSQL values: Python values <-> PostgreSQL text and binary wire formats, and
the value semantics they need (time zones, interval styles, numeric scales).

catalog/types.py names the types (OIDs, typmods, storage); this package holds their
values. It sits in the lowest layer so that every layer may import it. One module per
type family; registry.py holds each type's four codecs in one record per type OID.

The server asks once per result column for an encoder (`text_encoder`,
`binary_encoder`) and once per parameter for a decoder (`text_decoder`,
`binary_decoder`); each returns a plain function built for that type and session,
so the per-value path is one call with no type dispatch.

Python representation (what DuckDB hands us through pyarrow `to_pylist()`):

  bool, int, float, decimal.Decimal (numeric), str (text family, json, jsonb),
  bytes (bytea), uuid.UUID or str (uuid), datetime.date, datetime.time,
  datetime.datetime naive (timestamp) or aware (timestamptz, any zone),
  interval as pyarrow.MonthDayNano, `Interval` or datetime.timedelta.

Values Python's datetime cannot hold (BC, year > 9999, +-infinity, time 24:00:00)
travel as ints holding the Arrow raw value: date = days since 1970-01-01,
timestamp/timestamptz = microseconds since 1970-01-01 00:00 UTC, time =
microseconds since midnight. Infinity uses DuckDB's values: +-(2**31 - 1) days,
+-(2**63 - 1) microseconds. Decoders return the same forms.

char(n) values are kept without trailing blanks (PostgreSQL ignores them in
comparisons, length() and casts to text); encoders pad them back to n.
"""

from headwater.catalog.pgtypes.codec import Decoder, Encoder
from headwater.catalog.pgtypes.days import (
    DATE_INFINITY,
    DATE_NEG_INFINITY,
    TIMESTAMP_INFINITY,
    TIMESTAMP_NEG_INFINITY,
)
from headwater.catalog.pgtypes.interval import Interval
from headwater.catalog.pgtypes.jsonb import normalize_jsonb
from headwater.catalog.pgtypes.numeric import (
    QUOTIENT_PRECISION,
    QUOTIENT_PRECISIONS,
    QUOTIENT_SCALE,
    SPREAD_PRECISION,
    numeric_div_scale,
    quotient_scale,
    quotient_text,
)
from headwater.catalog.pgtypes.registry import (
    binary_decoder,
    binary_encoder,
    parse_literal,
    text_decoder,
    text_encoder,
)
from headwater.catalog.pgtypes.session import DEFAULT_SESSION, SessionFormat
from headwater.catalog.pgtypes.timezones import resolve_timezone

__all__ = [
    "DATE_INFINITY",
    "DATE_NEG_INFINITY",
    "TIMESTAMP_INFINITY",
    "TIMESTAMP_NEG_INFINITY",
    "QUOTIENT_PRECISION",
    "QUOTIENT_PRECISIONS",
    "QUOTIENT_SCALE",
    "SPREAD_PRECISION",
    "Decoder",
    "Encoder",
    "Interval",
    "SessionFormat",
    "DEFAULT_SESSION",
    "text_encoder",
    "binary_encoder",
    "text_decoder",
    "binary_decoder",
    "parse_literal",
    "normalize_jsonb",
    "numeric_div_scale",
    "quotient_scale",
    "quotient_text",
    "resolve_timezone",
]
