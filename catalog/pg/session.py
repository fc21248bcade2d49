"""What the pg_catalog emulation needs from the session reading it and the server.

The catalog layer does not import the server: the server builds a `SessionContext` for
a session (server/session_context.py) and hands it to `system_relations()`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from headwater.catalog.catalog import Catalog

# has_table_privilege()'s question: does role (oid) hold any of privs ('SELECT, INSERT')
# on a relation or schema?
HasPrivilege = Callable[[Catalog, int, Any, str], bool]
# relacl / nspacl as aclitem[] text, None for the default (NULL)
AclItems = Callable[[Catalog, Any], list[str] | None]


@dataclass(frozen=True, kw_only=True)
class SessionContext:
    """The reading session (user, database, search path, settings, pid) and the server's
    answers the catalog layer cannot compute itself."""

    user: str
    database: str
    search_path: tuple[str, ...]
    settings: Mapping[str, str]  # the session's current values (SHOW)
    defaults: Mapping[str, str]  # the server's defaults (pg_settings' boot_val, reset_val)
    pid: int
    has_privilege: HasPrivilege
    acl_items: AclItems
    # pg_stat_activity rows of the server's sessions (asked only when named)
    activity: Callable[[], list[dict[str, Any]]] | None = None
    # pg_prepared_statements rows of the session (asked only when named)
    prepared_statements: Callable[[], list[dict[str, Any]]] | None = None
    session_user: str | None = None  # (None: `user`; SET ROLE changes only `user`)
    # pg_sequences.last_value of a sequence (None before its first nextval)
    sequence_last_value: Callable[[Any], int | None] | None = None
