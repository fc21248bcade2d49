"""The status page: GET / on the metrics address (server/metrics.py serves it).

One HTML page, plain HTML and CSS with inline SVG sparklines (no script), refreshing
itself every 5 s: the materialized views with frontier, lag, status, executor,
backfill progress and a sparkline of their freshness; the sinks with their lag; the
long work running now (backfills, COPYs); the Spark cluster's workers. It reads what
headwater_catalog.views, .sinks and .progress show, as /metrics does. Every name is
escaped: views, sinks and errors are the users' text.

Freshness is sampled once a second per running view (its lag_ms: how long ago the
oldest epoch it does not reflect closed, 0 when current) into a ring of the last
SAMPLES seconds, in memory only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import urllib.request
from collections import deque
from html import escape
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from headwater.server import hw_catalog
from headwater.server.slo import SLO_COLUMNS, slo_text

if TYPE_CHECKING:
    from headwater.server.instance import Instance

log = logging.getLogger("headwater.status")

SAMPLES = 120  # freshness samples kept per view (one a second: two minutes)
SAMPLE_EVERY = 1.0
WORKERS_TTL = 5.0  # seconds the master's answer is reused
MASTER_UI_PORT = 8080  # a standalone master's default --webui-port


class Freshness:
    """A ring of recent lag samples (seconds) per view, filled by `run`."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.rings: dict[str, deque[float]] = {}
        self._lock = threading.Lock()  # the sampler's thread and the page's

    def sample(self) -> None:
        lags = hw_catalog.view_lags(self.instance)
        with self._lock:
            for name, lag_ms in lags.items():
                self.rings.setdefault(name, deque(maxlen=SAMPLES)).append(lag_ms / 1000.0)
            for gone in self.rings.keys() - lags.keys():  # dropped (or in error)
                del self.rings[gone]

    def snapshot(self) -> dict[str, list[float]]:
        with self._lock:
            return {name: list(ring) for name, ring in self.rings.items()}

    async def run(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self.sample)
            except Exception:  # a view dropped meanwhile, the engine restarting: next time
                log.debug("status: sampling freshness", exc_info=True)
            await asyncio.sleep(SAMPLE_EVERY)


class Workers:
    """The Spark cluster's workers as the page shows them."""

    def __init__(self, master: str, ui: str | None) -> None:
        self.master = master
        if master.startswith("spark://") and ui is None:
            host = urlsplit(master.split(",")[0]).hostname or "127.0.0.1"
            ui = f"http://{host}:{MASTER_UI_PORT}"
        self.ui = ui
        self._cached: tuple[float, dict[str, Any]] | None = None

    def describe(self) -> dict[str, Any]:
        """{'kind': local | standalone | other, 'summary': text, 'workers': [...]}.
        A standalone master is asked at its web UI's /json/ (once per WORKERS_TTL)."""
        m = self.master
        if m.startswith("local"):
            return {
                "kind": "local",
                "summary": f"local master ({m}): Spark runs in one JVM on this machine, "
                "next to the server; there are no separate workers",
                "workers": [],
            }
        if not m.startswith("spark://") or self.ui is None:
            return {"kind": "other", "summary": f"master {m}: workers unknown", "workers": []}
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < WORKERS_TTL:
            return self._cached[1]
        try:
            with urllib.request.urlopen(self.ui.rstrip("/") + "/json/", timeout=1.0) as r:
                info = json.loads(r.read())
            workers = [
                {
                    "id": str(w.get("id", "")),
                    "address": f"{w.get('host', '?')}:{w.get('port', '?')}",
                    "state": str(w.get("state", "")),
                    "cores": f"{w.get('coresused', 0)}/{w.get('cores', 0)}",
                    "memory": f"{w.get('memoryused', 0)}/{w.get('memory', 0)} MB",
                }
                for w in info.get("workers", [])
            ]
            alive = info.get("aliveworkers", len(workers))
            out = {
                "kind": "standalone",
                "summary": f"master {m} ({info.get('status', '?')}): {alive} alive worker(s)",
                "workers": workers,
            }
        except (OSError, ValueError) as e:
            out = {
                "kind": "standalone",
                "summary": f"master {m}: workers unknown (its web UI {self.ui} did not "
                f"answer: {e})",
                "workers": [],
            }
        self._cached = (now, out)
        return out


