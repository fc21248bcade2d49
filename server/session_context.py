"""A server session as the pg_catalog emulation sees it (catalog/pg/session.py).

The catalog layer cannot import the server: this module gives it the session's user,
database, search path, settings and pid, the server's setting defaults, the privilege
checks and ACL text of server/auth.py, and the server's sessions for pg_stat_activity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.catalog.pg.session import SessionContext
from headwater.catalog.privileges import acl_items, has_privilege
from headwater.server.settings import DEFAULTS

if TYPE_CHECKING:
    from headwater.server.session import Session


def session_context(session: Session) -> SessionContext:
    return SessionContext(
        user=session.current_user,
        session_user=session.user,
        database=session.database,
        search_path=session.search_path(),
        settings=dict(session.settings.values),
        defaults=DEFAULTS,
        pid=session.pid,
        has_privilege=has_privilege,
        acl_items=acl_items,
        activity=lambda: _activity(session),
        sequence_last_value=session.instance.sequences.last_value,
        prepared_statements=lambda: _prepared_statements(session),
    )


def _prepared_statements(session: Session) -> list[dict[str, Any]]:
    """pg_prepared_statements: named statements, PREPAREd (from_sql) or Parsed."""
    return [
        {
            "name": name,
            "statement": prep.sql,
            "prepare_time": getattr(prep, "prepare_time", None),
            "parameter_types": [t.pg.sql_name for t in prep.param_types],
            "from_sql": getattr(prep, "from_sql", False),
            "generic_plans": 0,
            "custom_plans": 0,
        }
        for name, prep in session.prepared.items()
        if name
    ]


def _activity(session: Session) -> list[dict[str, Any]]:
    """pg_stat_activity rows of the server's sessions; `session` is the one asking."""
    server = getattr(session.instance, "server", None)
    conns = list(getattr(server, "sessions", {}).values()) if server is not None else []
    out = []
    for conn in conns:
        s = getattr(conn, "session", None)
        if s is None:
            continue
        state = {"I": "idle", "T": "idle in transaction", "E": "idle in transaction (aborted)"}
        out.append(
            {
                "datname": s.database,
                "pid": s.pid,
                "usesysid": getattr(s, "role_oid", 0) or None,
                "usename": s.user,
                "application_name": s.settings.values.get("application_name", ""),
                "client_addr": getattr(conn, "peer_host", None),
                "client_port": -1,
                "state": "active" if s is session else state.get(s.status, "idle"),
                "query": "",
            }
        )
    return out
