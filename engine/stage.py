"""The Spark side of the stage: the process's SparkSession, its JVM, and the query's health.

Everything that knows PySpark's internals lives here, so that nothing above the engine
does (engine/api.py wraps it for the server):

    spark = spark_session("local[2]")       # the process's one session, started on first use
    fault = check_query(query)              # None while healthy, else a StageFault
    jvm = jvm_process()                     # the JVM pyspark launched (pid, alive, stopped)
    forget_spark()                          # kill that JVM and reset pyspark's singletons

Py4J calls have no timeout and block forever in a hung JVM, so callers that must not
hang run them on a `Probe` (one long-lived thread, since pyspark pins a JVM thread and
connection to each Python thread that calls it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from queue import SimpleQueue
from typing import Any, NamedTuple

from headwater.engine import spool as sp
from headwater.engine.priority import in_background

_spark_lock = threading.Lock()
_spark: Any = None


def spark_session(master: str = "local[2]", conf: dict[str, str] | None = None) -> Any:
    """The process's one SparkSession, started on first use."""
    global _spark
    with _spark_lock:
        if _spark is None:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            from pyspark.sql import SparkSession

            b = (
                SparkSession.builder.master(master)
                .appName("headwater-engine")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                # the Spark executor's joins and aggregates: a task per core of local[2]
                .config("spark.sql.shuffle.partitions", "2")
                # Spark 4.3 fails to plan some rules' UNION ALLs with it on
                # ("key not found: _n#362L" in Union.rewriteConstraints; docs/engine.md)
                .config("spark.sql.constraintPropagation.enabled", "false")
                .config("spark.sql.session.timeZone", "UTC")
                # idle cost vs latency (docs/engine.md, figures (d)): 100 ms adds ~35 ms
                # to the median freshness and takes idle CPU from ~8% to ~1% of a core
                .config("spark.sql.streaming.pollingDelay", "100ms")
                .config("spark.sql.streaming.minBatchesToRetain", "20")
                .config("spark.driver.memory", "1g")
            )
            for k, v in (conf or {}).items():
                b = b.config(k, v)
            # the JVM (and the Python workers it starts) at the engine's background
            # priority: its start takes ~10 s of CPU, which writes need more
            _spark = in_background(b.getOrCreate)
            _spark.sparkContext.setLogLevel("ERROR")
            _spark.dataSource.register(sp.EpochSource)
            _spark.dataSource.register(sp.ChangeSource)
        return _spark


def spark_started() -> bool:
    """Whether the process's SparkSession is up (starting it takes seconds)."""
    return _spark is not None


def forget_spark() -> None:
    """Drop the process's SparkSession, SparkContext and Py4J gateway (their JVM died or
    does not answer: it is killed), so that the next start launches a new JVM."""
    global _spark
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from pyspark.sql.context import SQLContext

    with _spark_lock:
        spark, _spark = _spark, None
    gateway = SparkContext._gateway
    proc = gateway.__dict__.get("proc") if gateway is not None else None
    if proc is not None and proc.poll() is None:
        proc.kill()  # the JVM this process started, which no longer answers
        proc.wait()
    if spark is not None:
        with contextlib.suppress(Exception):
            spark.stop()  # Python-side cleanup (accumulator server); the JVM calls fail
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    SQLContext._instantiatedContext = None
    with SparkContext._lock:
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None
    if gateway is not None:
        with contextlib.suppress(Exception):
            gateway.shutdown()


# -- the JVM ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Jvm:
    """The JVM that pyspark launched for this process."""

    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def stopped(self) -> bool:
        """Stopped by a signal (SIGSTOP): a call into it would block until it resumes."""
        return _proc_state(self.proc.pid) in ("T", "t")

    def kill(self) -> None:
        self.proc.kill()


def jvm_process() -> Jvm | None:
    """The JVM that pyspark launched for this process, if any."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    # not getattr: a Py4J gateway resolves unknown attributes in the JVM
    proc = gateway.__dict__.get("proc") if gateway is not None else None
    return Jvm(proc) if proc is not None else None


def _proc_state(pid: int) -> str | None:
    """A process's state (/proc/<pid>/stat: R, S, D, T stopped, Z...); None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


