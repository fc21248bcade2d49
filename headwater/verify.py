"""`headwater verify VIEW [--epoch N]`: is my view right?

Connects to a running server over the PostgreSQL protocol (asyncpg), reads the view's
definition and frontier from headwater_catalog.views, and at one epoch (default: the
view's frontier) runs

    <the view's defining query> AS OF EPOCH n     recomputed from the tables
    SELECT * FROM the_view AS OF EPOCH n           the state the engine maintains

then compares the two as multisets of rows. Differences print as a diff from the
recomputed rows to the maintained ones: `-` a row the view should hold and lacks (one
line per missing copy), `+` a row the view holds and should not. Exit status: 0 equal,
1 different, 2 error (no such view, no connection, an epoch out of retention).

Floating-point values are compared to 12 significant digits: an incrementally
maintained sum of doubles adds in another order than a recomputation does. A view
over other materialized views is recomputed from their maintained rows at the epoch
(verify those first). A top-N view whose cut falls between tied rows may hold other
tied rows than the recomputation picks: it can differ and still be right.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

import asyncpg

from headwater.catalog.identifiers import quote
from headwater.client_options import add_connection_options

DEFAULT_LIMIT = 20  # differing rows printed before "... and N more"


class VerifyError(Exception):
    """Verification could not run (exit status 2); the message says why."""


def _normal(value: Any) -> Any:
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else float(f"{value:.12g}")  # (NaN != NaN)
    if isinstance(value, list):
        return tuple(_normal(v) for v in value)
    return value


def rows_of(records: Sequence[Any]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(_normal(v) for v in r) for r in records)


def diff(
    expected: Counter[tuple[Any, ...]], actual: Counter[tuple[Any, ...]]
) -> list[tuple[str, tuple[Any, ...]]]:
    """('-', row) per copy missing from `actual`, ('+', row) per extra copy, sorted."""
    out = [("-", r) for r, n in (expected - actual).items() for _ in range(n)]
    out += [("+", r) for r, n in (actual - expected).items() for _ in range(n)]
    return sorted(out, key=lambda d: (repr(d[1]), d[0]))


def _show(row: tuple[Any, ...]) -> str:
    return "(" + ", ".join("NULL" if v is None else str(v) for v in row) + ")"


async def _find(conn: asyncpg.Connection, view: str) -> asyncpg.Record:
    schema, _, name = view.rpartition(".")
    found = await conn.fetch(
        "SELECT schema, name, definition, frontier, status, error"
        " FROM headwater_catalog.views WHERE name = $1",
        name,
    )
    if schema:
        found = [r for r in found if r["schema"] == schema]
    elif len(found) > 1:  # the same name in several schemas: the search path's first
        path = await conn.fetchval("SELECT current_schemas(false)")
        ranked = [r for s in path for r in found if r["schema"] == s]
        found = ranked[:1] or found
    if not found:
        raise VerifyError(
            f'materialized view "{view}" does not exist '
            "(SELECT schema, name FROM headwater_catalog.views lists them)"
        )
    if len(found) > 1:
        raise VerifyError(f'materialized view "{view}" is ambiguous: qualify it with its schema')
    return found[0]


async def verify(
    view: str,
    epoch: int | None,
    *,
    host: str,
    port: int,
    user: str,
    database: str,
    limit: int = DEFAULT_LIMIT,
    out: TextIO = sys.stdout,
) -> int:
    """Compare the view with its query at `epoch`; returns the exit status (0 or 1)."""
    try:
        conn = await asyncpg.connect(host=host, port=port, user=user, database=database)
    except (OSError, asyncpg.PostgresError) as e:
        raise VerifyError(f"cannot connect to {host}:{port} as {user}: {e}") from None
    try:
        row = await _find(conn, view)
        qualified = f"{quote(row['schema'])}.{quote(row['name'])}"
        shown = f"{row['schema']}.{row['name']}"
        if row["frontier"] is None:
            raise VerifyError(
                f'materialized view "{shown}" has no frontier yet (status '
                f"{row['status']}): try again once it is populated"
            )
        if epoch is None:
            epoch = int(row["frontier"])
        elif epoch > row["frontier"]:  # (a read there would wait for the view)
            raise VerifyError(
                f'materialized view "{shown}" reflects epochs up to {row["frontier"]}, '
                f"not {epoch} yet: give an --epoch at or before it"
            )
        # the definition names relations as written, resolved in the view's schema
        await conn.execute(f"SET search_path TO {quote(row['schema'])}, public")
        try:
            expected = rows_of(await conn.fetch(f"{row['definition']} AS OF EPOCH {epoch:d}"))
            actual = rows_of(await conn.fetch(f"SELECT * FROM {qualified} AS OF EPOCH {epoch:d}"))
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as e:  # (a type it cannot read)
            raise VerifyError(f'materialized view "{shown}" at epoch {epoch}: {e}') from None
    finally:
        await conn.close()
    changes = diff(expected, actual)
    total = sum(expected.values())
    if not changes:
        print(f"{shown} at epoch {epoch}: OK, {total} rows equal to its query", file=out)
        return 0
    print(
        f"{shown} at epoch {epoch}: DIFFERENT: {len(changes)} rows differ "
        f"(- recomputed from the tables, missing from the view; + in the view only)",
        file=out,
    )
    for sign, r in changes[:limit]:
        print(f"{sign} {_show(r)}", file=out)
    if len(changes) > limit:
        print(f"... and {len(changes) - limit} more (--limit)", file=out)
    return 1


def run(args: Any) -> int:
    """The `headwater verify` command (arguments from headwater/cli.py)."""
    try:
        return asyncio.run(
            verify(
                args.view,
                args.epoch,
                host=args.host,
                port=args.port,
                user=args.user,
                database=args.dbname or args.user,
                limit=args.limit,
            )
        )
    except VerifyError as e:
        print(f"headwater verify: {e}", file=sys.stderr)
        return 2
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as e:  # (mid-way)
        print(f"headwater verify: {args.view}: {e}", file=sys.stderr)
        return 2


def add_parser(sub: Any) -> None:
    """`headwater verify`'s arguments, on the CLI's subcommand parsers."""
    p = sub.add_parser(
        "verify",
        add_help=False,  # -h is the host, as psql's and `headwater status`'s
        help="check a materialized view against its query recomputed from the tables",
        description="Recompute a materialized view's query at an epoch from the tables and "
        "compare it, as multisets of rows, with the view the server maintains at that "
        "epoch. Prints the differing rows; exits 0 when equal, 1 when different, 2 on error.",
    )
    p.add_argument("view", metavar="VIEW", help="the view, optionally schema-qualified")
    p.add_argument("--epoch", type=int, help="the epoch to compare at (default: its frontier)")
    add_connection_options(p)
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="differing rows to print (20)")
