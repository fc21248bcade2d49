"""EXPLAIN [ANALYZE]: DuckDB's plan of a statement in PostgreSQL's shape, and a
materialized view's incremental plan.

    EXPLAIN [ ( option [, ...] ) ] statement      ANALYZE, VERBOSE, COSTS, BUFFERS,
    EXPLAIN [ ANALYZE ] [ VERBOSE ] statement     TIMING, SUMMARY, FORMAT TEXT|JSON|YAML|XML
    EXPLAIN CREATE MATERIALIZED VIEW v AS ...     the plan the engine would maintain
    EXPLAIN [ [OPTIMIZED] PLAN [AS TEXT|JSON] FOR ] MATERIALIZED VIEW v   (Materialize's)

A SELECT is bound as a read is (server/queries.py) and DuckDB explains it (`EXPLAIN
(FORMAT JSON)`; with ANALYZE, `EXPLAIN ANALYZE` runs it and profiles it);
planner/explain.py turns DuckDB's operators into PostgreSQL's nodes and prints them.
INSERT, UPDATE and DELETE show the plan of the rows they write under "Insert on t"
(...); with ANALYZE they run, in the statement's transaction, as in PostgreSQL. A
materialized view's plan comes from the engine (EngineAPI.explain): operators, their
delta rules and states, the executor of its batches and why, its frontier.
"""

from __future__ import annotations

import copy
import json
import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pglast.ast as A
from headwater.catalog.objects import MaterializedView, Table
from headwater.catalog.types import JSON, TEXT, ColumnType
from headwater.planner import pg_compat
from headwater.planner.explain import (
    FORMATS,
    Options,
    PlanNode,
    from_duckdb,
    incremental_tree,
    modify_node,
    rename_columns,
    render,
)
from headwater.planner.extensions import AsOf, ExplainMatview, ExplainSelectAsOf
from headwater.planner.naming import name_targets
from headwater.planner.params import epoch_parameter
from headwater.planner.relations import deparse
from headwater.planner.scope import column_types, resolve_relation
from headwater.server import epoch_choice, queries, reads
from headwater.server.auth import privilege_checks
from headwater.server.binders import read_binder
from headwater.server.results import Field, Result
from headwater.server.session import Session
from pglast.enums import ObjectType

from headwater.errors import FeatureNotSupported, SQLError

if TYPE_CHECKING:
    from headwater.engine.explain import ViewExplain
    from headwater.server.executor import Executor

_BOOLEAN_OPTIONS = (
    "analyze",
    "verbose",
    "costs",
    "buffers",
    "timing",
    "summary",
    "settings",
    "wal",
)
_TRUE = ("true", "on", "1", "yes")
_FALSE = ("false", "off", "0", "no")


def options(defs: Any) -> Options:
    """EXPLAIN's options, checked as PostgreSQL 15 checks them."""
    opts = Options()
    given: set[str] = set()
    for d in defs or ():
        name = d.defname.lower()
        arg = d.arg
        value = None if arg is None else str(getattr(arg, "sval", getattr(arg, "ival", arg)))
        if name == "format":
            fmt = (value or "").lower()
            if fmt not in FORMATS:
                raise SQLError(
                    f'unrecognized value for EXPLAIN option "format": "{value}"', "22023"
                )
            opts.format = fmt
            continue
        if name not in _BOOLEAN_OPTIONS:
            raise SQLError(f'unrecognized EXPLAIN option "{d.defname}"', "42601")
        if value is None or value.lower() in _TRUE:
            on = True
        elif value.lower() in _FALSE:
            on = False
        else:
            raise SQLError(f"{name} requires a Boolean value", "42601")
        if on:
            given.add(name)
        if name in ("settings", "wal"):
            continue  # accepted: nothing to show
        setattr(opts, name, on)
    for name in ("wal", "timing"):  # set to true without ANALYZE (TIMING OFF is fine)
        if name in given and not opts.analyze:
            raise SQLError(f"EXPLAIN option {name.upper()} requires ANALYZE", "22023")
    return opts


def fields(opts: Options) -> list[Field]:
    """One column, "QUERY PLAN": text, or json for FORMAT JSON (as in PostgreSQL)."""
    kind: ColumnType = ColumnType(JSON) if opts.format == "json" else ColumnType(TEXT)
    return [Field("QUERY PLAN", kind)]