def sparkline(samples: list[float], width: int = 160, height: int = 28) -> str:
    """An inline SVG polyline of lag seconds (0 at the bottom), scaled to its maximum
    (at least 1 s, so that a current view draws a flat line at the bottom)."""
    if not samples:
        return '<span class="muted">no samples yet</span>'
    top = max(max(samples), 1.0)
    n = len(samples)
    step = width / max(SAMPLES - 1, 1)
    x0 = width - (n - 1) * step  # the newest sample at the right edge
    points = " ".join(
        f"{x0 + i * step:.1f},{height - 2 - (s / top) * (height - 4):.1f}"
        for i, s in enumerate(samples)
    )
    return (
        f'<svg class="spark" width="{width}" height="{height}" role="img" '
        f'aria-label="freshness over the last {n} s, now {samples[-1]:.2f} s, max {top:.2f} s">'
        f"<title>lag now {samples[-1]:.2f} s, max {max(samples):.2f} s over {n} s</title>"
        f'<polyline fill="none" stroke="#2a7ae2" stroke-width="1.5" points="{points}"/></svg>'
    )


CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin: 0 0 .2em; } h2 { font-size: 1.1em; margin: 1.4em 0 .4em; }
table { border-collapse: collapse; } td, th { padding: .25em .8em; text-align: left;
  border-bottom: 1px solid #ddd; vertical-align: middle; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #888; } .st-running, .st-ok { color: #1a7f37; }
.st-error, .st-restarting, .st-retrying { color: #c62828; font-weight: 600; }
.st-backfilling { color: #9a6700; }
.bar { display: inline-block; width: 100px; height: .7em; background: #eee; }
.bar span { display: block; height: 100%; background: #2a7ae2; }
"""


def _cell(value: Any, num: bool = False) -> str:
    text = "" if value is None else escape(str(value))
    return f'<td class="num">{text}</td>' if num else f"<td>{text}</td>"


def _status(value: str | None, error: str | None) -> str:
    s = escape(value or "")
    why = f' title="{escape(error)}"' if error else ""
    return f'<td class="st-{s}"{why}>{s}</td>'


def _ms(value: float | None) -> str | None:
    return None if value is None else f"{value:,.0f} ms"


def _bar(percent: float | None, phase: str | None) -> str:
    if percent is None:
        return escape(phase or "")
    return (
        f'<span class="bar"><span style="width:{percent:.0f}%"></span></span> '
        f"{percent:.0f}% {escape(phase or '')}"
    )


def render(
    views: list[dict[str, Any]],
    sinks: list[dict[str, Any]],
    work: list[dict[str, Any]],
    cluster: dict[str, Any],
    rings: dict[str, list[float]],
    version: str,
) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="refresh" content="5">',
        f"<title>Headwater status</title><style>{CSS}</style></head><body>",
        f"<h1>Headwater {escape(version)}</h1>",
        f'<p class="muted">{time.strftime("%Y-%m-%d %H:%M:%S %Z")}; refreshes every 5 s; '
        '<a href="/metrics">/metrics</a></p>',
        f'<h2 id="views">Materialized views ({len(views)})</h2>',
    ]
    if views:
        out.append(
            "<table><tr><th>view</th><th>status</th><th>frontier</th><th>lag (epochs)</th>"
            "<th>lag</th><th>rows</th><th>executor</th><th>SLO</th><th>freshness (last "
            f"{SAMPLES} s)</th></tr>"
        )
        for v in views:
            name = f"{v['schema']}.{v['name']}"
            fresh = (
                _bar(v["progress"], v["progress_phase"])
                if v["status"] == "backfilling"
                else sparkline(rings.get(name, []))
            )
            out.append(
                f'<tr class="view">{_cell(name)}{_status(v["status"], v["error"])}'
                f"{_cell(v['frontier'], True)}{_cell(v['lag_epochs'], True)}"
                f"{_cell(_ms(v['lag_ms']), True)}{_cell(v['rows'], True)}"
                f"{_cell(v['executor'])}"
                f"{_cell(slo_text(*(v[k] for k in SLO_COLUMNS)))}"
                f"<td>{fresh}</td></tr>"
            )
        out.append("</table>")
    else:
        out.append('<p class="muted">no materialized views</p>')
    out.append(f'<h2 id="sinks">Sinks ({len(sinks)})</h2>')
    if sinks:
        out.append(
            "<table><tr><th>sink</th><th>from</th><th>into</th><th>status</th>"
            "<th>epoch written</th><th>lag (epochs)</th><th>lag</th><th>rows</th></tr>"
        )
        for s in sinks:
            into = f"{s['target_kind']} {s['target']}"
            name = f"{s['schema']}.{s['name']}"
            out.append(
                f'<tr class="sink">{_cell(name)}{_cell(s["source"])}'
                f"{_cell(into)}{_status(s['status'], s['error'])}"
                f"{_cell(s['epoch_written'], True)}{_cell(s['lag_epochs'], True)}"
                f"{_cell(_ms(s['lag_ms']), True)}{_cell(s['rows'], True)}</tr>"
            )
        out.append("</table>")
    else:
        out.append('<p class="muted">no sinks</p>')
    if work:
        out.append(f'<h2 id="progress">Running now ({len(work)})</h2>')
        out.append(
            "<table><tr><th>work</th><th>on</th><th>progress</th><th>done</th><th>elapsed</th></tr>"
        )
        for w in work:
            total = "" if w["total"] is None else f"/{w['total']:,}"
            done = f"{w['done']:,}{total} {w['unit']}" + (
                f" ({w['detail']})" if w["detail"] else ""
            )
            took = f"{w['elapsed_s']:.1f} s"
            out.append(
                f'<tr class="work">{_cell(w["kind"])}{_cell(w["target"])}'
                f"<td>{_bar(w['percent'], w['phase'])}</td>{_cell(done, True)}"
                f"{_cell(took, True)}</tr>"
            )
        out.append("</table>")
    out.append('<h2 id="cluster">Spark cluster</h2>')
    out.append(f'<p class="cluster">{escape(cluster["summary"])}</p>')
    if cluster["workers"]:
        out.append(
            "<table><tr><th>worker</th><th>address</th><th>state</th><th>cores used</th>"
            "<th>memory used</th></tr>"
        )
        for w in cluster["workers"]:
            out.append(
                f'<tr class="worker">{_cell(w["id"])}{_cell(w["address"])}'
                f"{_cell(w['state'])}{_cell(w['cores'], True)}{_cell(w['memory'], True)}</tr>"
            )
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)


class StatusPage:
    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.freshness = Freshness(instance)
        cfg = instance.config
        self.workers = Workers(cfg.spark_master, cfg.spark_master_ui)
        self._sampler: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sampler = asyncio.get_running_loop().create_task(self.freshness.run())

    def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()

    def html(self) -> bytes:
        """The page (on a worker thread: the views' sizes are a statement)."""
        from headwater import __version__

        inst = self.instance
        try:
            views = hw_catalog.views(inst).to_pylist()
        except Exception:  # the page goes on without them, as /metrics does
            log.exception("status: reading headwater_catalog.views")
            views = []
        page = render(
            views,
            inst.sinks.rows(),
            inst.progress.rows(),
            self.workers.describe(),
            self.freshness.snapshot(),
            __version__,
        )
        return page.encode("utf-8")
