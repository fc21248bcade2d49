"""DECLARE / FETCH / MOVE / CLOSE: a session's cursors, which live until the end of
their transaction. A cursor over a SELECT (or SELECT ... AS OF) holds its result; one
over SUBSCRIBE is a Subscription that FETCH waits on (FETCH ... WITH (timeout))."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pglast.ast as A
from headwater.planner.extensions import DeclareSelectAsOf, DeclareSubscribe, FetchTimeout
from headwater.server.auth import privilege_checks
from headwater.server.results import Field, Result
from headwater.server.session import Session
from headwater.server.settings import seconds
from headwater.server.subscribe import Subscription
from pglast.enums import FetchDirection

from headwater.errors import FeatureNotSupported, SQLError

if TYPE_CHECKING:
    from headwater.server.executor import Executor


@dataclass
class RowsCursor:
    """DECLARE ... CURSOR FOR SELECT: the result, handed out by FETCH."""

    fields: list[Field]
    rows: list[tuple[Any, ...]]
    pos: int = 0

    def take(self, n: int | None) -> list[tuple[Any, ...]]:
        end = len(self.rows) if n is None else min(self.pos + n, len(self.rows))
        out = self.rows[self.pos : end]
        self.pos = end
        return out

    def close(self) -> None:
        self.rows = []


async def declare(ex: Executor, stmt: Any, params: list[Any]) -> Result:
    s = ex.s
    if s.status == "I":
        raise SQLError("DECLARE CURSOR can only be used in transaction blocks", "25P01")
    name = stmt.portalname if isinstance(stmt, A.DeclareCursorStmt) else stmt.name
    if name in s.cursors:
        raise SQLError(f'cursor "{name}" already exists', "42P03")
    if isinstance(stmt, DeclareSubscribe):
        sub = Subscription(ex, stmt.subscribe)
        await sub.open()
        s.cursors[name] = sub
    elif isinstance(stmt, DeclareSelectAsOf):
        privilege_checks.check(s, stmt.select.stmt)
        result = await ex.select(stmt.select.stmt, params, as_of=stmt.select.as_of)
        s.cursors[name] = RowsCursor(result.fields or [], result.rows)
    else:
        if not isinstance(stmt.query, A.SelectStmt):
            raise FeatureNotSupported("DECLARE CURSOR supports SELECT and SUBSCRIBE")
        result = await ex.select(stmt.query, params)
        s.cursors[name] = RowsCursor(result.fields or [], result.rows)
    return Result("DECLARE CURSOR")


def fields(s: Session, stmt: Any) -> list[Field] | None:
    """What a FETCH returns (Describe before Execute)."""
    cur = s.cursors.get(stmt.name if isinstance(stmt, FetchTimeout) else stmt.portalname)
    return cur.fields if cur is not None else None


async def fetch(ex: Executor, stmt: Any) -> Result:
    if isinstance(stmt, FetchTimeout):
        name, count = stmt.name, stmt.count
        timeout: float | None = seconds(stmt.timeout, "timeout")
        move = False
    else:
        if stmt.direction not in (FetchDirection.FETCH_FORWARD,):
            raise FeatureNotSupported("cursors only move forward (FETCH [FORWARD] n | ALL)")
        name, move = stmt.portalname, stmt.ismove
        count = None if stmt.howMany >= 2**62 else int(stmt.howMany)
        timeout = None
    cur = ex.s.cursors.get(name)
    if cur is None:
        raise SQLError(f'cursor "{name}" does not exist', "34000")
    if isinstance(cur, RowsCursor):
        rows = cur.take(count)
    else:
        rows = await ex.waits.wait(cur.take(count, timeout))
    tag = f"{'MOVE' if move else 'FETCH'} {len(rows)}"
    return Result(tag) if move else Result(tag, cur.fields, rows)


def close(s: Session, name: str | None) -> Result:
    """CLOSE name, or CLOSE ALL (`name` None)."""
    cursors = s.cursors
    if name is None:  # CLOSE ALL
        for c in cursors.values():
            c.close()
        cursors.clear()
    else:
        cur = cursors.pop(name, None)
        if cur is None:
            raise SQLError(f'cursor "{name}" does not exist', "34000")
        cur.close()
    return Result("CLOSE CURSOR")
