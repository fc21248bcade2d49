"""CREATE SINK and DROP SINK: the sink's catalog object, in a writing transaction.

What a sink does and its options: server/sinks.py. Creating one takes a superuser (it
writes files and connects out as the server) and SELECT on its source.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from headwater.catalog.catalog import is_temp_schema
from headwater.catalog.objects import MaterializedView, Sink, Table
from headwater.planner.extensions import SINK_KINDS, CreateSink, DropSink
from headwater.server import transactions
from headwater.server.auth import privilege_checks
from headwater.server.results import Result
from headwater.server.subscribe import _select_all

from headwater.errors import FeatureNotSupported, SQLError, UndefinedColumn

if TYPE_CHECKING:
    from headwater.server.executor import Executor
    from headwater.server.session import Session, WriteTxn

MODES = ("mirror", "changes")
OPTIONS = ("mode", "key", "interval")
ICEBERG_OPTIONS = ("namespace", "table", "catalog_uri")  # INTO ICEBERG's own
KEPT = ("interval", *ICEBERG_OPTIONS)  # the options a Sink keeps as given


async def execute(ex: Executor, stmt: CreateSink | DropSink) -> Result:
    s = ex.s
    if isinstance(stmt, CreateSink):
        result = await transactions.in_write(s, partial(_create, s), stmt)
    else:
        result = await transactions.in_write(s, partial(_drop, s), stmt)
    ex.instance.sinks.reconcile()  # (in a transaction block: again at the next look)
    return result


def _create(s: Session, w: WriteTxn, stmt: CreateSink) -> Result:
    cat = w.catalog
    sp = s.search_path()
    role = cat.roles.get(s.role_oid)
    if role is None or not role.superuser:  # it writes files and connects out as the server
        raise SQLError("must be superuser to create a sink", "42501")
    schema = cat.creation_schema(stmt.name.schemaname, sp)
    if cat.resolve_sink(schema, stmt.name.relname, ()) is not None:
        if stmt.if_not_exists:
            return Result(
                "CREATE SINK", notices=[f'sink "{stmt.name.relname}" already exists, skipping']
            )
        raise SQLError(f'sink "{stmt.name.relname}" already exists', "42710")
    rel = cat.get_relation(stmt.source.schemaname, stmt.source.relname, sp)
    if not isinstance(rel, Table | MaterializedView):
        raise FeatureNotSupported(
            f'cannot sink {rel.kind} "{rel.name}"',
            hint="A sink reads a table or a materialized view.",
        )
    if is_temp_schema(rel.schema):
        raise FeatureNotSupported(
            f'cannot sink temporary table "{rel.name}"',
            hint="A sink outlives sessions and restarts; its source must too.",
        )
    privilege_checks.check(s, _select_all(stmt.source))
    if stmt.kind not in SINK_KINDS:
        raise FeatureNotSupported(f"sinks into {stmt.kind} are not supported")
    options = dict(stmt.options)
    allowed = OPTIONS + (ICEBERG_OPTIONS if stmt.kind == "iceberg" else ())
    unknown = [k for k in options if k not in allowed]
    if unknown:
        raise SQLError(f'unrecognized sink option "{unknown[0]}"', "42601")
    mode = (options.get("mode") or "mirror").lower()
    if mode not in MODES:
        raise SQLError(f'invalid value for sink option "mode": "{mode}"', "22023")
    if stmt.kind == "postgres" and not stmt.table:
        raise SQLError("a sink INTO POSTGRES needs TABLE name", "42601")
    if stmt.kind != "postgres" and stmt.table:
        raise SQLError(f"a sink INTO {stmt.kind.upper()} takes no TABLE", "42601")
    table = stmt.table
    if stmt.kind == "iceberg":
        table = _iceberg_table(stmt.target, options)
    key: tuple[str, ...]
    if options.get("key"):
        key = tuple(k.strip().lower() for k in str(options["key"]).split(",") if k.strip())
    elif isinstance(rel, Table) and rel.primary_key is not None:
        key = rel.primary_key.columns
    else:
        key = ()
    for k in key:
        if rel.column(k) is None:
            raise UndefinedColumn(f'column "{k}" of relation "{rel.name}" does not exist')
    if "interval" in options:
        try:
            float(options["interval"] or "")
        except ValueError:
            raise SQLError('sink option "interval" takes seconds', "22023") from None
    sink = Sink(
        cat.allocate_oid(),
        schema,
        stmt.name.relname,
        rel.oid,
        stmt.kind,
        stmt.target,
        table,
        mode,
        key,
        tuple((k, v or "") for k, v in stmt.options if k in KEPT),
        created_epoch=s.instance.visible_epoch,
    )
    cat.put_sink(sink)
    return Result("CREATE SINK")


def _iceberg_table(warehouse: str, options: dict[str, str | None]) -> str:
    """INTO ICEBERG's `namespace.table` (its WITH options), checked."""
    from headwater.storage.sinks.iceberg import catalog_properties

    for name in ("namespace", "table"):
        if not options.get(name):
            raise SQLError(f"a sink INTO ICEBERG needs WITH ({name} = '...')", "42601")
    try:
        catalog_properties(warehouse, options.get("catalog_uri") or None)
    except ValueError as e:
        raise SQLError(str(e), "22023") from None
    return f"{options['namespace']}.{options['table']}"


def _drop(s: Session, w: WriteTxn, stmt: DropSink) -> Result:
    cat = w.catalog
    sink = cat.resolve_sink(stmt.name.schemaname, stmt.name.relname, s.search_path())
    if sink is None:
        if stmt.if_exists:
            return Result(
                "DROP SINK", notices=[f'sink "{stmt.name.relname}" does not exist, skipping']
            )
        raise SQLError(f'sink "{stmt.name.relname}" does not exist', "42704")
    role = cat.roles.get(s.role_oid)
    if (role is None or not role.superuser) and sink.owner != s.role_oid:
        raise SQLError(f"must be owner of sink {sink.name}", "42501")
    cat.drop_sink(sink)
    return Result("DROP SINK")
