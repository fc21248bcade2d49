"""Progress of long work: a materialized view's backfill, a COPY FROM STDIN.

Each piece of long work is a Task on the instance's Board while it runs: what it works
on, its phase, how much is done of how much (when known) and since when. The board
is read by headwater_catalog.progress, the views' `progress` column (so by `headwater
status`) and the status page. A ticker thread, alive only while tasks run, logs each
task to the server's console once a second, with a bar when its total is known:

    backfill public.v: reading inputs [#######.............] 35% 350,000/1,000,000 rows 2.1s

Work done within a second logs nothing. A phase whose progress is another's to tell
(DuckDB's progress of the statement it runs) gives a `poll` callable for it.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("headwater.progress")

LOG_EVERY = 1.0  # seconds between a task's console lines (and before its first)
BAR = 20  # characters of the console's bar


@dataclass
class Task:
    id: int
    kind: str  # backfill | copy
    target: str  # schema.name of the view or table
    phase: str
    unit: str  # what `done` and `total` count: rows | bytes
    total: int | None = None
    done: int = 0
    detail: str = ""  # e.g. the bytes a COPY received
    # the current phase's percent from elsewhere (None: not known now)
    poll: Callable[[], float | None] | None = None
    started: float = field(default_factory=time.monotonic)
    logged: bool = False

    def percent(self) -> float | None:
        if self.poll is not None:  # the phase's progress is the poll's to tell
            try:
                p = self.poll()
            except Exception:  # the statement ended meanwhile: no figure this time
                p = None
            return None if p is None else max(0.0, min(p, 100.0))
        if self.total:
            return min(100.0 * self.done / self.total, 100.0)
        return 100.0 if self.total == 0 else None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def line(self) -> str:
        """One console line: target, phase, bar and percent, counts, elapsed."""
        parts = [f"{self.kind} {self.target}: {self.phase}"]
        pct = self.percent()
        if pct is not None:
            filled = int(round(pct / 100 * BAR))
            parts.append(f"[{'#' * filled}{'.' * (BAR - filled)}] {pct:3.0f}%")
        if self.poll is None or pct is None:
            count = f"{self.done:,}" if self.total is None else f"{self.done:,}/{self.total:,}"
            parts.append(f"{count} {self.unit}")
        if self.detail:
            parts.append(f"({self.detail})")
        parts.append(f"{self.elapsed():.1f}s")
        return " ".join(parts)

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": self.target,
            "phase": self.phase,
            "done": self.done,
            "total": self.total,
            "unit": self.unit,
            "percent": self.percent(),
            "detail": self.detail or None,
            "elapsed_s": round(self.elapsed(), 3),
        }


class Board:
    """The long work running now (any thread adds, updates and ends tasks)."""

    def __init__(self) -> None:
        self._tasks: dict[int, Task] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._ticker: threading.Thread | None = None

    @contextmanager
    def task(
        self, kind: str, target: str, phase: str, unit: str = "rows", total: int | None = None
    ) -> Iterator[Task]:
        t = Task(next(self._ids), kind, target, phase, unit, total)
        with self._lock:
            self._tasks[t.id] = t
            if self._ticker is None:
                self._ticker = threading.Thread(
                    target=self._tick, name="headwater-progress", daemon=True
                )
                self._ticker.start()
        try:
            yield t
        finally:
            with self._lock:
                self._tasks.pop(t.id, None)
            if t.logged:  # it showed progress: say that it ended
                log.info("%s %s: done in %.1fs", t.kind, t.target, t.elapsed())

    def tasks(self) -> list[Task]:
        with self._lock:
            return list(self._tasks.values())

    def find(self, kind: str, target: str) -> Task | None:
        return next((t for t in self.tasks() if t.kind == kind and t.target == target), None)

    def rows(self) -> list[dict[str, Any]]:
        return [t.row() for t in self.tasks()]

    def _tick(self) -> None:
        while True:
            time.sleep(LOG_EVERY)
            with self._lock:
                tasks = list(self._tasks.values())
                if not tasks:
                    self._ticker = None
                    return
            for t in tasks:
                if t.elapsed() >= LOG_EVERY:
                    t.logged = True
                    log.info("%s", t.line())
