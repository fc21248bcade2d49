"""Role and privilege statements: CREATE/ALTER/DROP ROLE, GRANT and REVOKE.

They run inside the writing transaction, like DDL, and change catalog roles and
ACLs. Who may run them follows PostgreSQL: CREATEROLE for roles, superuser for
superusers, ownership for GRANT on an object.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pglast.ast as A
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import (
    BOOTSTRAP_ROLE_OID,
    DefaultAcl,
    MaterializedView,
    Relation,
    Role,
    Sequence,
    Table,
    View,
)
from headwater.catalog.privileges import (
    FUNCTION_ALL,
    OBJTYPE_ALL,
    PRIV_LETTERS,
    SCHEMA_ALL,
    SEQUENCE_ALL,
    TABLE_ALL,
    function_acl,
    hardwired_acl,
    memberships,
    merge_acl,
    owner,
    owns,
)
from headwater.server import user_functions
from headwater.server.auth.passwords import encrypt_password
from pglast.enums import GrantTargetType, ObjectType, RoleSpecType, RoleStmtType

from headwater.errors import (
    DependentObjects,
    DuplicateObject,
    FeatureNotSupported,
    InsufficientPrivilege,
    InvalidSchemaName,
    SQLError,
    UndefinedObject,
)

ROLE_STMTS = (
    A.AlterDefaultPrivilegesStmt,
    A.CreateRoleStmt,
    A.AlterRoleStmt,
    A.DropRoleStmt,
    A.GrantStmt,
    A.GrantRoleStmt,
)


def _role_name(spec: A.RoleSpec, session: Any, catalog: Catalog) -> str:
    t = spec.roletype
    if t == RoleSpecType.ROLESPEC_CSTRING:
        return spec.rolename
    if t in (
        RoleSpecType.ROLESPEC_CURRENT_USER,
        RoleSpecType.ROLESPEC_SESSION_USER,
        RoleSpecType.ROLESPEC_CURRENT_ROLE,
    ):
        r = catalog.roles.get(session.role_oid)
        return r.name if r is not None else session.user
    raise SQLError('role "public" does not exist', "42704")


def _lookup_role(catalog: Catalog, name: str) -> Role:
    r = catalog.role(name)
    if r is None:
        raise UndefinedObject(f'role "{name}" does not exist')
    return r


def _parse_valid_until(value: str) -> str | None:
    v = value.strip()
    if v.lower() == "infinity":
        return None
    try:
        ts = datetime.fromisoformat(v.replace(" ", "T", 1) if " " in v[:11] else v)
    except ValueError:
        raise SQLError(
            f'invalid input syntax for type timestamp with time zone: "{value}"', "22007"
        ) from None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.isoformat()


_ROLE_FLAGS = {
    "canlogin": "login",
    "superuser": "superuser",
    "createrole": "createrole",
    "createdb": "createdb",
    "inherit": "inherit",
}
_IGNORED_OPTIONS = ("connectionlimit", "isreplication", "bypassrls", "sysid")


def _role_options(
    options: Any, role: str, encryption: str, notices: list[str]
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Changes to a role from CREATE/ALTER ROLE options; (fields, IN ROLE, ROLE members)."""
    fields: dict[str, Any] = {}
    in_roles: list[str] = []
    members: list[str] = []
    seen: set[str] = set()
    for opt in options or ():
        name = opt.defname
        if name in seen:
            raise SQLError("conflicting or redundant options", "42601")
        seen.add(name)
        if name in _ROLE_FLAGS:
            fields[_ROLE_FLAGS[name]] = bool(opt.arg.boolval)
        elif name == "password":
            if opt.arg is None:
                fields["password"] = None
            else:
                pw = _string_option(opt, "PASSWORD")
                if pw == "":
                    notices.append("empty string is not a valid password, clearing password")
                    fields["password"] = None
                else:
                    fields["password"] = encrypt_password(pw, role, encryption)
        elif name == "validUntil":
            fields["valid_until"] = _parse_valid_until(_string_option(opt, "VALID UNTIL"))
        elif name == "addroleto":
            in_roles = [r.rolename for r in opt.arg]
        elif name in ("rolemembers", "adminmembers"):
            members += [r.rolename for r in opt.arg]
        elif name in _IGNORED_OPTIONS:
            continue
        else:
            raise FeatureNotSupported(f"role option {name} is not supported")
    return fields, in_roles, members