def describe(stmt: Any) -> list[Field]:
    try:
        opts = options(getattr(stmt, "options", None))
    except SQLError:
        opts = Options()
    return fields(opts)


Explain = A.ExplainStmt | ExplainMatview | ExplainSelectAsOf


async def explain(ex: Executor, stmt: Explain, params: list[Any]) -> Result:
    opts = options(stmt.options)
    if isinstance(stmt, ExplainMatview):
        lines = _matview(ex.s, stmt.name, opts)
        return _result(opts, lines)
    if isinstance(stmt, ExplainSelectAsOf):
        select = stmt.select
        privilege_checks.check(ex.s, select.stmt)
        root, planning, execution = await _select(ex, select.stmt, params, opts, select.as_of)
        return _result(opts, render(root, opts, planning, execution))
    query = stmt.query
    privilege_checks.check(ex.s, query)
    if isinstance(query, A.SelectStmt):
        if query.intoClause:
            raise FeatureNotSupported("EXPLAIN of SELECT INTO is not supported")
        root, planning, execution = await _select(ex, query, params, opts)
        return _result(opts, render(root, opts, planning, execution))
    if isinstance(query, A.InsertStmt | A.UpdateStmt | A.DeleteStmt):
        root, planning, execution = await _write(ex, query, params, opts)
        return _result(opts, render(root, opts, planning, execution))
    if isinstance(query, A.CreateTableAsStmt) and query.objtype == ObjectType.OBJECT_MATVIEW:
        return _result(opts, await _create_matview(ex, query, params, opts))
    raise FeatureNotSupported(f"EXPLAIN of {type(query).__name__} is not supported")


def _result(opts: Options, lines: list[str]) -> Result:
    return Result("EXPLAIN", fields(opts), [(line,) for line in lines])


# -- reads ---------------------------------------------------------------------------------
async def _select(
    ex: Executor,
    stmt: A.SelectStmt,
    params: list[Any],
    opts: Options,
    as_of: AsOf | None = None,
) -> tuple[PlanNode, float, float | None]:
    """DuckDB's plan of the SELECT (at `as_of`'s epoch, if given), with its profile
    under ANALYZE; planning and execution times in ms."""
    s = ex.s
    t0 = time.perf_counter()
    binder = read_binder(s, epoch_parameter(stmt), history=as_of is not None)
    columns = _scan_views_plainly(s, binder)
    name_targets(stmt)
    col_types = column_types(stmt, binder.catalog, binder.search_path)
    sql, _ = queries.bind_read(s, binder, pg_compat.translate(stmt, column_types=col_types))
    used, epoch_param = reads.split_params(sql, binder.epoch_param)
    epoch = None
    if epoch_param or as_of is not None:
        epoch = await epoch_choice.statement_epoch(s, ex.waits, binder.matviews, as_of)
    args = reads.args(used, params, epoch_param, epoch)
    bound_ms = (time.perf_counter() - t0) * 1000.0
    verb = "EXPLAIN ANALYZE (FORMAT JSON) " if opts.analyze else "EXPLAIN (FORMAT JSON) "
    cur = s.cursor()

    def run() -> Any:
        t = time.perf_counter()
        rows = cur.execute(verb + sql, args).fetchall()
        return rows, (time.perf_counter() - t) * 1000.0

    def run_plainly() -> Any:
        """A plan DuckDB cannot profile (answered from statistics: its profile is an
        error document): the plan, and the statement run and timed."""
        plain = cur.execute("EXPLAIN (FORMAT JSON) " + sql, args).fetchall()
        t = time.perf_counter()
        n = len(cur.execute(sql, args).fetchall())
        return plain, (time.perf_counter() - t) * 1000.0, n

    rows, took = await reads.run(False, run)
    doc = json.loads(rows[0][1])
    relation = _relation_names(s, columns)
    if opts.analyze and not (isinstance(doc, dict) and "operator" in doc):
        rows, took, n = await reads.run(False, run_plainly)
        root = rename_columns(from_duckdb(json.loads(rows[0][1])[0], relation), columns)
        root.actual = (0.0, took, float(n))
        return root, bound_ms, took
    if opts.analyze:
        ops = doc["operator"] if isinstance(doc, dict) else doc
        root = rename_columns(from_duckdb(ops[0], relation), columns)
        planning = bound_ms + 1000.0 * (
            doc.get("planner", {}).get("total_time", 0.0)
            + doc.get("physical_planner", {}).get("total_time", 0.0)
        )
        execution = 1000.0 * float(doc.get("query", {}).get("total_time", took / 1000.0))
        return root, planning, max(execution - (planning - bound_ms), 0.0)
    root = rename_columns(from_duckdb(doc[0], relation), columns)
    return root, bound_ms + took, None


