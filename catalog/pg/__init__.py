"""pg_catalog and information_schema, built from a catalog snapshot and the session.

Every system relation a client can name is listed in `specs.RELATIONS` with
PostgreSQL 15's column names and types (generated from PostgreSQL 15 by
scripts/gen_pg_specs.py). A statement that names one gets it as an Arrow table
registered on the statement's DuckDB connection (only the relations the statement
references are built); the Binder splices in a scan of it through its `system` hook
(hook.py). Rows come from the Headwater catalog, so the system relations always agree
with it; what Headwater does not have (triggers, policies, publications, comments,
...) is an empty relation of the right shape.

Relations whose name starts with `_hw_` are internal (internal.py):
planner/pg_compat.py rewrites the functions and casts clients use (pg_get_indexdef,
pg_table_is_visible, 'name'::regclass, current_user, ...) into subqueries over them.

OIDs: relations, schemas and indexes use their catalog oid; key constraints, the
indexes behind PRIMARY KEY/UNIQUE constraints and column defaults get oids derived
from their table's oid (`oids.derived_oid`), stable as long as the table exists.

What comes from the server (the session's user, settings and pid, privilege checks,
ACL text, the server's sessions for pg_stat_activity) is passed in as a
`session.SessionContext`; this package does not import server/.

Modules, bottom up: specs (generated data), oids, typeinfo,
session, column_default, snapshot (the objects of a snapshot), ruleutils (definition
texts), roles, pg_catalog, information_schema, internal (the relations' rows), tables
(Arrow tables and their caches), hook (the entry point, `system_relations`).
"""