def _string_option(opt: A.DefElem, what: str) -> str:
    if not isinstance(opt.arg, A.String):
        raise SQLError(f"{what} takes a string constant", "42601")
    return str(opt.arg.sval)


def _check_role_name(name: str) -> None:
    if name == "public" or name == "none":
        raise SQLError(f'role name "{name}" is reserved', "42939")
    if name.startswith("pg_"):
        raise SQLError(
            f'role name "{name}" is reserved',
            "42939",
            detail='Role names starting with "pg_" are reserved.',
        )


def _would_cycle(catalog: Catalog, member: Role, group: Role) -> bool:
    """Granting `group` to `member` makes a cycle if group is (or is in) member."""
    return member.oid in memberships(catalog, group.oid, inherit_only=False)


def _add_membership(catalog: Catalog, member: Role, group: Role, notices: list[str]) -> None:
    member = catalog.roles[member.oid]
    if group.oid in member.member_of:
        notices.append(f'role "{member.name}" is already a member of role "{group.name}"')
        return
    if member.oid == group.oid:
        raise SQLError(f'role "{group.name}" cannot be a member of itself', "0LP01")
    if _would_cycle(catalog, member, group):
        raise SQLError(f'role "{group.name}" is a member of role "{member.name}"', "0LP01")
    catalog.put_role(replace(member, member_of=member.member_of + (group.oid,)))


def execute(executor: Any, w: Any, stmt: Any) -> Any:
    """CREATE/ALTER/DROP ROLE, GRANT/REVOKE: catalog writes in the transaction `w`."""
    from headwater.server.results import Result

    s = executor.s
    cat: Catalog = w.catalog
    me = cat.roles.get(s.role_oid)
    superuser = me is not None and me.superuser
    createrole = superuser or (me is not None and me.createrole)
    notices: list[str] = []
    encryption = s.settings.values.get("password_encryption", "scram-sha-256")

    if isinstance(stmt, A.CreateRoleStmt):
        name = stmt.role
        if not createrole:
            raise InsufficientPrivilege("permission denied to create role")
        _check_role_name(name)
        if cat.role(name) is not None:
            raise DuplicateObject(f'role "{name}" already exists')
        fields, in_roles, members = _role_options(stmt.options, name, encryption, notices)
        if fields.get("superuser") and not superuser:
            raise InsufficientPrivilege("must be superuser to create superusers")
        login = stmt.stmt_type == RoleStmtType.ROLESTMT_USER
        role = Role(cat.allocate_oid(), name, **{"login": login, **fields})
        cat.put_role(role)
        for g in in_roles:
            _add_membership(cat, role, _lookup_role(cat, g), notices)
        for m in members:
            _add_membership(cat, _lookup_role(cat, m), role, notices)
        return Result("CREATE ROLE", notices=notices)

    if isinstance(stmt, A.AlterRoleStmt):
        name = _role_name(stmt.role, s, cat)
        role = _lookup_role(cat, name)
        fields, in_roles, members = _role_options(stmt.options, name, encryption, notices)
        if in_roles or members:
            raise FeatureNotSupported("use GRANT and REVOKE to change role memberships")
        if not superuser:
            if role.superuser or "superuser" in fields:
                raise InsufficientPrivilege(
                    "must be superuser to alter superuser roles or change superuser attribute"
                )
            own_password = role.oid == s.role_oid and set(fields) <= {"password"}
            if not createrole and not own_password:
                raise InsufficientPrivilege("permission denied")
        if role.oid == BOOTSTRAP_ROLE_OID and fields.get("superuser") is False:
            raise InsufficientPrivilege(
                "permission denied to alter role",
                detail="The bootstrap user must have the SUPERUSER attribute.",
            )
        cat.put_role(replace(role, **fields))
        return Result("ALTER ROLE", notices=notices)

    if isinstance(stmt, A.DropRoleStmt):
        if not createrole:
            raise InsufficientPrivilege("permission denied to drop role")
        for spec in stmt.roles:
            name = _role_name(spec, s, cat)
            role = cat.role(name)
            if role is None:
                if stmt.missing_ok:
                    notices.append(f'role "{name}" does not exist, skipping')
                    continue
                raise UndefinedObject(f'role "{name}" does not exist')
            if role.oid == s.role_oid:
                raise SQLError("current user cannot be dropped", "55006")
            if role.oid == BOOTSTRAP_ROLE_OID:
                raise DependentObjects(
                    f"cannot drop role {name} because it is required by the database system"
                )
            if role.superuser and not superuser:
                raise InsufficientPrivilege("must be superuser to drop superusers")
            _check_no_dependents(cat, role)
            for other in list(cat.roles.values()):
                if role.oid in other.member_of:
                    cat.put_role(
                        replace(other, member_of=tuple(m for m in other.member_of if m != role.oid))
                    )
            cat.drop_role(role)
        return Result("DROP ROLE", notices=notices)

    if isinstance(stmt, A.GrantRoleStmt):
        if stmt.opt:
            raise FeatureNotSupported("WITH ADMIN OPTION is not supported")
        for ap in stmt.granted_roles:
            group = _lookup_role(cat, ap.priv_name)
            if not createrole or (group.superuser and not superuser):
                raise InsufficientPrivilege(f'must have admin option on role "{group.name}"')
            for spec in stmt.grantee_roles:
                member = _lookup_role(cat, _role_name(spec, s, cat))
                if stmt.is_grant:
                    _add_membership(cat, member, group, notices)
                else:
                    member = cat.roles[member.oid]
                    if group.oid not in member.member_of:
                        notices.append(
                            f'role "{member.name}" has not been granted membership in role '
                            f'"{group.name}" by role "{me.name if me else s.user}"'
                        )
                        continue
                    cat.put_role(
                        replace(
                            member, member_of=tuple(m for m in member.member_of if m != group.oid)
                        )
                    )
        return Result("GRANT ROLE" if stmt.is_grant else "REVOKE ROLE", notices=notices)

    if isinstance(stmt, A.GrantStmt):
        return _grant(executor, cat, stmt, notices)
    if isinstance(stmt, A.AlterDefaultPrivilegesStmt):
        _default_privileges(s, cat, stmt)
        return Result("ALTER DEFAULT PRIVILEGES")
    raise FeatureNotSupported(f"{type(stmt).__name__} is not supported")


