"""The privileges a statement needs, checked before it runs.

`check()` runs at the start of every statement, with a fast path for superusers:
SELECT needs SELECT on every relation it reads (a view's own reads are checked with
its owner's privileges, as in PostgreSQL), INSERT/UPDATE/DELETE/TRUNCATE their
privilege on the target, DDL ownership or CREATE on the schema. The privilege model
(ACLs, memberships, ownership) is catalog/privileges.py.
"""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.catalog.catalog import SYSTEM_SCHEMAS, Catalog
from headwater.catalog.objects import Domain, Function, Relation, Schema, UserType, View
from headwater.catalog.privileges import has_priv, is_superuser, memberships, owner
from headwater.planner.scope import named_relations
from headwater.server.auth.roles import ROLE_STMTS
from pglast import parse_sql
from pglast.enums import ObjectType, OnConflictAction

from headwater.errors import InsufficientPrivilege, SQLError

SUPERUSER_ONLY = ("pg_authid", "pg_shadow")

# The relations each view reads, by (view oid, definition): parsed once, not per statement
_VIEW_REFS: dict[tuple[int, str], list[tuple[str | None, str]]] = {}


def _view_refs(view: View) -> list[tuple[str | None, str]]:
    key = (view.oid, view.definition)
    refs = _VIEW_REFS.get(key)
    if refs is None:
        try:
            found = named_relations(parse_sql(view.definition)[0].stmt)
        except Exception:
            found = []
        refs = [(rv.schemaname, rv.relname) for rv in found]
        if len(_VIEW_REFS) > 4096:
            _VIEW_REFS.clear()
        _VIEW_REFS[key] = refs
    return refs