_PHYSICAL = re.compile(r"(?:^|\.)hw\.t(\d+)$")
_VIEW_OUTPUT = re.compile(r"(?:^|\.)of?(\d+)$")


_READ_COLUMN = re.compile(r'CAST\((c\d+) AS [^)]*\) AS "?([^",]+)"?')


def _scan_views_plainly(s: Session, binder: Any) -> dict[str, str]:
    """Materialized views read as a scan of their stored rows, without the expansion of
    each row's multiplicity (a join with range(_n) that would bury the scan in DuckDB's
    plan): the plan reads as one over the view. Returns the view's internal column names
    as the user's, for the expressions DuckDB prints."""
    columns: dict[str, str] = {}
    read = binder.matview

    def plain(mv: MaterializedView) -> str:
        sql = read(mv)
        for internal, user in _READ_COLUMN.findall(sql):
            columns[internal] = user
        return sql.replace(", range(_o._n))", ")")

    binder.matview = plain
    return columns


def _relation_names(s: Session, columns: dict[str, str]) -> Any:
    """DuckDB's table names (the replica's `hw.t{oid}`, the engine's `o{view}`) as the
    user's (schema, name)."""
    catalog = s.catalog

    def name(table: str) -> tuple[str, str] | None:
        m = _PHYSICAL.search(table)
        if m is None and "hw_engine" in table:
            m = _VIEW_OUTPUT.search(table)
        if m is None:
            return None
        rel = catalog.by_oid(int(m.group(1)))
        return (rel.schema, rel.name) if rel is not None else None

    return name


# -- writes --------------------------------------------------------------------------------
def _rows_of(stmt: A.InsertStmt | A.UpdateStmt | A.DeleteStmt) -> A.SelectStmt | None:
    """The SELECT of the rows a write reads (None: INSERT ... VALUES)."""
    star = (A.ResTarget(val=A.ColumnRef(fields=(A.A_Star(),))),)
    if isinstance(stmt, A.InsertStmt):
        sel = stmt.selectStmt
        if sel is None or (isinstance(sel, A.SelectStmt) and sel.valuesLists):
            return None
        if not isinstance(sel, A.SelectStmt):
            return None
        if stmt.withClause is not None and sel.withClause is None:
            sel = copy.copy(sel)
            sel.withClause = stmt.withClause
        return sel
    extra = stmt.fromClause if isinstance(stmt, A.UpdateStmt) else stmt.usingClause
    return A.SelectStmt(
        targetList=star,
        fromClause=(stmt.relation, *(extra or ())),
        whereClause=stmt.whereClause,
        withClause=stmt.withClause,
        limitOption=0,
        op=0,
    )


async def _write(
    ex: Executor, stmt: Any, params: list[Any], opts: Options
) -> tuple[PlanNode, float, float | None]:
    s = ex.s
    kind = {A.InsertStmt: "Insert", A.UpdateStmt: "Update", A.DeleteStmt: "Delete"}[type(stmt)]
    table = resolve_relation(s.catalog, stmt.relation, s.search_path())
    if not isinstance(table, Table):
        raise SQLError(f'cannot change relation "{table.name}"', "42809")
    select = _rows_of(stmt)
    child: PlanNode | None
    planning, execution = 0.0, None
    if select is None:
        n = len(stmt.selectStmt.valuesLists) if stmt.selectStmt is not None else 1
        child = (
            PlanNode("Result", rows=1)
            if n == 1
            else PlanNode("Values Scan", relation='"*VALUES*"', alias='"*VALUES*"', rows=n)
        )
        if opts.analyze:
            child.actual = (0.0, 0.0, float(n))
    else:
        # The rows an INSERT ... SELECT reads are explained, not run twice (its SELECT
        # may call nextval); UPDATE and DELETE's are profiled before they change.
        profile = opts.analyze and not isinstance(stmt, A.InsertStmt)
        sub = replace(opts, analyze=profile)
        child, planning, execution = await _select(ex, _copy(select), params, sub)
    alias = stmt.relation.alias.aliasname if stmt.relation.alias is not None else None
    root = modify_node(kind, table.name, table.schema, child, alias)
    if not opts.analyze:
        return root, planning, None
    t0 = time.perf_counter()
    result = await ex.run(stmt, params)
    took = (time.perf_counter() - t0) * 1000.0
    count = float(result.tag.rsplit(" ", 1)[-1]) if result.tag[-1:].isdigit() else 0.0
    if child is not None and child.actual is None:
        child.actual = (0.0, took, count)
    root.actual = (took, took, 0.0)
    return root, planning, (execution or 0.0) + took


