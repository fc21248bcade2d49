"""Binders for statements: which rows of tables and views a statement's SQL scans,
and where the system catalogs (pg_catalog, headwater_catalog) come from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headwater.catalog.catalog import Catalog
from headwater.catalog.pg.hook import system_relations
from headwater.catalog.types import UserTypes
from headwater.planner.relations import Binder
from headwater.server import hw_catalog
from headwater.server.sequence_calls import SequenceBinder
from headwater.server.session import Session, WriteTxn
from headwater.server.session_context import session_context
from headwater.storage.replica import CURRENT, Replica, visible_at

from headwater.errors import UndefinedTable


def read_binder(s: Session, epoch_param: int, history: bool = False) -> Binder:
    """A binder for a read. Tables and materialized views are scanned at the
    statement's epoch, which is chosen after binding (server/epoch_choice.py), once the
    views the statement reads are known: the SQL names it as the DuckDB parameter
    $`epoch_param` (planner.params.epoch_parameter: after the client's), bound when the
    statement runs. In a writing transaction tables are read as it left them, unless
    `history` (AS OF)."""
    epoch = f"${epoch_param}"
    reading = CURRENT if s.write is not None and not history else visible_at(epoch)
    binder = SequenceBinder(
        s.catalog,
        s.search_path(),
        lambda t: Replica.scan(t, reading),
        system=system_sql(s, s.catalog, s.cursor),
        matview=lambda m: s.instance.matviews.read_sql(m, epoch),
        sequences=s.instance.sequences,
        session=s,
    )
    binder.epoch_param = epoch_param
    return binder


def write_binder(s: Session, w: WriteTxn) -> Binder:
    """Writes read tables as the transaction left them and views at their frontier."""
    return _current(s, w.catalog, lambda: w.cur)


def user_types(s: Session, w: WriteTxn) -> UserTypes:
    """The enums and domains a DDL statement's type names may name: the transaction's
    own included."""
    cat, path = w.catalog, s.search_path()
    return lambda names: cat.domain_column_type(names, path) or cat.type_named(names, path)


def current_binder(s: Session) -> Binder:
    """A write computed outside a writing transaction (server/scanned_writes.py): tables
    as the replica has them now, views at their frontier."""
    return _current(s, s.catalog, s.cursor)


def _current(s: Session, catalog: Catalog, cursor: Callable[[], Any]) -> Binder:
    mv = s.instance.matviews
    return SequenceBinder(
        catalog,
        s.search_path(),
        lambda t: Replica.scan(t, CURRENT),
        system=system_sql(s, catalog, cursor),
        matview=lambda m: mv.read_sql(m, str(mv.fresh_until(m.oid))),
        sequences=s.instance.sequences,
        session=s,
    )


def system_sql(
    s: Session, catalog: Catalog, cursor: Callable[[], Any]
) -> Callable[[str | None, str], str | None]:
    """The SQL of a system relation by (schema, name): headwater_catalog's from the
    instance, registered on the statement's connection; pg_catalog's emulated."""
    pg = system_relations(lambda: session_context(s), catalog, cursor)
    instance = s.instance

    def system(schema: str | None, name: str) -> str | None:
        if schema == "headwater_catalog":
            table = hw_catalog.relation(instance, name)
            if table is None:
                raise UndefinedTable(f'relation "headwater_catalog.{name}" does not exist')
            view = f"_hwsys_headwater_catalog_{name}"
            cursor().register(view, table)
            return f'(SELECT * FROM "{view}")'
        return pg(schema, name)

    return system
