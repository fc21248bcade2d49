"""Single-row writes of the shapes applications send, one client, Headwater next to
PostgreSQL 15.

Each shape is a table and one prepared statement (asyncpg), run --statements times one
after another; reported: milliseconds per statement (its round trip, acknowledged
durable). One client measures each statement's own path: a shape Headwater does not
take through its fast paths (server/batcher.py, server/point_writes.py) is a writing
transaction of its own, ~10 ms, where the fast paths take ~1-2 ms and PostgreSQL
~0.2-0.3 ms. The ratio per shape shows which shapes still take the general path.

plain            INSERT (id, name) VALUES ($1, 'x')
const default    the same into a table with DEFAULT 0 / true / '' columns left out
uuid key         INSERT into a table whose key is uuid DEFAULT gen_random_uuid()
unique lower()   INSERT into a table with CREATE UNIQUE INDEX ... (lower(email))
generated        INSERT into a table with a GENERATED ALWAYS AS (a * 2) STORED column
do nothing       INSERT ... ON CONFLICT DO NOTHING (keys repeat: half are skipped)
upsert           INSERT ... ON CONFLICT (id) DO UPDATE SET n = t.n + 1 (keys repeat)
upsert in block  the same in BEGIN ... COMMIT, as SQLAlchemy and psycopg sessions send it
                 (the time of the whole transaction)
do nothing in block  INSERT ... ON CONFLICT DO NOTHING in BEGIN ... COMMIT
short values     INSERT INTO t VALUES ($1, 'x') into a table of more columns (the rest
                 take their defaults)
update           UPDATE t SET n = n + 1 WHERE id = $1
delete           DELETE FROM t WHERE id = $1
array            INSERT of a text[] value (ARRAY['a', 'b']: an expression)
array param      INSERT of a text[] value as a parameter (a list)
default item     INSERT INTO t VALUES ($1, DEFAULT, 'x') (ActiveRecord, Django)
cast params      INSERT ... VALUES ($1::int8, $2::varchar, $3::numeric) (SQLAlchemy's casts)
update product   UPDATE t SET n = n * 2 WHERE id = $1
update concat    UPDATE t SET s = s || 'x' WHERE id = $1
update jsonb tbl UPDATE t SET n = n + 1 WHERE id = $1 of a table with a jsonb column
update array     UPDATE t SET tags = $2, n = n + 1 WHERE id = $1 (a text[] parameter)
expressions      INSERT ... VALUES ($1, lower($2), $3 + 1) (items DuckDB computes first)
time interval    INSERT ... VALUES ($1, '10:00', '1 day') into time and interval columns
orm flush        SQLAlchemy's ORM flush of 3 new objects with a serial key: INSERT ... SELECT
                 p0::VARCHAR, p1::INTEGER FROM (VALUES ...) AS imp_sen(...) ORDER BY
                 sen_counter RETURNING id
select consts    INSERT INTO t (id, name) SELECT $1, 'x'
clock expr       INSERT ... VALUES ($1, now() + interval '1 day') (an expiry)
update expr      UPDATE t SET name = lower($2) WHERE id = $1 (a SET item DuckDB computes first)

    .venv/bin/python bench/write_shapes.py
    .venv/bin/python bench/write_shapes.py --statements 1000 --only upsert,array
"""

from __future__ import annotations

import argparse
import asyncio
import decimal
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import asyncpg

try:
    from bench import common
except ImportError:  # run as a script: bench/ is sys.path[0]
    import common  # type: ignore[no-redef]


class Shape(NamedTuple):
    columns: str
    sql: str  # {t}: the table
    args: Callable[[int], tuple[Any, ...]] = lambda i: (i,)  # the i-th statement's
    loaded: bool = False  # rows 0..statements first (UPDATE, DELETE)
    index: str = ""  # an index to create first
    block: bool = False  # each statement in BEGIN ... COMMIT (timed together)


