"""VACUUM and ANALYZE: accepted with PostgreSQL's tags, checks and errors.

Tools run them after loading data. Headwater keeps no planner statistics (DuckDB
gathers its own as it scans), so ANALYZE checks its relations and columns and does
nothing more. VACUUM removes row versions older than the retention window now, the
work the instance's background pass (server/instance.py) would do at its next tick;
FULL, FREEZE and the other options change nothing beyond that.
"""

from __future__ import annotations

import pglast.ast as A
from headwater.catalog.catalog import SYSTEM_SCHEMAS
from headwater.catalog.objects import MaterializedView, Table
from headwater.catalog.pg.specs import RELATIONS
from headwater.server.results import Result
from headwater.server.session import Session

from headwater.errors import SQLError

# the options PostgreSQL 15's VACUUM and ANALYZE accept (anything else is 42601)
_VACUUM_OPTIONS = {
    "analyze",
    "disable_page_skipping",
    "freeze",
    "full",
    "index_cleanup",
    "parallel",
    "process_toast",
    "skip_locked",
    "truncate",
    "verbose",
}
_ANALYZE_OPTIONS = {"skip_locked", "verbose"}


def _enabled(opt: A.DefElem) -> bool:
    """`(analyze)`, `(analyze true)`, `(analyze off)`: is the option on?"""
    arg = opt.arg
    if arg is None:
        return True
    text = arg.sval if isinstance(arg, A.String) else str(getattr(arg, "ival", 1))
    return text.lower() not in ("false", "off", "0", "no")


async def vacuum(s: Session, stmt: A.VacuumStmt) -> Result:
    word = "VACUUM" if stmt.is_vacuumcmd else "ANALYZE"
    allowed = _VACUUM_OPTIONS if stmt.is_vacuumcmd else _ANALYZE_OPTIONS
    analyze = not stmt.is_vacuumcmd
    for opt in stmt.options or ():
        if opt.defname not in allowed:
            loc = getattr(opt, "location", None)
            raise SQLError(
                f'unrecognized {word} option "{opt.defname}"',
                "42601",
                position=loc + 1 if isinstance(loc, int) and loc >= 0 else None,
            )
        if opt.defname == "analyze":
            analyze = _enabled(opt)
    rels = list(stmt.rels or ())
    if not analyze and any(r.va_cols for r in rels):
        raise SQLError("ANALYZE option must be specified when a column list is provided", "0A000")
    if stmt.is_vacuumcmd and s.status != "I":
        raise SQLError("VACUUM cannot run inside a transaction block", "25001")
    notices: list[str | SQLError] = []
    verb = "vacuum" if stmt.is_vacuumcmd else "analyze"
    for r in rels:
        rv = r.relation
        if _is_system(s, rv):
            continue
        rel = s.catalog.get_relation(rv.schemaname, rv.relname, s.search_path())  # 42P01
        if not isinstance(rel, Table | MaterializedView):
            notices.append(
                SQLError(
                    f'skipping "{rel.name}" --- cannot {verb} non-tables or special system tables',
                    "01000",
                    severity="WARNING",
                )
            )
            continue
        for col in r.va_cols or ():
            if rel.column(col.sval) is None:
                raise SQLError(
                    f'column "{col.sval}" of relation "{rel.name}" does not exist', "42703"
                )
    if stmt.is_vacuumcmd:
        await s.instance.vacuum_now()
    return Result(word, notices=notices)


def _is_system(s: Session, rv: A.RangeVar) -> bool:
    """A pg_catalog or information_schema relation (vacuumed by nobody here)."""
    if rv.schemaname in SYSTEM_SCHEMAS:
        return True
    if rv.schemaname is None and s.catalog.resolve(None, rv.relname, s.search_path()) is None:
        return ("pg_catalog", rv.relname) in RELATIONS
    return False