_DEFAULT_OBJTYPES = {
    ObjectType.OBJECT_TABLE: ("r", "table"),
    ObjectType.OBJECT_SEQUENCE: ("S", "sequence"),
    ObjectType.OBJECT_FUNCTION: ("f", "function"),
    ObjectType.OBJECT_PROCEDURE: ("f", "procedure"),
    ObjectType.OBJECT_ROUTINE: ("f", "routine"),
    ObjectType.OBJECT_TYPE: ("T", "type"),
    ObjectType.OBJECT_SCHEMA: ("n", "schema"),
}


def _default_privileges(s: Any, cat: Catalog, stmt: A.AlterDefaultPrivilegesStmt) -> None:
    """ALTER DEFAULT PRIVILEGES [FOR ROLE r, ...] [IN SCHEMA s, ...] GRANT | REVOKE ... ON
    TABLES | SEQUENCES | FUNCTIONS | ROUTINES | TYPES | SCHEMAS: the entries
    pg_default_acl keeps, which objects the roles create later start with (the global
    entry replaces the hard-wired default; a schema's adds to it)."""
    g = stmt.action
    if g.grant_option:
        raise FeatureNotSupported("WITH GRANT OPTION is not supported")
    opts = {o.defname: o.arg for o in stmt.options or ()}
    objtype, kind = _DEFAULT_OBJTYPES[g.objtype]
    schemas = [a.sval for a in opts.get("schemas", ())] or [""]
    if objtype == "n" and schemas != [""]:
        raise SQLError("cannot use IN SCHEMA clause when using GRANT/REVOKE ON SCHEMAS", "0LP01")
    for name in schemas:
        if name and name not in cat.schemas:
            raise InvalidSchemaName(f'schema "{name}" does not exist')
    me = cat.roles.get(s.role_oid)
    roles = [_lookup_role(cat, _role_name(r, s, cat)) for r in opts.get("roles", ())]
    roles = roles or ([me] if me is not None else [])
    for role in roles:
        if not (me is not None and me.superuser) and role.oid not in memberships(
            cat, s.role_oid, inherit_only=False
        ):
            raise InsufficientPrivilege("permission denied to change default privileges")
    letters = _privileges(g, OBJTYPE_ALL[objtype], kind)
    grantees = [
        0
        if spec.roletype == RoleSpecType.ROLESPEC_PUBLIC
        else _lookup_role(cat, _role_name(spec, s, cat)).oid
        for spec in g.grantees
    ]
    for role in roles:
        for schema in schemas:
            old = cat.default_acls.get((role.oid, schema, objtype))
            # the global entry starts from the hard-wired default; a schema's from none
            empty = hardwired_acl(objtype, role.oid) if not schema else ()
            acl = old.acl if old is not None else empty
            for grantee in grantees:
                acl = merge_acl(acl, grantee, letters, g.is_grant)
            if acl == empty:
                if old is not None:
                    cat.drop_default_acl(old)
                continue
            oid = old.oid if old is not None else cat.allocate_oid()
            cat.put_default_acl(DefaultAcl(oid, role.oid, schema, objtype, acl))


