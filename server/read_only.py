"""Read-only transactions: BEGIN READ ONLY, SET TRANSACTION READ ONLY and
default_transaction_read_only, as PostgreSQL 15 has them.

A transaction block's mode is the session setting `transaction_read_only`: BEGIN /
START TRANSACTION set it from their READ ONLY / READ WRITE option, else from
`default_transaction_read_only`; SET TRANSACTION (or SET transaction_read_only) in
the block changes it; at the block's end it shows the default again (SHOW, outside
a block, reports the default, as PostgreSQL does). An autocommit statement runs in
the default mode. In a read-only transaction a statement that writes fails before it
does anything, with 25006 "cannot execute INSERT in a read-only transaction";
INSERT, UPDATE and DELETE of temporary tables are allowed (PostgreSQL's rule).
`SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY` sets the default.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakSet

import pglast.ast as A
from headwater.catalog.catalog import is_temp_schema
from headwater.server.results import Result
from headwater.server.session import Session
from pglast.enums import LockClauseStrength, ObjectType, VariableSetKind

from headwater.errors import SQLError

TXN, DEFAULT = "transaction_read_only", "default_transaction_read_only"

_NAMES: dict[type, str] = {
    A.InsertStmt: "INSERT",
    A.UpdateStmt: "UPDATE",
    A.DeleteStmt: "DELETE",
    A.TruncateStmt: "TRUNCATE TABLE",
    A.CreateStmt: "CREATE TABLE",
    A.ViewStmt: "CREATE VIEW",
    A.IndexStmt: "CREATE INDEX",
    A.CreateSchemaStmt: "CREATE SCHEMA",
    A.CreateSeqStmt: "CREATE SEQUENCE",
    A.AlterSeqStmt: "ALTER SEQUENCE",
    A.CreateEnumStmt: "CREATE TYPE",
    A.AlterEnumStmt: "ALTER TYPE",
    A.AlterTableStmt: "ALTER TABLE",
    A.CommentStmt: "COMMENT",
    A.CreateRoleStmt: "CREATE ROLE",
    A.AlterRoleStmt: "ALTER ROLE",
    A.DropRoleStmt: "DROP ROLE",
    A.GrantRoleStmt: "GRANT",
    A.AlterDefaultPrivilegesStmt: "ALTER DEFAULT PRIVILEGES",
    A.CopyStmt: "COPY FROM",
    A.CreateExtensionStmt: "CREATE EXTENSION",
    A.CreateFunctionStmt: "CREATE FUNCTION",
    A.CreateTrigStmt: "CREATE TRIGGER",
    A.AlterFunctionStmt: "ALTER FUNCTION",
    A.AlterOwnerStmt: "ALTER FUNCTION",
}
_OBJECTS = {  # DROP / RENAME / ALTER ... SET SCHEMA of these, named as PostgreSQL does
    ObjectType.OBJECT_TABLE: "TABLE",
    ObjectType.OBJECT_VIEW: "VIEW",
    ObjectType.OBJECT_MATVIEW: "MATERIALIZED VIEW",
    ObjectType.OBJECT_INDEX: "INDEX",
    ObjectType.OBJECT_SCHEMA: "SCHEMA",
    ObjectType.OBJECT_SEQUENCE: "SEQUENCE",
    ObjectType.OBJECT_TYPE: "TYPE",
    ObjectType.OBJECT_COLUMN: "TABLE",
    ObjectType.OBJECT_TABCONSTRAINT: "TABLE",
    ObjectType.OBJECT_EXTENSION: "EXTENSION",
    ObjectType.OBJECT_FUNCTION: "FUNCTION",
    ObjectType.OBJECT_TRIGGER: "TRIGGER",
}
_LOCKS = {
    LockClauseStrength.LCS_FORKEYSHARE: "SELECT FOR KEY SHARE",
    LockClauseStrength.LCS_FORSHARE: "SELECT FOR SHARE",
    LockClauseStrength.LCS_FORNOKEYUPDATE: "SELECT FOR NO KEY UPDATE",
    LockClauseStrength.LCS_FORUPDATE: "SELECT FOR UPDATE",
}


def read_only(s: Session) -> bool:
    """Does the session's current (or next autocommit) transaction refuse writes?"""
    key = TXN if s.status != "I" else DEFAULT
    return s.settings.values.get(key, "off") == "on"


# Sessions whose transaction block has run a query: it may no longer become read-write
# (25001, PostgreSQL's "before any query"); weak, a session's end forgets it
_QUERIED: WeakSet[Session] = WeakSet()


def refuse_writes(s: Session, stmt: Any) -> None:
    """25006 if `stmt` writes and the transaction is read-only (before it runs); notes
    that the block ran a query."""
    if s.status == "T" and not isinstance(stmt, A.VariableSetStmt | A.VariableShowStmt):
        _QUERIED.add(s)
    if not read_only(s):
        return
    name = _writes(s, stmt)
    if name is not None:
        raise SQLError(f"cannot execute {name} in a read-only transaction", "25006")


