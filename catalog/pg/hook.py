"""The Binder's `system` hook: the system relations a statement names, built and
registered on its DuckDB connection."""

from __future__ import annotations

from collections.abc import Callable

import duckdb
from headwater.catalog.catalog import Catalog
from headwater.catalog.pg import specs
from headwater.catalog.pg.internal import INTERNAL
from headwater.catalog.pg.session import SessionContext
from headwater.catalog.pg.tables import build


def lookup(schema: str | None, name: str) -> tuple[str, str] | None:
    """The system relation (schema, name) a reference names, or None.

    Unqualified names find pg_catalog relations (pg_catalog is implicitly first on
    every search path); information_schema relations need their schema.
    """
    if schema is None or schema == "pg_catalog":
        if name in INTERNAL or ("pg_catalog", name) in specs.RELATIONS:
            return ("pg_catalog", name)
        return None
    if schema == "information_schema" and (schema, name) in specs.RELATIONS:
        return (schema, name)
    return None


class SystemRelations:
    """The Binder's `system` hook for one statement: registers the system relations it
    names on the statement's DuckDB connection and returns a scan of each."""

    def __init__(
        self,
        catalog: Catalog,
        context: Callable[[], SessionContext],
        cursor: Callable[[], duckdb.DuckDBPyConnection],
    ) -> None:
        self.catalog = catalog
        self.context = context  # asked once, when the statement names a system relation
        self.cursor = cursor
        self._info: SessionContext | None = None

    @property
    def info(self) -> SessionContext:
        if self._info is None:
            self._info = self.context()
        return self._info

    def __call__(self, schema: str | None, name: str) -> str | None:
        found = lookup(schema, name)
        if found is None:
            return None
        table = build(self.catalog, self.info, *found)
        view = f"_hwsys_{found[0]}_{found[1]}"
        self.cursor().register(view, table)
        return f'(SELECT * FROM "{view}")'


def system_relations(
    context: Callable[[], SessionContext],
    catalog: Catalog,
    cursor: Callable[[], duckdb.DuckDBPyConnection],
) -> SystemRelations:
    """The Binder hook for a statement reading `catalog` on `cursor()`; `context()` gives
    the reading session's SessionContext (the server's, server/session_context.py)."""
    return SystemRelations(catalog, context, cursor)
