"""The listening socket: accepts connections and routes cancel requests."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from headwater.server import tls
from headwater.server.auth.hba import load_hba
from headwater.server.connection import Connection
from headwater.server.instance import Config, Instance

log = logging.getLogger("headwater.server")


class Server:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.instance = Instance(config)
        self.sessions: dict[int, Connection] = {}
        self.instance.server = self  # type: ignore[attr-defined]  # pg_terminate_backend
        self.hba = load_hba(config.hba_file)
        self.tls = tls.setup(config.data_dir, config.tls_cert, config.tls_key, config.tls)
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.metrics: Any = None  # server/metrics.py, with --metrics-address

    async def start(self) -> None:
        await self.instance.open()
        self._server = await asyncio.start_server(
            self._accept, self.config.host, self.config.port, limit=1 << 20, backlog=512
        )
        log.info("listening on %s:%d", self.config.host, self.config.port)
        if self.config.metrics_address:
            from headwater.server.metrics import MetricsServer, parse_address

            self.metrics = MetricsServer(self.instance, lambda: self.sessions)
            await self.metrics.start(*parse_address(self.config.metrics_address))

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self, reader, writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await conn.run()
        except asyncio.CancelledError:
            pass  # the server is stopping: the connection ends with it
        finally:
            if task is not None:
                self._tasks.discard(task)

    def cancel(self, pid: int, secret: int) -> None:
        conn = self.sessions.get(pid)
        if conn is not None and conn.session is not None and conn.session.secret == secret:
            conn.cancel()

    async def serve_forever(self) -> None:
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        if self.metrics is not None:
            await self.metrics.close()
        for t in list(self._tasks):
            t.cancel()
        await self.instance.close()