def _writes(s: Session, stmt: Any) -> str | None:
    """The command name PostgreSQL reports for `stmt` if it writes, else None."""
    if isinstance(stmt, A.SelectStmt):
        if stmt.intoClause is not None:
            return "SELECT INTO"
        if stmt.lockingClause:
            return _LOCKS.get(stmt.lockingClause[0].strength, "SELECT FOR UPDATE")
        return None
    if isinstance(stmt, A.InsertStmt | A.UpdateStmt | A.DeleteStmt):
        rv = stmt.relation
        rel = s.catalog.resolve(rv.schemaname, rv.relname, s.search_path())
        if rel is not None and is_temp_schema(rel.schema):
            return None  # temporary tables may be written (PostgreSQL)
    if isinstance(stmt, A.CopyStmt):
        return "COPY FROM" if stmt.is_from else None
    if isinstance(stmt, A.CreateTableAsStmt):
        if stmt.objtype == ObjectType.OBJECT_MATVIEW:
            return "CREATE MATERIALIZED VIEW"
        return "SELECT INTO" if stmt.is_select_into else "CREATE TABLE AS"
    if isinstance(stmt, A.DropStmt):
        return f"DROP {_OBJECTS.get(stmt.removeType, 'TABLE')}"
    if isinstance(stmt, A.RenameStmt | A.AlterObjectSchemaStmt):
        kind = stmt.renameType if isinstance(stmt, A.RenameStmt) else stmt.objectType
        if isinstance(stmt, A.RenameStmt) and kind in (
            ObjectType.OBJECT_COLUMN,
            ObjectType.OBJECT_TABCONSTRAINT,
        ):
            kind = stmt.relationType
        return f"ALTER {_OBJECTS.get(kind, 'TABLE')}"
    if isinstance(stmt, A.GrantStmt):
        return "GRANT" if stmt.is_grant else "REVOKE"
    return _NAMES.get(type(stmt))


def begin(s: Session, stmt: A.TransactionStmt) -> None:
    """BEGIN / START TRANSACTION [READ ONLY | READ WRITE]: the block's mode."""
    mode = _mode(stmt.options)
    s.settings.values[TXN] = mode if mode is not None else s.settings.values.get(DEFAULT, "off")
    _QUERIED.discard(s)


def end(s: Session) -> None:
    """The block ended: SHOW transaction_read_only reports the default again."""
    s.settings.values[TXN] = s.settings.values.get(DEFAULT, "off")


def set_mode(s: Session, stmt: A.VariableSetStmt) -> Result | None:
    """SET TRANSACTION / SET SESSION CHARACTERISTICS AS TRANSACTION / SET
    [default_]transaction_read_only; None for other SETs."""
    name = (stmt.name or "").lower()
    if stmt.kind == VariableSetKind.VAR_SET_MULTI:
        mode = _mode(stmt.args)
        if name == "session characteristics":
            if mode is not None:
                s.settings.set(DEFAULT, mode)
                after_set(s)
            return Result("SET")
        if name != "transaction":
            return None
        if s.status == "I":
            warning = SQLError("SET TRANSACTION can only be used in transaction blocks", "25P01")
            warning.severity = "WARNING"
            return Result("SET", notices=[warning])
        if mode is not None:
            _change_mode(s, mode)
        return Result("SET")
    if stmt.kind != VariableSetKind.VAR_SET_VALUE or name not in (TXN, DEFAULT):
        return None
    value = _boolean(name, stmt.args)
    if name == DEFAULT:
        s.settings.set(DEFAULT, value)
        after_set(s)
    elif s.status != "I":  # outside a block it has no effect (PostgreSQL)
        _change_mode(s, value)
    return Result("SET")


def _change_mode(s: Session, mode: str) -> None:
    if mode == "off" and s.settings.values.get(TXN) == "on" and s in _QUERIED:
        raise SQLError("transaction read-write mode must be set before any query", "25001")
    s.settings.values[TXN] = mode


def after_set(s: Session) -> None:
    """A SET or RESET outside a block: transaction_read_only follows the default."""
    if s.status == "I":
        end(s)


_TRUE = ("on", "true", "yes", "1", "t", "y")
_FALSE = ("off", "false", "no", "0", "f", "n")


def _boolean(name: str, args: Any) -> str:
    """A Boolean setting's value as SHOW prints it (22023 unless one Boolean)."""
    arg = args[0] if args and len(args) == 1 else None
    val = getattr(arg, "val", None)
    text = str(getattr(val, "sval", getattr(val, "ival", ""))).lower()
    if isinstance(val, A.Boolean):
        text = "on" if val.boolval else "off"
    if text in _TRUE:
        return "on"
    if text in _FALSE:
        return "off"
    raise SQLError(f'parameter "{name}" requires a Boolean value', "22023")


def _mode(options: Any) -> str | None:
    """ "on" for READ ONLY, "off" for READ WRITE, None if the options say neither."""
    mode = None
    for opt in options or ():
        if isinstance(opt, A.DefElem) and opt.defname == "transaction_read_only":
            arg = opt.arg
            val = getattr(arg, "val", arg)
            on = getattr(val, "ival", getattr(val, "boolval", None))
            mode = "on" if on else "off"
    return mode
