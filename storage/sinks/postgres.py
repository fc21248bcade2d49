"""INTO POSTGRES 'conninfo' TABLE name: a table of a PostgreSQL database, with asyncpg.

The target table is created with the source's columns and types when it does not
exist (mode 'changes': `epoch bigint, diff bigint` first; mode 'mirror' with a key: that
key as its PRIMARY KEY). Every batch is one transaction that applies the rows and sets
this sink's row of `headwater_sink_progress` (in the target table's schema) to the
batch's last epoch, after checking that the row still says the previous one (so two
writers cannot interleave): the target holds a batch entirely or not at all.

Mirror: with a key, the batch's changed keys are deleted and their new rows inserted;
without one, rows are matched whole, `n` copies deleted or inserted for a change of
multiplicity `n`. Values travel as PostgreSQL's text output of the catalog's types (the
same bytes psql would show), by COPY.
"""

from __future__ import annotations

import io
import shlex
from typing import Any

import asyncpg
from headwater.catalog.objects import Column
from headwater.catalog.pgtypes import text_encoder
from headwater.storage.sinks.spec import DIFF, EPOCH, BatchReader, SinkSpec

PROGRESS = "headwater_sink_progress"
BATCH = "_hw_sink_batch"  # the transaction's temporary table of the batch's rows
CONNECT_TIMEOUT = 10.0


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def parse_conninfo(conninfo: str) -> dict[str, Any]:
    """libpq's `key=value ...` (or a postgresql:// URI) as asyncpg.connect's arguments."""
    if "://" in conninfo:
        return {"dsn": conninfo}
    names = {"dbname": "database", "host": "host", "port": "port", "user": "user"}
    names |= {"password": "password", "sslmode": "ssl"}
    out: dict[str, Any] = {}
    for part in shlex.split(conninfo):
        key, _, value = part.partition("=")
        if key in names:
            out[names[key]] = int(value) if key == "port" else value
    return out