def _check_no_dependents(cat: Catalog, role: Role) -> None:
    """2BP01 naming what the role owns or holds privileges on, in the order the objects
    were made (PostgreSQL lists its dependencies so)."""
    lines: list[tuple[int, str]] = []
    for sch in cat.schemas.values():
        if owner(sch) == role.oid:
            lines.append((sch.oid, f"owner of schema {sch.name}"))
        if any(g == role.oid for g, _ in sch.acl):
            lines.append((sch.oid, f"privileges for schema {sch.name}"))
    for rel in cat.relations.values():
        if owner(rel) == role.oid and rel.kind != "index":
            shown = rel.qualified if rel.schema != "public" else rel.name
            lines.append((rel.oid, f"owner of {rel.kind} {shown}"))
        if any(g == role.oid for g, _ in rel.acl):
            lines.append((rel.oid, f"privileges for {rel.kind} {rel.name}"))
    kinds = {"r": "relations", "S": "sequences", "f": "functions", "T": "types", "n": "schemas"}
    for d in cat.default_acls.values():
        owner_role = cat.roles.get(d.role)
        what = f"default privileges on new {kinds[d.objtype]} belonging to role "
        what += f"{owner_role.name if owner_role else d.role}"
        what += f" in schema {d.schema}" if d.schema else ""
        if d.role == role.oid:
            lines.append((d.oid, f"owner of {what}"))
        elif any(g == role.oid for g, _ in d.acl):
            lines.append((d.oid, f"privileges for {what}"))
    if lines:
        raise DependentObjects(
            f'role "{role.name}" cannot be dropped because some objects depend on it',
            detail="\n".join(line for _, line in sorted(lines)),
        )


def check_set_role(s: Any, name: str) -> None:
    """SET ROLE name: the role exists and the session user may become it (a member of
    it, or a superuser)."""
    if name == "none":
        return
    cat = s.catalog
    role = cat.role(name)
    if role is None:
        raise SQLError(f'role "{name}" does not exist', "22023")
    me = cat.roles.get(s.session_role_oid)
    if me is None or me.superuser:
        return
    if role.oid not in memberships(cat, me.oid, inherit_only=False):
        raise InsufficientPrivilege(f'permission denied to set role "{name}"')


def _privileges(stmt: A.GrantStmt, all_letters: str, kind: str) -> str:
    if not stmt.privileges:
        return all_letters
    out = ""
    for ap in stmt.privileges:
        if ap.cols:
            raise FeatureNotSupported("column privileges are not supported")
        letter = PRIV_LETTERS.get(ap.priv_name)
        if letter is None or letter not in all_letters:
            raise SQLError(f"invalid privilege type {ap.priv_name.upper()} for {kind}", "0LP01")
        out += letter
    return out