class Checker:
    """Privilege checks for one statement by one (non-superuser) role."""

    def __init__(self, catalog: Catalog, role_oid: int, search_path: tuple[str, ...]) -> None:
        self.cat = catalog
        self.role_oid = role_oid
        self.search_path = search_path
        self._roles: dict[int, set[int]] = {}

    def roles_of(self, oid: int) -> set[int]:
        got = self._roles.get(oid)
        if got is None:
            got = self._roles[oid] = memberships(self.cat, oid)
        return got

    def superuser(self, oid: int) -> bool:
        return is_superuser(self.cat, oid)

    # -- building blocks ------------------------------------------------------------
    def schema_usage(self, name: str, as_role: int) -> None:
        schema = self.cat.schemas.get(name)
        if schema is None or self.superuser(as_role):
            return
        if not has_priv(schema, "U", self.roles_of(as_role)):
            raise InsufficientPrivilege(f"permission denied for schema {name}")

    def relation(
        self, schema: str | None, name: str, letters: str, as_role: int, depth: int = 0
    ) -> Relation | None:
        rel = None if schema in SYSTEM_SCHEMAS else self.cat.resolve(schema, name, self.search_path)
        if rel is None:
            # a system relation, or missing (binding reports it); password verifiers
            # are for superusers only, as in PostgreSQL
            if name in SUPERUSER_ONLY and schema in (None, "pg_catalog"):
                if not self.superuser(as_role):
                    raise InsufficientPrivilege(f"permission denied for table {name}")
            return None
        if self.superuser(as_role):
            return rel
        self.schema_usage(rel.schema, as_role)
        roles = self.roles_of(as_role)
        for letter in letters:
            if not has_priv(rel, letter, roles):
                raise InsufficientPrivilege(f"permission denied for {rel.kind} {rel.name}")
        if isinstance(rel, View) and "r" in letters and depth < 32:
            # A view reads its relations with its owner's privileges, as in PostgreSQL.
            for s, n in _view_refs(rel):
                self.relation(s, n, "r", owner(rel), depth + 1)
        return rel

    def reads(self, node: Any, skip: Any = None) -> None:
        for rv in named_relations(node, skip=skip):
            self.relation(rv.schemaname, rv.relname, "r", self.role_oid)

    def create_in(self, rv: A.RangeVar) -> None:
        """CREATE on the schema `rv` is made in; a temporary relation needs none (the
        TEMP privilege on the database, which PUBLIC holds)."""
        schema = rv.schemaname
        if rv.relpersistence == "t" or schema == "pg_temp":
            return
        try:
            name = self.cat.creation_schema(schema, self.search_path)
        except SQLError:
            return  # executing the statement reports it
        s = self.cat.schemas[name]
        if not has_priv(s, "C", self.roles_of(self.role_oid)):
            raise InsufficientPrivilege(f"permission denied for schema {name}")

    def owns(self, obj: Relation | Schema | UserType | Domain | Function) -> bool:
        return self.superuser(self.role_oid) or owner(obj) in self.roles_of(self.role_oid)

    def own_type(self, names: list[str]) -> None:
        """An enum or a domain (CREATE DOMAIN) is the role's."""
        schema = names[0] if len(names) == 2 else None
        t = self.cat.resolve_type(schema, names[-1], self.search_path)
        t = t or self.cat.resolve_domain(schema, names[-1], self.search_path)
        if t is not None:
            self.must_own(t)

    def own_function(self, names: list[str]) -> None:
        """The functions `names` (as written) names are the role's (PostgreSQL's message
        names them as written)."""
        schema = names[0] if len(names) == 2 else None
        for fn in self.cat.find_functions(schema, names[-1], self.search_path):
            if not self.owns(fn):
                raise InsufficientPrivilege(f"must be owner of function {'.'.join(names)}")

    def must_own(self, obj: Relation | Schema | UserType | Domain) -> None:
        if self.owns(obj):
            return
        if isinstance(obj, Relation | UserType | Domain):
            # The owner of the schema may drop what is in it.
            schema = self.cat.schemas.get(obj.schema)
            if schema is not None and self.owns(schema):
                return
            raise InsufficientPrivilege(f"must be owner of {obj.kind} {obj.name}")
        raise InsufficientPrivilege(f"must be owner of schema {obj.name}")

    # -- statements -----------------------------------------------------------------
    def statement(self, stmt: Any) -> None:
        if isinstance(stmt, A.SelectStmt):
            self.reads(stmt)
        elif isinstance(stmt, A.InsertStmt):
            letters = "a"
            oc = stmt.onConflictClause
            if oc is not None and oc.action == OnConflictAction.ONCONFLICT_UPDATE:
                letters += "wr"
            if _returning(stmt):
                letters += "r"
            self.target(stmt.relation, letters)
            self.reads(stmt, skip=stmt.relation)
        elif isinstance(stmt, A.UpdateStmt):
            reads = stmt.whereClause is not None or _returning(stmt)
            reads = reads or _has_column_ref(tuple(t.val for t in stmt.targetList or ()))
            self.target(stmt.relation, "w" + ("r" if reads else ""))
            self.reads(stmt, skip=stmt.relation)
        elif isinstance(stmt, A.DeleteStmt):
            reads = stmt.whereClause is not None or _returning(stmt)
            self.target(stmt.relation, "d" + ("r" if reads else ""))
            self.reads(stmt, skip=stmt.relation)
        elif isinstance(stmt, A.TruncateStmt):
            for rv in stmt.relations:
                self.target(rv, "D")
        elif isinstance(stmt, A.CreateStmt):
            self.create_in(stmt.relation)
        elif isinstance(stmt, A.ViewStmt):
            self.create_in(stmt.view)
            existing = self.cat.resolve(stmt.view.schemaname, stmt.view.relname, self.search_path)
            if existing is not None and stmt.replace:
                self.must_own(existing)
        elif isinstance(stmt, A.CreateTableAsStmt):
            self.create_in(stmt.into.rel)
            self.reads(stmt.query)
        elif isinstance(stmt, A.IndexStmt) or (
            isinstance(stmt, A.AlterTableStmt | A.RenameStmt | A.AlterObjectSchemaStmt)
            and stmt.relation is not None
        ):
            rel = self.cat.resolve(
                stmt.relation.schemaname, stmt.relation.relname, self.search_path
            )
            if rel is not None:
                self.schema_usage(rel.schema, self.role_oid)
                self.must_own(rel)
        elif isinstance(stmt, A.CreateSeqStmt):
            self.create_in(stmt.sequence)
        elif isinstance(stmt, A.AlterSeqStmt):
            rv = stmt.sequence
            rel = self.cat.resolve(rv.schemaname, rv.relname, self.search_path)
            if rel is not None:
                self.must_own(rel)
        elif isinstance(stmt, A.CreateEnumStmt):
            names = [n.sval for n in stmt.typeName]
            schema = names[0] if len(names) == 2 else None
            self.create_in(A.RangeVar(schemaname=schema, relname=names[-1], relpersistence="p"))
        elif isinstance(stmt, A.AlterEnumStmt):
            self.own_type([n.sval for n in stmt.typeName])
        elif isinstance(stmt, A.RenameStmt) and stmt.renameType == ObjectType.OBJECT_TYPE:
            self.own_type([n.sval for n in stmt.object])
        elif isinstance(stmt, A.AlterOwnerStmt) and stmt.objectType in _TYPES:
            self.own_type([n.sval for n in stmt.object])
        elif isinstance(stmt, A.AlterDomainStmt):
            self.own_type([n.sval for n in stmt.typeName])
        elif isinstance(stmt, A.AlterOwnerStmt) and stmt.objectType == ObjectType.OBJECT_SCHEMA:
            schema = self.cat.schemas.get(stmt.object.sval)
            if schema is not None:
                self.must_own(schema)
        elif _names_function(stmt):  # ALTER FUNCTION, COMMENT ON FUNCTION
            obj = stmt.func if isinstance(stmt, A.AlterFunctionStmt) else stmt.object
            self.own_function([n.sval for n in obj.objname])
        elif isinstance(stmt, A.CreateTrigStmt):
            self.target(stmt.relation, "t")  # TRIGGER on the table
        elif isinstance(stmt, A.CreateFunctionStmt):
            names = [n.sval for n in stmt.funcname]
            schema = names[0] if len(names) == 2 else None
            self.create_in(A.RangeVar(schemaname=schema, relname=names[-1], relpersistence="p"))
            if stmt.replace:
                self.own_function(names)
        elif isinstance(stmt, A.CreateSchemaStmt):
            raise InsufficientPrivilege("permission denied for database headwater")
        elif isinstance(stmt, A.DropStmt):
            self.drop(stmt)
        elif isinstance(stmt, PASS_THROUGH):
            return
        else:
            self.reads(stmt)  # anything else may not read what the role may not

    def target(self, rv: A.RangeVar, letters: str) -> None:
        self.relation(rv.schemaname, rv.relname, letters, self.role_oid)

    def drop(self, stmt: A.DropStmt) -> None:
        if stmt.removeType == ObjectType.OBJECT_SCHEMA:
            for obj in stmt.objects:
                s = self.cat.schemas.get(obj.sval)
                if s is not None:
                    self.must_own(s)
            return
        if stmt.removeType in _TYPES:
            for tn in stmt.objects:
                self.own_type([n.sval for n in tn.names])
            return
        if stmt.removeType == ObjectType.OBJECT_TRIGGER:
            for obj in stmt.objects:
                names = [n.sval for n in obj][:-1]
                rel = self.cat.resolve(
                    names[0] if len(names) == 2 else None, names[-1], self.search_path
                )
                if rel is not None:
                    self.must_own(rel)
            return
        if stmt.removeType in (ObjectType.OBJECT_FUNCTION, ObjectType.OBJECT_PROCEDURE):
            for obj in stmt.objects:
                self.own_function([n.sval for n in obj.objname])
            return
        for obj in stmt.objects:
            if not isinstance(obj, tuple | list):
                continue
            names = [n.sval for n in obj if isinstance(n, A.String)]
            if not names:
                continue
            schema, name = (names[-2], names[-1]) if len(names) > 1 else (None, names[-1])
            rel = self.cat.resolve(schema, name, self.search_path)
            if rel is not None:
                self.schema_usage(rel.schema, self.role_oid)
                self.must_own(rel)


