"""The catalog: a copy-on-write snapshot of every schema and relation.

Readers take the current `Catalog` and keep it for a statement. A writing
transaction works on `copy()` and its changes (`changed`, `dropped`) are persisted
with the transaction's epoch; on commit the copy becomes current. Writers are
serialised (see storage/commit.py), so copies never need merging.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TypeVar

from headwater.catalog.objects import (
    BOOTSTRAP_ROLE_OID,
    Acl,
    CatalogObject,
    DefaultAcl,
    Domain,
    Extension,
    Function,
    MaterializedView,
    Relation,
    Role,
    Schema,
    Sink,
    Table,
    UserType,
    View,
)
from headwater.catalog.privileges import OBJTYPE_OF_KIND, initial_acl
from headwater.catalog.types import ColumnType, PgType

from headwater.errors import (
    DuplicateSchema,
    DuplicateTable,
    InvalidSchemaName,
    UndefinedTable,
)

T = TypeVar("T")
FIRST_USER_OID = 16384
SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "headwater_catalog")
PUBLIC_SCHEMA_OID = 2200
BOOTSTRAP_ROLE = "headwater"
TEMP_SCHEMA_PREFIX = "pg_temp_"  # a session's schema of temporary relations (pg_temp_N)


def is_temp_schema(name: str) -> bool:
    return name.startswith(TEMP_SCHEMA_PREFIX)


def bootstrap_role() -> Role:
    return Role(
        BOOTSTRAP_ROLE_OID,
        BOOTSTRAP_ROLE,
        login=True,
        superuser=True,
        createrole=True,
        createdb=True,
    )


def _on_path(
    objects: dict[tuple[str, str], T], schema: str | None, name: str, path: tuple[str, ...]
) -> T | None:
    """The object `name` in `schema`, or in the first schema of `path` that has one."""
    for s in (schema,) if schema is not None else path:
        found = objects.get((s, name))
        if found is not None:
            return found
    return None


class Catalog:
    def __init__(self) -> None:
        # PostgreSQL 15: everyone may use schema public; only its owner creates in it.
        public = Schema(PUBLIC_SCHEMA_OID, "public", acl=((0, "U"),))
        self.schemas: dict[str, Schema] = {"public": public}
        self.relations: dict[tuple[str, str], Relation] = {}
        self.roles: dict[int, Role] = {BOOTSTRAP_ROLE_OID: bootstrap_role()}
        self.sinks: dict[tuple[str, str], Sink] = {}  # CREATE SINK (not relations)
        self.types: dict[tuple[str, str], UserType] = {}  # CREATE TYPE ... AS ENUM
        self.domains: dict[tuple[str, str], Domain] = {}  # CREATE DOMAIN
        self.extensions: dict[str, Extension] = {}  # CREATE EXTENSION, by name
        # ALTER DEFAULT PRIVILEGES: by (role, schema or '', objtype)
        self.default_acls: dict[tuple[int, str, str], DefaultAcl] = {}
        # CREATE FUNCTION: the overloads of each (schema, name). Replaced, never changed in
        # place: the dict's identity tells a statement's inlined calls are current.
        self.functions: dict[tuple[str, str], tuple[Function, ...]] = {}
        # The role a writing transaction runs as: owner of the objects it creates.
        self.creator = 0
        self.next_oid = FIRST_USER_OID
        # What this copy changed since it was taken: oid -> object (None if dropped).
        self.changes: dict[int, CatalogObject | None] = {}
        self._by_oid: dict[int, Relation] | None = None  # built on use, reset on change

    def copy(self) -> Catalog:
        c = Catalog.__new__(Catalog)
        c.schemas = dict(self.schemas)
        c.relations = dict(self.relations)
        c.roles = dict(self.roles)
        c.sinks = dict(self.sinks)
        c.types = dict(self.types)
        c.domains = dict(self.domains)
        c.extensions = dict(self.extensions)
        c.default_acls = dict(self.default_acls)
        c.functions = self.functions
        c.creator = 0
        c.next_oid = self.next_oid
        c.changes = {}
        c._by_oid = self._by_oid  # the same relations until the copy changes them
        return c

    # -- lookup -------------------------------------------------------------------
    def resolve(
        self, schema: str | None, name: str, search_path: tuple[str, ...]
    ) -> Relation | None:
        if schema is not None:
            return self.relations.get((schema, name))
        for s in search_path:
            rel = self.relations.get((s, name))
            if rel is not None:
                return rel
        return None

    def get_relation(self, schema: str | None, name: str, search_path: tuple[str, ...]) -> Relation:
        rel = self.resolve(schema, name, search_path)
        if rel is None:
            if schema is not None and schema not in self.schemas:
                raise InvalidSchemaName(f'schema "{schema}" does not exist')
            shown = f"{schema}.{name}" if schema else name
            raise UndefinedTable(f'relation "{shown}" does not exist')
        return rel

    def creation_schema(self, schema: str | None, search_path: tuple[str, ...]) -> str:
        if schema is not None:
            if schema not in self.schemas:
                raise InvalidSchemaName(f'schema "{schema}" does not exist')
            return schema
        for s in search_path:
            if s in self.schemas and not is_temp_schema(s):  # TEMP says so explicitly
                return s
        raise InvalidSchemaName("no schema has been selected to create in")

    def tables(self) -> Iterator[Table]:
        return (r for r in self.relations.values() if isinstance(r, Table))

    def views(self) -> Iterator[View]:
        return (r for r in self.relations.values() if isinstance(r, View))

    def matviews(self) -> Iterator[MaterializedView]:
        return (r for r in self.relations.values() if isinstance(r, MaterializedView))

    def by_oid(self, oid: int) -> Relation | None:
        """The relation with this oid (an index over `relations`, built once per state
        of the catalog: a write asks once per epoch and table, issue 16)."""
        index = self._by_oid
        if index is None:
            index = {}
            for r in self.relations.values():
                index.setdefault(r.oid, r)  # the first, as a scan would find
            self._by_oid = index
        return index.get(oid)

    def role(self, name: str) -> Role | None:
        return next((r for r in self.roles.values() if r.name == name), None)

    # -- change -------------------------------------------------------------------
    def allocate_oid(self) -> int:
        oid = self.next_oid
        self.next_oid += 1
        return oid

    def add_schema(self, name: str) -> Schema:
        if name in self.schemas or name in SYSTEM_SCHEMAS:
            raise DuplicateSchema(f'schema "{name}" already exists')
        owner = self.creator
        s = Schema(self.allocate_oid(), name, owner=owner, acl=self.initial_acl("n", owner, ""))
        self.schemas[name] = s
        self.changes[s.oid] = s
        return s

    def drop_schema(self, name: str) -> Schema:
        s = self.schemas.pop(name)
        self.changes[s.oid] = None
        for d in [d for d in self.default_acls.values() if d.schema == name]:
            self.drop_default_acl(d)  # (its default privileges go with it)
        return s

    def add_relation(self, rel: Relation) -> None:
        key = (rel.schema, rel.name)
        if key in self.relations:
            raise DuplicateTable(f'relation "{rel.name}" already exists')
        if not rel.owner and self.creator:
            rel = replace(rel, owner=self.creator)
        objtype = OBJTYPE_OF_KIND.get(rel.kind)
        if not rel.acl and objtype is not None and self.default_acls:
            rel = replace(rel, acl=self.initial_acl(objtype, rel.owner, rel.schema))
        self._by_oid = None
        self.relations[key] = rel
        self.changes[rel.oid] = rel

    def replace_relation(self, rel: Relation) -> None:
        old = self.relations.get((rel.schema, rel.name))
        if old is not None and not rel.owner and not rel.acl:  # keeps owner and grants
            rel = replace(rel, owner=old.owner, acl=old.acl)
        self._by_oid = None
        self.relations[(rel.schema, rel.name)] = rel
        self.changes[rel.oid] = rel

    def drop_relation(self, rel: Relation) -> None:
        self._by_oid = None
        del self.relations[(rel.schema, rel.name)]
        self.changes[rel.oid] = None

    def replace_schema(self, schema: Schema) -> None:
        self.schemas[schema.name] = schema
        self.changes[schema.oid] = schema

    def put_role(self, role: Role) -> None:
        self.roles[role.oid] = role
        self.changes[role.oid] = role

    def put_sink(self, sink: Sink) -> None:
        if not sink.owner and self.creator:
            sink = replace(sink, owner=self.creator)
        self.sinks[(sink.schema, sink.name)] = sink
        self.changes[sink.oid] = sink

    def drop_sink(self, sink: Sink) -> None:
        del self.sinks[(sink.schema, sink.name)]
        self.changes[sink.oid] = None

    def resolve_sink(
        self, schema: str | None, name: str, search_path: tuple[str, ...]
    ) -> Sink | None:
        return _on_path(self.sinks, schema, name, search_path)

    def resolve_type(
        self, schema: str | None, name: str, search_path: tuple[str, ...]
    ) -> UserType | None:
        return _on_path(self.types, schema, name, search_path)

    def resolve_domain(
        self, schema: str | None, name: str, search_path: tuple[str, ...]
    ) -> Domain | None:
        return _on_path(self.domains, schema, name, search_path)

    def type_named(self, names: list[str], search_path: tuple[str, ...]) -> PgType | None:
        """The user type a (qualified) type name stands for, if any: an enum, or a
        domain's base type (what a cast to the domain computes)."""
        if len(names) > 2:
            return None
        schema = names[0] if len(names) == 2 else None
        t = self.resolve_type(schema, names[-1], search_path)
        if t is None and (d := self.resolve_domain(schema, names[-1], search_path)):
            return d.base.pg
        return t.pg if t is not None else None

    def domain_column_type(
        self, names: list[str], search_path: tuple[str, ...]
    ) -> ColumnType | None:
        """The type of a column declared of the domain `names` names, if it is one."""
        if len(names) > 2:
            return None
        d = self.resolve_domain(names[0] if len(names) == 2 else None, names[-1], search_path)
        return replace(d.base, domain=d.pg) if d is not None else None

    def put_domain(self, d: Domain) -> None:
        if not d.owner and self.creator:
            d = replace(d, owner=self.creator)
        if (d.schema, d.name) not in self.domains and not d.acl:
            d = replace(d, acl=self.initial_acl("T", d.owner, d.schema))
        self.domains[(d.schema, d.name)] = d
        self.changes[d.oid] = d

    def drop_domain(self, d: Domain) -> None:
        del self.domains[(d.schema, d.name)]
        self.changes[d.oid] = None

    def put_type(self, t: UserType) -> None:
        if not t.owner and self.creator:
            t = replace(t, owner=self.creator)
        if (t.schema, t.name) not in self.types and not t.acl:
            t = replace(t, acl=self.initial_acl("T", t.owner, t.schema))
        self.types[(t.schema, t.name)] = t
        self.changes[t.oid] = t

    def drop_type(self, t: UserType) -> None:
        del self.types[(t.schema, t.name)]
        self.changes[t.oid] = None

    def put_extension(self, ext: Extension) -> None:
        if not ext.owner and self.creator:
            ext = replace(ext, owner=self.creator)
        self.extensions[ext.name] = ext
        self.changes[ext.oid] = ext

    def drop_extension(self, ext: Extension) -> None:
        del self.extensions[ext.name]
        self.changes[ext.oid] = None

    def find_functions(
        self, schema: str | None, name: str, search_path: tuple[str, ...]
    ) -> tuple[Function, ...]:
        """The overloads of function `name` in `schema`, or in the first schema of the
        path that has one."""
        return _on_path(self.functions, schema, name, search_path) or ()

    def function(self, oid: int) -> Function | None:
        """The function with `oid` (a trigger names its function so)."""
        return next((f for fs in self.functions.values() for f in fs if f.oid == oid), None)

    def put_function(self, fn: Function) -> None:
        """Add `fn`, or replace the overload with its oid (CREATE OR REPLACE)."""
        if not fn.owner and self.creator:
            fn = replace(fn, owner=self.creator)
        key = (fn.schema, fn.name)
        others = tuple(f for f in self.functions.get(key, ()) if f.oid != fn.oid)
        if len(others) == len(self.functions.get(key, ())) and not fn.acl:  # a new one
            fn = replace(fn, acl=self.initial_acl("f", fn.owner, fn.schema))
        self.functions = {**self.functions, key: (*others, fn)}
        self.changes[fn.oid] = fn

    def drop_function(self, fn: Function) -> None:
        key = (fn.schema, fn.name)
        rest = tuple(f for f in self.functions[key] if f.oid != fn.oid)
        self.functions = {k: v for k, v in self.functions.items() if k != key}
        if rest:
            self.functions[key] = rest
        self.changes[fn.oid] = None

    def initial_acl(self, objtype: str, owner: int, schema: str) -> Acl:
        """The ACL ALTER DEFAULT PRIVILEGES gives a new object (): no GRANT)."""
        if not self.default_acls:
            return ()
        owner = owner or BOOTSTRAP_ROLE_OID
        everywhere = self.default_acls.get((owner, "", objtype))
        here = self.default_acls.get((owner, schema, objtype)) if schema else None
        if everywhere is None and here is None:
            return ()
        return initial_acl(
            everywhere.acl if everywhere else None, here.acl if here else None, objtype, owner
        )

    def put_default_acl(self, d: DefaultAcl) -> None:
        self.default_acls[(d.role, d.schema, d.objtype)] = d
        self.changes[d.oid] = d

    def drop_default_acl(self, d: DefaultAcl) -> None:
        del self.default_acls[(d.role, d.schema, d.objtype)]
        self.changes[d.oid] = None

    def drop_role(self, role: Role) -> None:
        del self.roles[role.oid]
        self.changes[role.oid] = None

    # -- persistence ----------------------------------------------------------------
    def load(self, objects: list[CatalogObject], next_oid: int) -> None:
        self._by_oid = None
        for obj in objects:
            if isinstance(obj, Schema):
                self.schemas[obj.name] = obj
            elif isinstance(obj, Role):
                self.roles[obj.oid] = obj
            elif isinstance(obj, Sink):
                self.sinks[(obj.schema, obj.name)] = obj
            elif isinstance(obj, UserType):
                self.types[(obj.schema, obj.name)] = obj
            elif isinstance(obj, Domain):
                self.domains[(obj.schema, obj.name)] = obj
            elif isinstance(obj, Extension):
                self.extensions[obj.name] = obj
            elif isinstance(obj, DefaultAcl):
                self.default_acls[(obj.role, obj.schema, obj.objtype)] = obj
            elif isinstance(obj, Function):
                key = (obj.schema, obj.name)
                self.functions = {**self.functions, key: (*self.functions.get(key, ()), obj)}
            else:
                self.relations[(obj.schema, obj.name)] = obj
        self.next_oid = max(next_oid, FIRST_USER_OID)
