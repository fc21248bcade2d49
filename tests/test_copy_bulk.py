"""COPY FROM STDIN, small and bulk (server/copy.py, server/constraints.py): PostgreSQL's
text-format semantics, and its constraint errors for batches of any size (from
constraints.BULK_ROWS rows, DuckDB looks for repeated keys)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from headwater.server import constraints

from tests.hwserver import HeadwaterServer, free_port

BULK = constraints.BULK_ROWS + 5

TEXT_CASES = [  # (COPY options, payload)
    ("", "1\ta\\tb\\\\c\\nd\t2024-01-02\n2\t\\N\t\\N\n3\t\\x41\\101\\q\t\\N\n"),
    ("", "1\tno null marker here\t2024-01-02\n2\tx\t2024-01-03\n"),
    ("", "1\t\\\\N\t2024-01-02\n2\tN\t2024-01-03\n\\.\n"),  # an escaped backslash, then N
    ("WITH (NULL 'nil')", "1\tnil\t2024-01-02\n2\tnilx\tnil\n3\t\\N\t2024-01-04\n"),
    ("WITH (NULL '')", "1\t\t2024-01-02\n2\tx\t\n"),
    ("WITH (DELIMITER '|')", "1|a b|2024-01-02\n2|ü 日本|\\N\n"),
    ("WITH (FORMAT csv, HEADER true)", 'id,name,d\n1,"x,y",2024-01-02\n2,,\n3,"",\n'),
    ("", "\\.\n"),  # the end marker only
    ("", "1\tx\n"),  # missing data for column
    ("", "1\tx\t2024-01-02\textra\n"),  # extra data after last expected column
]


@contextlib.contextmanager
def _both(hw_server, pg_oracle) -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:  # type: ignore[no-untyped-def]
    """Headwater's and the oracle's autocommit connections."""
    with (
        psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as hw,
        psycopg.connect(pg_oracle.dsn, autocommit=True) as pg,
    ):
        yield hw, pg


def _fresh(c: psycopg.Connection, table: str, columns: str) -> None:
    c.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
    c.execute(f"CREATE TABLE {table} ({columns})")


def _copy(
    c: psycopg.Connection, sql: str, payload: str | bytes, piece: int = 1 << 30
) -> tuple[str | None, str | None]:
    """COPY `payload` in pieces of `piece` bytes: (SQLSTATE, DETAIL) of its error, if any."""
    try:
        with c.cursor().copy(sql) as cp:
            for start in range(0, len(payload), piece):
                cp.write(payload[start : start + piece])
    except psycopg.Error as e:
        return e.sqlstate, e.diag.message_detail
    return None, None


@pytest.mark.parametrize("case", range(len(TEXT_CASES)))
def test_text_format_as_postgres(hw_server, pg_oracle, table_name: str, case: int) -> None:  # type: ignore[no-untyped-def]
    options, payload = TEXT_CASES[case]
    with _both(hw_server, pg_oracle) as (hw, pg):
        results = []
        for c in (hw, pg):
            _fresh(c, table_name, "id int, name text, d date")
            state, _ = _copy(c, f"COPY {table_name} FROM STDIN {options}", payload)
            rows = c.execute(f"SELECT id, name, d FROM {table_name} ORDER BY id").fetchall()
            results.append((state, rows))
        assert results[0] == results[1]


def _bulk(rows: int, base: int = 0, c: str = "v{a}") -> str:
    """Rows (a, b, c): a from `base` on, b = a % 7, c as `c` formats a (\\N: NULL)."""
    return "".join(f"{a}\t{a % 7}\t{c.format(a=a)}\n" for a in range(base, base + rows))


def test_bulk_keys_as_postgres(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """A composite primary key and a UNIQUE column over batches past BULK_ROWS: clean,
    repeated within the batch, repeating a stored row, NULLs (never equal), NOT NULL."""
    t = table_name
    columns = "a bigint, b int, c text UNIQUE, PRIMARY KEY (a, b)"
    copy = f"COPY {t} FROM STDIN"
    with _both(hw_server, pg_oracle) as (hw, pg):
        outcomes = []
        for c in (hw, pg):
            _fresh(c, t, columns)
            got = [_copy(c, copy, _bulk(BULK))]
            # the same (a, b) twice in one batch: the second one's key in the detail
            again = 10**6 + 51
            got.append(_copy(c, copy, _bulk(BULK, 10**6) + f"{again}\t{again % 7}\tlast\n"))
            # a key the first COPY stored
            got.append(_copy(c, copy, _bulk(BULK, 2 * 10**6) + "7\t0\ty\n"))
            # the UNIQUE column repeated within the batch
            got.append(
                _copy(c, copy, _bulk(BULK, 3 * 10**6, "u{a}") + f"-1\t1\tu{3 * 10**6 + 5}\n")
            )
            # NULLs in the UNIQUE column: no two are equal
            got.append(_copy(c, copy, _bulk(BULK, 4 * 10**6, "\\N")))
            # NOT NULL of the primary key
            got.append(_copy(c, copy, _bulk(BULK, 5 * 10**6) + "\\N\t1\tz\n"))
            count = c.execute(f"SELECT count(*), count(c), sum(a) FROM {t}").fetchone()
            outcomes.append((got, count))
        assert outcomes[0] == outcomes[1]
        assert outcomes[0][0][0] == (None, None) and outcomes[0][0][4] == (None, None)
        assert [state for state, _ in outcomes[0][0][1:4]] == ["23505"] * 3


def test_bulk_defaults_and_views(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """Omitted columns take their defaults (a sequence's numbers too); a view over the
    table sees the rows."""
    t = table_name
    with _both(hw_server, pg_oracle) as (hw, pg):
        results = []
        for c in (hw, pg):
            _fresh(c, t, "id serial PRIMARY KEY, v int, w text DEFAULT 'd'")
            c.execute(
                f"CREATE MATERIALIZED VIEW {t}_mv AS SELECT count(*) AS n, sum(v) AS s FROM {t}"
            )
            assert _copy(c, f"COPY {t} (v) FROM STDIN", "".join(f"{i}\n" for i in range(BULK))) == (
                None,
                None,
            )
            if c is pg:
                c.execute(f"REFRESH MATERIALIZED VIEW {t}_mv")
            results.append(
                (
                    c.execute(
                        f"SELECT count(*), min(id), max(id), min(w), max(w) FROM {t}"
                    ).fetchone(),
                    c.execute(f"SELECT n, s FROM {t}_mv").fetchone(),
                )
            )
        assert results[0] == results[1]


def _rows_in_blocks(n: int) -> str:
    """Text-format rows past several copy.BLOCK_BYTES: NULLs, escapes, non-ASCII."""
    lines = []
    for i in range(n):
        name = (
            "\\N" if i % 97 == 0 else (f"a\\tb\\\\{i}" if i % 89 == 0 else f"name {i} ü {'x' * 60}")
        )
        lines.append(f"{i}\t{name}\t2024-01-{i % 28 + 1:02d}\n")
    return "".join(lines)


@pytest.mark.parametrize("tail", ["", "\\.\n", "1\tshort\n"], ids=["plain", "end-marker", "bad"])
def test_payload_in_blocks_as_postgres(hw_server, pg_oracle, table_name: str, tail: str) -> None:  # type: ignore[no-untyped-def]
    """A payload of several parse blocks, sent in pieces that cut lines anywhere, with a
    header: PostgreSQL's rows (or its error, from the last block, and no row)."""
    from headwater.server import copy

    payload = ("id\tname\td\n" + _rows_in_blocks(2 * copy.BLOCK_BYTES // 90) + tail).encode()
    assert len(payload) > 2 * copy.BLOCK_BYTES
    with _both(hw_server, pg_oracle) as (hw, pg):
        results = []
        for c in (hw, pg):
            _fresh(c, table_name, "id int, name text, d date")
            sql = f"COPY {table_name} FROM STDIN WITH (HEADER true)"
            state, _ = _copy(c, sql, payload, 1_000_003)
            summary = c.execute(
                f"SELECT count(*), count(name), sum(id),"
                f" md5(string_agg(name || d, ',' ORDER BY id))"
                f" FROM {table_name}"
            ).fetchone()
            results.append((state, summary))
        assert results[0] == results[1]
        assert (results[0][0] is None) == (tail != "1\tshort\n")


SUMMARY = "SELECT count(*), sum(a), sum(b), md5(string_agg(c, ',' ORDER BY a)) FROM k"


def test_acknowledged_copy_survives_sigkill(tmp_path: Path) -> None:
    """A bulk COPY's change rows, encoded while DuckDB takes them (changelog.encode_ahead),
    are in the log once acknowledged: after SIGKILL the table is back, row for row; a
    COPY that failed left nothing."""
    server = HeadwaterServer(tmp_path / "data", port=free_port()).start()
    try:
        with psycopg.connect(server.dsn, autocommit=True, sslmode="disable") as c:
            c.execute("CREATE TABLE k (a bigint PRIMARY KEY, b int, c text)")
            assert _copy(c, "COPY k FROM STDIN", _bulk(60_000)) == (None, None)
            assert (
                _copy(c, "COPY k FROM STDIN", _bulk(60_000, 10**6) + "5\t5\tagain\n")[0] == "23505"
            )
            assert _copy(c, "COPY k FROM STDIN", _bulk(60_000, 2 * 10**6)) == (None, None)
            want = c.execute(SUMMARY).fetchone()
        server.kill()
        server = HeadwaterServer(server.data_dir, port=server.port).start()
        with psycopg.connect(server.dsn, autocommit=True, sslmode="disable") as c:
            got = c.execute(SUMMARY).fetchone()
        assert got == want and want[0] == 120_000
    finally:
        server.kill()