_TYPES = (ObjectType.OBJECT_TYPE, ObjectType.OBJECT_DOMAIN)


def _names_function(stmt: Any) -> bool:
    if isinstance(stmt, A.AlterFunctionStmt):
        return True
    kind = getattr(stmt, "objectType", None) or getattr(stmt, "renameType", None)
    if isinstance(stmt, A.CommentStmt):
        kind = stmt.objtype
    return isinstance(stmt, A.AlterOwnerStmt | A.RenameStmt | A.CommentStmt) and (
        kind == ObjectType.OBJECT_FUNCTION
    )


def _returning(stmt: Any) -> bool:
    rc = getattr(stmt, "returningClause", None)
    return rc is not None and bool(rc.exprs)


def _has_column_ref(node: Any) -> bool:
    if isinstance(node, tuple | list):
        return any(_has_column_ref(n) for n in node)
    if isinstance(node, A.ColumnRef):
        return True
    if isinstance(node, A.Node):
        return any(_has_column_ref(getattr(node, a)) for a in node)
    return False


PASS_THROUGH = ROLE_STMTS + (
    A.TransactionStmt,
    A.VariableSetStmt,
    A.VariableShowStmt,
    A.DiscardStmt,
    A.CopyStmt,  # checked by check_copy_in / as the SELECT it becomes
)


def check(session: Any, stmt: Any) -> None:
    """Raise 42501 unless the session's role may run `stmt`. Superusers: two lookups."""
    cat = session.catalog
    role = cat.roles.get(session.role_oid)
    if role is not None and role.superuser:
        return
    Checker(cat, session.role_oid, session.search_path()).statement(stmt)


def check_copy_in(session: Any, rv: A.RangeVar) -> None:
    cat = session.catalog
    if is_superuser(cat, session.role_oid):
        return
    Checker(cat, session.role_oid, session.search_path()).target(rv, "a")
