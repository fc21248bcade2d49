"""Freshness SLOs with named reasons (RockStream's model).

`CREATE MATERIALIZED VIEW v WITH (freshness = '1s') AS ...` declares a target: every
write should be reflected in v within 1 s of its epoch closing. Once a second the
server samples each such view's lag (the time since the oldest epoch it does not
reflect closed, as headwater_catalog.views' lag_ms) and keeps the samples of the last
SLO_WINDOW seconds. headwater_catalog.views then shows

    freshness_target   the target (interval)
    slo_compliance     the share of the window's samples within the target (NULL: no target)
    degraded_reason    NULL at 1.0, else why the latest sample past the target was late:

        ERROR             the view failed (its status is 'error'; see `error`)
        SPARK_RESTARTING  the Spark stage that advances the views is restarting
        BACKFILLING       the view is being populated, or was created and its stage
                          is still starting
        RECOVERING        catching up after a server restart: the view is behind the
                          epoch that was durable when the server started
        BEHIND            lagging with none of the above (load, a slow batch)

and /metrics exports `headwater_view_slo_compliance{view}`,
`headwater_view_freshness_target_seconds{view}` and `headwater_view_degraded{view,reason}`
(1 for the reason given, 0 for the others).
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwater.server import hw_catalog
from pglast import ast as A
from pglast.enums import AlterTableType as AT
from prometheus_client.core import GaugeMetricFamily, Metric

from headwater.errors import FeatureNotSupported, InvalidParameterValue

if TYPE_CHECKING:
    from headwater.catalog.objects import MaterializedView
    from headwater.server.instance import Instance

log = logging.getLogger("headwater.slo")

REASONS = ("BACKFILLING", "RECOVERING", "SPARK_RESTARTING", "BEHIND", "ERROR")
SLO_WINDOW = 300.0  # seconds of samples slo_compliance is computed over
SLO_SAMPLE = 1.0  # seconds between samples

# PostgreSQL's storage parameters of a heap: accepted by PostgreSQL on a materialized
# view, not by Headwater (0A000); any other name is unrecognized (22023), as there
PG_RELOPTIONS = frozenset(
    {
        "fillfactor",
        "toast_tuple_target",
        "parallel_workers",
        "autovacuum_enabled",
        "user_catalog_table",
        "vacuum_index_cleanup",
        "vacuum_truncate",
        "log_autovacuum_min_duration",
    }
)

_UNITS = {
    "us": 1e-6,
    "microsecond": 1e-6,
    "microseconds": 1e-6,
    "ms": 0.001,
    "msec": 0.001,
    "millisecond": 0.001,
    "milliseconds": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
}
_TERM = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-z]*)\s*")


def parse_interval(text: str) -> float | None:
    """'1s', '500ms', '1 minute 30 seconds', '2.5' (seconds) -> seconds; None if not an
    interval of that form."""
    v = text.strip().lower()
    pos, total = 0, 0.0
    while pos < len(v):
        m = _TERM.match(v, pos)
        if m is None or m.end() == pos or (m.group(2) or "s") not in _UNITS:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2) or "s"]
        pos = m.end()
    return total if v else None


def view_options(options: list[A.DefElem] | None) -> float | None:
    """The freshness target (seconds) of CREATE MATERIALIZED VIEW ... WITH (...)."""
    freshness = None
    for opt in options or ():
        name = opt.defname.lower()
        if opt.defnamespace is None and name == "freshness":
            freshness = freshness_value(opt.arg)
        elif opt.defnamespace is not None or name in PG_RELOPTIONS:
            raise FeatureNotSupported(
                f'storage parameter "{opt.defname}" on a materialized view is not supported'
            )
        else:
            raise InvalidParameterValue(
                f'unrecognized parameter "{opt.defname}"',
                hint="A materialized view takes WITH (freshness = '1s'): its freshness target.",
            )
    return freshness


def sets_options(cmds: list[A.AlterTableCmd]) -> bool:
    """ALTER MATERIALIZED VIEW ... SET (...) / RESET (...) and nothing else."""
    return bool(cmds) and all(
        c.subtype in (AT.AT_SetRelOptions, AT.AT_ResetRelOptions) for c in cmds
    )


def altered_freshness(mv: MaterializedView, cmds: list[A.AlterTableCmd]) -> float | None:
    """The view's target after ALTER MATERIALIZED VIEW ... SET (freshness = '5s') or
    RESET (freshness) (validated as at CREATE)."""
    freshness = mv.freshness
    for cmd in cmds:
        if cmd.subtype == AT.AT_SetRelOptions:
            freshness = view_options(list(cmd.def_)) or freshness
            continue
        for opt in cmd.def_:
            name = opt.defname.lower()
            if opt.defnamespace is None and name == "freshness":
                freshness = None
            elif opt.defnamespace is None and name not in PG_RELOPTIONS:
                view_options([opt])  # unrecognized parameter (22023)
    return freshness


def freshness_value(arg: Any) -> float:
    """WITH (freshness = X): X an interval string or a number of seconds, above zero."""
    text = None
    if isinstance(arg, A.String):
        text = arg.sval
    elif isinstance(arg, A.Integer):
        text = str(arg.ival)
    elif isinstance(arg, A.Float):
        text = arg.fval
    elif isinstance(arg, A.TypeName) and arg.names:  # an unquoted word: freshness = soon
        text = arg.names[-1].sval
    secs = parse_interval(text) if text is not None else None
    if secs is None or not math.isfinite(secs) or secs <= 0:
        shown = "" if text is None else f': "{text}"'
        raise InvalidParameterValue(
            f'invalid value for interval option "freshness"{shown}',
            hint="Give a positive interval, e.g. freshness = '1s', '500ms' or '2 minutes'.",
        )
    return secs


# -- reasons --------------------------------------------------------------------------
def reason(
    *,
    status: str | None,
    stage: str,
    created_here: bool,
    frontier: int | None,
    recovery_epoch: int | None,
) -> str:
    """Why a view is past its freshness target. `status`: the engine's (None: not
    populated yet); `stage`: the Spark stage as supervised (starting: also until its
    first batch | running | restarting | error | stopped); `created_here`: created (or
    backfilled again) since the server started; `recovery_epoch`: the epoch durable
    when it started."""
    if status == "error":
        return "ERROR"
    if status is None:
        return "BACKFILLING"
    if stage in ("restarting", "error"):
        return "SPARK_RESTARTING"
    if not created_here and (
        stage == "starting"
        or (frontier is not None and recovery_epoch is not None and frontier < recovery_epoch)
    ):
        return "RECOVERING"
    if stage == "starting":
        return "BACKFILLING"
    return "BEHIND"


@dataclass(frozen=True)
class Sample:
    at: float
    met: bool
    reason: str | None  # why it was late (None: met)


class FreshnessSLO:
    """The samples of every view with a freshness target, and their verdicts."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.samples: dict[int, deque[Sample]] = {}
        self._targets: dict[int, float] = {}  # the target the samples were measured against
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(SLO_SAMPLE)
            try:
                self.sample(time.time())
            except Exception:  # never let the sampler die: the next second tries again
                log.exception("freshness SLO: sampling the views' lag")

    def sample(self, now: float) -> None:
        """Sample every view with a target now (on the event loop: the commit path
        changes the epochs it reads)."""
        views = [v for v in self.instance.catalog.matviews() if v.freshness is not None]
        for oid in set(self.samples) - {v.oid for v in views}:
            del self.samples[oid], self._targets[oid]  # dropped, or its target removed
        if not views:
            return
        states = self._states()
        for v in views:
            if self._targets.get(v.oid) != v.freshness:  # new, or ALTER ... SET (freshness)
                self.samples[v.oid], self._targets[v.oid] = deque(), v.freshness
            window = self.samples[v.oid]
            window.append(self._measure(v, states, now))
            while window and window[0].at < now - SLO_WINDOW:
                window.popleft()

    def _measure(self, v: MaterializedView, states: dict[int, Any], now: float) -> Sample:
        st = states.get(v.oid)
        mv = self.instance.matviews
        frontier = mv.fresh_until(v.oid, st.frontier) if st is not None else None
        _, lag_ms = hw_catalog.view_lag(self.instance, frontier, self.instance.visible_epoch, now)
        assert v.freshness is not None
        if st is not None and st.status != "error" and lag_ms is not None:
            if lag_ms <= v.freshness * 1000.0:
                return Sample(now, True, None)
        why = reason(
            status=st.status if st is not None else None,
            stage="starting" if mv.stage_warming else mv.stage_state,
            created_here=v.oid in mv.backfills,
            frontier=frontier,
            recovery_epoch=mv.recovery_epoch,
        )
        return Sample(now, False, why)

    def _states(self) -> dict[int, Any]:
        engine = self.instance.matviews.engine
        return engine.view_states() if engine is not None else {}

    def verdict(self, v: MaterializedView) -> tuple[float, str | None]:
        """(slo_compliance, degraded_reason) of a view with a target: over the window's
        samples (a sample taken now when there is none yet)."""
        now = time.time()
        window = [s for s in self.samples.get(v.oid, ()) if s.at >= now - SLO_WINDOW]
        if self._targets.get(v.oid) != v.freshness:  # its target changed since
            window = []
        if not window:
            window = [self._measure(v, self._states(), now)]
        met = sum(1 for s in window if s.met)
        late = [s for s in window if not s.met]
        return met / len(window), late[-1].reason if late else None


