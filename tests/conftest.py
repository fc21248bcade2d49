"""Fixtures: one Headwater server (one process) for the whole test session."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import psycopg
import pytest

from tests.hwserver import HeadwaterServer, start_temp_server

_names = itertools.count()


@pytest.fixture(scope="session")
def hw_server() -> Iterator[HeadwaterServer]:
    server = start_temp_server()
    yield server
    server.stop()


@pytest.fixture
def conn(hw_server: HeadwaterServer) -> Iterator[psycopg.Connection]:
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        yield c


@pytest.fixture
def table_name() -> str:
    """A table name no other test uses (tests share one server)."""
    return f"t_{next(_names)}"


@pytest.fixture(scope="session")
def pg_oracle() -> Iterator[object]:
    """A throwaway PostgreSQL 15 (the oracle), with role and database `headwater`."""
    from tests.pg_oracle import ensure_postgres_installed, start_postgres

    try:
        ensure_postgres_installed()
    except RuntimeError as e:
        pytest.skip(str(e))
    pg = start_postgres(user="headwater", dbname="headwater")
    yield pg
    pg.stop()


@pytest.fixture
def pg(pg_oracle: object) -> Iterator[psycopg.Connection]:
    """An autocommit connection to the oracle."""
    with psycopg.connect(pg_oracle.dsn, autocommit=True) as c:  # type: ignore[attr-defined]
        yield c


@pytest.fixture(scope="session")
def spark() -> object:
    """One SparkSession (local[2]) for the engine tests that run the stage themselves."""
    from headwater.engine.stage import spark_session

    return spark_session("local[2]")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config._headwater_exitstatus = int(exitstatus)  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    """Exit as soon as pytest is done: DuckDB's nanobind bindings print spurious
    "leaked" reports during interpreter shutdown, after pytest's summary line."""
    import os
    import sys

    status = getattr(config, "_headwater_exitstatus", None)
    if status is not None and not hasattr(config, "workerinput"):  # (not an xdist worker)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
