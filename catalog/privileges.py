"""The privilege model: which role may do what to which relation or schema.

PostgreSQL's ACLs as the catalog stores them (catalog/objects.py: `acl` is a tuple of
(grantee oid, privilege letters), grantee 0 being PUBLIC), role memberships, and
ownership. Pure functions over the catalog: the server's statement checks, the GRANT
statements and the pg_catalog emulation (relacl, has_table_privilege) all use them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.catalog.objects import BOOTSTRAP_ROLE_OID, Acl, Relation, Schema

if TYPE_CHECKING:
    from headwater.catalog.catalog import Catalog

PRIV_LETTERS = {
    "select": "r",
    "insert": "a",
    "update": "w",
    "delete": "d",
    "truncate": "D",
    "references": "x",
    "trigger": "t",
    "usage": "U",
    "create": "C",
    "execute": "X",
}
TABLE_ALL = "arwdDxt"  # every privilege a relation can grant, in aclitem order
SEQUENCE_ALL = "rwU"  # a sequence's: SELECT (currval), UPDATE (nextval, setval), USAGE
SCHEMA_ALL = "UC"
FUNCTION_ALL = "X"


def function_acl(fn: Any) -> Acl:
    """A function's ACL: until a GRANT or REVOKE, PostgreSQL's default (NULL proacl):
    its owner and PUBLIC may EXECUTE it."""
    return fn.acl or tuple(sorted({0: "X", owner(fn): "X"}.items()))


# every privilege of an object kind (pg_default_acl's objtype), and PUBLIC's before any
# GRANT (PostgreSQL's acldefault)
OBJTYPE_ALL = {"r": TABLE_ALL, "S": SEQUENCE_ALL, "f": FUNCTION_ALL, "T": "U", "n": SCHEMA_ALL}
_PUBLIC_DEFAULT = {"f": "X", "T": "U"}
OBJTYPE_OF_KIND = {"table": "r", "view": "r", "materialized view": "r", "sequence": "S"}


def hardwired_acl(objtype: str, owner: int) -> Acl:
    """The ACL an object of `objtype` owned by `owner` has before any GRANT."""
    entries = {owner: OBJTYPE_ALL[objtype]}
    if objtype in _PUBLIC_DEFAULT:
        entries[0] = _PUBLIC_DEFAULT[objtype]
    return tuple(sorted(entries.items()))


def initial_acl(everywhere: Acl | None, in_schema: Acl | None, objtype: str, owner: int) -> Acl:
    """A new object's ACL under ALTER DEFAULT PRIVILEGES: the owner's global entry (else
    the hard-wired default) with its schema's entry added, as PostgreSQL's
    get_user_default_acl; () where that is the hard-wired default."""
    hard = hardwired_acl(objtype, owner)
    acl = everywhere if everywhere is not None else hard
    for grantee, letters in in_schema or ():
        acl = merge_acl(acl, grantee, letters, True)
    return () if acl == hard else acl


def memberships(catalog: Catalog, oid: int, inherit_only: bool = True) -> set[int]:
    """The role, every role it is a member of (through INHERIT roles), and PUBLIC (0)."""
    out = {0, oid}
    stack = [oid]
    roles = catalog.roles
    while stack:
        r = roles.get(stack.pop())
        if r is None or (inherit_only and not r.inherit):
            continue
        for m in r.member_of:
            if m not in out:
                out.add(m)
                stack.append(m)
    return out


def owner(obj: Relation | Schema) -> int:
    """The owning role; objects from before ownership was recorded belong to the bootstrap role."""
    return obj.owner or BOOTSTRAP_ROLE_OID


def has_priv(obj: Relation | Schema, letter: str, roles: set[int]) -> bool:
    if owner(obj) in roles:
        return True
    return any(g in roles and letter in p for g, p in obj.acl)


def is_superuser(catalog: Catalog, oid: int) -> bool:
    r = catalog.roles.get(oid)
    return r is not None and r.superuser


def owns(catalog: Catalog, role_oid: int, obj: Relation | Schema) -> bool:
    """May the role act as the owner (GRANT, DROP): a superuser or a member of the owner."""
    return is_superuser(catalog, role_oid) or owner(obj) in memberships(catalog, role_oid)


def has_privilege(catalog: Catalog, role_oid: int, obj: Relation | Schema, privs: str) -> bool:
    """has_table_privilege / has_schema_privilege: privs are names ('SELECT, INSERT')
    or letters; true if the role holds any of them (PostgreSQL's semantics)."""
    if is_superuser(catalog, role_oid):
        return True
    letters = ""
    for p in privs.split(","):
        p = p.strip().lower().removesuffix(" with grant option")
        letters += PRIV_LETTERS.get(p, p if len(p) == 1 else "")
    roles = memberships(catalog, role_oid)
    return any(has_priv(obj, letter, roles) for letter in letters)


def acl_items(catalog: Catalog, obj: Relation | Schema) -> list[str] | None:
    """PostgreSQL's aclitem[] text for relacl / nspacl (None: the default, NULL)."""
    if not obj.acl:
        return None

    def name(oid: int) -> str:
        r = catalog.roles.get(oid)
        return "" if oid == 0 else (r.name if r is not None else str(oid))

    owner_name = name(owner(obj))
    order = TABLE_ALL if isinstance(obj, Relation) else SCHEMA_ALL
    if getattr(obj, "kind", "") == "sequence":
        order = SEQUENCE_ALL
    if getattr(obj, "kind", "") == "function":  # (its ACL holds its owner: function_acl)
        order = FUNCTION_ALL
    items = [f"{owner_name}={order}/{owner_name}"]
    for grantee, letters in obj.acl:
        if grantee == owner(obj):
            continue
        shown = "".join(c for c in order if c in letters)
        items.append(f"{name(grantee)}={shown}/{owner_name}")
    return items


def merge_acl(acl: Acl, grantee: int, letters: str, grant: bool) -> Acl:
    """The ACL after GRANT (grant=True) or REVOKE of `letters` to one grantee."""
    entries = dict(acl)
    have = entries.get(grantee, "")
    if grant:
        new = have + "".join(c for c in letters if c not in have)
    else:
        new = "".join(c for c in have if c not in letters)
    if new:
        entries[grantee] = new
    else:
        entries.pop(grantee, None)
    return tuple(sorted(entries.items()))
