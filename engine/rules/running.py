"""Running sums over a batch's epochs: how stateful rules integrate in epoch order."""

from __future__ import annotations

from headwater.planner.render import ns_eq


def running_sums(rel: str, keys: list[str], values: list[str], window: bool) -> str:
    """Per key and epoch of `rel` (keys..., _e, values...; one row per key and epoch):
    each value's running sum over the key's epochs up to this one (`{x}_r`), the
    row's own value (`{x}_d`), its rank among the key's epochs (`_i`, from 1) and
    whether it is the key's last (`_last`).

    `window`: with a window function partitioned by key; otherwise with a self-join
    of each key's epochs. DuckDB's partitioned windows cost ~5 us per row and summed
    column (and per partition), the join a key's epochs squared: the join is the
    cheaper when the batch changed at few epochs (`SELF_JOIN_EPOCHS`)."""
    if window:
        part = ", ".join(keys) or "1"
        vals = "".join(f"{x} AS {x}_d, sum({x}) OVER _w AS {x}_r, " for x in values)
        kl = "".join(f"{k}, " for k in keys)
        return (
            f"(SELECT {kl}_e, {vals}row_number() OVER _w AS _i, lead(_e) OVER _w IS NULL AS _last"
            f" FROM {rel} WINDOW _w AS (PARTITION BY {part} ORDER BY _e"
            " ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW))"
        )
    eq = ns_eq([f"_a.{k}" for k in keys], [f"_b.{k}" for k in keys])
    ak = "".join(f"_a.{k}, " for k in keys)
    vals = "".join(f"any_value(_a.{x}) AS {x}_d, sum(_b.{x}) AS {x}_r, " for x in values)
    last = ns_eq([f"_q.{k}" for k in keys], [f"_m.{k}" for k in keys])
    kl = "".join(f"{k}, " for k in keys)
    return (
        f"(SELECT _q.*, _q._e = _m._e AS _last FROM (SELECT {ak}_a._e, {vals}count(*) AS _i"
        f" FROM {rel} AS _a JOIN {rel} AS _b ON {eq} AND _b._e <= _a._e"
        f" GROUP BY {ak}_a._e) AS _q"
        f" JOIN (SELECT {kl}max(_e) AS _e FROM {rel} GROUP BY ALL) AS _m ON {last})"
    )