# -- the query's health -----------------------------------------------------------------
class StageFault(NamedTuple):
    """Why the stage is down, and whether its next start needs a new JVM."""

    error: str
    new_jvm: bool


def check_query(query: Any) -> StageFault | None:
    """None while the stage is healthy. Calls into the JVM: run it on a `Probe`."""
    try:
        return _check_query(query)
    except Exception as e:  # a fault to restart from, not a dead supervisor
        return StageFault(f"checking the Spark stage failed: {brief(e)}", False)


def _check_query(query: Any) -> StageFault | None:
    jvm = jvm_process()
    if jvm is not None and not jvm.alive:
        return StageFault(_exited(jvm), True)
    if query is None:
        return StageFault("the Spark stage's query is gone", False)
    try:
        if query.isActive:
            return None
        exc = query.exception()
    except Exception as e:  # Py4J: the driver's JVM does not answer; did it exit?
        with contextlib.suppress(Exception):
            if jvm is not None and jvm.proc.wait(timeout=2) is not None:
                return StageFault(_exited(jvm), True)
        return StageFault(f"the Spark driver does not answer: {brief(e)}", True)
    if exc is None:
        return StageFault("the Spark stage's query stopped", False)
    text = brief(exc)
    cause = getattr(exc, "_cause", None)  # pyspark's converted Java cause
    if cause is not None and brief(cause) not in text:
        text += f" (caused by {brief(cause)})"
    return StageFault(f"the Spark stage's query failed: {text}", False)


def _exited(jvm: Jvm) -> str:
    return f"the Spark JVM (pid {jvm.pid}) exited with code {jvm.proc.returncode}"


def brief(e: BaseException) -> str:
    """An exception in one line. Spark's messages run over many lines (a Python
    traceback from the foreachBatch sink, the query's description): keep the first
    line and the Python exception that ends an embedded traceback."""
    text = str(e)
    for cut in ("=== Streaming Query ===", "JVM stacktrace:", "\n\tat "):
        text = text.split(cut, 1)[0]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    head = lines[0].split(" Return Message:", 1)[0]
    if len(lines) > 1:
        raised = [ln for ln in lines[1:] if _EXCEPTION_LINE.match(ln)]
        if raised:
            head = f"{head} {raised[-1]}"
    return head if len(head) <= 500 else head[:497] + "..."


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)(: |$)")


class Probe:
    """Calls into the JVM on a thread of their own: Py4J has no timeout, and a call
    into a JVM that hangs (SIGSTOP, a deadlock) blocks until that JVM dies. One
    long-lived thread, since pyspark pins a JVM thread and connection to each Python
    thread that calls it."""

    def __init__(self) -> None:
        self._jobs: SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="spark-probe", daemon=True)
            self._thread.start()
        fut: Future[Any] = Future()
        self._jobs.put((fn, fut))
        return fut

    def _work(self) -> None:
        while True:
            fn, fut = self._jobs.get()
            try:
                fut.set_result(fn())
            except BaseException as e:
                fut.set_exception(e)


# -- Spark's checkpoint ---------------------------------------------------------------------
def drop_unrenamed_logs(checkpoint: str) -> None:
    """Spark writes each offset/commit log entry to a hidden temp file, then renames it;
    a kill in between leaves the temp file, and Spark 4 then refuses to start at batch 0
    (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY). No query runs here: they are garbage."""
    for log_dir in ("offsets", "commits"):
        for tmp in Path(checkpoint, log_dir).glob(".*.tmp*"):
            tmp.unlink(missing_ok=True)


def batch_end(checkpoint: str, batch_id: int) -> int | None:
    """The last epoch of a micro-batch, from Spark's offset log (written before the
    batch runs, so it is there when the batch is replayed after a crash)."""
    path = Path(checkpoint, "offsets", str(batch_id))
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    ends = [json.loads(line)["epoch"] for line in lines[2:] if line.startswith("{")]
    return int(max(ends)) if ends else None
