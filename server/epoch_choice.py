"""Which epoch a statement reads at: the one place that decides it.

A read sees every table and view at one epoch. Without AS OF it is the newest epoch
at which every view it reads is fresh, never older than headwater.freshness asks for
('latest', the default: everything acknowledged, by any session, before the statement
started, as PostgreSQL's read committed and Materialize's strict serializable reads;
'session': the session's own last write and headwater.read_after; 'none': anything),
waiting for lagging views up to headwater.freshness_timeout. A wait the client would
notice is announced first with a NOTICE naming what it waits for. AS OF names the
epoch (or a time, the newest epoch closed by then), checked against the retained
history. The bound SQL names the epoch as a DuckDB parameter (`binder.epoch_param`),
bound when the statement runs, never spliced into its text; the write fence
headwater_write_fence() is the session's last write epoch.
Materialize's timestamp_selection.rs is the model.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import duckdb
import pglast.ast as A
from headwater.planner.extensions import AsOf, replace_calls
from headwater.server.session import Session
from headwater.server.settings import seconds
from headwater.server.waits import Waits
from headwater.storage.duckdb_errors import translate

from headwater.errors import SQLError

# A running stage reflects a write within about a batch (~0.4 s median, ~1 s p99): a
# wait that outlasts this is told with a NOTICE; one for a stage that is not running
# (the first Spark start takes 10-60 s) is told at once.
NOTICE_AFTER = 1.0


def write_fence(s: Session, stmt: Any) -> list[Any]:
    """Put the session's last write epoch in place of headwater_write_fence() calls in
    `stmt` (a copy the caller owns); returns what planner.extensions.restore() would
    need to undo it (empty: none)."""
    fence = A.TypeCast(
        arg=A.A_Const(val=A.Integer(ival=s.last_write_epoch)),
        typeName=A.TypeName(names=(A.String(sval="int8"),)),
    )
    return replace_calls(stmt, "headwater_write_fence", fence)


async def statement_epoch(
    s: Session, waits: Waits, views: set[int] | frozenset[int], as_of: AsOf | None = None
) -> int:
    """The one epoch the statement reads every table and view at: AS OF's, checked
    against the retained history (even when the statement reads no relation, say
    `SELECT 1 AS OF EPOCH 3`), or the newest fresh one (read_epoch)."""
    if as_of is not None:
        return await as_of_epoch(s, waits, as_of, set(views))
    return await read_epoch(s, waits, set(views))


async def as_of_epoch(s: Session, waits: Waits, as_of: AsOf, views: set[int]) -> int:
    """The epoch AS OF names, checked against the retained history; a future epoch
    is waited for (up to headwater.freshness_timeout), as are lagging views."""
    instance = s.instance
    low, high = instance.retained_range()
    epoch = as_of.epoch if as_of.epoch is not None else epoch_at(s, as_of.timestamp or "")
    hint = (
        f"History is kept for headwater.retention = "
        f"{s.settings.values['headwater.retention']}; "
        "headwater_catalog.epochs lists the retained epochs."
    )
    if epoch < low:
        raise SQLError(
            f"epoch {epoch} is outside the retained range [{low}, {high}]", "22023", hint=hint
        )
    timeout = seconds(s.settings.values["headwater.freshness_timeout"], "timeout")
    committer = instance.committer
    assert committer is not None
    told = False
    if epoch > instance.visible_epoch:
        waits.notice(
            _notice(
                f"waiting for epoch {epoch} to close",
                detail=f"The newest closed epoch is {committer.durable_epoch}.",
            )
        )
        told = True
        if not await waits.wait(committer.wait_visible(epoch, timeout)):
            raise SQLError(
                f"epoch {epoch} has not closed yet (the newest is {committer.durable_epoch})",
                "22023",
            )
    mv = instance.matviews
    for oid in views:
        name = getattr(s.catalog.by_oid(oid), "name", oid)
        created = mv.created_epoch(oid)
        if created is not None and epoch < created:
            raise SQLError(
                f'materialized view "{name}" has no state before epoch {created}, '
                "when it was created",
                "22023",
            )
    await wait_views(s, waits, views, epoch, told=told)
    return epoch


def epoch_at(s: Session, timestamp: str) -> int:
    """The newest epoch closed at or before `timestamp` (in the session's TimeZone).
    Compared in microseconds, as headwater_catalog.epochs shows closed_at: AS OF
    TIMESTAMP of an epoch's closed_at reads that epoch."""
    try:
        row = s.cursor().execute("SELECT epoch_us(CAST(? AS TIMESTAMPTZ))", [timestamp]).fetchone()
    except duckdb.Error as e:
        raise translate(e) from None
    at = int(row[0]) if row else 0
    origin = datetime.fromtimestamp(0, UTC)
    best = None
    for epoch, (closed_at, _) in s.instance.epoch_history.items():
        shown = datetime.fromtimestamp(closed_at, UTC) - origin
        closed_us = (shown.days * 86400 + shown.seconds) * 1_000_000 + shown.microseconds
        if closed_us <= at and (best is None or epoch > best):
            best = epoch
    if best is None:
        low, high = s.instance.retained_range()
        raise SQLError(
            f"no retained epoch closed at or before {timestamp}",
            "22023",
            hint=f"The retained epochs are [{low}, {high}]; see headwater_catalog.epochs.",
        )
    return best


async def read_epoch(s: Session, waits: Waits, views: set[int]) -> int:
    """The statement's epoch: the newest at which every view it reads is fresh,
    never older than what headwater.freshness asks for (waiting for lagging views
    up to headwater.freshness_timeout). Without views: the newest visible epoch."""
    instance = s.instance
    mv = instance.matviews
    for oid in views:
        status, error = mv.status(oid)
        if status == "error":
            raise view_failed(getattr(s.catalog.by_oid(oid), "name", oid), error)
    visible = instance.visible_epoch
    if s.write is not None:  # the transaction reads tables as it wrote them
        return min((mv.fresh_until(o) for o in views), default=visible)
    if not views:
        return visible
    need = required_epoch(s)
    if need > 0:
        await wait_views(s, waits, views, need)
    return min([instance.visible_epoch, *(mv.fresh_until(o) for o in views)])


async def wait_views(
    s: Session, waits: Waits, views: set[int], epoch: int, *, told: bool = False
) -> None:
    """Wait until every view reflects `epoch`, or fail naming the one that does not.
    Unless `told` (the statement sent its NOTICE already), a wait the client would
    notice is announced first: at once when the stage is not running, else after
    NOTICE_AFTER."""
    mv = s.instance.matviews
    timeout = seconds(s.settings.values["headwater.freshness_timeout"], "timeout")
    lagging = [o for o in sorted(views) if mv.fresh_until(o) < epoch]
    if not lagging:
        return
    deadline = time.monotonic() + timeout
    behind: int | None = lagging[0]
    if not told:
        if mv.stage_state == "running" or mv.interim:
            first = min(NOTICE_AFTER, timeout)
            behind = await waits.wait(mv.wait_frontiers(views, epoch, first))
        if behind is not None and mv.status(behind)[0] != "error":
            if time.monotonic() < deadline:
                waits.notice(waiting_notice(s, behind, epoch))
    if behind is not None and mv.status(behind)[0] != "error":
        left = max(0.0, deadline - time.monotonic())
        behind = await waits.wait(mv.wait_frontiers(views, epoch, left))
    if behind is None:
        return
    name = getattr(s.catalog.by_oid(behind), "name", behind)
    status, error = mv.status(behind)
    if status == "error":
        raise view_failed(name, error)
    raise SQLError(
        f'materialized view "{name}" is at epoch {mv.frontier(behind)}; '
        f"this read needs epoch {epoch}",
        "57014",
        detail=f"Waited {timeout:g}s (headwater.freshness_timeout).",
        hint="SET headwater.freshness = 'none' reads what is fresh now; "
        "headwater_catalog.views shows the view's lag and status.",
    )


def waiting_notice(s: Session, oid: int, epoch: int) -> SQLError:
    """The NOTICE a read sends before it waits for view `oid` to reach `epoch`."""
    mv = s.instance.matviews
    name = getattr(s.catalog.by_oid(oid), "name", oid)
    at = f'Materialized view "{name}" reflects epoch {mv.frontier(oid)}'
    at += f"; this read needs epoch {epoch}"
    hint = "SET headwater.freshness = 'none' reads what is fresh now, without waiting."
    state = mv.stage_state
    if mv.interim:  # DuckDB advances the views meanwhile: the wait is for the view
        return _notice(
            f'waiting for materialized view "{name}" to reach epoch {epoch}',
            detail=f"{at}. The Spark stage is {state}; DuckDB maintains the views"
            " meanwhile (--executor auto).",
        )
    if state == "starting":
        return _notice(
            "waiting for the maintenance engine to start",
            detail=f"{at}. The engine (a Spark stage) takes 10-60 s to start.",
            hint=hint,
        )
    if state != "running":
        why = f" ({mv.stage_error})" if mv.stage_error else ""
        return _notice(
            "waiting for the maintenance engine to restart",
            detail=f"{at}. The engine stopped{why}.",
            hint=hint,
        )
    return _notice(
        f'waiting for materialized view "{name}" to reach epoch {epoch}', detail=f"{at}."
    )


def _notice(message: str, detail: str, hint: str | None = None) -> SQLError:
    return SQLError(message, "00000", detail=detail, hint=hint, severity="NOTICE")


def required_epoch(s: Session) -> int:
    """The oldest epoch a read may see, as headwater.freshness says: 'latest' (the
    default) everything acknowledged before the statement started, 'session' the
    session's own last write (and headwater.read_after), 'none' anything."""
    values = s.settings.values
    mode = values["headwater.freshness"]
    if mode == "none":
        return 0
    need = max(s.last_write_epoch, int(values["headwater.read_after"]))
    if mode == "latest":
        committer = s.instance.committer
        assert committer is not None
        need = max(need, committer.durable_epoch)
    return need


async def await_own_writes(s: Session, waits: Waits) -> None:
    """A statement sees every write acknowledged before it started, by any session.

    Acknowledgement comes at durability; the replica may apply an epoch a few
    milliseconds later, so a read waits for that (and hurries it along).
    """
    committer = s.instance.committer
    assert committer is not None
    if s.settings.values["headwater.freshness"] == "none":
        return
    target = max(required_epoch(s), committer.durable_epoch)
    if s.write is None and committer.visible_epoch < target:
        s.instance.batcher.hurry()
        if not await waits.wait(committer.wait_visible(target, timeout=30)):
            raise SQLError(f"timed out waiting for epoch {target} to become readable", "57014")


def view_failed(name: object, error: str | None) -> SQLError:
    """A read of a view stopped by an error: the error's SQLSTATE and PostgreSQL's
    wording where storage/duckdb_errors.py knows them (division by zero: 22012)."""
    cause = translate(Exception(error or "unknown error"))
    return SQLError(
        f'materialized view "{name}" failed: {cause.message}',
        cause.sqlstate,
        hint=f"DROP MATERIALIZED VIEW {name} and create it again once the cause "
        "is fixed; headwater_catalog.views shows its status.",
    )
