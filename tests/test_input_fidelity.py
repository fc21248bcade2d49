"""Input as PostgreSQL 15 reads it, against the oracle: bytea and boolean constants in
INSERT (autocommitted and in a transaction block), boolean's input words, the refused
integer-to-boolean assignment (42804), and ParameterStatus after SET (psycopg decodes
timestamptz in the TimeZone the server reports)."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.hwserver import HeadwaterServer, run_psql

psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.oracle


@pytest.fixture
def both(hw_server: HeadwaterServer, pg_oracle: Any) -> Iterator[Any]:
    with (
        psycopg.connect(hw_server.dsn, autocommit=True) as hw,
        psycopg.connect(pg_oracle.dsn, autocommit=True) as pg,
    ):
        yield hw, pg


def _answer(conn: Any, sql: str) -> Any:
    try:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description else cur.statusmessage
    except psycopg.Error as e:
        return ("ERROR", e.sqlstate)


PSQL_SCRIPT = r"""
DROP TABLE IF EXISTS infid_bytes;
CREATE TABLE infid_bytes (id int, b bytea, f boolean);
INSERT INTO infid_bytes VALUES (1, '\x0102', 'off');
BEGIN;
INSERT INTO infid_bytes VALUES (2, '\x0102', 'on');
INSERT INTO infid_bytes VALUES (3, '\xff', ' yes '), (4, 'a\\b', 'n');
INSERT INTO infid_bytes VALUES (5, '\x00', '1'), (6, '\x01', '0'), (7, '\x02', 'of'),
    (8, '\x03', 'TRUE'), (9, '\x04', 'f'), (10, '\x05', 'y'), (11, '\x06', NULL),
    (12, '\x07', 't');
