"""Output column types through subqueries and CTEs against PostgreSQL 15: a char(n)
column keeps its blank padding (and its type in RowDescription) when it passes through
a subquery, a CTE or both, as when it is read directly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.hwserver import HeadwaterServer

_QUERIES = [
    "SELECT n_name FROM otn_nation ORDER BY 1",
    "SELECT n_name FROM (SELECT n_name FROM otn_nation) s ORDER BY 1",
    "SELECT s.n_name, s.k FROM (SELECT n_nationkey AS k, n_name FROM otn_nation) AS s ORDER BY 2",
    "SELECT x FROM (SELECT n_name FROM otn_nation) AS s (x) ORDER BY 1",
    "SELECT * FROM (SELECT n_name, n_code FROM otn_nation WHERE n_nationkey < 2) s ORDER BY 1",
    "WITH c AS (SELECT n_name, n_code FROM otn_nation) SELECT n_name, n_code FROM c ORDER BY 1",
    "WITH c (nm) AS (SELECT n_name FROM otn_nation) SELECT nm FROM c ORDER BY 1",
    "WITH c AS (SELECT n_name FROM otn_nation), d AS (SELECT n_name FROM c)"
    " SELECT d.n_name FROM d ORDER BY 1",
    "SELECT n_name, cnt FROM (SELECT n_name, count(*) AS cnt FROM otn_nation GROUP BY n_name)"
    " AS g ORDER BY 1",
    "SELECT s.n_name, t.n_code FROM (SELECT n_nationkey, n_name FROM otn_nation) s"
    " JOIN otn_nation t ON s.n_nationkey = t.n_nationkey ORDER BY 1",
    "SELECT upper(n_name) FROM (SELECT n_name FROM otn_nation) s ORDER BY 1",
    "SELECT n_name || '|' FROM (SELECT n_name FROM otn_nation) s ORDER BY 1",
]


@pytest.fixture(scope="module")
def both(hw_server: HeadwaterServer, pg_oracle: Any) -> Iterator[Any]:
    setup = [
        "DROP TABLE IF EXISTS otn_nation",
        "CREATE TABLE otn_nation (n_nationkey int, n_name char(25), n_code char(3))",
        "INSERT INTO otn_nation VALUES (0, 'ALGERIA', 'DZ'), (1, 'FRANCE', 'F'), (2, 'PERU', NULL)",
    ]
    with (
        psycopg.connect(hw_server.dsn, autocommit=True) as hw,
        psycopg.connect(pg_oracle.dsn, autocommit=True) as pg,
    ):
        for conn in (hw, pg):
            for sql in setup:
                conn.execute(sql)
        yield hw, pg


def _result(conn: psycopg.Connection, sql: str) -> tuple[Any, ...]:
    with conn.cursor() as cur:
        cur.execute(sql)
        assert cur.description is not None
        types = [(d.name, d.type_code, d.internal_size) for d in cur.description]
        return types, cur.fetchall()


@pytest.mark.parametrize("sql", _QUERIES)
def test_padding_through_subqueries(both: Any, sql: str) -> None:
    hw, pg = both
    assert _result(hw, sql) == _result(pg, sql)
