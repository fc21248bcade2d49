"""The CPU priority of the engine's background work (Linux: a nice value per thread).

Maintenance batches and the Spark JVM yield the CPU to the write path and reads
under contention and take all of it when it is free: the server's event loop and
its clients keep their throughput while views are maintained, and a batch that
waited simply takes the epochs that arrived meanwhile (docs/engine.md (i)).

    background()                    # the calling thread, from now on (once per thread)
    in_background(fn)               # fn() on a new thread of that priority: what it
                                    # starts (a JVM, threads) inherits it
    run_delay()                     # seconds the calling thread has waited for a CPU
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

# 0: as the server's; HW_ENGINE_NICE sets it
NICE = int(os.environ.get("HW_ENGINE_NICE", "10"))
_niced: set[int] = set()
T = TypeVar("T")


def background(nice: int = NICE) -> None:
    """Lower the calling thread's priority to `nice`, once; the threads and processes
    it starts inherit it. An unprivileged thread cannot raise it again: only threads
    that do nothing but background work call this (never the main thread: a server's
    event loop, or a program running the engine in process)."""
    tid = threading.get_native_id()
    if nice <= 0 or tid in _niced or threading.current_thread() is threading.main_thread():
        return
    _niced.add(tid)
    try:
        if os.getpriority(os.PRIO_PROCESS, tid) < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except (OSError, AttributeError):  # not Linux, or not permitted: as it is
        pass


def in_background(fn: Callable[[], T], nice: int = NICE) -> T:
    """fn() on a thread of its own at `nice` (what it launches inherits it), waited for;
    its exception is raised here."""
    if nice <= 0:
        return fn()
    out: list[T] = []
    err: list[BaseException] = []

    def run() -> None:
        background(nice)
        try:
            out.append(fn())
        except BaseException as e:
            err.append(e)

    t = threading.Thread(target=run, name="background-start", daemon=True)
    t.start()
    t.join()
    if err:
        raise err[0]
    return out[0]


def run_delay() -> float:
    """Seconds the calling thread has spent runnable but waiting for a CPU (Linux's
    schedstat); 0 where that is not known."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0