class PostgresTarget:
    def __init__(self, spec: SinkSpec) -> None:
        self.spec = spec
        assert spec.table is not None
        schema, _, table = spec.table.rpartition(".")
        self.schema = schema or "public"
        self.table_name = table
        self.table = f"{quote_ident(self.schema)}.{quote_ident(table)}"
        self.progress = f"{quote_ident(self.schema)}.{PROGRESS}"
        self.key_name = f"{spec.name} -> {self.schema}.{table}"  # its progress row
        self.conn: asyncpg.Connection | None = None

    async def _connect(self) -> asyncpg.Connection:
        if self.conn is None or self.conn.is_closed():
            self.conn = await asyncpg.connect(
                **parse_conninfo(self.spec.target), timeout=CONNECT_TIMEOUT
            )
            await self._ensure_tables(self.conn)
        return self.conn

    async def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None and not conn.is_closed():
            conn.terminate()

    async def last_epoch(self) -> int | None:
        conn = await self._connect()
        row = await conn.fetchrow(
            f"SELECT epoch, sink_oid FROM {self.progress} WHERE sink = $1", self.key_name
        )
        if row is None or row["sink_oid"] != self.spec.oid:
            return None
        return int(row["epoch"])

    async def _ensure_tables(self, conn: asyncpg.Connection) -> None:
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.schema)}")
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {self.progress} (sink text PRIMARY KEY,"
            " sink_oid bigint NOT NULL, epoch bigint NOT NULL,"
            " updated_at timestamptz NOT NULL DEFAULT now())"
        )
        exists = await conn.fetchval("SELECT to_regclass($1)", self.table)
        if exists is not None:
            return
        spec = self.spec
        # an enum's labels as text: the target has no such type (a table made beforehand
        # with the type takes them as they are)
        cols = [
            f"{quote_ident(c.name)} {'text' if c.type.pg.category == 'E' else c.type.sql()}"
            for c in spec.columns
        ]
        if spec.mode == "changes":
            cols = [f"{EPOCH} bigint NOT NULL", f"{DIFF} bigint NOT NULL", *cols]
        elif spec.key:
            cols.append(f"PRIMARY KEY ({', '.join(quote_ident(k) for k in spec.key)})")
        await conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} ({', '.join(cols)})")

    async def write(self, batch: BatchReader) -> int:
        import asyncio

        spec = self.spec
        conn = await self._connect()
        if spec.mode == "changes":
            rows = await asyncio.to_thread(lambda: batch.python_rows(batch.changes()))
            types = [_BIGINT, _BIGINT, *spec.columns]
        elif batch.after is None:
            rows = await asyncio.to_thread(lambda: batch.python_rows(batch.state()))
            types = list(spec.columns)
        else:
            rows = await asyncio.to_thread(lambda: batch.python_rows(batch.net()))
            types = [_BIGINT, *spec.columns]
        data = _copy_text(rows, types)
        async with conn.transaction():
            await self._check_progress(conn, batch.after)
            if spec.mode == "changes":
                names = [EPOCH, DIFF, *spec.column_names]
                await self._copy(conn, self.table_name, self.schema, names, data)
            elif batch.after is None:
                await conn.execute(f"DELETE FROM {self.table}")
                await self._copy(conn, self.table_name, self.schema, spec.column_names, data)
            else:
                await self._apply_net(conn, data)
            await conn.execute(
                f"INSERT INTO {self.progress} (sink, sink_oid, epoch) VALUES ($1, $2, $3)"
                " ON CONFLICT (sink) DO UPDATE SET sink_oid = EXCLUDED.sink_oid,"
                " epoch = EXCLUDED.epoch, updated_at = now()",
                self.key_name,
                spec.oid,
                batch.upto,
            )
        return len(rows)

    async def _check_progress(self, conn: asyncpg.Connection, after: int | None) -> None:
        row = await conn.fetchrow(
            f"SELECT epoch, sink_oid FROM {self.progress} WHERE sink = $1 FOR UPDATE",
            self.key_name,
        )
        have = None if row is None or row["sink_oid"] != self.spec.oid else int(row["epoch"])
        if after is not None and have != after:
            raise RuntimeError(
                f"the target's progress row says epoch {have}, not {after}: another writer?"
            )

    @staticmethod
    async def _copy(
        conn: asyncpg.Connection, table: str, schema: str | None, names: list[str], data: bytes
    ) -> None:
        if data:
            await conn.copy_to_table(
                table, source=io.BytesIO(data), columns=names, schema_name=schema, format="text"
            )

    async def _apply_net(self, conn: asyncpg.Connection, data: bytes) -> None:
        """Mirror: the batch's net changes (n, cols...) applied by key or by whole row."""
        spec = self.spec
        cols = spec.column_names
        await conn.execute(
            f"CREATE TEMP TABLE {BATCH} ON COMMIT DROP AS"
            f" SELECT 0::bigint AS _hw_n, * FROM {self.table} WITH NO DATA"
        )
        await self._copy(conn, BATCH, None, ["_hw_n", *cols], data)
        qcols = ", ".join(quote_ident(c) for c in cols)
        if spec.key:
            not_null = {c.name for c in spec.columns if c.not_null}
            on = " AND ".join(
                f"t.{quote_ident(k)} = b.{quote_ident(k)}"
                if k in not_null
                else f"t.{quote_ident(k)} IS NOT DISTINCT FROM b.{quote_ident(k)}"
                for k in spec.key
            )
            await conn.execute(f"DELETE FROM {self.table} AS t USING {BATCH} AS b WHERE {on}")
            await conn.execute(
                f"INSERT INTO {self.table} ({qcols}) SELECT {qcols} FROM {BATCH} WHERE _hw_n > 0"
            )
            return
        match = " AND ".join(
            f"t.{quote_ident(c)} IS NOT DISTINCT FROM b.{quote_ident(c)}" for c in cols
        )
        await conn.execute(f"ALTER TABLE {BATCH} ADD COLUMN _hw_i bigserial")
        await conn.execute(
            f"DELETE FROM {self.table} WHERE ctid = ANY (ARRAY("
            f"SELECT ctid FROM (SELECT t.ctid, b._hw_n, row_number() OVER"
            f" (PARTITION BY b._hw_i) AS _hw_r FROM {self.table} AS t JOIN {BATCH} AS b"
            f" ON {match or 'true'} WHERE b._hw_n < 0) AS d WHERE _hw_r <= -_hw_n))"
        )
        await conn.execute(
            f"INSERT INTO {self.table} ({qcols}) SELECT {qcols} FROM {BATCH},"
            f" generate_series(1, _hw_n) WHERE _hw_n > 0"
        )


class _Bigint:
    pass


_BIGINT = _Bigint()


def _copy_text(rows: list[tuple[Any, ...]], types: list[Column | _Bigint]) -> bytes:
    """COPY's text format of `rows`: each value as PostgreSQL's text output."""
    encoders = [
        (lambda v: str(v).encode()) if isinstance(t, _Bigint) else text_encoder(t.type)
        for t in types
    ]
    out = io.BytesIO()
    for r in rows:
        fields = [
            b"\\N" if v is None else _escape(enc(v)) for v, enc in zip(r, encoders, strict=True)
        ]
        out.write(b"\t".join(fields) + b"\n")
    return out.getvalue()


def _escape(b: bytes) -> bytes:
    if b"\\" in b or b"\t" in b or b"\n" in b or b"\r" in b:
        b = b.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\n", b"\\n")
        b = b.replace(b"\r", b"\\r")
    return b