def _copy(select: A.SelectStmt) -> A.SelectStmt:
    """A fresh tree of the write's SELECT: binding rewrites it in place."""
    from pglast import parse_sql

    return parse_sql(deparse(select))[0].stmt


# -- materialized views ---------------------------------------------------------------------
async def _create_matview(
    ex: Executor, stmt: A.CreateTableAsStmt, params: list[Any], opts: Options
) -> list[str]:
    """EXPLAIN CREATE MATERIALIZED VIEW: the plan the engine would maintain; with
    ANALYZE the view is created (as PostgreSQL runs the statement) and explained."""
    s = ex.s
    rv = stmt.into.rel
    if opts.analyze:
        await ex.run(stmt, params)
        return _matview(s, rv, opts)
    if not isinstance(stmt.query, A.SelectStmt):
        raise FeatureNotSupported("a materialized view must be defined by a SELECT")
    from headwater.engine.api import EngineAPI

    name_targets(stmt.query)
    view = EngineAPI.explain_definition(
        deparse(stmt.query), s.catalog, s.search_path(), s.instance.config.executor
    )
    schema = s.catalog.creation_schema(rv.schemaname, s.search_path())
    return _render_view(s, view, schema, rv.relname, opts)


def _matview(s: Session, rv: A.RangeVar, opts: Options) -> list[str]:
    rel = resolve_relation(s.catalog, rv, s.search_path())
    if not isinstance(rel, MaterializedView):
        raise SQLError(f'"{rel.name}" is not a materialized view', "42809")
    engine = s.instance.matviews.engine
    view = engine.explain(rel.oid) if engine is not None else None
    if view is None:  # being backfilled: its plan, not yet its state
        from headwater.engine.api import EngineAPI

        view = EngineAPI.explain_definition(
            rel.definition, s.catalog, (rel.schema, "public"), s.instance.config.executor
        )
        view.status = "backfilling"
    return _render_view(s, view, rel.schema, rel.name, opts)


def _render_view(s: Session, view: ViewExplain, schema: str, name: str, opts: Options) -> list[str]:
    catalog = s.catalog

    def relation(oid: int) -> str:
        rel = catalog.by_oid(oid)
        return rel.name if rel is not None else str(oid)

    def operator(node: Any) -> tuple[int, str, tuple[str, ...]] | None:
        op = view.operators.get(id(node))
        return None if op is None else (op.index, op.rule, op.states)

    tree = incremental_tree(view.plan.root, view.plan.output, operator, relation)
    top = PlanNode("Materialized View", f"Materialized View {schema}.{name}", children=[tree])
    top.props.append(("Relation Name", name))
    top.props.append(("Schema", schema))
    d = top.details
    d.append(("Output", list(view.plan.output)))
    d.append(("Rule", f"engine/rules/output.py {view.output_rule}"))
    d.append(
        ("State", [f"{view.output_tables[0]} (versions)", f"{view.output_tables[1]} (changes)"])
    )
    d.append(("Executor", view.executor))
    d.append(("Executor Reason", view.executor_reason))
    if view.family is not None:
        shared = view.family_size - 1
        d.append(
            (
                "Family",
                f"{view.family} (statements shared with {shared} other views)"
                if shared
                else view.family,
            )
        )
    if view.frontier is not None:
        d.append(("Frontier", view.frontier))
        d.append(("Created At Epoch", view.created))
    d.append(("Status", view.status or "not created"))
    if view.error:
        d.append(("Error", view.error))
    plain = Options(verbose=opts.verbose, costs=False, format=opts.format, summary=False)
    return render(top, plain)