def _twice(i: int) -> tuple[Any, ...]:
    return (i // 2,)  # each key twice: the second conflicts


SHAPES: dict[str, Shape] = {
    "plain": Shape(
        "id bigint PRIMARY KEY, name text", "INSERT INTO {t} (id, name) VALUES ($1, 'x')"
    ),
    "const default": Shape(
        "id bigint PRIMARY KEY, name text, n int DEFAULT 0, ok boolean DEFAULT true,"
        " note text DEFAULT ''",
        "INSERT INTO {t} (id, name) VALUES ($1, 'x')",
    ),
    "uuid key": Shape(
        "id uuid PRIMARY KEY DEFAULT gen_random_uuid(), k bigint, name text",
        "INSERT INTO {t} (k, name) VALUES ($1, 'x')",
    ),
    "unique lower()": Shape(
        "id bigint PRIMARY KEY, email text",
        "INSERT INTO {t} (id, email) VALUES ($1, $2)",
        lambda i: (i, f"User{i}@X.com"),
        index="CREATE UNIQUE INDEX {t}_lower ON {t} (lower(email))",
    ),
    "generated": Shape(
        "id bigint PRIMARY KEY, a int, b int GENERATED ALWAYS AS (a * 2) STORED",
        "INSERT INTO {t} (id, a) VALUES ($1, 21)",
    ),
    "do nothing": Shape(
        "id bigint PRIMARY KEY, name text",
        "INSERT INTO {t} (id, name) VALUES ($1, 'x') ON CONFLICT DO NOTHING",
        _twice,
    ),
    "upsert": Shape(
        "id bigint PRIMARY KEY, name text, n int",
        "INSERT INTO {t} AS t (id, name, n) VALUES ($1, 'x', 1)"
        " ON CONFLICT (id) DO UPDATE SET n = t.n + 1",
        _twice,
    ),
    "upsert in block": Shape(
        "id bigint PRIMARY KEY, name text, n int",
        "INSERT INTO {t} AS t (id, name, n) VALUES ($1, 'x', 1)"
        " ON CONFLICT (id) DO UPDATE SET n = t.n + 1",
        _twice,
        block=True,
    ),
    "do nothing in block": Shape(
        "id bigint PRIMARY KEY, name text",
        "INSERT INTO {t} (id, name) VALUES ($1, 'x') ON CONFLICT DO NOTHING",
        _twice,
        block=True,
    ),
    "short values": Shape(
        "id bigint PRIMARY KEY, name text, n int, note text",
        "INSERT INTO {t} VALUES ($1, 'x')",
    ),
    "update": Shape(
        "id bigint PRIMARY KEY, n int", "UPDATE {t} SET n = n + 1 WHERE id = $1", loaded=True
    ),
    "delete": Shape("id bigint PRIMARY KEY, n int", "DELETE FROM {t} WHERE id = $1", loaded=True),
    "array": Shape(
        "id bigint PRIMARY KEY, tags text[]",
        "INSERT INTO {t} (id, tags) VALUES ($1, ARRAY['a', 'b'])",
    ),
    "array param": Shape(
        "id bigint PRIMARY KEY, tags text[]",
        "INSERT INTO {t} (id, tags) VALUES ($1, $2)",
        lambda i: (i, ["a", "b"]),
    ),
    "default item": Shape(
        "id bigint PRIMARY KEY, n int DEFAULT 0, name text",
        "INSERT INTO {t} VALUES ($1, DEFAULT, 'x')",
    ),
    "cast params": Shape(
        "id bigint PRIMARY KEY, name varchar(20), amount numeric(10,2)",
        "INSERT INTO {t} (id, name, amount) VALUES ($1::int8, $2::varchar, $3::numeric)",
        lambda i: (i, "x", decimal.Decimal("1.5")),
    ),
    "update product": Shape(
        "id bigint PRIMARY KEY, n int", "UPDATE {t} SET n = n * 2 WHERE id = $1", loaded=True
    ),
    "update concat": Shape(
        "id bigint PRIMARY KEY, s text", "UPDATE {t} SET s = s || 'x' WHERE id = $1", loaded=True
    ),
    "update jsonb tbl": Shape(
        "id bigint PRIMARY KEY, n int, doc jsonb",
        "UPDATE {t} SET n = n + 1 WHERE id = $1",
        loaded=True,
    ),
    "update array": Shape(
        "id bigint PRIMARY KEY, n int, tags text[]",
        "UPDATE {t} SET tags = $2, n = n + 1 WHERE id = $1",
        lambda i: (i, ["a"]),
        loaded=True,
    ),
    "expressions": Shape(
        "id bigint PRIMARY KEY, name text, n int",
        "INSERT INTO {t} VALUES ($1, lower($2), $3 + 1)",
        lambda i: (i, "X", i),
    ),
    "time interval": Shape(
        "id bigint PRIMARY KEY, at time, span interval",
        "INSERT INTO {t} VALUES ($1, '10:00', '1 day')",
    ),
    "orm flush": Shape(
        "id serial PRIMARY KEY, name varchar(50) NOT NULL, age int NOT NULL",
        "INSERT INTO {t} (name, age) SELECT p0::VARCHAR, p1::INTEGER FROM (VALUES"
        " ($1::VARCHAR, $2::INTEGER, 0), ($3::VARCHAR, $4::INTEGER, 1),"
        " ($5::VARCHAR, $6::INTEGER, 2)) AS imp_sen(p0, p1, sen_counter)"
        " ORDER BY sen_counter RETURNING {t}.id, {t}.id AS id__1",
        lambda i: ("a", i, "b", i + 1, "c", i + 2),
    ),
    "select consts": Shape(
        "id bigint PRIMARY KEY, name text", "INSERT INTO {t} (id, name) SELECT $1, 'x'"
    ),
    "clock expr": Shape(
        "id bigint PRIMARY KEY, expires timestamptz",
        "INSERT INTO {t} VALUES ($1, now() + interval '1 day')",
    ),
    "update expr": Shape(
        "id bigint PRIMARY KEY, n int, name text",
        "UPDATE {t} SET name = lower($2) WHERE id = $1",
        lambda i: (i, "X"),
        loaded=True,
    ),
}


async def run_shape(dsn: str, name: str, statements: int) -> float:
    """Median milliseconds per statement of the shape, one client."""
    shape = SHAPES[name]
    table = "ws_" + "".join(ch for ch in name if ch.isalnum())
    conn = await asyncpg.connect(**common.asyncpg_kwargs(dsn), ssl=False)
    try:
        await conn.execute(f"DROP TABLE IF EXISTS {table}")
        await conn.execute(f"CREATE TABLE {table} ({shape.columns})")
        if shape.index:
            await conn.execute(shape.index.format(t=table))
        if shape.loaded:
            await conn.execute(
                f"INSERT INTO {table} SELECT g, 1 FROM generate_series(0, {statements}) AS g"
            )
        stmt = await conn.prepare(shape.sql.format(t=table))
        times = []
        for i in range(statements):
            args = shape.args(i)
            t0 = time.perf_counter()
            if shape.block:
                async with conn.transaction():
                    await stmt.fetch(*args)
            else:
                await stmt.fetch(*args)
            times.append(time.perf_counter() - t0)
        await conn.execute(f"DROP TABLE {table}")
        return 1000 * statistics.median(times)
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--statements", type=int, default=400, help="statements per shape (400)")
    p.add_argument("--only", default=",".join(SHAPES), help="shapes: " + ",".join(SHAPES))
    common.add_server_args(p)
    args = p.parse_args(argv)
    shapes = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        p.error(f"unknown shapes {unknown}; choose from {', '.join(SHAPES)}")
    report = common.Report(
        title="Single-row writes by shape, one client",
        params={"statements": args.statements, "load_avg_at_start": common.load_avg()},
    )
    report.notes.append("client and server share this machine's CPUs; no TLS")
    for side, server in common.sides(args):
        try:
            with server() as dsn:
                report.servers[side] = common.server_version(dsn)
                for name in shapes:
                    m = report.metric(f"{name}: ms per statement", "ms", higher_is_better=False)
                    m.values[side] = asyncio.run(run_shape(dsn, name, args.statements))
                    common.log(f"{side} {name}: {m.values[side]:.2f} ms (load {common.load_avg()})")
        except Exception as e:
            common.side_failed(report, side, e)
    return common.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