def _grant(executor: Any, cat: Catalog, stmt: A.GrantStmt, notices: list[str]) -> Any:
    from headwater.server.results import Result

    s = executor.s
    tag = "GRANT" if stmt.is_grant else "REVOKE"
    if stmt.grant_option:
        raise FeatureNotSupported("WITH GRANT OPTION is not supported")
    grantees: list[int] = []
    for spec in stmt.grantees:
        if spec.roletype == RoleSpecType.ROLESPEC_PUBLIC:
            grantees.append(0)
        else:
            grantees.append(_lookup_role(cat, _role_name(spec, s, cat)).oid)

    if stmt.objtype == ObjectType.OBJECT_DATABASE:
        letters = _privileges(stmt, "CcT", "database") if stmt.privileges else "cT"
        for obj in stmt.objects:
            if obj.sval != "headwater":
                raise SQLError(f'database "{obj.sval}" does not exist', "3D000")
        if "C" in letters:
            raise FeatureNotSupported(
                "CREATE ON DATABASE is not supported: superusers create schemas"
            )
        return Result(tag)  # CONNECT and TEMPORARY: everyone has them

    if stmt.objtype == ObjectType.OBJECT_SCHEMA:
        letters = _privileges(stmt, SCHEMA_ALL, "schema")
        for obj in stmt.objects:
            schema = cat.schemas.get(obj.sval)
            if schema is None:
                raise InvalidSchemaName(f'schema "{obj.sval}" does not exist')
            if not owns(cat, s.role_oid, schema):
                raise InsufficientPrivilege(f"permission denied for schema {schema.name}")
            acl = schema.acl
            for g in grantees:
                acl = merge_acl(acl, g, letters, stmt.is_grant)
            cat.replace_schema(replace(schema, acl=acl))
        return Result(tag)

    if stmt.objtype == ObjectType.OBJECT_FUNCTION:  # EXECUTE (CREATE FUNCTION's)
        letters = _privileges(stmt, FUNCTION_ALL, "function")
        if stmt.targtype == GrantTargetType.ACL_TARGET_ALL_IN_SCHEMA:
            for obj in stmt.objects:
                if obj.sval not in cat.schemas:
                    raise InvalidSchemaName(f'schema "{obj.sval}" does not exist')
            fns = [f for obj in stmt.objects for f in user_functions.in_schema(cat, obj.sval)]
        else:
            fns = [user_functions.named(s, cat, obj) for obj in stmt.objects]
        for fn in fns:
            if not owns(cat, s.role_oid, fn):
                raise InsufficientPrivilege(f"permission denied for function {fn.name}")
            acl = function_acl(fn)
            for g in grantees:
                acl = merge_acl(acl, g, letters, stmt.is_grant)
            cat.put_function(replace(fn, acl=acl))
        return Result(tag)

    sequences = stmt.objtype == ObjectType.OBJECT_SEQUENCE
    if stmt.objtype != ObjectType.OBJECT_TABLE and not sequences:
        raise FeatureNotSupported(
            f"GRANT on {stmt.objtype.name.removeprefix('OBJECT_').lower()} is not supported"
        )
    kinds = Sequence if sequences else Table | View | MaterializedView
    rels: list[Relation] = []
    if stmt.targtype == GrantTargetType.ACL_TARGET_ALL_IN_SCHEMA:
        for obj in stmt.objects:
            if obj.sval not in cat.schemas:
                raise InvalidSchemaName(f'schema "{obj.sval}" does not exist')
            rels += [r for r in cat.relations.values() if r.schema == obj.sval]
        rels = [r for r in rels if isinstance(r, kinds)]
    elif stmt.targtype == GrantTargetType.ACL_TARGET_OBJECT:
        for rv in stmt.objects:
            rel = cat.get_relation(rv.schemaname, rv.relname, s.search_path())
            if sequences and not isinstance(rel, Sequence):
                raise SQLError(f'"{rel.name}" is not a sequence', "42809")
            rels.append(rel)
    else:
        raise FeatureNotSupported("ALTER DEFAULT PRIVILEGES is not supported")
    for rel in rels:
        if rel.kind == "index":
            raise SQLError(f'"{rel.name}" is an index', "42809")
        if not owns(cat, s.role_oid, rel):
            raise InsufficientPrivilege(f"permission denied for {rel.kind} {rel.name}")
        letters = _relation_privileges(stmt, rel)
        acl = rel.acl
        for g in grantees:
            acl = merge_acl(acl, g, letters, stmt.is_grant)
        cat.replace_relation(replace(rel, acl=acl))
    return Result(tag)


def _relation_privileges(stmt: A.GrantStmt, rel: Relation) -> str:
    """The letters GRANT gives `rel`; GRANT ... ON TABLE of a sequence gives those a
    sequence has (PostgreSQL warns of the others)."""
    if not isinstance(rel, Sequence):
        return _privileges(stmt, TABLE_ALL, "table")
    if stmt.objtype == ObjectType.OBJECT_SEQUENCE:
        return _privileges(stmt, SEQUENCE_ALL, "sequence")
    letters = _privileges(stmt, TABLE_ALL + "U", "table")
    return "".join(c for c in letters if c in SEQUENCE_ALL) or SEQUENCE_ALL
