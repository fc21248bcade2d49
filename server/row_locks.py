"""SELECT ... FOR UPDATE / FOR NO KEY UPDATE / FOR SHARE / FOR KEY SHARE.

Headwater's writing transactions are serialised by one write lock (docs/storage.md),
so a row lock is that lock: inside a transaction block, a locking SELECT takes the
write lock as the block's first write would, and keeps it until COMMIT or ROLLBACK.
Its rows (and every other row) cannot change until then, and it reads the newest
committed state, on the transaction's own DuckDB connection. Outside a block the
lock would end with the statement, so it is a plain read. NOWAIT fails with 55P03
when another transaction holds the lock; SKIP LOCKED then returns no rows (every row
is locked by it). The four strengths lock alike. The clause is checked as PostgreSQL
checks it (0A000 with GROUP BY, DISTINCT, aggregates, UNION, ...; 42P01 for an OF
name not in FROM; 42809 for a materialized view or sequence) and removed before
binding: DuckDB does not take it.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import pglast.ast as A
from headwater.catalog.objects import MaterializedView, Sequence
from headwater.planner.ir import SET_RETURNING_FUNCS
from headwater.planner.pg_compat import AGGREGATES
from headwater.planner.scope import find_relation
from headwater.planner.syntax import nodes
from headwater.server import transactions
from headwater.server.auth import privilege_checks
from headwater.server.results import Result
from pglast.enums import LockClauseStrength, LockWaitPolicy, SetOperation

from headwater.errors import FeatureNotSupported, LockNotAvailable, SQLError, UndefinedTable

if TYPE_CHECKING:
    from headwater.server.executor import Executor
    from headwater.server.session import Session

_STRENGTH = {
    LockClauseStrength.LCS_FORKEYSHARE: "FOR KEY SHARE",
    LockClauseStrength.LCS_FORSHARE: "FOR SHARE",
    LockClauseStrength.LCS_FORNOKEYUPDATE: "FOR NO KEY UPDATE",
    LockClauseStrength.LCS_FORUPDATE: "FOR UPDATE",
}


def has_locks(stmt: A.SelectStmt) -> bool:
    """A locking clause on the SELECT or on a subquery in its FROM (cheap: FROM only)."""
    return bool(_locking_selects(stmt))


def _locking_selects(stmt: A.SelectStmt) -> list[A.SelectStmt]:
    """The SELECT and the subqueries in its FROM (also within joins and nested
    subqueries) that carry a locking clause."""
    out = [stmt] if stmt.lockingClause else []
    for item in _from_items(stmt.fromClause or ()):
        if isinstance(item, A.RangeSubselect) and isinstance(item.subquery, A.SelectStmt):
            out += _locking_selects(item.subquery)
    return out


async def select(ex: Executor, stmt: A.SelectStmt, params: list[Any]) -> Result:
    """A SELECT with locking clauses: checked, locked (in a block), read."""
    s = ex.s
    selects = _locking_selects(stmt)
    for sel in reversed(selects):  # inner subqueries first, as PostgreSQL analyses them
        check(s, sel)
    clauses = [c for sel in selects for c in sel.lockingClause]
    word = _STRENGTH.get(clauses[0].strength, "FOR UPDATE")
    plain = without_locks(stmt)
    privilege_checks.check(s, plain)
    if s.status == "T" and s.write is None:
        if s.settings.values.get("transaction_read_only") == "on":
            raise SQLError(f"cannot execute SELECT {word} in a read-only transaction", "25006")
        lock = s.instance.committer.write_lock if s.instance.committer else None
        policies = {c.waitPolicy for c in clauses}
        if lock is not None and lock.locked():
            if LockWaitPolicy.LockWaitError in policies:
                raise LockNotAvailable(
                    f'could not obtain lock on row in relation "{_first_table(selects[0])}"'
                )
            if LockWaitPolicy.LockWaitSkip in policies:
                result = await ex.select(plain, params)
                return Result("SELECT 0", result.fields, [], result.notices)
        await transactions.begin_write(s)  # held until COMMIT / ROLLBACK
    return await ex.select(plain, params)


def without_locks(stmt: A.SelectStmt) -> A.SelectStmt:
    """A copy of `stmt` without its locking clauses (the client's tree may be reused)."""
    if not stmt.lockingClause:
        stmt = copy.deepcopy(stmt)  # the clauses are in FROM's subqueries
    else:
        stmt = copy.copy(stmt)
        stmt.lockingClause = None
    for sel in _locking_selects(stmt):
        sel.lockingClause = None
    return stmt


def _first_table(stmt: A.SelectStmt) -> str:
    for item in _from_items(stmt.fromClause or ()):
        if isinstance(item, A.RangeVar):
            return item.relname
    return ""


def _from_items(items: Any) -> list[Any]:
    """FROM items, joins opened up (their sides share the query's range table)."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, A.JoinExpr):
            out.extend(_from_items((item.larg, item.rarg)))
        else:
            out.append(item)
    return out


def _alias(item: Any) -> str | None:
    if isinstance(item, A.RangeVar):
        return item.alias.aliasname if item.alias else item.relname
    alias = getattr(item, "alias", None)
    return alias.aliasname if alias else None


def check(s: Session, stmt: A.SelectStmt) -> None:
    """PostgreSQL's checks of a locking clause, in its order: the query's shape per
    clause (CheckSelectLocking, transformLockingClause), then the locked relations."""
    ctes = {c.ctename for c in stmt.withClause.ctes} if stmt.withClause else set()
    locked: list[Any] = []
    for clause in stmt.lockingClause:
        word = _STRENGTH.get(clause.strength, "FOR UPDATE")
        _check_shape(stmt, word)
        locked += _locked_items(stmt, clause, word, ctes)
    for rv in locked:
        _check_relation(s, rv)


def _check_shape(stmt: A.SelectStmt, word: str) -> None:
    def no(what: str) -> FeatureNotSupported:
        return FeatureNotSupported(f"{word} is not allowed with {what}")

    if stmt.op != SetOperation.SETOP_NONE:
        raise no("UNION/INTERSECT/EXCEPT")
    if stmt.distinctClause is not None:
        raise no("DISTINCT clause")
    if stmt.groupClause:
        raise no("GROUP BY clause")
    if stmt.havingClause is not None:
        raise no("HAVING clause")
    calls = _calls(stmt.targetList) + _calls(stmt.whereClause) + _calls(stmt.sortClause)
    if any(c.over is None and _name(c) in AGGREGATES for c in calls):
        raise no("aggregate functions")
    if any(c.over is not None for c in calls):
        raise no("window functions")
    if any(_name(c) in SET_RETURNING_FUNCS for c in _calls(stmt.targetList)):
        raise no("set-returning functions in the target list")


def _name(call: A.FuncCall) -> str:
    return call.funcname[-1].sval.lower()


def _calls(node: Any) -> list[A.FuncCall]:
    """Function calls of an expression, not inside subqueries."""
    return [n for n in nodes(node, skip=A.SubLink) if isinstance(n, A.FuncCall)]


def _locked_items(stmt: A.SelectStmt, clause: Any, word: str, ctes: set[str]) -> list[Any]:
    """The relations a clause locks: all of FROM, or those OF names (checked)."""
    items = _from_items(stmt.fromClause or ())
    out: list[Any] = []
    named = list(clause.lockedRels or ())
    for item in items if not named else ():
        if isinstance(item, A.RangeVar) and not (item.schemaname is None and item.relname in ctes):
            out.append(item)
        elif isinstance(item, A.RangeSubselect) and isinstance(item.subquery, A.SelectStmt):
            out += _in_subquery(item.subquery, clause, word, ctes)
    for rv in named:
        loc = rv.location + 1 if rv.location is not None and rv.location >= 0 else None
        if rv.schemaname is not None:
            raise SQLError(f"{word} must specify unqualified relation names", "42601", position=loc)
        hits = [i for i in items if _alias(i) == rv.relname]
        if not hits:
            raise UndefinedTable(
                f'relation "{rv.relname}" in {word} clause not found in FROM clause',
                position=loc,
            )
        item = hits[0]
        if isinstance(item, A.RangeFunction):
            raise FeatureNotSupported(f"{word} cannot be applied to a function", position=loc)
        if isinstance(item, A.RangeVar) and item.schemaname is None and item.relname in ctes:
            raise FeatureNotSupported(f"{word} cannot be applied to a WITH query", position=loc)
        if isinstance(item, A.RangeVar):
            out.append(item)
        elif isinstance(item, A.RangeSubselect) and isinstance(item.subquery, A.SelectStmt):
            out += _in_subquery(item.subquery, clause, word, ctes)
    return out


def _in_subquery(sub: A.SelectStmt, clause: Any, word: str, ctes: set[str]) -> list[Any]:
    """A subquery in FROM is locked as a whole (PostgreSQL pushes the clause down)."""
    if sub.valuesLists:
        return []
    _check_shape(sub, word)
    return _locked_items(sub, A.LockingClause(lockedRels=None), word, ctes)


def _check_relation(s: Session, rv: A.RangeVar) -> None:
    rel = find_relation(s.catalog, rv, s.search_path())
    if isinstance(rel, MaterializedView):
        raise SQLError(f'cannot lock rows in materialized view "{rel.name}"', "42809")
    if isinstance(rel, Sequence):
        raise SQLError(f'cannot lock rows in sequence "{rel.name}"', "42809")
