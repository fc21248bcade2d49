"""SQLAlchemy 2 (through psycopg 3) against Headwater: connect, reflect, Core select/insert.

SQLAlchemy's first connect runs its dialect initialisation (version(), current_schema(),
psycopg's hstore lookup inside a SAVEPOINT); reflection queries pg_catalog the way the
PostgreSQL dialect does for PostgreSQL 15.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

sa = pytest.importorskip("sqlalchemy")


@pytest.fixture
def engine(hw_server: Any) -> Iterator[Any]:
    url = f"postgresql+psycopg://headwater@{hw_server.host}:{hw_server.port}/headwater"
    eng = sa.create_engine(url)
    with eng.begin() as c:
        c.exec_driver_sql("DROP VIEW IF EXISTS sa_orders_big")
        c.exec_driver_sql("DROP TABLE IF EXISTS sa_orders")
        c.exec_driver_sql(
            "CREATE TABLE sa_orders (id int PRIMARY KEY, customer varchar(20) NOT NULL "
            "DEFAULT 'nobody', amount numeric(10,2), note text UNIQUE, placed date)"
        )
        c.exec_driver_sql("CREATE INDEX sa_orders_amount ON sa_orders (amount)")
        c.exec_driver_sql(
            "CREATE VIEW sa_orders_big AS SELECT id, customer FROM sa_orders WHERE amount > 5"
        )
    yield eng
    with eng.begin() as c:
        c.exec_driver_sql("DROP VIEW IF EXISTS sa_orders_big")
        c.exec_driver_sql("DROP TABLE IF EXISTS sa_orders")
    eng.dispose()


def test_reflection(engine: Any) -> None:
    insp = sa.inspect(engine)
    assert "public" in insp.get_schema_names()
    assert "sa_orders" in insp.get_table_names()
    assert "sa_orders_big" not in insp.get_table_names()
    assert "sa_orders_big" in insp.get_view_names()
    # other tests' materialized views share the server; none of this test's relations is one
    matviews = insp.get_materialized_view_names()
    assert not {"sa_orders", "sa_orders_big"} & set(matviews)
    assert insp.has_table("sa_orders") and not insp.has_table("sa_missing")

    cols = {c["name"]: c for c in insp.get_columns("sa_orders")}
    assert list(cols) == ["id", "customer", "amount", "note", "placed"]
    assert isinstance(cols["id"]["type"], sa.INTEGER)
    assert isinstance(cols["customer"]["type"], sa.VARCHAR)
    assert cols["customer"]["type"].length == 20
    assert isinstance(cols["amount"]["type"], sa.NUMERIC)
    assert (cols["amount"]["type"].precision, cols["amount"]["type"].scale) == (10, 2)
    assert isinstance(cols["note"]["type"], sa.TEXT)
    assert isinstance(cols["placed"]["type"], sa.DATE)
    assert [c["nullable"] for c in cols.values()] == [False, False, True, True, True]
    assert cols["customer"]["default"] == "'nobody'::character varying"
    assert cols["amount"]["default"] is None

    view_cols = insp.get_columns("sa_orders_big")
    assert [(c["name"], type(c["type"])) for c in view_cols] == [
        ("id", sa.INTEGER),
        ("customer", sa.VARCHAR),
    ]

    assert insp.get_pk_constraint("sa_orders")["constrained_columns"] == ["id"]
    assert insp.get_pk_constraint("sa_orders")["name"] == "sa_orders_pkey"
    indexes = {i["name"]: i for i in insp.get_indexes("sa_orders")}
    assert indexes["sa_orders_amount"]["column_names"] == ["amount"]
    assert indexes["sa_orders_amount"]["unique"] is False
    assert indexes["sa_orders_note_key"]["unique"] is True
    assert [u["column_names"] for u in insp.get_unique_constraints("sa_orders")] == [["note"]]
    assert insp.get_foreign_keys("sa_orders") == []
    assert "sa_orders" in insp.get_view_definition("sa_orders_big")


def test_core_select_and_insert(engine: Any) -> None:
    md = sa.MetaData()
    orders = sa.Table("sa_orders", md, autoload_with=engine)
    with engine.begin() as c:
        c.execute(orders.insert().values(id=1, customer="ada", amount=Decimal("12.50")))
        c.execute(
            sa.insert(orders),
            [
                {"id": 2, "customer": "bob", "amount": Decimal("3.20")},
                {"id": 3, "customer": "cy", "amount": None},
            ],
        )
    with engine.connect() as c:
        rows = c.execute(
            sa.select(orders.c.id, orders.c.customer, orders.c.amount)
            .where(orders.c.id > 1)
            .order_by(orders.c.id)
        ).all()
        assert [tuple(r) for r in rows] == [(2, "bob", Decimal("3.20")), (3, "cy", None)]
        total = c.execute(sa.select(sa.func.sum(orders.c.amount))).scalar_one()
        assert total == Decimal("15.70")
        big = sa.Table("sa_orders_big", md, autoload_with=engine)
        assert c.execute(sa.select(big.c.customer)).scalars().all() == ["ada"]
