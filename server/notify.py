"""LISTEN, UNLISTEN, NOTIFY, pg_notify() and pg_listening_channels().

As in PostgreSQL: LISTEN and UNLISTEN take effect, and NOTIFYs are sent, when the
transaction commits (at once in autocommit); a rollback drops them. A transaction's
notifications are delivered in order, equal (channel, payload) pairs once. Every
session listening on the channel when the notifier commits gets them, the notifier
too, as NotificationResponse messages sent outside transaction blocks: before the
session's next ReadyForQuery, or at once when it is idle (server/connection.py's
`deliver_notifications`). The state lives here, per instance; sessions are keyed by
pid (never reused), and those that disconnected are forgotten at the next commit.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import pglast.ast as A
from headwater.catalog.types import ColumnType, PgType
from headwater.server import queries
from headwater.server.channels import Listener, Notifications, Pending
from headwater.server.results import Field, Result
from pglast import parse_sql

from headwater.errors import SQLError

if TYPE_CHECKING:
    from headwater.server.executor import Executor
    from headwater.server.session import Session

VOID = PgType("void", 2278, 4, 0, "void", "P")  # pg_notify's result type
NAMEDATALEN = 64
PAYLOAD_MAX = 8000  # bytes, as PostgreSQL's NOTIFY_PAYLOAD_MAX_LENGTH
FUNCTIONS = frozenset({"pg_notify", "pg_listening_channels"})


def _hub(s: Session) -> Notifications:
    return s.instance.notifications


def _pending(s: Session) -> Pending:
    return _hub(s).pending.setdefault(s.pid, Pending())


# -- statements --------------------------------------------------------------------------
def listen(s: Session, stmt: A.ListenStmt) -> Result:
    _pending(s).actions.append((True, stmt.conditionname))
    return Result("LISTEN")


def unlisten(s: Session, stmt: A.UnlistenStmt) -> Result:
    _pending(s).actions.append((False, stmt.conditionname))
    return Result("UNLISTEN")


def notify(s: Session, stmt: A.NotifyStmt) -> Result:
    queue(s, stmt.conditionname, stmt.payload)
    return Result("NOTIFY")


def queue(s: Session, channel: str | None, payload: str | None) -> None:
    """A notification, sent when the transaction commits (PostgreSQL's checks)."""
    if not channel:
        raise SQLError("channel name cannot be empty", "22023")
    if len(channel.encode()) >= NAMEDATALEN:
        raise SQLError("channel name too long", "22023")
    payload = payload or ""
    if len(payload.encode()) >= PAYLOAD_MAX:
        raise SQLError("payload string too long", "22023")
    _pending(s).notifies[(channel, payload)] = None


def listening(s: Session) -> list[str]:
    """pg_listening_channels(): the committed LISTENs, in order."""
    listener = _hub(s).listeners.get(s.pid)
    return list(listener.channels) if listener else []


# -- transaction end ---------------------------------------------------------------------
def statement_ended(s: Session) -> None:
    """After each statement that succeeded: outside a block its LISTEN/NOTIFY commit
    (a failed one's go: `abort`)."""
    if s.status == "I" and s.pid in _hub(s).pending:
        commit(s)


def transaction_ended(s: Session, tag: str | None) -> None:
    """After COMMIT or ROLLBACK (tag None: it failed, and the transaction is gone)."""
    if s.status != "I" or s.pid not in _hub(s).pending:
        return
    if tag == "COMMIT":
        commit(s)
    else:
        abort(s)


def abort(s: Session) -> None:
    _hub(s).pending.pop(s.pid, None)


def commit(s: Session) -> None:
    hub = _hub(s)
    pending = hub.pending.pop(s.pid, None)
    if pending is None:
        return
    for on, channel in pending.actions:
        listener = hub.listeners.setdefault(s.pid, Listener())
        if on:
            listener.channels[channel] = None
        elif channel is None:
            listener.channels.clear()
        else:
            listener.channels.pop(channel, None)
    sessions = _sessions(s)
    if sessions:  # forget sessions that disconnected
        for pid in [p for p in hub.listeners if p not in sessions and p != s.pid]:
            del hub.listeners[pid]
        for pid in [p for p in hub.pending if p not in sessions]:
            del hub.pending[pid]
    for pid, listener in hub.listeners.items():
        got = [(s.pid, c, p) for c, p in pending.notifies if c in listener.channels]
        if got:
            listener.inbox.extend(got)
            if pid != s.pid and pid in sessions:  # the notifier's own: before its ReadyForQuery
                sessions[pid].deliver_notifications(idle=True)


def _sessions(s: Session) -> dict[int, Any]:
    """The server's connections by pid (server/server.py)."""
    server = getattr(s.instance, "server", None)
    return server.sessions if server is not None else {}


def take(s: Session) -> list[tuple[int, str, str]]:
    """The session's notifications to send now: (notifier pid, channel, payload), those
    of channels it still listens on."""
    listener = _hub(s).listeners.get(s.pid)
    if listener is None or not listener.inbox:
        return []
    out = [n for n in listener.inbox if n[1] in listener.channels]
    listener.inbox.clear()
    return out


# -- pg_notify() and pg_listening_channels() in a SELECT ---------------------------------
def _function_name(node: Any) -> str | None:
    if isinstance(node, A.FuncCall):
        names = [n.sval for n in node.funcname]
        if names[-1] in FUNCTIONS and (len(names) == 1 or names[0] == "pg_catalog"):
            return names[-1]
    return None


def _range_function(item: Any) -> bool:
    return (
        isinstance(item, A.RangeFunction)
        and len(item.functions) == 1
        and _function_name(item.functions[0][0]) == "pg_listening_channels"
    )


def calls_functions(stmt: A.SelectStmt) -> bool:
    """Does the SELECT call them in its target list or FROM (where they are served)?"""
    return any(
        isinstance(t, A.ResTarget) and _function_name(t.val) for t in stmt.targetList or ()
    ) or any(_range_function(item) for item in stmt.fromClause or ())


def _rewrite(s: Session, stmt: A.SelectStmt) -> tuple[A.SelectStmt, list[tuple[int, str]]]:
    """A copy of `stmt` where pg_listening_channels() is the list of channels and each
    pg_notify(c, p) target is its two arguments as text; and where those targets are
    (position in the result, column name)."""
    stmt = copy.deepcopy(stmt)
    channels = listening(s)
    stmt.fromClause = (
        tuple(
            _channels_subquery(channels, item.alias) if _range_function(item) else item
            for item in stmt.fromClause or ()
        )
        or None
    )
    targets: list[Any] = []
    notify_at: list[tuple[int, str]] = []
    for t in stmt.targetList:
        name = _function_name(t.val) if isinstance(t, A.ResTarget) else None
        if name == "pg_listening_channels" and not t.val.args:
            targets.append(A.ResTarget(name=t.name or name, val=_channels_array(channels)))
        elif name == "pg_notify" and len(t.val.args or ()) == 2:
            notify_at.append((len(targets), t.name or name))
            targets += [A.ResTarget(val=_text(a)) for a in t.val.args]
        else:
            targets.append(t)
    stmt.targetList = tuple(targets)
    return stmt, notify_at


def _void_fields(fields: list[Field], notify_at: list[tuple[int, str]]) -> list[Field]:
    out = list(fields)
    for pos, name in reversed(notify_at):
        out[pos : pos + 2] = [Field(name, ColumnType(VOID))]
    return out


async def select(ex: Executor, stmt: A.SelectStmt, params: list[Any]) -> Result:
    """The SELECT with the functions served; pg_notify queues one notification per row."""
    s = ex.s
    stmt, notify_at = _rewrite(s, stmt)
    result = await ex.select(stmt, params)
    if not notify_at:
        return result
    rows = [list(r) for r in result.rows]
    for pos, _ in reversed(notify_at):
        for row in rows:
            queue(s, row[pos], row[pos + 1])
            row[pos : pos + 2] = [""]
    fields = _void_fields(result.fields or [], notify_at)
    return Result(result.tag, fields, [tuple(r) for r in rows], result.notices)


async def describe(ex: Executor, stmt: A.SelectStmt, nparams: int) -> list[Field]:
    stmt, notify_at = _rewrite(ex.s, stmt)
    return _void_fields(await queries.describe(ex.s, ex.waits, stmt, nparams), notify_at)


def _text(node: Any) -> A.TypeCast:
    return A.TypeCast(arg=node, typeName=A.TypeName(names=(A.String(sval="text"),), typemod=-1))


def _channels_array(channels: list[str]) -> Any:
    items = ", ".join("'" + c.replace("'", "''") + "'" for c in channels)
    return parse_sql(f"SELECT unnest(ARRAY[{items}]::text[])")[0].stmt.targetList[0].val


def _channels_subquery(channels: list[str], alias: A.Alias | None) -> A.RangeSubselect:
    sub = parse_sql("SELECT 1 AS pg_listening_channels")[0].stmt
    sub.targetList[0].val = _channels_array(channels)
    return A.RangeSubselect(
        lateral=False,
        subquery=sub,
        alias=alias or A.Alias(aliasname="pg_listening_channels"),
    )