COMMIT;
SELECT * FROM infid_bytes ORDER BY id;
BEGIN;
INSERT INTO infid_bytes VALUES (13, '\x0g', true);
ROLLBACK;
BEGIN;
INSERT INTO infid_bytes VALUES (14, '\x00', 'o');
ROLLBACK;
DROP TABLE infid_bytes;
"""


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_bytea_and_boolean_constants_through_psql(
    hw_server: HeadwaterServer, pg_oracle: Any
) -> None:
    expected = run_psql(pg_oracle.host, pg_oracle.port, PSQL_SCRIPT, quiet=True)
    actual = run_psql(hw_server.host, hw_server.port, PSQL_SCRIPT, quiet=True)
    assert "\\x0102" in expected
    assert _without_positions(actual) == _without_positions(expected)


def _without_positions(output: str) -> list[str]:
    """psql's output less the error cursor (LINE n: ... and its ^), which Headwater does
    not send for these errors."""
    lines = output.splitlines()
    return [ln for ln in lines if not ln.startswith("LINE ") and ln.strip() != "^"]


BOOL_WORDS = [
    "off", "on", "of", "o", " true ", "TRUE", "t", "tr", "yes", "y", "no", "n", "1", "0",
    "f", "false", "fa", "2", "", "yess", "ye", "nO",
]  # fmt: skip


@pytest.mark.parametrize("word", BOOL_WORDS)
def test_boolean_input_words(both: Any, word: str) -> None:
    hw, pg = both
    sql = f"SELECT '{word}'::boolean, CAST('{word}' AS bool)"
    assert _answer(hw, sql) == _answer(pg, sql)


def test_integer_into_boolean_column_is_refused(both: Any) -> None:
    for conn in both:
        conn.execute("DROP TABLE IF EXISTS infid_flags")
        conn.execute("CREATE TABLE infid_flags (id int, b boolean)")
    statements = [
        "INSERT INTO infid_flags(b) VALUES (1)",
        "INSERT INTO infid_flags(b) VALUES (1.5)",
        "INSERT INTO infid_flags VALUES (1, 'off'), (2, 'yes')",
        "INSERT INTO infid_flags VALUES " + ", ".join(f"({i}, {i % 2})" for i in range(10)),
        "INSERT INTO infid_flags VALUES "
        + ", ".join(f"({i}, '{'on' if i % 2 else 'off'}')" for i in range(10, 20)),
        "SELECT id, b FROM infid_flags ORDER BY id",
    ]
    for sql in statements:
        for in_block in (False, True):
            answers = []
            for conn in both:
                if in_block:
                    conn.execute("BEGIN")
                answers.append(_answer(conn, sql))
                if in_block:
                    conn.execute("ROLLBACK")
            assert answers[0] == answers[1], (sql, in_block)
    hw, pg = both
    try:
        pg.execute("INSERT INTO infid_flags(b) VALUES (1)")
    except psycopg.Error as e:
        expected = e.diag.message_primary
    with pytest.raises(psycopg.Error) as info:
        hw.execute("INSERT INTO infid_flags(b) VALUES (1)")
    assert info.value.sqlstate == "42804"
    assert info.value.diag.message_primary == expected
    for conn in both:
        conn.execute("DROP TABLE infid_flags")


def test_set_timezone_is_reported(both: Any) -> None:
    moment = "SELECT '2024-01-01 12:00:00+00'::timestamptz"
    for conn in both:
        conn.execute("SET TimeZone = 'America/New_York'")
        assert conn.info.parameter_status("TimeZone") == "America/New_York"
        value = conn.execute(moment).fetchone()[0]
        assert value.utcoffset() == dt.timedelta(hours=-5)
        assert str(value.tzinfo) == "America/New_York"
        conn.execute("SET application_name = 'infid'")
        assert conn.info.parameter_status("application_name") == "infid"
        conn.execute("SET IntervalStyle = 'iso_8601'")
        assert conn.info.parameter_status("IntervalStyle") == "iso_8601"
        conn.execute("SET DateStyle = 'ISO, DMY'")
        assert conn.info.parameter_status("DateStyle") == "ISO, DMY"
        # a SET rolled back is reported again with the restored value
        conn.execute("BEGIN")
        conn.execute("SET TimeZone = 'Asia/Tokyo'")
        assert conn.info.parameter_status("TimeZone") == "Asia/Tokyo"
        conn.execute("ROLLBACK")
        assert conn.info.parameter_status("TimeZone") == "America/New_York"
        conn.execute("RESET ALL")
        assert conn.info.parameter_status("application_name") == ""


DATESTYLE_SCRIPT = [
    "SET DateStyle = 'ISO, DMY'",
    "SELECT '01/02/2020'::date, date '13/01/2020', '01/02/2020 10:00'::timestamp",
    "CREATE TABLE infid_dates (i int, d date, ts timestamp)",
    "INSERT INTO infid_dates VALUES (1, '01/02/2020', '03/04/2020 05:06')",
    "INSERT INTO infid_dates VALUES "
    + ", ".join(f"({i}, '0{i}/02/2020', '03/0{i}/2020 05:06')" for i in range(2, 10)),
    "SELECT i FROM infid_dates WHERE d = '01/02/2020'",
    "SELECT i FROM infid_dates WHERE d BETWEEN '02/02/2020' AND '04/02/2020' ORDER BY i",
    "SELECT i FROM infid_dates WHERE '05/02/2020' < d ORDER BY i",
    "UPDATE infid_dates SET d = '05/06/2020' WHERE d = '09/02/2020'",
    "DELETE FROM infid_dates WHERE ts = '03/08/2020 05:06'",
    "BEGIN",
    "UPDATE infid_dates SET ts = '31/12/2020 23:59' WHERE i = 7",
    "COMMIT",
    "CREATE MATERIALIZED VIEW infid_dates_mv AS"
    " SELECT count(*) AS n FROM infid_dates WHERE d >= '03/02/2020'",
    "SELECT n FROM infid_dates_mv",
    "CREATE VIEW infid_dates_v AS"
    " SELECT i FROM infid_dates WHERE d = '02/02/2020' OR d = '04/02/2020'::date"
    " OR d BETWEEN '06/02/2020' AND '07/02/2020'",
    "SELECT * FROM infid_dates ORDER BY i",
    "SET DateStyle = 'ISO, YMD'",
    "SELECT '20/01/02'::date",
    "SET DateStyle = 'ISO, MDY'",
    "SELECT '01/02/2020'::date, i FROM infid_dates WHERE d = '02/02/2020'",
    # the views' constants were read in the order of the session that created them
    "SELECT i FROM infid_dates_v ORDER BY i",
    "INSERT INTO infid_dates VALUES (30, '2020-02-10', NULL)",
    "REFRESH MATERIALIZED VIEW infid_dates_mv",  # (PostgreSQL's runs its query again)
    "SELECT n FROM infid_dates_mv",
    "DROP VIEW infid_dates_v",
    "SELECT '13/01/2020'::date",
    "DROP MATERIALIZED VIEW infid_dates_mv",
    "DROP TABLE infid_dates",
]


def test_datestyle_order_reads_date_constants_as_postgres(both: Any) -> None:
    """Ambiguous dates (01/02/2020) are read in the session's DateStyle order (DMY, YMD,
    MDY) wherever PostgreSQL reads them as dates: typed constants, a constant compared
    with or assigned to a date or timestamp column (DuckDB's own cast reads ISO text
    only: 22P02 before), the general and the fast INSERT paths, a view's definition
    (kept as read: a later session in another order reads the same view); and a query
    the connection reuses is read again after SET DateStyle."""
    hw, pg = both
    for sql in DATESTYLE_SCRIPT:
        want, got = _answer(pg, sql), _answer(hw, sql)
        if sql.startswith("CREATE MATERIALIZED VIEW"):  # (the tags differ: SELECT 1)
            assert not isinstance(got, tuple), (sql, got)
            continue
        assert got == want, sql
    # a prepared read planned under one order and run under the other
    q = "SELECT %s::text, '01/02/2020'::date"
    for order, day in (("MDY", dt.date(2020, 1, 2)), ("DMY", dt.date(2020, 2, 1))):
        hw.execute(f"SET DateStyle = 'ISO, {order}'")
        for _ in range(3):
            assert hw.execute(q, ["x"], prepare=True).fetchone() == ("x", day)
    hw.execute("RESET DateStyle")
