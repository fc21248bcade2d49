"""A read's epoch is a DuckDB parameter, never spliced into its SQL text.

The Binder's scans name $n, the parameter after the client's (planner/params.py's
epoch_parameter); each execution binds the epoch it chose (server/epoch_choice.py)
with the client's values. So one bound SQL text serves every epoch, and AS OF a
statement that reads no relation (`SELECT 1 AS OF EPOCH n`) runs, after the same
range check as any other AS OF.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import psycopg
import pytest
from headwater.catalog.catalog import Catalog
from headwater.planner.ddl import table_from_create
from headwater.planner.params import epoch_parameter
from headwater.planner.relations import Binder
from headwater.planner.serving import serving_sql
from headwater.server import reads
from headwater.server.executor import Executor
from headwater.server.instance import Config, Instance
from headwater.server.session import Session
from headwater.server.statements import parse_statements
from headwater.storage.replica import FROM, Replica, visible_at
from psycopg import errors

from tests.hwserver import HeadwaterServer


def _stmt(sql: str):  # type: ignore[no-untyped-def]
    return parse_statements(sql)[0][0]


def test_epoch_parameter_follows_the_clients() -> None:
    assert epoch_parameter(_stmt("SELECT 1")) == 1
    assert epoch_parameter(_stmt("SELECT * FROM t WHERE a = $1 OR a = $3")) == 4


def test_args_bind_the_epoch_after_the_clients() -> None:
    sql = "SELECT * FROM (SELECT a FROM t WHERE _hw_from <= $3 AND _hw_to > $3) s WHERE a = $2"
    used, epoch_param = reads.split_params(sql, 3)
    assert (used, epoch_param) == ({2}, 3)
    assert reads.args(used, [10, 20], epoch_param, 7) == {"2": 20, "3": 7}
    assert reads.args(frozenset({1, 2}), [10, 20], 3, 7) == [10, 20, 7]
    assert reads.split_params("SELECT 1", 1) == (frozenset(), 0)  # reads no epoch
    assert reads.args(frozenset(), [], 0, 7) is None


def test_ir_serving_names_the_same_parameter() -> None:
    """The IR's rendering (planner/serving.py) scans at the Binder's $n too."""
    catalog = Catalog()
    catalog.add_relation(
        table_from_create(_stmt("CREATE TABLE ep_ir (a int)"), catalog.allocate_oid(), "public")
    )
    stmt = _stmt("SELECT a, count(*) FROM ep_ir GROUP BY a")
    at = f"${epoch_parameter(stmt)}"
    scan = visible_at(at)  # type: ignore[arg-type]
    ir = Binder(catalog, ("public",), lambda t: Replica.scan(t, scan))
    sql = serving_sql(stmt, ir)
    assert sql is not None and scan in sql
    plain = Binder(catalog, ("public",), lambda t: Replica.scan(t, scan))
    assert scan in plain.to_sql(stmt)


def test_one_bound_text_serves_every_epoch(tmp_path: Path) -> None:
    """A reused SELECT is bound once: its SQL names the epoch as $n (after the client's
    parameters) and stays the same text while the epochs it reads advance."""

    async def run() -> None:
        instance = Instance(Config(data_dir=tmp_path / "data", tls=False))
        await instance.open()
        try:
            session = Session(instance, "headwater", "headwater")
            role = instance.catalog.role("headwater")
            assert role is not None
            session.role_oid = role.oid  # the bootstrap superuser, as a connection sets it
            ex = Executor(session)
            await ex.execute(_stmt("CREATE TABLE ep_bound (a int)"), [])
            read = _stmt("SELECT count(*) FROM ep_bound WHERE a > $1")
            ex.plans.keep(read)
            texts = set()
            for i in range(1, 4):
                await ex.execute(_stmt(f"INSERT INTO ep_bound VALUES ({i})"), [])
                result = await ex.execute(read, [0])
                assert result.rows == [(i,)]
                plan = ex.plans.get(read)
                assert plan is not None and plan.epoch == 2 and plan.params == {1}
                texts.add(plan.sql)
            (sql,) = texts
            assert visible_at("$2") in sql  # type: ignore[arg-type]
            assert not re.search(rf"{FROM}\s*<=\s*\d", sql)  # no epoch number in the text
        finally:
            await instance.close()

    asyncio.run(run())


@pytest.fixture
def conn_ep(hw_server: HeadwaterServer):  # type: ignore[no-untyped-def]
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        yield c


def test_as_of_without_relations(conn_ep: psycopg.Connection) -> None:
    """`SELECT 1 AS OF EPOCH n` runs at a retained epoch and fails, as every AS OF,
    outside the retained range (22023); with parameters too."""
    c = conn_ep
    c.execute("CREATE TABLE ep_const (a int)")
    c.execute("INSERT INTO ep_const VALUES (1)")
    (epoch,) = c.execute("SELECT max(epoch) FROM headwater_catalog.epochs").fetchone()
    assert c.execute(f"SELECT 1 AS OF EPOCH {epoch}").fetchall() == [(1,)]
    assert c.execute(f"SELECT 'x' AS y AS OF {epoch}").fetchall() == [("x",)]
    for _ in range(2):  # prepared: the client's $1 and no epoch parameter
        row = c.execute(f"SELECT %s::int + 1 AS OF EPOCH {epoch}", [41], prepare=True).fetchone()
        assert row == (42,)
    assert c.execute(
        f"SELECT a + %s FROM ep_const AS OF EPOCH {epoch}", [1], prepare=True
    ).fetchall() == [(2,)]
    c.execute("SET headwater.freshness_timeout = '0.2s'")
    with pytest.raises(errors.InvalidParameterValue, match="has not closed yet"):
        c.execute(f"SELECT 1 AS OF EPOCH {epoch + 1000000}")