SLO_COLUMNS = ("freshness_target", "slo_compliance", "degraded_reason")  # slo_text's


def slo_text(target: Any, compliance: float | None, reason: str | None) -> str:
    """A view's SLO as `headwater status` and the status page show it: '0.92 BEHIND
    (target 1s)'; '' without a target."""
    if target is None:
        return ""
    shown = "" if compliance is None else f"{compliance:.2f}"
    return f"{shown}{' ' + reason if reason else ''} (target {target.total_seconds():g}s)"


def metrics(rows: list[dict[str, Any]]) -> Iterator[Metric]:
    """The SLO's Prometheus metrics, from headwater_catalog.views' rows."""
    label = ["view"]
    target = GaugeMetricFamily(
        "headwater_view_freshness_target_seconds",
        "the view's freshness target (WITH (freshness = ...))",
        labels=label,
    )
    compliance = GaugeMetricFamily(
        "headwater_view_slo_compliance",
        f"share of the last {SLO_WINDOW:g}s during which the view met its freshness target",
        labels=label,
    )
    degraded = GaugeMetricFamily(
        "headwater_view_degraded",
        "1 for the reason the view misses its freshness target, 0 for the others",
        labels=["view", "reason"],
    )
    for r in rows:
        if r.get("freshness_target") is None:
            continue
        name = f"{r['schema']}.{r['name']}"
        target.add_metric([name], r["freshness_target"].total_seconds())
        if r["slo_compliance"] is not None:
            compliance.add_metric([name], r["slo_compliance"])
        for why in REASONS:
            degraded.add_metric([name, why], 1 if r["degraded_reason"] == why else 0)
    yield from (target, compliance, degraded)
