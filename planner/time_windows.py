"""TUMBLE and HOP time windows in FROM, as RisingWave and Materialize users write them.

    TUMBLE(relation, time_col, size)        each row in the window holding it
    HOP(relation, time_col, slide, size)    each row in every window of `size`,
                                            starting every `slide`, holding it

Both give the relation's columns plus `window_start` and `window_end`. Windows are
aligned to 1970-01-01 00:00:00 UTC (RisingWave's offset 0): `window_start =
date_bin(size, time_col, origin)` (for HOP, the latest start is binned by `slide` and
the row is repeated for the size/slide starts before it). They are plain expressions
(and for HOP a cross join with the constant offsets 0..n-1), so the linear rules
maintain them; a row whose time is NULL is in no HOP window, and in TUMBLE's NULL
window (as date_bin gives).
"""

from __future__ import annotations

import duckdb

from headwater.errors import FeatureNotSupported, SQLError

TIME_WINDOW_FUNCS = ("tumble", "hop")


def interval_seconds(sql: str) -> float:
    """A constant interval's length in seconds (its SQL as the IR holds it); 22023 for
    one that is not positive or counts months (windows are fixed-length)."""
    try:
        row = duckdb.execute(
            f"SELECT epoch(CAST(({sql}) AS INTERVAL)), date_part('month', CAST(({sql}) AS"
            f" INTERVAL)) + 12 * date_part('year', CAST(({sql}) AS INTERVAL))"
        ).fetchone()
    except duckdb.Error as e:
        raise FeatureNotSupported(f"a window size that is not a constant interval ({sql})") from e
    assert row is not None
    seconds, months = row
    if months or seconds is None or seconds <= 0:
        raise SQLError(f"window size must be a positive interval of fixed length: {sql}", "22023")
    return float(seconds)


def hop_count(slide: str, size: str) -> int:
    """How many HOP windows hold a row: size / slide, which must be a whole number."""
    n = interval_seconds(size) / interval_seconds(slide)
    if abs(n - round(n)) > 1e-9:
        raise SQLError("HOP's window size must be a multiple of its slide", "22023")
    return int(round(n))


def origin_for(type_name: str | None) -> str:
    """The windows' origin, typed as the time column (timestamp or timestamptz)."""
    if type_name == "timestamp":
        return "CAST('1970-01-01 00:00:00' AS timestamp)"
    return "CAST('1970-01-01 00:00:00+00' AS timestamptz)"
