"""ALTER TYPE | DOMAIN | SCHEMA ... OWNER TO (a relation's: server/alter.py; a
function's: server/user_functions.py), and the role an OWNER TO names."""

from __future__ import annotations

import pglast.ast as A
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import replace
from headwater.server.results import Result
from headwater.server.session import Session, WriteTxn
from pglast.enums import ObjectType, RoleSpecType

from headwater.errors import InvalidSchemaName, UndefinedObject

KINDS = (ObjectType.OBJECT_TYPE, ObjectType.OBJECT_DOMAIN, ObjectType.OBJECT_SCHEMA)


def handles(stmt: object) -> bool:
    return isinstance(stmt, A.AlterOwnerStmt) and stmt.objectType in KINDS


def new_owner(s: Session, cat: Catalog, spec: A.RoleSpec) -> int:
    """The oid of the role OWNER TO names (CURRENT_USER, SESSION_USER: the session's)."""
    if spec.roletype == RoleSpecType.ROLESPEC_CSTRING:
        role = cat.role(spec.rolename)
        if role is None:
            raise UndefinedObject(f'role "{spec.rolename}" does not exist')
        return role.oid
    if spec.roletype == RoleSpecType.ROLESPEC_PUBLIC:
        raise UndefinedObject('role "public" does not exist')
    return s.role_oid


def execute(s: Session, w: WriteTxn, stmt: A.AlterOwnerStmt) -> Result:
    cat = w.catalog
    owner = new_owner(s, cat, stmt.newowner)
    if stmt.objectType == ObjectType.OBJECT_SCHEMA:
        schema = cat.schemas.get(stmt.object.sval)
        if schema is None:
            raise InvalidSchemaName(f'schema "{stmt.object.sval}" does not exist')
        cat.replace_schema(replace(schema, owner=owner))
        return Result("ALTER SCHEMA")
    names = [n.sval for n in stmt.object]
    schema, path = names[0] if len(names) == 2 else None, s.search_path()
    tag = "ALTER DOMAIN" if stmt.objectType == ObjectType.OBJECT_DOMAIN else "ALTER TYPE"
    if (t := cat.resolve_type(schema, names[-1], path)) is not None:
        cat.put_type(replace(t, owner=owner))
    elif (d := cat.resolve_domain(schema, names[-1], path)) is not None:
        cat.put_domain(replace(d, owner=owner))
    else:
        raise UndefinedObject(f'type "{".".join(names)}" does not exist')
    return Result(tag)
