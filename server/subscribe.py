"""SUBSCRIBE: a relation's or a query's changes, epoch by epoch, as they close.

Rows are `(epoch, [progressed,] diff, columns...)` as Materialize's SUBSCRIBE gives
them (`ENVELOPE UPSERT (KEY (...))`: `(epoch, [progressed,] state, key..., value...)`
with state 'upsert', 'delete' or 'key_violation'). The snapshot comes first, at the
start epoch; then every epoch's consolidated changes in epoch order; with PROGRESS,
a row `(E, true, NULL...)` says every change up to epoch E has been sent.

Where changes come from:
- a table: its versions in the replica (a version born at e is +1 at e, one retired
  at e is -1 at e), so history back to the retention horizon can be replayed;
- a materialized view: its changes as the engine gives them (engine/api.py);
- a query: evaluated at each epoch that changed one of its inputs, diffed with the
  previous evaluation (exact, but costs a query per changed epoch: subscribe to a
  materialized view for big results).

A producer task per subscription fills a bounded buffer; a consumer that falls more
than `headwater.subscribe_buffer_rows` behind is cut off with an error saying why, so
a slow subscriber never holds back writers, views or other subscribers.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

import duckdb
import pglast.ast as A
from headwater.catalog.objects import MaterializedView, Table
from headwater.catalog.types import BOOL, INT8, TEXT, ColumnType
from headwater.planner import pg_compat
from headwater.planner.extensions import Subscribe
from headwater.planner.naming import name_targets
from headwater.planner.params import epoch_parameter
from headwater.planner.scope import column_types
from headwater.server import epoch_choice, queries, reads
from headwater.server.auth import privilege_checks
from headwater.server.binders import read_binder
from headwater.server.duckdb_calls import fetch
from headwater.server.results import Field, arrow_fields
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import FROM, TO, physical, quote, visible_at

from headwater.errors import FeatureNotSupported, SQLError, UndefinedColumn

if TYPE_CHECKING:
    from headwater.server.executor import Executor

log = logging.getLogger("headwater.subscribe")

WAIT_SECONDS = 1.0  # longest wait for a new epoch before checking views and retention


class Subscription:
    def __init__(self, executor: Executor, spec: Subscribe) -> None:
        self.ex = executor
        self.spec = spec
        self.instance = executor.instance
        self.rows: deque[tuple[Any, ...]] = deque()
        self.error: SQLError | None = None
        self.finished = False
        self.cancelled = False
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.fields: list[Field] = []
        self.limit = int(executor.s.settings.values["headwater.subscribe_buffer_rows"])

    # -- setup ------------------------------------------------------------------------
    async def open(self) -> list[Field]:
        """Resolve the target, fix the start epoch and start producing."""
        ex, spec, s = self.ex, self.spec, self.ex.s
        privilege_checks.check(s, spec.query or _select_all(spec.relation))  # SELECT privileges
        # The target at the epoch in DuckDB parameter $n: `query_sql[0]` at $base (the
        # newer epoch of a change), `query_sql[1]` at $base + 1 (the older one)
        self.base = 1 if spec.query is None else epoch_parameter(spec.query)
        epochs = (f"${self.base}", f"${self.base + 1}")
        if spec.relation is not None:
            rel = s.catalog.get_relation(
                spec.relation.schemaname, spec.relation.relname, s.search_path()
            )
            if not isinstance(rel, Table | MaterializedView):
                raise FeatureNotSupported(
                    f'cannot subscribe to {rel.kind} "{rel.name}"',
                    hint="SUBSCRIBE to a table, a materialized view or (SELECT ...).",
                )
            self.rel: Table | MaterializedView | None = rel
            self.columns = [c.name for c in rel.columns]
            self.types = [c.type for c in rel.columns]
            if isinstance(rel, MaterializedView):
                self.views = {rel.oid}
                self.tables: set[int] = set()
                self.query_sql = tuple(ex.instance.matviews.read_sql(rel, e) for e in epochs)
            else:
                self.views, self.tables = set(), {rel.oid}
                cols = ", ".join(quote(c) for c in self.columns)
                self.query_sql = tuple(
                    f"(SELECT {cols} FROM {physical(rel.oid)} WHERE {visible_at(e)})"
                    for e in epochs
                )
        else:
            self.rel = None
            query = spec.query
            name_targets(query)
            col_types = column_types(query, s.catalog, s.search_path())
            tree = pg_compat.translate(query, column_types=col_types)
            binders = [read_binder(s, n, history=True) for n in (self.base, self.base + 1)]
            self.query_sql = tuple(f"({b.to_sql(tree)})" for b in binders)
            self.views, self.tables = set(binders[0].matviews), set(binders[0].tables)
            probe = f"SELECT * FROM {self.query_sql[0]} AS _q LIMIT 0"
            args = self._args(probe, {self.base: 0})  # no rows: any epoch
            table, types = await asyncio.to_thread(fetch, s.cursor(), probe, args)
            described = queries.with_sources(s, tree, arrow_fields(table.schema, types))
            self.columns = [f.name for f in described]
            self.types = [f.type for f in described]
        if spec.as_of is not None:
            self.start = await epoch_choice.as_of_epoch(s, ex.waits, spec.as_of, self.views)
        else:
            await epoch_choice.await_own_writes(s, ex.waits)
            self.start = await epoch_choice.read_epoch(s, ex.waits, self.views)
        key = spec.upsert_key
        head: list[tuple[str, ColumnType]] = [("epoch", ColumnType(INT8, -1))]
        if spec.progress:
            head.append(("progressed", ColumnType(BOOL, -1)))
        if key is not None:
            missing = [k for k in key if k not in self.columns]
            if missing:
                raise UndefinedColumn(f'column "{missing[0]}" does not exist')
            self.key_idx = [self.columns.index(k) for k in key]
            self.val_idx = [i for i in range(len(self.columns)) if i not in self.key_idx]
            head.append(("state", ColumnType(TEXT, -1)))
            order = self.key_idx + self.val_idx
        else:
            head.append(("diff", ColumnType(INT8, -1)))
            order = list(range(len(self.columns)))
        self.fields = [Field(n, t) for n, t in head] + [
            Field(self.columns[i], self.types[i]) for i in order
        ]
        self._task = asyncio.get_running_loop().create_task(self._produce())
        return self.fields

    # -- consuming ----------------------------------------------------------------------
    async def take(self, n: int | None, timeout: float | None) -> list[tuple[Any, ...]]:
        """Up to `n` rows (None: all buffered); waits for the first row up to `timeout`
        seconds (None: until one comes or the subscription ends)."""
        if not self.rows and not self.finished and self.error is None:
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except TimeoutError:
                pass
        if not self.rows and self.error is not None:
            raise self.error
        count = len(self.rows) if n is None else min(n, len(self.rows))
        return [self.rows.popleft() for _ in range(count)]

    @property
    def done(self) -> bool:
        return self.finished and not self.rows

    def cancel(self) -> None:
        """CancelRequest: the consumer's wait ends with 57014."""
        self.error = SQLError("canceling statement due to user request", "57014")
        self.rows.clear()
        self.close()
        self._ready.set()

    def close(self) -> None:
        self.cancelled = True
        if self._task is not None:
            self._task.cancel()

    # -- producing ----------------------------------------------------------------------
    def _emit(self, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        self.rows.extend(rows)
        self._ready.set()
        if len(self.rows) > self.limit:
            self.rows.clear()
            self.error = SQLError(
                f"subscription cut off: the client fell more than {self.limit} rows behind",
                "53400",
                hint="Read faster, raise headwater.subscribe_buffer_rows, or resubscribe "
                "AS OF the last epoch received.",
            )
            raise asyncio.CancelledError

    def _frontier(self) -> int:
        mv = self.instance.matviews
        return min([self.instance.visible_epoch, *(mv.fresh_until(v) for v in self.views)])

    async def _produce(self) -> None:
        spec = self.spec
        pos = self.start
        try:
            if spec.up_to is not None and pos >= spec.up_to:
                return  # UP TO excludes the start epoch: nothing to send
            if spec.snapshot:
                rows = await asyncio.to_thread(self._snapshot, pos)
                self._emit(self._shape(rows))
            self._progress(pos)
            while not self.cancelled:
                if spec.up_to is not None and pos >= spec.up_to - 1:
                    break
                if pos < self.instance.retained_from:
                    low, high = self.instance.retained_range()
                    raise SQLError(
                        f"subscription cut off: epoch {pos} left the retained range "
                        f"[{low}, {high}]",
                        "22023",
                    )
                self._check_sources()
                end = self._frontier()
                if spec.up_to is not None:
                    end = min(end, spec.up_to - 1)
                if end <= pos:
                    await self._wait(pos + 1)
                    continue
                rows = await asyncio.to_thread(self._changes, pos, end)
                self._emit(self._shape(rows))
                self._progress(end)
                pos = end
        except asyncio.CancelledError:
            pass
        except SQLError as e:
            self.error = e
        except duckdb.Error as e:
            self.error = translate(e)
        except Exception as e:  # a bug: this subscription ends, the server goes on
            log.exception("subscription failed")
            self.error = SQLError(f"internal error: {type(e).__name__}: {e}", "XX000")
        finally:
            self.finished = True
            self._ready.set()

    def _check_sources(self) -> None:
        """A dropped relation or a failed view ends the subscription."""
        catalog = self.instance.catalog
        for oid in (*self.tables, *self.views):
            if catalog.by_oid(oid) is None:
                raise SQLError("subscription ended: a relation it reads was dropped", "42P01")

    async def _wait(self, epoch: int) -> None:
        """Until `epoch` is visible and every view reflects it (woken by the epoch
        closing and by the views' stage advancing, not by polling), or a while passes."""
        mv = self.instance.matviews
        if self.views:
            behind = await mv.wait_frontiers(self.views, epoch, WAIT_SECONDS)
            if behind is not None:
                status, err = mv.status(behind)
                if status == "error":
                    raise SQLError(f"materialized view failed: {err}", "XX000")
                return
        committer = self.instance.committer
        assert committer is not None
        await committer.wait_visible(epoch, WAIT_SECONDS)

    def _progress(self, epoch: int) -> None:
        if self.spec.progress:
            width = len(self.fields) - 2
            self._emit([(epoch, True, *([None] * width))])

    def _shape(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """(epoch, diff, cols...) rows, consolidated per epoch, into the output layout."""
        progress = (False,) if self.spec.progress else ()
        if self.spec.upsert_key is None:
            return [(r[0], *progress, r[1], *r[2:]) for r in rows]
        out: list[tuple[Any, ...]] = []
        i = 0
        while i < len(rows):  # one epoch at a time
            j = i
            while j < len(rows) and rows[j][0] == rows[i][0]:
                j += 1
            keys: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
            for r in rows[i:j]:
                cols = r[2:]
                k = tuple(cols[x] for x in self.key_idx)
                keys.setdefault(k, []).append(r)
            for k, changes in keys.items():
                plus = [c for c in changes if c[1] > 0]
                vals = [None] * len(self.val_idx)
                if not plus:
                    state = "delete"
                elif len(plus) > 1 or plus[0][1] > 1:
                    state = "key_violation"
                else:
                    state = "upsert"
                    vals = [plus[0][2:][x] for x in self.val_idx]
                out.append((rows[i][0], *progress, state, *k, *vals))
            i = j
        return out

    # -- SQL (worker threads) ---------------------------------------------------------
    # Epochs are DuckDB parameters, never spliced into the SQL: $base and $base + 1 in
    # `query_sql`, $1 and $2 the range (after, upto] of a change query.
    def _cols(self, prefix: str = "") -> str:
        return ", ".join(f"{prefix}{quote(c)}" for c in self.columns)

    def _args(self, sql: str, values: dict[int, int]) -> dict[str, int] | None:
        """The `values` of the parameters `sql` names (DuckDB takes exactly those)."""
        used = reads.param_numbers(sql)
        named = {str(n): v for n, v in values.items() if used is None or n in used}
        return named or None

    def _run(self, sql: str, values: dict[int, int]) -> list[tuple[Any, ...]]:
        cur = self.instance.replica.cursor()
        try:
            self.ex.s.in_session_zone(cur, fresh=True)
            return cur.execute(sql, self._args(sql, values)).fetchall()
        finally:
            cur.close()

    def _snapshot(self, epoch: int) -> list[tuple[Any, ...]]:
        cols = self._cols()
        sep = ", " if cols else ""
        at = f"${self.base}"
        return self._run(
            f"SELECT {at}::BIGINT, count(*)::BIGINT{sep}{cols} FROM {self.query_sql[0]} AS _s"
            f" GROUP BY ALL",
            {self.base: epoch},
        )

    def _changes(self, after: int, upto: int) -> list[tuple[Any, ...]]:
        cols = self._cols()
        sep = ", " if cols else ""
        rel = self.rel
        if isinstance(rel, Table):
            t = physical(rel.oid)
            inner = (
                f"SELECT {FROM} AS _e, 1 AS _w{sep}{cols} FROM {t}"
                f" WHERE {FROM} > $1 AND {FROM} <= $2"
                f" UNION ALL SELECT {TO}, -1{sep}{cols} FROM {t}"
                f" WHERE {TO} > $1 AND {TO} <= $2"
            )
        elif isinstance(rel, MaterializedView):
            changes = self.instance.matviews.changes_sql(rel, "$1", "$2")
            inner = f"SELECT * FROM {changes} AS _v"
        else:
            return self._query_changes(after, upto)
        return self._run(
            f"SELECT _e::BIGINT, sum(_w)::BIGINT{sep}{cols} FROM ({inner}) AS _c"
            f" GROUP BY ALL HAVING sum(_w) <> 0 ORDER BY 1",
            {1: after, 2: upto},
        )

    def _query_changes(self, after: int, upto: int) -> list[tuple[Any, ...]]:
        epochs = sorted(self._changed_epochs(after, upto))
        out: list[tuple[Any, ...]] = []
        cols = self._cols()
        sep = ", " if cols else ""
        new, old = self.query_sql
        sql = (
            f"SELECT ${self.base}::BIGINT, sum(_w)::BIGINT{sep}{cols} FROM ("
            f"SELECT 1 AS _w, * FROM {new} AS _n UNION ALL "
            f"SELECT -1, * FROM {old} AS _o) AS _d"
            f" GROUP BY ALL HAVING sum(_w) <> 0"
        )
        prev = after
        for e in epochs:
            out += self._run(sql, {self.base: e, self.base + 1: prev})
            prev = e
        return out

    def _changed_epochs(self, after: int, upto: int) -> set[int]:
        hist = self.instance.epoch_history
        found = {
            e
            for e in range(after + 1, upto + 1)
            if e in hist and any(t in hist[e][1] for t in self.tables)
        }
        mv, catalog = self.instance.matviews, self.instance.catalog
        for v in self.views:
            view = catalog.by_oid(v)
            assert isinstance(view, MaterializedView)
            changes = mv.changes_sql(view, "$1", "$2")
            found |= {
                int(r[0])
                for r in self._run(f"SELECT DISTINCT _e FROM {changes} AS _c", {1: after, 2: upto})
            }
        return found


def _select_all(rv: Any) -> A.SelectStmt:
    star = A.ResTarget(val=A.ColumnRef(fields=(A.A_Star(),)))
    return A.SelectStmt(targetList=(star,), fromClause=(rv,), op=0)
