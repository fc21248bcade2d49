"""Rewrite what PostgreSQL clients send about the catalog into SQL DuckDB runs.

psql, pgjdbc and SQLAlchemy query pg_catalog with PostgreSQL's functions, casts and
operators: `'t'::regclass`, `c.oid::regclass::text`, `pg_get_indexdef(oid, 0, true)`,
`pg_table_is_visible(c.oid)`, `OPERATOR(pg_catalog.~)`, `COLLATE pg_catalog.default`,
`current_user`, `information_schema._pg_expandarray(...)`, ... This pass turns them
into plain expressions, or into scalar subqueries over the system relations of
catalog/system.py (the internal `pg_catalog._hw_*` relations carry what the
functions need). The Binder then resolves those relations like any other.

The translation is `RULES`, a tuple of small rules (one node -> its replacement),
folded over one copy of the tree by `translate`, before binding; the client's parse
tree is not changed. It is idempotent: what it produces is never rewritten again.
Values never become SQL text: arguments stay tree nodes, and constants the rules
introduce are A_Const nodes that the deparser quotes. The same translation serves
plain reads and the expressions of views (planner/ir.py's pg_semantics).

    >>> translate_sql("SELECT c.oid::regclass::text, version() FROM pg_class c")[:40]
    'SELECT COALESCE((SELECT min(_hw_v.hw_dis'
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

import pglast.ast as A
from headwater.catalog.pg import functions as function_rows
from headwater.catalog.pgtypes import (
    QUOTIENT_PRECISION,
    QUOTIENT_SCALE,
    SPREAD_PRECISION,
    normalize_jsonb,
    numeric_div_scale,
    text_decoder,
)
from headwater.catalog.pgtypes.arrays import array_in, parse_array_literal
from headwater.catalog.types import enum_duckdb, resolve_type_name, type_named
from headwater.catalog.version import SERVER_VERSION_TEXT
from headwater.planner import constant_lists, functions, syntax
from headwater.planner.functions import text_casts
from headwater.planner.functions.literals import DATE_ORDER, ISO_TIMESTAMP
from headwater.planner.functions.nodes import COLUMN_TYPES, column_type, user_type
from pglast import parse_sql
from pglast.enums import (
    A_Expr_Kind,
    BoolExprType,
    CoercionForm,
    NullTestType,
    SortByDir,
    SortByNulls,
    SQLValueFunctionOp,
)

from headwater.errors import SQLError

SYSTEM_QUALIFIERS = ("pg_catalog", "information_schema")

_REG_TYPES = ("regclass", "regtype", "regnamespace", "regrole", "regproc", "regprocedure")
_TEXT_TYPES = ("text", "varchar", "name", "bpchar", "char")
_NUMBER_TYPES = ("float4", "float8", "real", "float", "numeric", "decimal")

# Casts to PostgreSQL-only types: the DuckDB type that stores their values.
_TYPE_MAP: dict[str, tuple[str, bool]] = {  # name -> (DuckDB type, list of it)
    "oid": ("uinteger", False),
    "varbit": ("bit", False),  # bit varying: DuckDB's BIT is any length
    "xid": ("int8", False),
    "xid8": ("int8", False),
    "cid": ("int8", False),
    "regoper": ("int8", False),
    "regoperator": ("int8", False),
    "regcollation": ("int8", False),
    "regconfig": ("int8", False),
    "name": ("text", False),
    "char": ("text", False),  # "char", the one-byte type
    "pg_node_tree": ("text", False),
    "aclitem": ("text", False),
    "int2vector": ("int2", True),
    "oidvector": ("ubigint", True),
    "sql_identifier": ("text", False),
    "character_data": ("text", False),
    "yes_or_no": ("text", False),
    "cardinal_number": ("int4", False),
}

_NULL_TEXT_FUNCS = frozenset(
    {
        "shobj_description",
        "pg_get_partkeydef",
        "pg_get_statisticsobjdef_columns",
        "pg_get_ruledef",
        "pg_get_constraintdef_ext",
        "inet_server_addr",
        "inet_client_addr",
    }
)
# the texts of a function catalog/pg/functions.py gives _hw_defs, by their hw_n
_FUNCTION_TEXTS = {
    "pg_get_functiondef": 0,
    "pg_get_function_result": function_rows.RESULT,
    "pg_get_function_arguments": function_rows.ARGUMENTS,
    "pg_get_function_identity_arguments": function_rows.IDENTITY,
}
_TRUE_FUNCS = frozenset(
    {
        "has_database_privilege",
        "has_function_privilege",
        "has_sequence_privilege",
        "has_type_privilege",
        "has_tablespace_privilege",
        "has_language_privilege",
        "has_foreign_data_wrapper_privilege",
        "has_server_privilege",
        "pg_has_role",
    }
)
_PRIV_FUNCS = frozenset(
    {
        "has_table_privilege",
        "has_sequence_privilege",
        "has_schema_privilege",
        "has_column_privilege",
        "has_any_column_privilege",
    }
)
_FALSE_FUNCS = frozenset(
    {"pg_relation_is_publishable", "pg_is_in_recovery", "pg_is_other_temp_schema"}
)
_VISIBLE_FUNCS = frozenset(
    {
        "pg_type_is_visible",
        "pg_function_is_visible",
        "pg_operator_is_visible",
        "pg_opclass_is_visible",
        "pg_opfamily_is_visible",
        "pg_collation_is_visible",
        "pg_conversion_is_visible",
        "pg_ts_config_is_visible",
    }
)
_SIZE_FUNCS = frozenset(
    {"pg_relation_size", "pg_total_relation_size", "pg_table_size", "pg_indexes_size"}
)
_RENAMED = {
    "btrim": "trim",
    "every": "bool_and",
    "json_build_object": "json_object",
    "jsonb_build_object": "json_object",
}

_ARRAY_LITERALS: ContextVar[bool] = ContextVar("_ARRAY_LITERALS", default=True)
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_COMPARISONS = frozenset({"=", "<>", "!=", "<", ">", "<=", ">=", "@>", "<@", "&&"})
# Functions giving an array: a '{...}' constant compared with one is an array too.
_ARRAY_FUNCS = frozenset(
    {
        "array_agg",
        "array_append",
        "array_prepend",
        "array_cat",
        "array_remove",
        "array_replace",
        "array_fill",
        "string_to_array",
        "regexp_split_to_array",
        "regexp_match",
    }
)
# Set-returning functions DuckDB evaluates as a scalar returning a list: in a target
# list, PostgreSQL gives one row per element (DuckDB's unnest() of the list does).
_LIST_SRFS = frozenset({"generate_series"})

# -- templates ----------
# SQL with placeholders __hwarg0, __hwarg1 ... for the call's arguments. The internal
# relations' columns start with hw_ and their aliases with _hw_, so that an argument's
# unqualified column never binds inside the template's subquery.
_SESSION = "(SELECT _hw_s.hw_{col} FROM pg_catalog._hw_session _hw_s)"
_RELNAME_OID = (
    "(SELECT min(_hw_c.hw_oid) FROM pg_catalog._hw_relnames _hw_c "
    "WHERE _hw_c.hw_name = __hwarg0 OR (_hw_c.hw_folds AND _hw_c.hw_name = lower(__hwarg0)))"
)
_RELVIS_DISPLAY = (
    "coalesce((SELECT min(_hw_v.hw_display) FROM pg_catalog._hw_relvis _hw_v "
    "WHERE _hw_v.hw_oid = __hwarg0), CAST(__hwarg0 AS text))"
)
_TYPNAME_OID = (
    "(SELECT min(_hw_t.hw_oid) FROM pg_catalog._hw_typnames _hw_t "
    "WHERE _hw_t.hw_name = __hwarg0 OR _hw_t.hw_name = lower(__hwarg0))"
)
_NAME_OID = (
    "(SELECT min(_hw_o.hw_oid) FROM pg_catalog._hw_objnames _hw_o "
    "WHERE _hw_o.hw_kind = '{kind}' AND _hw_o.hw_name = __hwarg0)"
)
_OID_NAME = (
    "coalesce((SELECT min(_hw_o.hw_name) FROM pg_catalog._hw_objnames _hw_o "
    "WHERE _hw_o.hw_kind = '{kind}' AND _hw_o.hw_oid = __hwarg0), CAST(__hwarg0 AS text))"
)
_NSPNAME_OID = _NAME_OID.format(kind="namespace")
_NSP_DISPLAY = _OID_NAME.format(kind="namespace")
_ROLNAME_OID = _NAME_OID.format(kind="role")
_ROLE_DISPLAY = _OID_NAME.format(kind="role")
_PROC_DISPLAY = _OID_NAME.format(kind="proc")
_USERBYID = (
    "coalesce((SELECT min(_hw_o.hw_name) FROM pg_catalog._hw_objnames _hw_o "
    "WHERE _hw_o.hw_kind = 'role' AND _hw_o.hw_oid = __hwarg0), "
    "'unknown (OID=' || CAST(__hwarg0 AS text) || ')')"
)
_DEF = (
    "(SELECT min(_hw_d.hw_def) FROM pg_catalog._hw_defs _hw_d "
    "WHERE _hw_d.hw_oid = __hwarg0 AND _hw_d.hw_n = __hwarg1)"
)
# COMMENT ON: obj_description(oid[, catalog]) and col_description(table, column)
_DESCRIPTION = (
    "(SELECT min(_hw_dsc.description) FROM pg_catalog.pg_description _hw_dsc "
    "WHERE _hw_dsc.objoid = __hwarg0 AND _hw_dsc.objsubid = __hwarg1)"
)
_DESCRIPTION_IN = (
    "(SELECT min(_hw_dsc.description) FROM pg_catalog.pg_description _hw_dsc "
    "WHERE _hw_dsc.objoid = __hwarg0 AND _hw_dsc.objsubid = 0 AND _hw_dsc.classoid = "
    "CASE CAST(__hwarg1 AS text) WHEN 'pg_class' THEN 1259 WHEN 'pg_namespace' THEN 2615 "
    "WHEN 'pg_type' THEN 1247 WHEN 'pg_proc' THEN 1255 ELSE 0 END)"
)
_TABLE_VISIBLE = (
    "(SELECT bool_or(_hw_v.hw_visible) FROM pg_catalog._hw_relvis _hw_v "
    "WHERE _hw_v.hw_oid = __hwarg0)"
)
_SETTING = (
    "(SELECT min(_hw_g.hw_setting) FROM pg_catalog._hw_settings _hw_g "
    "WHERE _hw_g.hw_name = lower(__hwarg0))"
)
# current_setting(name[, missing_ok]): 42704 for a name no setting has
_SETTING_OR_ERROR = (
    f"CASE WHEN __hwarg0 IS NULL THEN NULL ELSE coalesce({_SETTING}, CASE WHEN __hwarg1 "
    "THEN NULL ELSE error('[SQLSTATE 42704] unrecognized configuration parameter \"' || "
    "__hwarg0 || '\"') END) END"
)
_FORMAT_TYPE = """CASE WHEN __hwarg0 IS NULL THEN NULL WHEN __hwarg0 = 0 THEN '-' ELSE coalesce(
  (SELECT CASE _hw_f.hw_kind
     WHEN 'varchar' THEN CASE WHEN __hwarg1 >= 4
       THEN 'character varying(' || CAST(__hwarg1 - 4 AS text) || ')'
       ELSE 'character varying' END
     WHEN 'bpchar' THEN CASE WHEN __hwarg1 >= 4
       THEN 'character(' || CAST(__hwarg1 - 4 AS text) || ')'
       WHEN __hwarg1 = -1 THEN 'bpchar' ELSE 'character' END
     WHEN 'numeric' THEN CASE WHEN __hwarg1 >= 4
       THEN 'numeric(' || CAST((__hwarg1 - 4) >> 16 AS text) || ','
            || CAST((__hwarg1 - 4) & 65535 AS text) || ')'
       ELSE 'numeric' END
     ELSE _hw_f.hw_base END || _hw_f.hw_suffix
   FROM pg_catalog._hw_typfmt _hw_f WHERE _hw_f.hw_oid = __hwarg0), '???') END"""
_HAS_PRIV = """(SELECT CASE WHEN count(*) = 0 THEN true ELSE coalesce(bool_or(
    _hw_p.hw_priv <> '-' AND position(_hw_p.hw_priv IN upper(__hwarg1)) > 0), false) END
  FROM pg_catalog._hw_privs _hw_p WHERE _hw_p.hw_oid = __hwarg0)"""
# the same for a role named by the first argument (42704 for a role that does not exist)
_ROLE_HAS_PRIV = """(SELECT CASE
    WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles _hw_r WHERE _hw_r.rolname = __hwarg2)
      THEN error('[SQLSTATE 42704] role "' || __hwarg2 || '" does not exist')
    WHEN count(*) = 0 THEN true ELSE coalesce(bool_or(
    _hw_p.hw_priv <> '-' AND position(_hw_p.hw_priv IN upper(__hwarg1)) > 0), false) END
  FROM pg_catalog._hw_role_privs _hw_p
  WHERE _hw_p.hw_oid = __hwarg0 AND _hw_p.hw_role = __hwarg2)"""
_SIZE_PRETTY = """CASE
  WHEN abs(__hwarg0) < 10240 THEN CAST(__hwarg0 AS text) || ' bytes'
  WHEN abs(__hwarg0) < 10485760 THEN CAST(round(__hwarg0 / 1024.0) AS bigint) || ' kB'
  WHEN abs(__hwarg0) < 10737418240 THEN CAST(round(__hwarg0 / 1048576.0) AS bigint) || ' MB'
  WHEN abs(__hwarg0) < 10995116277760 THEN CAST(round(__hwarg0 / 1073741824.0) AS bigint) || ' GB'
  ELSE CAST(round(__hwarg0 / 1099511627776.0) AS bigint) || ' TB' END"""
_QUOTE_IDENT = (
    "CASE WHEN regexp_full_match(__hwarg0, '[a-z_][a-z0-9_$]*') THEN __hwarg0 "
    "ELSE '\"' || replace(__hwarg0, '\"', '\"\"') || '\"' END"
)
_ENCODING = "CASE __hwarg0 WHEN 6 THEN 'UTF8' WHEN 0 THEN 'SQL_ASCII' ELSE '' END"
_EXPANDARRAY = "struct_pack(x := unnest(__hwarg0), n := unnest(range(1, len(__hwarg0) + 1)))"
_ARRAY_UPPER = "CASE WHEN len(__hwarg0) > 0 THEN len(__hwarg0) END"
_ARRAY_LOWER = "CASE WHEN len(__hwarg0) > 0 THEN 1 END"

_template_cache: dict[str, str] = {}


def _copy(node: Any) -> Any:
    """A fresh copy of an expression node (the Binder rewrites nodes in place)."""
    return parse_sql(f"SELECT {syntax.deparse(node)}")[0].stmt.targetList[0].val


def _copy_window(over: A.WindowDef) -> A.WindowDef:
    """A fresh copy of an OVER clause."""
    return _copy(A.FuncCall(funcname=(A.String(sval="count"),), agg_star=True, over=over)).over


def _template(sql: str, *args: Any) -> Any:
    tree = parse_sql(f"SELECT {sql}")[0].stmt.targetList[0].val
    used: set[int] = set()

    def sub(node: Any) -> Any:
        if isinstance(node, A.ColumnRef) and len(node.fields) == 1:
            f = node.fields[0]
            if isinstance(f, A.String) and f.sval.startswith("__hwarg"):
                i = int(f.sval[7:])
                if i in used:
                    return _copy(args[i])
                used.add(i)
                return args[i]
        if isinstance(node, A.Node):
            for name in node:
                child = getattr(node, name)
                if isinstance(child, A.Node):
                    new = sub(child)
                    if new is not child:
                        setattr(node, name, new)
                elif isinstance(child, tuple):
                    items = tuple(sub(c) for c in child)
                    if any(a is not b for a, b in zip(items, child, strict=True)):
                        setattr(node, name, items)
        return node

    return sub(tree)


def _const(value: str | int | bool | None) -> Any:
    if value is None:
        return A.A_Const(isnull=True)
    if isinstance(value, bool):
        return A.A_Const(isnull=False, val=A.Boolean(boolval=value))
    if isinstance(value, int):
        return A.A_Const(isnull=False, val=A.Integer(ival=value))
    return A.A_Const(isnull=False, val=A.String(sval=value))


def _type_name(name: str, array: bool = False) -> Any:
    return A.TypeName(
        names=(A.String(sval=name),),
        typemod=-1,
        arrayBounds=(A.Integer(ival=-1),) if array else None,
    )


def cast_to(node: Any, type_name: str, array: bool = False) -> Any:
    return A.TypeCast(arg=node, typeName=_type_name(type_name, array))


def _names(node_names: Any) -> list[str]:
    return [n.sval for n in node_names if isinstance(n, A.String)]


def _type_of(tc: A.TypeCast) -> str:
    names = _names(tc.typeName.names)
    return names[-1].lower() if names else ""


def _is_regclass(node: Any) -> bool:
    return isinstance(node, A.TypeCast) and _type_of(node) == "regclass"


def _stringish(node: Any) -> bool:
    """Does this expression give a name (text) rather than an oid?"""
    if isinstance(node, A.A_Const):
        return isinstance(node.val, A.String)
    if isinstance(node, A.ParamRef | A.FuncCall):
        return True
    if isinstance(node, A.TypeCast):
        return _type_of(node) in _TEXT_TYPES or _type_of(node) in ("varchar", "unknown")
    if isinstance(node, A.A_Expr):
        return _names(node.name or ())[-1:] == ["||"]
    if isinstance(node, A.CoalesceExpr):
        return bool(node.args) and _stringish(node.args[0])
    return False


# -- the rules ----------
# Each rule maps one node to its replacement, or returns the node itself (perhaps with
# its own fields adjusted). `translate` applies them to every node of a copy of the
# tree, top-down, and applies them again to what a replacement holds.
Rule = Callable[[Any], Any]


def select_outputs(node: Any) -> Any:
    """Output columns shown as PostgreSQL shows them: a bare `x::regclass` column gives
    the relation's name, and a set-returning function gives one row per element.

    >>> translate_sql("SELECT generate_series(1, 3)", (select_outputs,))
    'SELECT unnest(CAST(generate_series(1, 3) AS integer[]))'
    """
    if isinstance(node, A.SelectStmt) and node.targetList:
        for rt in node.targetList:
            if not isinstance(rt, A.ResTarget):
                continue
            if isinstance(rt.val, A.FuncCall) and rt.val.over is None:
                fname = "".join(_names(rt.val.funcname)[-1:]).lower()
                if fname in _TO_REG and len(rt.val.args or ()) == 1:  # shown as the name
                    rt.val = _reg_display(_TO_REG[fname], rt.val)
            if isinstance(rt.val, A.TypeCast) and _type_of(rt.val) in _REG_TYPES:
                rt.val = cast_to(rt.val, "text")
            rt.val = _padded_char(rt.val)
            rt.val = _unnest_inner_srfs(rt.val)
            rt.val = _row_value(rt.val)
            if (
                isinstance(rt.val, A.FuncCall)
                and rt.val.over is None
                and "".join(_names(rt.val.funcname)[-1:]).lower() in _LIST_SRFS
            ):
                rt.val = A.FuncCall(
                    funcname=(A.String(sval="unnest"),), args=(_int4_series(rt.val),)
                )
    return node


_TO_REG = {
    "to_regclass": "regclass",
    "to_regtype": "regtype",
    "to_regnamespace": "regnamespace",
    "to_regrole": "regrole",
}


def _reg_display(reg: str, oid: Any) -> Any:
    """The name a reg* value (an oid expression) shows."""
    if reg == "regclass":
        return _template(_RELVIS_DISPLAY, oid)
    if reg == "regtype":
        return _template(_FORMAT_TYPE, oid, cast_to(_const(None), "int4"))
    if reg == "regnamespace":
        return _template(_NSP_DISPLAY, oid)
    return _template(_ROLE_DISPLAY, oid)


# substring/position/overlay of bit strings: over their text of 0s and 1s
_BIT_STRING_FUNCS = {
    "substring": {
        2: "CAST(substr(CAST(__hwarg0 AS varchar), __hwarg1) AS bit)",
        3: "CAST(substr(CAST(__hwarg0 AS varchar), __hwarg1, __hwarg2) AS bit)",
    },
    "position": {2: "CAST(strpos(CAST(__hwarg0 AS varchar), CAST(__hwarg1 AS varchar)) AS int4)"},
    "overlay": {
        3: "CAST(left(CAST(__hwarg0 AS varchar), __hwarg2 - 1) || CAST(__hwarg1 AS varchar)"
        " || substr(CAST(__hwarg0 AS varchar), __hwarg2 + length(CAST(__hwarg1 AS varchar)))"
        " AS bit)",
        4: "CAST(left(CAST(__hwarg0 AS varchar), __hwarg2 - 1) || CAST(__hwarg1 AS varchar)"
        " || substr(CAST(__hwarg0 AS varchar), __hwarg2 + __hwarg3) AS bit)",
    },
}


def _is_bits(node: Any) -> bool:
    if isinstance(node, A.A_Const):
        return isinstance(node.val, A.BitString)
    return _type_of_cast(node) in ("bit", "varbit")


def _braced(node: A.A_Const) -> bool:
    return isinstance(node.val, A.String) and node.val.sval.lstrip().startswith("{")


def _is_vector(node: Any) -> bool:
    return column_type(node) in ("int2vector", "oidvector")


def _int_const(node: Any) -> int | None:
    if isinstance(node, A.A_Const) and isinstance(node.val, A.Integer):
        return node.val.ival
    return None


def _is_point(node: Any) -> bool:
    return isinstance(node, A.FuncCall) and _names(node.funcname)[-1:] == ["point"]


def _type_of_cast(node: Any) -> str:
    return _type_of(node) if isinstance(node, A.TypeCast) else ""


def _padded_char(node: Any) -> Any:
    """'abc'::char(5) as an output column: blank-padded to 5, as PostgreSQL shows it."""
    if not (isinstance(node, A.TypeCast) and _type_of(node) in ("bpchar", "char")):
        return node
    mods = node.typeName.typmods or ()
    arg = node.arg
    if (
        len(mods) == 1
        and isinstance(mods[0], A.A_Const)
        and isinstance(mods[0].val, A.Integer)
        and isinstance(arg, A.A_Const)
        and isinstance(arg.val, A.String)
        and len(arg.val.sval) < mods[0].val.ival
    ):
        node.arg = _const(arg.val.sval.ljust(mods[0].val.ival))
    return node


def _unnest_inner_srfs(node: Any) -> Any:
    """generate_series(1, 3) + 10, generate_series(...)::date, abs(generate_series(...)):
    the set-returning call inside an output expression unnested (one row per element),
    as a bare one is."""
    if _is_list_srf(node):
        return node  # a bare call: select_outputs
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, A.A_Expr | A.TypeCast):
            for attr in ("lexpr", "rexpr", "arg"):
                child = getattr(cur, attr, None)
                if _is_list_srf(child):
                    setattr(cur, attr, _unnested(child))
                elif child is not None:
                    stack.append(child)
        elif isinstance(cur, A.CoalesceExpr) and any(_is_list_srf(a) for a in cur.args):
            raise SQLError("set-returning functions are not allowed in COALESCE", "0A000")
        elif isinstance(cur, A.FuncCall) and cur.over is None and cur.args:
            if _names(cur.funcname)[-1:] == ["unnest"]:
                continue  # unnested already (translate is idempotent)
            stack.extend(a for a in cur.args if not _is_list_srf(a))
            cur.args = tuple(_unnested(a) if _is_list_srf(a) else a for a in cur.args)
    return node


def _is_list_srf(node: Any) -> bool:
    return (
        isinstance(node, A.FuncCall)
        and node.over is None
        and "".join(_names(node.funcname)[-1:]).lower() in _LIST_SRFS
    )


def _unnested(call: A.FuncCall) -> A.FuncCall:
    return A.FuncCall(funcname=(A.String(sval="unnest"),), args=(_int4_series(call),))


def row_values(node: Any) -> Any:
    """ROW(a, b) as a value (an output column, a function's argument, (ROW(...)).f2) is a
    record with fields f1, f2, ... (DuckDB: a struct, which the text codec shows as
    PostgreSQL's record, (1,a)); ROW(...) = ROW(...) compares field by field, NULL when
    a field is. Rows compared in IN and subqueries stay DuckDB's.

    >>> translate_sql("SELECT to_json(ROW(1, 'a'))", (row_values,))
    "SELECT to_json(struct_pack(f1 => 1, f2 => 'a'))"
    """
    if isinstance(node, A.FuncCall) and node.args:
        args = tuple(_row_value(a) for a in node.args)
        if any(a is not b for a, b in zip(args, node.args, strict=True)):
            node.args = args
    elif isinstance(node, A.A_Indirection):
        node.arg = _row_value(node.arg)
    elif (
        isinstance(node, A.A_Expr)
        and node.kind == A_Expr_Kind.AEXPR_OP
        and _names(node.name or ()) in (["="], ["<>"], ["!="])
        and all(_is_row(x) for x in (node.lexpr, node.rexpr))
        and len(node.lexpr.args or ()) == len(node.rexpr.args or ())
        and node.lexpr.args
    ):
        op = _names(node.name)[0]
        pairs = tuple(
            A.A_Expr(kind=A_Expr_Kind.AEXPR_OP, name=(A.String(sval=op),), lexpr=a, rexpr=b)
            for a, b in zip(node.lexpr.args, node.rexpr.args, strict=True)
        )
        if len(pairs) == 1:
            return pairs[0]
        kind = BoolExprType.AND_EXPR if op == "=" else BoolExprType.OR_EXPR
        return A.BoolExpr(boolop=kind, args=pairs)
    return node


def _is_row(node: Any) -> bool:
    return isinstance(node, A.RowExpr)


def _row_value(node: Any) -> Any:
    if not (isinstance(node, A.RowExpr) and node.row_format == CoercionForm.COERCE_EXPLICIT_CALL):
        return node
    fields = tuple(
        A.NamedArgExpr(name=f"f{i}", arg=a, argnumber=-1) for i, a in enumerate(node.args or (), 1)
    )
    return A.FuncCall(funcname=(A.String(sval="struct_pack"),), args=fields)


def catalog_functions(node: Any) -> Any:
    """PostgreSQL's functions DuckDB lacks or names differently: catalog and session
    functions become subqueries over catalog/system.py's relations, sum and avg get
    PostgreSQL's result types, renamed functions their DuckDB name.

    >>> translate_sql("SELECT pg_catalog.btrim(s), sum(n) FROM t", (catalog_functions,))
    'SELECT "trim"(s), hw_sum(n) FROM t'
    """
    return _func(node) if isinstance(node, A.FuncCall) else node


def casts(node: Any) -> Any:
    """Casts to PostgreSQL-only types (reg*, oid, name, jsonb, numeric, ...) as the
    DuckDB types and expressions that give the same values.

    >>> translate_sql("SELECT x::oid, interval '90' day", (casts,))
    "SELECT CAST(x AS uinteger), CAST('90 day' AS interval)"
    """
    return _typecast(node) if isinstance(node, A.TypeCast) else node


def session_values(node: Any) -> Any:
    """current_user, session_user, current_catalog, current_schema from the session.

    >>> translate_sql("SELECT current_user", (session_values,))
    'SELECT (SELECT _hw_s.hw_user_name FROM pg_catalog._hw_session AS _hw_s)'
    """
    return _sql_value_function(node) if isinstance(node, A.SQLValueFunction) else node


def operators(node: Any) -> Any:
    r"""Operators with PostgreSQL's semantics: ANY/ALL of a NULL array, '{...}' array
    constants, LIKE's backslash escape, OPERATOR(pg_catalog.op).

    >>> translate_sql("SELECT a LIKE 'x\\_%' FROM t", (operators,))
    "SELECT like_escape(a, 'x\\_%', '\\') FROM t"
    """
    if isinstance(node, A.A_ArrayExpr):
        _check_array_dims(node)
    if isinstance(node, A.A_Const) and isinstance(node.val, A.BitString):
        text = node.val.bsval
        if text[:1] in ("x", "X"):  # X'1F': a bit string of 4 bits a hex digit
            bits = "".join(format(int(c, 16), "04b") for c in text[1:])
            return A.A_Const(isnull=False, val=A.BitString(bsval="b" + bits))
    return _a_expr(node) if isinstance(node, A.A_Expr) else node


def _check_array_dims(node: A.A_ArrayExpr) -> None:
    """ARRAY[[1, 2], [3]]: PostgreSQL's arrays are rectangular (DuckDB's lists need not be)."""
    subs = [e for e in node.elements or () if isinstance(e, A.A_ArrayExpr)]
    if subs and len({len(e.elements or ()) for e in subs}) > 1:
        raise SQLError(
            "multidimensional arrays must have array expressions with matching dimensions",
            "2202E",
        )


def no_collations(node: Any) -> Any:
    """COLLATE clauses dropped (DuckDB has no pg_catalog.default collation).

    >>> translate_sql('SELECT name COLLATE pg_catalog."default" FROM t', (no_collations,))
    'SELECT name FROM t'
    """
    return node.arg if isinstance(node, A.CollateClause) else node


def window_null_order(node: Any) -> Any:
    """The ORDER BY of a window or an aggregate with PostgreSQL's default NULL order,
    written out (NULLs last ascending, first descending; DuckDB's there: last both ways).

    >>> translate_sql("SELECT rank() OVER (ORDER BY n DESC) FROM t", (window_null_order,))
    'SELECT rank() OVER (ORDER BY n DESC NULLS FIRST) FROM t'
    """
    order = None
    if isinstance(node, A.WindowDef):
        order = node.orderClause
    elif isinstance(node, A.FuncCall):
        order = node.agg_order
    for s in order or ():
        if isinstance(s, A.SortBy) and s.sortby_nulls == SortByNulls.SORTBY_NULLS_DEFAULT:
            desc = s.sortby_dir == SortByDir.SORTBY_DESC
            s.sortby_nulls = (
                SortByNulls.SORTBY_NULLS_FIRST if desc else SortByNulls.SORTBY_NULLS_LAST
            )
    return node


def unqualified_columns(node: Any) -> Any:
    """Column references qualified by a system schema, without it.

    >>> translate_sql("SELECT pg_catalog.pg_class.oid FROM pg_class", (unqualified_columns,))
    'SELECT pg_class.oid FROM pg_class'
    """
    if isinstance(node, A.ColumnRef):
        fields = node.fields
        if (
            len(fields) >= 3
            and isinstance(fields[0], A.String)
            and fields[0].sval in SYSTEM_QUALIFIERS
        ):
            node.fields = fields[1:]
    return node


def table_functions(node: Any) -> Any:
    """FROM json_each(j) & co. as subqueries with PostgreSQL's columns."""
    if isinstance(node, A.RangeFunction):
        new = _zipped_functions(node) or _int4_series_table(node)
        if new is None:
            new = functions.table_function(node)
        return node if new is None else new
    return node


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_INT4_NAMES = frozenset({"int4", "int2", "integer", "int", "smallint"})


def _is_int4(node: Any) -> bool:
    """An integer argument PostgreSQL types int4: a literal within int4 (pglast gives
    larger ones as Float) or a cast to integer or smallint."""
    if isinstance(node, A.A_Const):
        return isinstance(node.val, A.Integer)
    if isinstance(node, A.TypeCast):
        return not node.typeName.arrayBounds and _type_of(node) in _INT4_NAMES
    return False


def _int4_series(call: Any) -> Any:
    """generate_series(int, int [, int]) returns int in PostgreSQL (DuckDB: bigint), so
    chr(g) and friends find their integer overload: the list cast to INTEGER[]."""
    if (
        isinstance(call, A.FuncCall)
        and "".join(_names(call.funcname)[-1:]).lower() == "generate_series"
        and len(call.args or ()) in (2, 3)
        and all(_is_int4(a) for a in call.args)
    ):
        return _template("CAST(__hwarg0 AS INTEGER[])", call)
    return call


def _int4_series_table(node: A.RangeFunction) -> Any:
    """FROM generate_series(int, int [, int]) AS g: a subquery whose one column (named
    as PostgreSQL names it) is the series as integer."""
    if node.ordinality or node.coldeflist or len(node.functions or ()) != 1:
        return None
    call, coldefs = node.functions[0]
    if coldefs or _int4_series(call) is call:
        return None
    alias = node.alias.aliasname if node.alias else "generate_series"
    colnames = [c.sval for c in (node.alias.colnames or ())] if node.alias else []
    column = colnames[0] if colnames else alias
    bigints = ", ".join(f"CAST({syntax.deparse(a)} AS bigint)" for a in call.args)  # DuckDB's
    sql = (
        f"SELECT * FROM (SELECT CAST(_hw_s.generate_series AS INTEGER) AS {_quoted(column)} "
        f"FROM generate_series({bigints}) AS _hw_s(generate_series)) AS {_quoted(alias)}"
    )
    sub = parse_sql(sql)[0].stmt.fromClause[0]
    sub.lateral = node.lateral
    return sub


def _zipped_functions(node: A.RangeFunction) -> Any:
    """ROWS FROM (f(), g()) and unnest(a, b): the functions' rows side by side, the
    shorter padded with NULLs -- DuckDB's unnest of several lists in one SELECT."""
    if node.ordinality or node.lateral or node.coldeflist:
        return None
    calls = [f[0] for f in node.functions or () if f and not f[1]]
    if len(calls) != len(node.functions or ()) or not all(isinstance(c, A.FuncCall) for c in calls):
        return None
    names = ["".join(_names(c.funcname)[-1:]).lower() for c in calls]
    if len(calls) == 1 and names == ["unnest"] and len(calls[0].args or ()) > 1:
        columns = [f"unnest({syntax.deparse(a)})" for a in calls[0].args]
    elif node.is_rowsfrom and len(calls) > 1 and set(names) <= {"unnest", "generate_series"}:
        columns = [
            syntax.deparse(c) if n == "unnest" else f"unnest({syntax.deparse(c)})"
            for c, n in zip(calls, names, strict=True)
        ]
        if any(n == "unnest" and len(c.args or ()) != 1 for c, n in zip(calls, names, strict=True)):
            return None
    else:
        return None
    colnames = [c.sval for c in (node.alias.colnames or ())] if node.alias else []
    targets = ", ".join(
        f"{col} AS {_quoted(colnames[i])}" if i < len(colnames) else col
        for i, col in enumerate(columns)
    )
    alias = node.alias.aliasname if node.alias else names[0]
    sql = f"SELECT * FROM (SELECT {targets}) AS {_quoted(alias)}"
    return parse_sql(sql)[0].stmt.fromClause[0]


RULES: tuple[Rule, ...] = (
    table_functions,
    select_outputs,
    catalog_functions,
    casts,
    session_values,
    operators,
    no_collations,
    window_null_order,
    unqualified_columns,
    row_values,
)


def translate(
    stmt: Any,
    array_literals: bool = True,
    rules: tuple[Rule, ...] = RULES,
    column_types: Mapping[str, str] | None = None,
) -> Any:
    """A copy of `stmt` with `rules` applied (see the module docstring); `stmt` is not
    changed. `array_literals=False` leaves '{1,2}' string constants as written (values
    an INSERT or UPDATE stores). `column_types`: the statement's columns' types by
    name (planner/scope.py `column_types`), for rewrites that depend on them."""
    tree = copy_tree(stmt)
    _fold(tree, array_literals, rules, column_types)
    return tree


def copy_tree(node: Any) -> Any:
    """A copy of a pglast tree: new nodes, shared leaf values and lists of constants no
    pass changes (`constant_lists.plain`: an IN list of 4,000 keys). copy.deepcopy takes
    ~25 times as long (it sets each attribute through pglast's validating __setattr__),
    more than parsing the text again; this costs about what one translation pass does."""
    if isinstance(node, A.Node):
        new = object.__new__(type(node))
        for name in type(node).__slots__:
            value = getattr(node, name, _UNSET)
            if value is not _UNSET:
                _set_slot(new, name, copy_tree(value))
        return new
    if isinstance(node, tuple):
        if constant_lists.plain(node):
            return node
        return tuple(copy_tree(n) for n in node)
    if isinstance(node, list):
        return [copy_tree(n) for n in node]
    return node


_UNSET = object()
_set_slot = object.__setattr__  # the values are a valid tree's: no need to check them again


def rewrite(
    stmt: Any, array_literals: bool = True, column_types: Mapping[str, str] | None = None
) -> None:
    """`translate` in place, on a tree the caller owns (one it parsed itself: copying
    a tree costs about as much as parsing it)."""
    _fold(stmt, array_literals, RULES, column_types)


def translate_sql(sql: str, rules: tuple[Rule, ...] = RULES) -> str:
    """One statement's text through `translate`, deparsed. Remembered: the renderer
    translates each aggregate call's text this way for every read (`count(*)`, ~0.5 ms
    of parsing, rules and printing each time), and the result depends only on the text
    and the session's DateStyle order (a date literal's reading)."""
    return _translated(sql, rules, DATE_ORDER.get())


@functools.lru_cache(maxsize=2048)
def _translated(sql: str, rules: tuple[Rule, ...], date_order: str) -> str:
    return syntax.deparse(translate(parse_sql(sql)[0].stmt, rules=rules))


_RULES: ContextVar[tuple[Rule, ...]] = ContextVar("_RULES", default=RULES)


_NO_COLUMNS: dict[str, str] = {}


def _fold(
    stmt: Any,
    array_literals: bool,
    rules: tuple[Rule, ...],
    column_types: Mapping[str, str] | None = None,
) -> None:
    token = _ARRAY_LITERALS.set(array_literals)
    chosen = _RULES.set(rules)
    columns = COLUMN_TYPES.set(_NO_COLUMNS if column_types is None else column_types)
    try:
        _visit(stmt)
    finally:
        COLUMN_TYPES.reset(columns)
        _RULES.reset(chosen)
        _ARRAY_LITERALS.reset(token)


def _visit(node: Any) -> Any:
    if _is_null_array_guard(node):
        # made by _any_all: only its operands are still to be rewritten
        test, op = node.args[0].expr, node.defresult
        for parent, attr in ((test, "arg"), (op, "lexpr"), (op, "rexpr")):
            child = getattr(parent, attr)
            replaced = _visit_any(child)
            if replaced is not child:
                setattr(parent, attr, replaced)
        return node
    for rule in _RULES.get():
        new = rule(node)
        if new is node:
            continue
        # `node` keeps its arguments: the parameters it named that `new` dropped
        missing = (
            _params(node) - _params(new)
            if isinstance(node, A.FuncCall | A.TypeCast | A.A_Expr)
            else None
        )
        if missing:
            new = _keep_params(new, sorted(missing))
        return _visit(new)
    for name in node:
        child = getattr(node, name)
        replaced = _visit_any(child)
        if replaced is not child:
            setattr(node, name, replaced)
    return node


def _visit_any(child: Any) -> Any:
    if isinstance(child, A.Node):
        return _visit(child)
    if isinstance(child, tuple) and child:
        if constant_lists.plain(child):  # no rule changes a plain constant
            return child
        items = tuple(_visit_any(c) for c in child)
        if any(a is not b for a, b in zip(items, child, strict=True)):
            return items
    return child


def _params(node: Any) -> set[int]:
    """Numbers of the $n parameters an expression refers to."""
    out: set[int] = set()

    def walk(n: Any) -> None:
        if isinstance(n, A.ParamRef):
            out.add(n.number)
        elif isinstance(n, A.Node):
            for name in n:
                walk(getattr(n, name))
        elif isinstance(n, tuple):
            for c in n:
                walk(c)

    walk(node)
    return out


def _keep_params(expr: Any, numbers: list[int]) -> Any:
    """`expr`, still naming parameters a rewrite dropped (DuckDB wants every $n used)."""
    cond = " AND ".join(f"${n} IS NULL" for n in numbers)
    return _template(f"CASE WHEN {cond} THEN __hwarg0 ELSE __hwarg0 END", expr)


def _func(fc: A.FuncCall) -> Any:
    names = _names(fc.funcname)
    if len(names) == 2 and names[0] in SYSTEM_QUALIFIERS:
        fc.funcname = (A.String(sval=names[1]),)
        names = names[1:]
    if len(names) != 1:
        return fc
    name = names[0].lower()
    args = list(fc.args or ())
    if name in _BIT_STRING_FUNCS and args and _is_bits(args[0]) and fc.over is None:
        if (form := _BIT_STRING_FUNCS[name].get(len(args))) is not None:
            return _template(form, *args)
    rewrite_call = functions.REWRITES.get(name)  # date/time, formatting: planner/functions/
    if rewrite_call is not None and fc.over is None and (new := rewrite_call(args)) is not None:
        return new
    if fc.agg_order:  # a constant orders nothing (DuckDB refuses `ORDER BY 'x'`)
        fc.agg_order = tuple(s for s in fc.agg_order if not isinstance(s.node, A.A_Const)) or None
    if (aggregate := functions.AGGREGATES.get(name)) is not None and fc.over is None:
        return aggregate(fc)  # json_agg & co.: planner/functions/json.py
    if name in _HYPOTHETICAL and fc.agg_within_group and fc.over is None:
        if (new := _hypothetical(fc, name, args)) is not None:
            return new
    if name == "percentile_cont" and fc.agg_within_group and len(fc.agg_order or ()) == 1:
        # float8 or interval only: numbers as float8, other types 42883 (functions/mathfuncs)
        sort = fc.agg_order[0]
        sort.node = A.FuncCall(
            funcname=(A.String(sval="hw_percentile_cont_arg"),), args=(sort.node,)
        )
        if fc.over is None and len(args) == 1 and not isinstance(args[0], A.A_ArrayExpr):
            return _percentile_lerp(fc, sort, args[0])
    if name == "string_agg" and len(args) == 2 and _is_null(args[1]):
        fc.args = (args[0], _const(""))  # a NULL delimiter: none
    if name in _WINDOW_ONLY and fc.over is None and not fc.agg_within_group:
        raise SQLError(f"window function {name} requires an OVER clause", "42809")
    if name in _POSITIVE_ARG and fc.over is not None and len(args) > _POSITIVE_ARG[name][0]:
        position, sqlstate = _POSITIVE_ARG[name]
        arg = args[position]
        if isinstance(arg, A.A_Const) and isinstance(arg.val, A.Integer) and arg.val.ival <= 0:
            raise SQLError(f"argument of {name} must be greater than zero", sqlstate)
    if name in ("num_nulls", "num_nonnulls") and args and fc.over is None:
        test = NullTestType.IS_NULL if name == "num_nulls" else NullTestType.IS_NOT_NULL
        counts = [cast_to(A.NullTest(arg=a, nulltesttype=test), "int4") for a in args]
        total = counts[0]
        for c in counts[1:]:
            total = A.A_Expr(
                kind=A_Expr_Kind.AEXPR_OP, name=(A.String(sval="+"),), lexpr=total, rexpr=c
            )
        return total
    if name in ("json_build_object", "jsonb_build_object") and len(args) % 2:
        raise SQLError(
            "argument list must have even number of elements",
            "22023",
            hint=f"The arguments of {name}() must consist of alternating keys and values.",
        )
    if name == "generate_series" and len(args) == 3 and _is_zero(args[2]):
        raise SQLError("step size cannot equal zero", "22023")
    if name == "json_build_object" and args and not len(args) % 2 and fc.over is None:
        # json keeps PostgreSQL's text: {"k" : v, "k2" : v2}, keys of any type as text
        pairs = " || ', ' || ".join(
            f"hw_json_key(__hwarg{i}, {i + 1}) || ' : ' || hw_json_value(__hwarg{i + 1})"
            for i in range(0, len(args), 2)
        )
        return _template(f"CAST('{{' || {pairs} || '}}' AS json)", *args)
    if name in _RENAMED:
        fc.funcname = (A.String(sval=_RENAMED[name]),)
        return fc
    if name in ("nextval", "currval", "setval") and args and _is_regclass(args[0]):
        fc.args = (args[0].arg, *args[1:])  # the name: server/sequence_calls.py binds it
        return fc
    if name in ("sum", "avg") and len(args) == 1 and not (fc.agg_order or fc.agg_within_group):
        return _sum_avg(fc, name, args[0])
    if name in _SPREADS and len(args) == 1 and not (fc.agg_order or fc.agg_within_group):
        return _spread(fc, name, args[0])
    if name in PAIR_STATISTICS and len(args) == 2 and fc.over is None:
        if not (fc.agg_distinct or fc.agg_within_group or _has_aggregate(tuple(args))):
            return _as_macro(fc, f"hw_{name}", args)
    if name == "version" and not args:
        return _const(SERVER_VERSION_TEXT)
    if name == "current_database" and not args:
        return _template(_SESSION.format(col="database"))
    if name == "current_schema" and not args:
        return _template(_SESSION.format(col="current_schema"))
    if name == "current_schemas" and len(args) == 1:
        return _template(
            "(SELECT CASE WHEN __hwarg0 THEN _hw_s.hw_schemas_implicit ELSE _hw_s.hw_schemas "
            "END FROM pg_catalog._hw_session _hw_s)",
            args[0],
        )
    if name == "pg_partition_ancestors" and len(args) == 1:  # no partitions: the relation
        return _template("unnest(ARRAY[__hwarg0])", _oid_of("regclass", args[0]))
    if name == "pg_backend_pid" and not args:
        return _template(_SESSION.format(col="pid"))
    if name == "pg_postmaster_start_time" and not args:  # (DuckDB's: the transaction's start)
        return _template(_SESSION.format(col="started"))
    if name == "current_setting" and len(args) == 1:
        return _template(_SETTING_OR_ERROR, args[0], _const(False))
    if name == "current_setting" and len(args) == 2:  # (name, missing_ok)
        return _template(_SETTING_OR_ERROR, args[0], args[1])
    if name == "format_type" and len(args) == 2:
        return _template(_FORMAT_TYPE, args[0], args[1])
    if name == "pg_get_expr" and len(args) >= 3:  # (expr, relation, pretty)
        return _template(
            "CASE WHEN CAST(__hwarg1 AS boolean) THEN hw_pretty_expr(__hwarg0) ELSE __hwarg0 END",
            args[0],
            args[2],
        )
    if name == "pg_get_expr" and args:
        return args[0]
    if name in _FUNCTION_TEXTS and len(args) == 1:  # CREATE FUNCTION's (built-ins: NULL)
        target = args[0]
        if _type_of_cast(target) in ("regproc", "regprocedure") and _stringish(target.arg):
            # 'schema.f(integer)'::regprocedure: a regproc is its name here
            name_only = _template("regexp_replace(__hwarg0, '^.*[.]|[(].*$', '', 'g')", target.arg)
            target = _template(_NAME_OID.format(kind="proc"), name_only)
        return _template(_DEF, target, _const(_FUNCTION_TEXTS[name]))
    if name == "pg_get_indexdef" and args:
        n = args[1] if len(args) >= 2 else _const(0)
        return _template(_DEF, args[0], n)
    if name in ("pg_get_constraintdef", "pg_get_viewdef", "pg_get_triggerdef") and args:
        target = args[0]
        n = _const(0)
        if name == "pg_get_viewdef" and _stringish(target):
            target = _template(_RELNAME_OID, target)
        if len(args) > 1:  # pretty (or a wrap column, which implies pretty)
            n = _template("CASE WHEN CAST(__hwarg0 AS boolean) THEN -1 ELSE 0 END", args[1])
        return _template(_DEF, target, n)
    if name == "pg_table_is_visible" and len(args) == 1:
        return _template(_TABLE_VISIBLE, args[0])
    if name in _VISIBLE_FUNCS and len(args) == 1:
        return _template("(__hwarg0 IS NOT NULL)", args[0])
    if name == "obj_description" and args:
        if len(args) == 1:
            return _template(_DESCRIPTION, args[0], _const(0))
        return _template(_DESCRIPTION_IN, args[0], args[1])
    if name == "col_description" and len(args) == 2:
        return _template(_DESCRIPTION, args[0], args[1])
    if name in _NULL_TEXT_FUNCS:
        return cast_to(_const(None), "text")
    if name in _PRIV_FUNCS and len(args) >= 2:
        # (object, privilege): the session's role; (role, object, privilege): that role's
        obj, priv = (args[-2], args[-1]) if name != "has_column_privilege" else (args[-3], args[-1])
        if len(args) == 4 or (name == "has_column_privilege" and len(args) < 3):
            return _const(True)
        kind = "regnamespace" if name == "has_schema_privilege" else "regclass"
        _check_privileges(name, priv)
        oid = _existing(kind, obj)  # evaluated outside the subquery, which may find no rows
        role = args[0] if len(args) == (4 if name == "has_column_privilege" else 3) else None
        if role is not None and _stringish(role):  # (a role's oid: asked of the session's)
            has = _template(_ROLE_HAS_PRIV, _copy(oid), priv, cast_to(role, "text"))
        else:
            has = _template(_HAS_PRIV, _copy(oid), priv)
        if name == "has_column_privilege" and _stringish(args[-2]) and _stringish(obj):
            # a column the relation does not have: 42703
            has = _template(
                "CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_attribute _hw_a WHERE"
                " _hw_a.attrelid = __hwarg0 AND _hw_a.attname = __hwarg1) THEN __hwarg2"
                " ELSE error('[SQLSTATE 42703] column \"' || __hwarg3 || '\" of relation \"'"
                " || __hwarg4 || '\" does not exist') END",
                _copy(oid),
                _copy(args[-2]),
                has,
                _copy(args[-2]),
                _copy(obj),
            )
        return _template("CASE WHEN __hwarg0 IS NULL THEN NULL ELSE __hwarg1 END", oid, has)
    if name in _TRUE_FUNCS:
        return _const(True)
    if name in _FALSE_FUNCS:
        return _const(False)
    if name == "pg_get_userbyid" and len(args) == 1:
        return _template(_USERBYID, args[0])
    if name == "pg_encoding_to_char" and len(args) == 1:
        return _template(_ENCODING, args[0])
    if name in _SIZE_FUNCS and args:
        exists = _template("CAST(__hwarg0 * 0 AS bigint)", _existing("regclass", args[0]))
        return exists if _stringish(args[0]) else cast_to(_const(0), "int8")
    if name == "pg_size_pretty" and len(args) == 1:
        return _template(_SIZE_PRETTY, args[0])
    if name == "quote_ident" and len(args) == 1:
        return _template(_QUOTE_IDENT, args[0])
    if name == "to_regclass" and len(args) == 1:
        return _template(_RELNAME_OID, args[0])
    if name == "point" and len(args) == 2 and fc.over is None:
        return _template(
            "struct_pack(x => CAST(__hwarg0 AS float8), y => CAST(__hwarg1 AS float8))", *args
        )
    if name == "box" and len(args) == 2 and all(_is_point(a) for a in args):
        # corners: the upper right one first
        return _template(
            "struct_pack(high => struct_pack(x => greatest((__hwarg0).x, (__hwarg1).x),"
            " y => greatest((__hwarg2).y, (__hwarg3).y)), low => struct_pack("
            "x => least((__hwarg4).x, (__hwarg5).x), y => least((__hwarg6).y, (__hwarg7).y)))",
            *[_copy(args[i % 2]) for i in range(8)],
        )
    if name == "area" and len(args) == 1 and isinstance(args[0], A.FuncCall):
        if _names(args[0].funcname)[-1:] == ["box"]:
            return _template(
                "((__hwarg0).high.x - (__hwarg1).low.x) * ((__hwarg2).high.y - (__hwarg3).low.y)",
                *[_copy(args[0]) for _ in range(4)],
            )
    if name == "array_to_json" and len(args) == 2 and fc.over is None:
        # pretty: the top-level elements one a line
        return _template(
            "CASE WHEN __hwarg0 THEN CAST(hw_array_to_json_pretty(__hwarg1) AS json)"
            " ELSE array_to_json(__hwarg2) END",
            args[1],
            args[0],
            _copy(args[0]),
        )
    if name == "generate_subscripts" and len(args) == 2 and _is_vector(args[0]):
        # int2vector and oidvector subscripts start at 0 (pg_index.indkey: SQLAlchemy
        # reads an expression key's definition by its subscript + 1)
        return _template("unnest(range(0, len(__hwarg0)))", args[0])
    if name == "generate_subscripts" and len(args) == 2 and _int_const(args[1]) in (2, 3):
        # DuckDB's has dimension 1 only: the length of the first element's dimension
        path = "(__hwarg0)" + "[1]" * (_int_const(args[1]) - 1)
        return _template(f"unnest(generate_series(1, len({path})))", args[0])
    if name == "to_regproc" and len(args) == 1:  # the name, if one function has it
        return _template(
            "(SELECT min(_hw_p.proname) FROM pg_catalog.pg_proc _hw_p"
            " WHERE _hw_p.proname = regexp_replace(__hwarg0, '^pg_catalog\\.', '')"
            " HAVING count(*) = 1)",
            args[0],
        )
    if name == "octet_length" and len(args) == 1 and _type_of_cast(args[0]) in ("bpchar", "char"):
        # char(n) counts its blanks; its bytes as UTF-8
        return cast_to(
            A.FuncCall(funcname=(A.String(sval="strlen"),), args=(_padded_char(args[0]),)), "int4"
        )
    if name == "to_regtype" and len(args) == 1:
        return _template(_TYPNAME_OID, args[0])
    if name == "to_regnamespace" and len(args) == 1:
        return _template(_NSPNAME_OID, args[0])
    if name == "to_regrole" and len(args) == 1:
        return _template(_ROLNAME_OID, args[0])
    if name == "_pg_expandarray" and len(args) == 1:
        return _template(_EXPANDARRAY, args[0])
    if name == "array_upper" and len(args) == 2:
        return _template(_ARRAY_UPPER, args[0])
    if name == "array_lower" and len(args) == 2:
        return _template(_ARRAY_LOWER, args[0])
    if name == "pg_my_temp_schema" and not args:
        return _template(_SESSION.format(col="temp_schema"))
    return fc


_WINDOW_ONLY = frozenset(
    """row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value
    last_value nth_value""".split()
)
# window functions whose argument must be positive: (argument position, SQLSTATE)
_POSITIVE_ARG = {"ntile": (0, "22014"), "nth_value": (1, "22016")}


# The privileges each has_*_privilege function takes (PostgreSQL's convert_*_priv_string)
_PRIVILEGES = {
    "has_table_privilege": {"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES",
                            "TRIGGER"},
    "has_schema_privilege": {"CREATE", "USAGE"},
    "has_sequence_privilege": {"USAGE", "SELECT", "UPDATE"},
    "has_any_column_privilege": {"SELECT", "INSERT", "UPDATE", "REFERENCES"},
    "has_column_privilege": {"SELECT", "INSERT", "UPDATE", "REFERENCES"},
}  # fmt: skip
_MISSING = {
    "regclass": "[SQLSTATE 42P01] relation \"' || __hwarg1 || '\" does not exist",
    "regnamespace": "[SQLSTATE 3F000] schema \"' || __hwarg1 || '\" does not exist",
}


def _check_privileges(name: str, priv: Any) -> None:
    """22023 for a privilege the function does not know ('SELECT, UPDATE WITH GRANT
    OPTION' is a list of them)."""
    if not (isinstance(priv, A.A_Const) and isinstance(priv.val, A.String)):
        return
    for item in priv.val.sval.split(","):
        word = re.sub(r"\s+WITH\s+GRANT\s+OPTION$", "", item.strip(), flags=re.I).upper()
        if word not in _PRIVILEGES.get(name, {word}):
            raise SQLError(f'unrecognized privilege type: "{item.strip()}"', "22023")


def _existing(reg: str, obj: Any) -> Any:
    """The oid a name stands for, the name given as a string constant raising PostgreSQL's
    error when no such object exists."""
    oid = _oid_of(reg, obj)
    if not (isinstance(obj, A.A_Const) and isinstance(obj.val, A.String)) or reg not in _MISSING:
        return oid
    if obj.val.sval.isdigit():
        return oid
    return _template(f"coalesce(__hwarg0, error('{_MISSING[reg]}'))", oid, obj)


def _is_null(node: Any) -> bool:
    return isinstance(node, A.A_Const) and node.isnull


def _is_zero(node: Any) -> bool:
    return (
        isinstance(node, A.A_Const)
        and isinstance(node.val, A.Integer | A.Float)
        and not node.isnull
        and float(getattr(node.val, "ival", None) or getattr(node.val, "fval", None) or 0) == 0
    )


def _sum_avg(fc: A.FuncCall, name: str, arg: Any) -> Any:
    """sum/avg with PostgreSQL's result types (hw_sum, hw_avg: install_functions)."""
    if _has_aggregate(arg):
        return fc  # sum(count(*)) OVER (): DuckDB types a macro's aggregate argument late
    if fc.agg_filter is not None:  # the same rows: NULLs are skipped anyway
        arg = A.CaseExpr(args=(A.CaseWhen(expr=fc.agg_filter, result=arg),))
        fc.agg_filter = None
    if fc.over is not None and name == "avg":
        # avg(x) OVER w -> hw_avg_w(avg(x) OVER w, x): typed by x, as a macro holding
        # the window would need one aggregate only
        fc.funcname = (A.String(sval="mean"),)  # DuckDB's avg, not rewritten again
        fc.args = (arg,)
        # and the window's exact sum and count, for integers and numerics
        total = A.FuncCall(
            funcname=(A.String(sval="sum"),),
            args=(A.FuncCall(funcname=(A.String(sval="hw_try_numeric"),), args=(_copy(arg),)),),
            over=_copy_window(fc.over),
        )
        count = A.FuncCall(
            funcname=(A.String(sval="count"),), args=(_copy(arg),), over=_copy_window(fc.over)
        )
        return A.FuncCall(
            funcname=(A.String(sval="hw_avg_w"),), args=(fc, _copy(arg), total, count)
        )
    suffix = "_distinct" if fc.agg_distinct else ""
    return A.FuncCall(funcname=(A.String(sval=f"hw_{name}{suffix}"),), args=(arg,), over=fc.over)


# The hypothetical-set aggregates: rank(v) WITHIN GROUP (ORDER BY x) is the rank v would
# have among the group's rows. __hwarg0 is "x sorts before v", __hwarg1 "x is a peer of
# v or sorts before it" (NULLs sort last ascending, first descending), __hwarg2 is x.
_HYPOTHETICAL = {
    "rank": "count(*) FILTER (WHERE __hwarg0) + 1",
    "dense_rank": "count(DISTINCT __hwarg2) FILTER (WHERE __hwarg0)"
    " + CAST(coalesce(bool_or(__hwarg2 IS NULL) FILTER (WHERE __hwarg0), false) AS BIGINT) + 1",
    "percent_rank": "CASE WHEN count(*) = 0 THEN CAST(0 AS float8)"
    " ELSE CAST(count(*) FILTER (WHERE __hwarg0) AS float8) / count(*) END",
    "cume_dist": "CAST(count(*) FILTER (WHERE __hwarg1) + 1 AS float8) / (count(*) + 1)",
}


def _hypothetical(fc: A.FuncCall, name: str, args: list[Any]) -> Any:
    """rank/dense_rank/percent_rank/cume_dist(v) WITHIN GROUP (ORDER BY x): counts of the
    rows before v (DuckDB has no hypothetical-set aggregates)."""
    order = fc.agg_order or ()
    if len(args) != 1 or len(order) != 1 or fc.agg_filter is not None or fc.agg_distinct:
        return None
    sort = order[0]
    if sort.sortby_nulls != SortByNulls.SORTBY_NULLS_DEFAULT or sort.useOp:
        return None
    if sort.sortby_dir == SortByDir.SORTBY_DESC:
        before = "(__hwarg0 > __hwarg1 OR __hwarg0 IS NULL)"
        upto = "(__hwarg0 >= __hwarg1 OR __hwarg0 IS NULL)"
    else:
        before, upto = "__hwarg0 < __hwarg1", "__hwarg0 <= __hwarg1"
    x, v = sort.node, args[0]
    return _template(
        _HYPOTHETICAL[name], _template(before, x, v), _template(upto, _copy(x), _copy(v)), _copy(x)
    )


# stddev/variance and their spellings: numeric for integer and numeric arguments
_SPREADS = {
    "stddev": "stddev_samp", "stddev_samp": "stddev_samp", "stddev_pop": "stddev_pop",
    "variance": "var_samp", "var_samp": "var_samp", "var_pop": "var_pop",
}  # fmt: skip


def _spread(fc: A.FuncCall, name: str, arg: Any) -> Any:
    """stddev/variance of integers and numerics as PostgreSQL's exact numeric (hw_spread
    macros: install_functions); other types keep DuckDB's (double). Windows keep DuckDB's."""
    if fc.over is not None or _has_aggregate(arg):
        return fc
    suffix = "_distinct" if fc.agg_distinct else ""
    return _as_macro(fc, f"hw_{_SPREADS[name]}{suffix}", [arg])


# Two-variable statistics as PostgreSQL computes them (float.c): its Youngs-Cramer sums
# over the group's (y, x) pairs in Python (DuckDB's co-moments differ in the last
# digits, and its corr is NaN where PostgreSQL's is NULL), then float8_corr & co.
# The hw_ macros (_sum_avg_macros) hand the pairs to hw_pairs_<name>.
PAIR_STATISTICS = (
    "corr",
    "covar_pop",
    "covar_samp",
    "regr_avgx",
    "regr_avgy",
    "regr_intercept",
    "regr_r2",
    "regr_slope",
    "regr_sxx",
    "regr_sxy",
    "regr_syy",
)


def _percentile_lerp(fc: A.FuncCall, sort: A.SortBy, fraction: Any) -> Any:
    """percentile_cont(f) WITHIN GROUP (ORDER BY x): the group's values sorted (its
    non-NULL ones, FILTER's) interpolated as PostgreSQL does (hw_percentile_lerp)."""
    present = A.NullTest(arg=_copy(sort.node), nulltesttype=NullTestType.IS_NOT_NULL)
    keep = present
    if fc.agg_filter is not None:
        keep = A.BoolExpr(boolop=BoolExprType.AND_EXPR, args=(fc.agg_filter, present))
    values = A.FuncCall(
        funcname=(A.String(sval="list"),),
        args=(_copy(sort.node),),
        agg_order=(sort,),
        agg_filter=keep,
    )
    return A.FuncCall(funcname=(A.String(sval="hw_percentile_lerp"),), args=(values, fraction))


def _as_macro(fc: A.FuncCall, macro: str, args: list[Any]) -> Any:
    """The aggregate call `fc` as a call of `macro` on `args`. A macro takes no FILTER:
    it moves into the arguments (NULL where it is not true), which these aggregates skip."""
    if fc.agg_filter is not None:
        args = [
            A.CaseExpr(
                args=(A.CaseWhen(expr=_copy(fc.agg_filter) if i else fc.agg_filter, result=a),)
            )
            for i, a in enumerate(args)
        ]
    return A.FuncCall(funcname=(A.String(sval=macro),), args=tuple(args))


AGGREGATES = frozenset(  # aggregate functions, by name
    """count sum avg min max bool_and bool_or every string_agg array_agg json_agg jsonb_agg
    json_object_agg jsonb_object_agg stddev stddev_pop stddev_samp variance var_pop var_samp
    bit_and bit_or bit_xor first last any_value mode median percentile_cont percentile_disc
    corr covar_pop covar_samp regr_avgx regr_avgy regr_count regr_intercept regr_r2
    regr_slope regr_sxx regr_sxy regr_syy xmlagg range_agg range_intersect_agg""".split()
)


def _has_aggregate(node: Any) -> bool:
    """Does an expression hold an aggregate or window call (not inside a subquery)?"""
    if isinstance(node, A.FuncCall):
        fname = "".join(_names(node.funcname)[-1:]).lower()
        if node.over is not None or fname in AGGREGATES or fname.startswith("hw_"):
            return True
    if isinstance(node, A.SubLink):
        return False
    if isinstance(node, A.Node):
        return any(_has_aggregate(getattr(node, n)) for n in node)
    if isinstance(node, tuple):
        return any(_has_aggregate(c) for c in node)
    return False


def _oid_of(reg: str, arg: Any) -> Any:
    """The oid a `arg::reg*` cast stands for (a name is looked up)."""
    if not _stringish(arg):
        return cast_to(arg, "int8")
    if isinstance(arg, A.A_Const) and isinstance(arg.val, A.String) and arg.val.sval.isdigit():
        return cast_to(arg, "int8")  # an oid, as PostgreSQL's reg* input reads digits
    if reg == "regclass":
        return _template(_RELNAME_OID, arg)
    if reg == "regtype":
        return _template(_TYPNAME_OID, arg)
    if reg == "regnamespace":
        return _template(_NSPNAME_OID, arg)
    if reg == "regrole":
        return _template(_ROLNAME_OID, arg)
    return cast_to(arg, "int8")


# PostgreSQL's interval field masks (INTERVAL_MASK in datetime.h) for `interval '90' day`
_INTERVAL_FIELDS = {4: "year", 2: "month", 8: "day", 1024: "hour", 2048: "minute", 4096: "second"}


def interval_literal(tc: A.TypeCast) -> A.TypeCast | None:
    """`interval '90' day` -> `CAST('90 day' AS interval)`.

    PostgreSQL reads the trailing field as the unit; DuckDB cannot parse
    `CAST('90' AS interval day)` or reads it as seconds. None if not such a literal.
    """
    tn, arg = tc.typeName, tc.arg
    if (
        tn is None
        or tn.names[-1].sval != "interval"
        or not tn.typmods
        or not isinstance(arg, A.A_Const)
        or not isinstance(arg.val, A.String)
    ):
        return None
    first = tn.typmods[0]
    is_int = isinstance(first, A.A_Const) and isinstance(first.val, A.Integer)
    mask = first.val.ival if is_int else -1
    text = arg.val.sval.strip()
    unit = _INTERVAL_FIELDS.get(mask)
    if unit is not None and re.fullmatch(r"[-+]?\d+(\.\d+)?", text):
        text = f"{text} {unit}"
    return A.TypeCast(
        arg=A.A_Const(isnull=False, val=A.String(sval=text)),
        typeName=A.TypeName(names=(A.String(sval="interval"),), typemod=-1),
    )


def _text_cast(arg: Any) -> A.FuncCall:
    """`arg` as text, numbers as PostgreSQL prints them (planner/functions/text_casts.py)."""
    return A.FuncCall(funcname=(A.String(sval=text_casts.NAME),), args=(arg,))


def _text_operand(node: Any) -> bool:
    """Whether `node || x` is surely text concatenation: `node` is a text constant (not
    an array's or bytea's), a cast to text, or a chain of || holding such a constant."""
    if isinstance(node, A.A_Const):
        text = node.val.sval if isinstance(node.val, A.String) else None
        return text is not None and not text.startswith(("{", "\\x"))
    if isinstance(node, A.TypeCast):
        return _type_of(node) in ("text", "varchar")
    if isinstance(node, A.A_Expr) and _names(node.name or ()) == ["||"]:
        return _text_operand(node.lexpr) or _text_operand(node.rexpr)
    return False


def _printed_by_type(arg: Any) -> bool:
    """Whether `arg::text` may print a number: not a constant's or a parameter's text,
    not a cast to another kind of type, not a concatenation (text), not already hw_text.
    (hw_text names its argument in each branch: wrapping a chain of || link by link
    would copy it 6^n times.)"""
    if isinstance(arg, A.A_Const | A.ParamRef):
        return False
    if isinstance(arg, A.TypeCast):
        return _type_of(arg) in _NUMBER_TYPES
    if isinstance(arg, A.A_Expr) and _names(arg.name or ()) == ["||"]:
        return False
    return not (isinstance(arg, A.FuncCall) and _names(arg.funcname) == [text_casts.NAME])


def _typecast(tc: A.TypeCast) -> Any:
    fixed = functions.typed_literal(tc)
    if fixed is None:
        fixed = interval_literal(tc)
    if fixed is not None:
        return fixed
    tn = tc.typeName
    if tn.arrayBounds:
        if isinstance(tc.arg, A.A_Const) and isinstance(tc.arg.val, A.String):
            check_array_literal(tc.arg.val.sval, _names(tn.names))
        _to_duckdb_list(tc.arg)  # '{1,2}'::int[]; '{{1,2},{3,4}}'::int[] a list of lists
        tn.arrayBounds = (A.Integer(ival=-1),) * _list_depth(tc.arg)
    elif _names(tn.names)[-1:] == ["jsonb"]:
        return _jsonb(tc.arg)
    elif _names(tn.names)[-1:] in (["numeric"], ["decimal"]) and not tn.typmods:
        return _numeric(tc.arg)
    names = _names(tn.names)
    # (a built-in type's name is the built-in type's, as pg_catalog comes first)
    builtin = names[0] in SYSTEM_QUALIFIERS or (len(names) == 1 and type_named(names[0]))
    own = None if builtin else user_type(names)
    if own is not None and own.category == "E":  # 'happy'::mood: DuckDB's ENUM of its labels
        return _cast_sql_type(tc.arg, enum_duckdb(own.labels) + ("[]" if tn.arrayBounds else ""))
    if own is not None:  # 5::posint, a domain: its base type (its CHECKs are not applied)
        tn.names, names = (A.String(sval=own.name),), [own.name]
    if len(names) == 2 and names[0] in SYSTEM_QUALIFIERS:
        tn.names = (A.String(sval=names[1]),)
        names = names[1:]
    if len(names) != 1:
        return tc
    name = names[0].lower()
    arg = tc.arg
    if name in ("bpchar", "varchar"):
        n = _string_length(tn)
        if n is not None and isinstance(arg, A.A_Const) and isinstance(arg.val, A.String):
            arg.val = A.String(sval=arg.val.sval[:n])
        elif n is not None and not tn.arrayBounds:
            # any other value: its text's first n characters (DuckDB ignores the length)
            tn.typmods = None
            return A.FuncCall(funcname=(A.String(sval="left"),), args=(tc, _const(n)))
    if (
        name in ("text", "varchar")
        and not tn.typmods
        and not tn.arrayBounds
        and _printed_by_type(arg)
    ):
        tc.arg = _text_cast(arg)
        return tc
    if not tn.arrayBounds and (ranged := functions.range_cast(name, arg)) is not None:
        return ranged
    if name in ("inet", "cidr") and not tn.arrayBounds:
        return functions.network_cast(name, arg)
    if name == "time" and not tn.arrayBounds and _operand_type(arg) == "timestamptz":
        # the time of day in the session's zone (DuckDB has no timestamptz -> time cast)
        tc.arg = cast_to(arg, "timestamp")
        return tc
    if name == "bit" and (bits := _integer_bits(arg, tn)) is not None:
        return A.TypeCast(arg=_const(bits), typeName=tn.__class__(names=(A.String(sval="bit"),)))
    # x::regclass::text and friends: the object's name
    if name in _TEXT_TYPES and isinstance(arg, A.TypeCast) and _type_of(arg) in _REG_TYPES:
        inner = _type_of(arg)
        if inner in ("regproc", "regprocedure"):
            return _typecast(arg)
        oid = _existing(inner, arg.arg) if inner in _MISSING else _oid_of(inner, arg.arg)
        if inner == "regclass":
            return _template(_RELVIS_DISPLAY, oid)
        if inner == "regtype":
            return _template(_FORMAT_TYPE, oid, cast_to(_const(None), "int4"))
        if inner == "regnamespace":
            return _template(_NSP_DISPLAY, oid)
        return _template(_ROLE_DISPLAY, oid)
    if name in ("regclass", "regtype", "regnamespace", "regrole"):
        return _oid_of(name, arg)
    if name in ("regproc", "regprocedure"):
        if _stringish(arg):
            return A.FuncCall(
                funcname=(A.String(sval="regexp_replace"),),
                args=(arg, _const(r"^pg_catalog\."), _const("")),
            )
        return _template(_PROC_DISPLAY, arg)
    mapped = _TYPE_MAP.get(name)
    if mapped is not None and not (name == "char" and tn.typmods):
        duck, is_list = mapped
        if is_list:
            _to_duckdb_list(arg)
        # in place: a new node would be visited again, its '[...]' list text then
        # checked as a '{...}' literal ('{30,22}'::oid[] was 22P02)
        tc.typeName = _type_name(duck, is_list or bool(tn.arrayBounds))
        if tc.typeName.arrayBounds:
            tc.typeName.arrayBounds = tn.arrayBounds or tc.typeName.arrayBounds
        return tc
    return tc


def _integer_bits(arg: Any, tn: A.TypeName) -> str | None:
    """An integer constant cast to bit(n): its two's complement's rightmost n bits, the
    sign filling bits beyond its width (int4: 32, int8: 64), as PostgreSQL's bitfromint4."""
    mods = tn.typmods or ()
    if len(mods) != 1 or not (
        isinstance(mods[0], A.A_Const) and isinstance(mods[0].val, A.Integer)
    ):
        return None
    value = functions.constant_number(arg)
    if value is None or value.numeric:
        return None
    n, v = mods[0].val.ival, int(value.value)
    width = 32 if -(2**31) <= v < 2**31 else 64
    if n < 1 or not -(2**63) <= v < 2**63:
        return None
    bits = format(v & ((1 << width) - 1), f"0{width}b")
    return (bits[0] * (n - width) + bits)[-n:] if n > width else bits[-n:]


def _string_length(tn: A.TypeName) -> int | None:
    """n of varchar(n) and char(n): an explicit cast to a length truncates ('abcdef'::
    varchar(3) is 'abc'; DuckDB keeps the text as it is). char(n)'s blank padding is not
    added: the value travels as text, whose comparisons and || would see the blanks."""
    mods = tn.typmods or ()
    if len(mods) != 1 or not (
        isinstance(mods[0], A.A_Const) and isinstance(mods[0].val, A.Integer)
    ):
        return None
    return mods[0].val.ival


def _list_depth(arg: Any) -> int:
    """How deeply a list constant in DuckDB's syntax nests ('[[...]]': 2); 1 otherwise."""
    if isinstance(arg, A.A_Const) and isinstance(arg.val, A.String):
        text = arg.val.sval.replace(" ", "")
        return max(1, len(text) - len(text.lstrip("[")))
    return 1


def _numeric(arg: Any) -> Any:
    """x::numeric (DuckDB's numeric is decimal(18,3)): a constant at its own scale, as
    PostgreSQL keeps it ('1.50'::numeric is 1.50); anything else as the decimal(38,16)
    that stores unconstrained numeric."""
    text = None
    if isinstance(arg, A.A_Const) and not arg.isnull:
        v = arg.val
        text = str(v.ival) if isinstance(v, A.Integer) else getattr(v, "fval", None)
        if isinstance(v, A.String):
            text = v.sval.strip()
    if text is not None and _NUMBER.fullmatch(text):
        d = Decimal(text)
        scale = max(0, -d.as_tuple().exponent)
        precision = max(d.adjusted() + 1, 1) + scale
        if precision <= 38:
            return _cast_sql_type(arg, f"DECIMAL({precision},{scale})")
    return _cast_sql_type(arg, _NUMERIC)


def _cast_sql_type(node: Any, duck: str) -> Any:
    """CAST(node AS <a DuckDB type written as SQL>)."""
    tc = parse_sql(f"SELECT CAST(NULL AS {duck})")[0].stmt.targetList[0].val
    tc.arg = node
    return tc


def _jsonb(arg: Any) -> Any:
    """x::jsonb: DuckDB's JSON holding the text PostgreSQL's jsonb prints (keys sorted
    and deduplicated, `{"a": 1}` spacing): constants now, other values by hw_jsonb_in."""
    if isinstance(arg, A.A_Const) and (arg.isnull or isinstance(arg.val, A.String)):
        if not arg.isnull:
            arg = _const(normalize_jsonb(arg.val.sval))  # 22P02 as PostgreSQL
        return cast_to(arg, "json")
    call = A.FuncCall(funcname=(A.String(sval="hw_jsonb_in"),), args=(cast_to(arg, "text"),))
    return cast_to(call, "json")


def _sql_value_function(node: A.SQLValueFunction) -> Any:
    op = node.op
    if op in (
        SQLValueFunctionOp.SVFOP_CURRENT_USER,
        SQLValueFunctionOp.SVFOP_USER,
        SQLValueFunctionOp.SVFOP_CURRENT_ROLE,
    ):
        return _template(_SESSION.format(col="user_name"))
    if op == SQLValueFunctionOp.SVFOP_SESSION_USER:
        return _template(_SESSION.format(col="session_user_name"))
    if op == SQLValueFunctionOp.SVFOP_CURRENT_CATALOG:
        return _template(_SESSION.format(col="database"))
    if op == SQLValueFunctionOp.SVFOP_CURRENT_SCHEMA:
        return _template(_SESSION.format(col="current_schema"))
    value = functions.value_function(op, node.typmod)  # CURRENT_DATE & co.
    return node if value is None else value


# PostgreSQL's operators DuckDB spells as functions: a # b (xor), |/ x, ||/ x
_MATH_OPERATORS = {"#": "xor", "|/": "hw_sqrt", "||/": "cbrt"}


def _a_expr(node: A.A_Expr) -> Any:
    if node.kind in (A_Expr_Kind.AEXPR_BETWEEN_SYM, A_Expr_Kind.AEXPR_NOT_BETWEEN_SYM):
        return _between_symmetric(node)
    names = _names(node.name or ())
    if len(names) == 2 and names[0] in SYSTEM_QUALIFIERS:
        node.name = (A.String(sval=names[1]),)
        names = names[1:]
    if node.kind in (A_Expr_Kind.AEXPR_OP_ANY, A_Expr_Kind.AEXPR_OP_ALL) and len(names) == 1:
        is_any = node.kind == A_Expr_Kind.AEXPR_OP_ANY
        like = functions.rewrite_like_any(names[0], is_any, node.lexpr, node.rexpr)
        return like if like is not None else _any_all(node, names[0])
    if node.kind == A_Expr_Kind.AEXPR_OP and len(names) == 1:  # jsonb's operators
        if (new := functions.rewrite_operator(names[0], node.lexpr, node.rexpr)) is not None:
            return new
    if node.kind == A_Expr_Kind.AEXPR_OP and names == ["||"] and node.lexpr is not None:
        # text || number prints the number with its output function, as ::text does
        if _text_operand(node.rexpr) and _printed_by_type(node.lexpr):
            node.lexpr = _text_cast(node.lexpr)
        elif _text_operand(node.lexpr) and _printed_by_type(node.rexpr):
            node.rexpr = _text_cast(node.rexpr)
    if node.kind == A_Expr_Kind.AEXPR_OP and names and names[-1] in _COMPARISONS:
        # arr = '{1,2}': the constant takes the other side's type, an array (also in
        # an UPDATE's or DELETE's condition where that side is an array column)
        for const, other in ((node.lexpr, node.rexpr), (node.rexpr, node.lexpr)):
            if not isinstance(const, A.A_Const):
                continue
            if _ARRAY_LITERALS.get():
                kind = _arrayish(other)
                if kind == "array" or (kind == "maybe" and _numbers_only(const)):
                    _to_duckdb_list(const)
            elif _braced(const) and column_type(other) is not None and _arrayish(other) == "array":
                _to_duckdb_list(const)  # (a DML condition: only a '{...}' asks the types)
    _date_operands(node, names, _dated)
    if node.kind == A_Expr_Kind.AEXPR_OP and names and names[-1] in _ORDERINGS:
        # mood < 'happy' (or $1): the constant is of the enum column's type, ordered by
        # its labels (DuckDB would compare the label's text)
        if _string(node.rexpr) and (kind := _enum_kind(node.lexpr)):
            node.rexpr = _cast_sql_type(node.rexpr, kind)
        elif _string(node.lexpr) and (kind := _enum_kind(node.rexpr)):
            node.lexpr = _cast_sql_type(node.lexpr, kind)
    if node.kind in _BETWEENS and (kind := _enum_kind(node.lexpr)):
        node.rexpr = tuple(_cast_sql_type(x, kind) if _string(x) else x for x in node.rexpr)
    if node.kind == A_Expr_Kind.AEXPR_OP and names and names[-1] in ("@>", "<@", "&&"):
        # tags @> '{x}': an array constant (a jsonb one, '{"a": 1}', reads as JSON)
        for const, other in ((node.lexpr, node.rexpr), (node.rexpr, node.lexpr)):
            if _arrayish(other) != "no" and _array_not_json(const):
                _to_duckdb_list(const)
    if node.kind == A_Expr_Kind.AEXPR_OP and names and names[0] in _ARITHMETIC_OPS:
        _real_beside_number(node)
    if node.kind == A_Expr_Kind.AEXPR_OP and names and names[0] in _INTEGER_OPS:
        _smallint_beside_integer(node)
    if node.kind == A_Expr_Kind.AEXPR_OP and names == ["-"] and node.lexpr is not None:
        kinds = {_operand_type(x) for x in (node.lexpr, node.rexpr)}
        if kinds == {"date"}:  # date - date is an integer (DuckDB: bigint)
            return _template(
                "CAST(date_diff('day', __hwarg1, __hwarg0) AS int4)", node.lexpr, node.rexpr
            )
        if kinds == {"time"}:  # time - time is an interval (DuckDB has no such operator)
            return _template(
                "(date '2000-01-01' + __hwarg0) - (date '2000-01-01' + __hwarg1)",
                node.lexpr,
                node.rexpr,
            )
    if (
        node.kind == A_Expr_Kind.AEXPR_OP
        and names == ["<->"]
        and all(
            isinstance(x, A.FuncCall) and _names(x.funcname)[-1:] == ["point"]
            for x in (node.lexpr, node.rexpr)
        )
    ):  # the distance of two points
        return _template(
            "sqrt(power((__hwarg0).x - (__hwarg1).x, 2) + power((__hwarg2).y - (__hwarg3).y, 2))",
            node.lexpr,
            node.rexpr,
            _copy(node.lexpr),
            _copy(node.rexpr),
        )
    if node.kind == A_Expr_Kind.AEXPR_OP and names == ["^"]:
        if (folded := functions.fold_power_operator(node.lexpr, node.rexpr)) is not None:
            return folded  # numeric ^ of constants, exact
    if node.kind == A_Expr_Kind.AEXPR_OP and names[-1:] and names[-1] in _MATH_OPERATORS:
        operands = [x for x in (node.lexpr, node.rexpr) if x is not None]
        fn = _MATH_OPERATORS[names[-1]]
        if len(operands) == (2 if fn == "xor" else 1):
            return A.FuncCall(funcname=(A.String(sval=fn),), args=tuple(operands))
    if node.kind == A_Expr_Kind.AEXPR_SIMILAR:  # the pattern: functions/regex.py
        match = A.FuncCall(
            funcname=(A.String(sval="regexp_full_match"),), args=(node.lexpr, _func(node.rexpr))
        )
        return A.BoolExpr(boolop=2, args=(match,)) if names[-1:] == ["!~"] else match
    if node.kind in (A_Expr_Kind.AEXPR_LIKE, A_Expr_Kind.AEXPR_ILIKE):
        r = node.rexpr
        if isinstance(r, A.FuncCall) and _names(r.funcname)[-1:] == ["like_escape"]:
            fn = "like_escape" if node.kind == A_Expr_Kind.AEXPR_LIKE else "ilike_escape"
            call = A.FuncCall(
                funcname=(A.String(sval=fn),), args=(node.lexpr, *tuple(r.args or ()))
            )
            if names and names[0].startswith("!"):
                return A.BoolExpr(boolop=2, args=(call,))  # NOT_EXPR
            return call
        # PostgreSQL's LIKE escapes with a backslash by default; DuckDB's has no escape
        backslash = isinstance(r, A.A_Const) and isinstance(r.val, A.String) and "\\" in r.val.sval
        if backslash or isinstance(r, A.ParamRef):
            fn = "like_escape" if node.kind == A_Expr_Kind.AEXPR_LIKE else "ilike_escape"
            call = A.FuncCall(funcname=(A.String(sval=fn),), args=(node.lexpr, r, _const("\\")))
            if names and names[0].startswith("!"):
                return A.BoolExpr(boolop=2, args=(call,))
            return call
    return node


# -- array constants and ANY/ALL ----------


def duckdb_list_text(elements: list[Any]) -> str:
    """DuckDB's list input syntax for the same elements (every string quoted)."""
    parts = []
    for e in elements:
        if e is None:
            parts.append("NULL")
        elif isinstance(e, list):
            parts.append(duckdb_list_text(e))
        else:
            parts.append('"' + e.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "[" + ", ".join(parts) + "]"


def check_array_literal(text: str, type_names: list[str]) -> None:
    """PostgreSQL's errors for a bad '{...}'::t[] constant: 22P02 when malformed, and
    the element type's input errors (22P02, 22003 out of range, 22008); date/time items
    read in the default DateStyle, as scalar date/time constants are
    (functions/literals.py)."""
    try:
        elem = resolve_type_name(type_names, [])
    except SQLError:
        elem = None
    array_in(str if elem is None else text_decoder(elem))(text)


def _to_duckdb_list(node: Any) -> None:
    """A '{...}' string constant in place of an array: rewritten in DuckDB's syntax."""
    if isinstance(node, A.A_Const) and isinstance(node.val, A.String):
        elements = parse_array_literal(node.val.sval)
        if elements is not None:
            node.val = A.String(sval=duckdb_list_text(elements))


def _array_not_json(node: Any) -> bool:
    """A '{...}' string constant that reads as an array literal and not as JSON."""
    if not (isinstance(node, A.A_Const) and isinstance(node.val, A.String)):
        return False
    try:
        json.loads(node.val.sval)
    except ValueError:
        return parse_array_literal(node.val.sval) is not None
    return False


def _numbers_only(const: A.A_Const) -> bool:
    elements = parse_array_literal(const.val.sval) if isinstance(const.val, A.String) else None
    return bool(elements) and all(
        e is None or (isinstance(e, str) and _NUMBER.fullmatch(e)) for e in elements or ()
    )


_ARITHMETIC_OPS = frozenset({"+", "-", "*", "/"})
_ORDERINGS = frozenset({"<", ">", "<=", ">="})
_BETWEENS = (A_Expr_Kind.AEXPR_BETWEEN, A_Expr_Kind.AEXPR_NOT_BETWEEN)


def dated_constant(const: Any, kind: str | None) -> Any:
    """A string constant taken as a date or timestamp (`kind`: its column's type, in a
    comparison or an assignment), read with PostgreSQL's rules (the session's DateStyle
    order; functions/literals.py), as PostgreSQL reads it: DuckDB's implicit cast reads
    ISO text only. ISO text, other kinds and other expressions are left as they are."""
    if not (isinstance(const, A.A_Const) and isinstance(const.val, A.String)):
        return const
    if kind not in ("date", "timestamp") or ISO_TIMESTAMP.fullmatch(const.val.sval):
        return const
    typed = cast_to(const, kind)
    return functions.typed_literal(typed) or typed


def _date_operands(node: A.A_Expr, names: list[str], fix: Callable[[Any, Any], Any]) -> None:
    """Each operand of a comparison or a BETWEEN's bounds through `fix(operand, other
    side)`: a string constant beside a date or timestamp column is read as one."""
    if node.kind == A_Expr_Kind.AEXPR_OP and names and names[-1] in _COMPARISONS:
        node.lexpr, node.rexpr = fix(node.lexpr, node.rexpr), fix(node.rexpr, node.lexpr)
    elif node.kind in _BETWEENS and isinstance(node.rexpr, tuple | list):
        node.rexpr = tuple(fix(x, node.lexpr) for x in node.rexpr)


def _dated(const: Any, other: Any) -> Any:
    """d = '01/02/2020', d a column: the constant as of d's type (`dated_constant`)."""
    return dated_constant(const, column_type(other))


def fixed_dates(tree: Any, column_types: Mapping[str, str]) -> Any:
    """A view's definition read under a DateStyle order other than MDY: its ambiguous
    date constants ('01/02/2020'::date, d = '01/02/2020') written as the ISO text they
    read as now, since the definition is planned again later in other sessions' orders
    (PostgreSQL keeps the constant it parsed). Words ('today') and typmods are left."""
    token = COLUMN_TYPES.set(column_types)
    try:
        return syntax.replaced(tree, _fixed_date)
    finally:
        COLUMN_TYPES.reset(token)


def _fixed_date(node: Any) -> Any | None:
    if isinstance(node, A.TypeCast):
        return _iso_cast(node)
    if isinstance(node, A.A_Expr):
        _date_operands(node, _names(node.name or ()), _iso_of)
    return None


def _iso_of(const: Any, other: Any) -> Any:
    """A string constant beside a date or timestamp column, as a constant of that type."""
    fixed = _dated(const, other)
    return fixed if _constant_cast(fixed) else const


def _iso_cast(tc: A.TypeCast) -> A.TypeCast | None:
    """'01/02/2020'::date as '2020-02-01'::date (None: not such a constant)."""
    if tc.typeName.typmods or tc.typeName.arrayBounds:
        return None
    fixed = dated_constant(tc.arg, _type_of(tc))
    return fixed if fixed is not tc.arg and _constant_cast(fixed) else None


def _constant_cast(node: Any) -> bool:
    """A cast of a constant (not an expression, such as 'today' as of now())."""
    return isinstance(node, A.TypeCast) and isinstance(node.arg, A.A_Const)


def _string(node: Any) -> bool:
    """A string constant or a parameter: of the type of what it is compared with."""
    return isinstance(node, A.ParamRef) or (
        isinstance(node, A.A_Const) and isinstance(node.val, A.String)
    )


def _enum_kind(node: Any) -> str:
    """An enum column's DuckDB type (`ENUM('a', 'b')`), or ''."""
    kind = column_type(node) or ""
    return kind if kind.startswith("ENUM(") else ""


_EXACT_NUMBERS = frozenset({"int2", "int4", "int8", "numeric"})


def _operand_type(node: Any) -> str | None:
    """An operand's PostgreSQL type where the tree tells it: a cast, a column of the
    statement (nodes.COLUMN_TYPES), a number constant."""
    if isinstance(node, A.TypeCast):
        return None if node.typeName.arrayBounds else _type_of(node)
    if isinstance(node, A.A_Const) and not node.isnull:
        return {A.Integer: "int4", A.Float: "numeric"}.get(type(node.val))
    return column_type(node)


_INTEGER_OPS = _ARITHMETIC_OPS | {"%"}


def _smallint_beside_integer(node: A.A_Expr) -> None:
    """smallint op an integer constant is an integer in PostgreSQL (the constant is an
    int4; DuckDB gives it the smallint's type, and `32767::int2 + 1` overflowed): the
    smallint operand is widened."""
    if node.lexpr is None:
        return
    kinds = (_operand_type(node.lexpr), _operand_type(node.rexpr))
    if kinds == ("int2", "int4") and isinstance(node.rexpr, A.A_Const):
        node.lexpr = cast_to(node.lexpr, "int4")
    elif kinds == ("int4", "int2") and isinstance(node.lexpr, A.A_Const):
        node.rexpr = cast_to(node.rexpr, "int4")


def _real_beside_number(node: A.A_Expr) -> None:
    """real op integer/numeric is double precision in PostgreSQL (its float48
    operators; DuckDB computes it as a real: `1::real / 3` gave 0.33333334): the real
    operand is widened to double."""
    if node.lexpr is None:
        return
    kinds = (_operand_type(node.lexpr), _operand_type(node.rexpr))
    if kinds[0] in ("float4", "real") and kinds[1] in _EXACT_NUMBERS:
        node.lexpr = cast_to(node.lexpr, "float8")
    elif kinds[1] in ("float4", "real") and kinds[0] in _EXACT_NUMBERS:
        node.rexpr = cast_to(node.rexpr, "float8")


def _arrayish(node: Any) -> str:
    """Is `node` an array ("array"), perhaps one ("maybe": a column, a subquery), or
    not ("no")? Decides whether a '{...}' constant compared with it is an array."""
    if isinstance(node, A.A_ArrayExpr):
        return "array"
    if isinstance(node, A.TypeCast):
        return "array" if node.typeName.arrayBounds else "no"
    if isinstance(node, A.FuncCall):
        return "array" if "".join(_names(node.funcname)[-1:]).lower() in _ARRAY_FUNCS else "no"
    if isinstance(node, A.A_Indirection):
        slices = [i for i in node.indirection if isinstance(i, A.A_Indices)]
        if slices and any(i.is_slice for i in slices):
            return "array"
        return "no" if slices else "maybe"
    if (kind := column_type(node)) is not None:
        return "array" if kind.startswith("_") else "no"
    if isinstance(node, A.ColumnRef | A.SubLink | A.ParamRef):
        return "maybe"
    if isinstance(node, A.CoalesceExpr) and node.args:
        return _arrayish(node.args[0])
    return "no"


def _is_null_array_guard(node: Any) -> bool:
    """CASE WHEN arr IS NULL THEN NULL::boolean ELSE x op ANY/ALL (arr) END"""
    return (
        isinstance(node, A.CaseExpr)
        and node.arg is None
        and node.args is not None
        and len(node.args) == 1
        and isinstance(node.args[0].expr, A.NullTest)
        and node.args[0].expr.nulltesttype == NullTestType.IS_NULL
        and isinstance(node.args[0].result, A.TypeCast)
        and isinstance(node.defresult, A.A_Expr)
        and node.defresult.kind in (A_Expr_Kind.AEXPR_OP_ANY, A_Expr_Kind.AEXPR_OP_ALL)
    )


def _between_symmetric(node: A.A_Expr) -> Any:
    """x BETWEEN SYMMETRIC a AND b -> x BETWEEN a AND b OR x BETWEEN b AND a (DuckDB
    lacks SYMMETRIC)."""
    lo, hi = node.rexpr

    def between(x: Any, a: Any, b: Any) -> A.A_Expr:
        return A.A_Expr(
            kind=A_Expr_Kind.AEXPR_BETWEEN, name=(A.String(sval="BETWEEN"),), lexpr=x, rexpr=(a, b)
        )

    either = A.BoolExpr(
        boolop=BoolExprType.OR_EXPR,
        args=(between(node.lexpr, lo, hi), between(_copy(node.lexpr), _copy(hi), _copy(lo))),
    )
    if node.kind == A_Expr_Kind.AEXPR_NOT_BETWEEN_SYM:
        return A.BoolExpr(boolop=BoolExprType.NOT_EXPR, args=(either,))
    return either


def _any_all(node: A.A_Expr, op: str) -> Any:
    """x op ANY/ALL (array) as PostgreSQL evaluates it: NULL when the array is NULL
    (DuckDB: false for ANY, true for ALL); '{...}' constants are arrays here."""
    arr = node.rexpr
    is_any = node.kind == A_Expr_Kind.AEXPR_OP_ANY
    if isinstance(arr, A.A_Const) and isinstance(arr.val, A.String):
        elements = parse_array_literal(arr.val.sval)
        if elements is not None and all(not isinstance(e, list) for e in elements):
            # x = ANY('{1,2}') -> (x = '1' OR x = '2'): each constant takes x's type
            if not elements:
                return _const(not is_any)
            tests = [
                A.A_Expr(
                    kind=A_Expr_Kind.AEXPR_OP,
                    name=node.name,
                    lexpr=node.lexpr if i == 0 else _copy(node.lexpr),
                    rexpr=_const(e),
                )
                for i, e in enumerate(elements)
            ]
            if len(tests) == 1:
                return tests[0]
            return A.BoolExpr(
                boolop=BoolExprType.OR_EXPR if is_any else BoolExprType.AND_EXPR, args=tuple(tests)
            )
        if elements is None:
            array_in(str)(arr.val.sval)  # PostgreSQL's 22P02 malformed array literal
        return node
    if isinstance(arr, A.A_ArrayExpr) or (
        isinstance(arr, A.TypeCast) and isinstance(arr.arg, A.A_Const) and not arr.arg.isnull
    ):
        return node  # never NULL
    test = A.NullTest(arg=_copy(arr), nulltesttype=NullTestType.IS_NULL)
    return A.CaseExpr(
        args=(A.CaseWhen(expr=test, result=cast_to(_const(None), "bool")),),
        defresult=node,
    )


# -- functions DuckDB lacks ----------
# Installed on every DuckDB database Headwater runs SQL in (replica, engine).


def _tsround(x: float) -> float:
    return round(x * 1e6) / 1e6  # TSROUND: rint to microseconds


def _int32(x: float) -> int:
    if x != x or not -(2**31) <= x < 2**31:
        raise ValueError("interval out of range")
    return int(x)


def interval_scale(months: int, days: int, us: int, factor: float, divide: bool) -> tuple:
    """PostgreSQL 15's interval_mul / interval_div: (months, days, microseconds) of
    `interval * factor` or `interval / factor`, fractions cascading down as PostgreSQL
    does (a month is 30 days)."""
    if divide:
        if factor == 0.0:
            raise ZeroDivisionError("Division by zero")
        m_f, d_f, t_f = months / factor, days / factor, us / factor
    else:
        m_f, d_f, t_f = months * factor, days * factor, us * factor
    rm, rd = _int32(m_f), _int32(d_f)
    month_rem_days = _tsround((m_f - rm) * 30)
    sec_rem = _tsround((d_f - rd + month_rem_days - int(month_rem_days)) * 86400)
    if abs(sec_rem) >= 86400:
        whole = int(sec_rem / 86400)
        rd += whole
        sec_rem -= whole * 86400
    rd += int(month_rem_days)
    t = t_f + sec_rem * 1_000_000
    if t != t or not -(2.0**63) <= t < 2.0**63:
        raise ValueError("interval out of range")
    t = round(t)
    if not -(2**31) <= rd < 2**31:
        raise ValueError("interval out of range")
    return rm, rd, t


def _interval_div_udf(ivals: Any, factors: Any) -> Any:
    import pyarrow as pa

    out = []
    for iv, f in zip(ivals.to_pylist(), factors.to_pylist(), strict=True):
        if iv is None or f is None:
            out.append(None)
            continue
        m, d, us = interval_scale(iv.months, iv.days, iv.nanoseconds // 1000, f, True)
        out.append(pa.MonthDayNano([m, d, us * 1000]))
    return pa.array(out, pa.month_day_nano_interval())


def _avg_udf(scale: int) -> Any:
    """avg from (sum, count) as PostgreSQL's numeric division gives it, at most
    `scale` digits (DuckDB's avg of integers and decimals is a double)."""

    def avg(sums: Any, counts: Any) -> Any:
        import pyarrow as pa

        out = []
        for total, n in zip(sums.to_pylist(), counts.to_pylist(), strict=True):
            if total is None or not n:
                out.append(None)
                continue
            d = Decimal(n)
            total_scale = max(0, -total.normalize().as_tuple().exponent)
            r = min(numeric_div_scale(total, d, total_scale), scale)
            q = _DIV.divide(total, d).quantize(Decimal(1).scaleb(-r), context=_DIV)
            out.append(q)
        return pa.array(out, pa.decimal128(37, scale))

    return avg


_INT_TYPES = ("SMALLINT", "INTEGER", "BIGINT")
_DIV = Context(prec=120, rounding=ROUND_HALF_UP)
_NUMERIC = "DECIMAL(38,16)"  # unconstrained numeric
_QUOTIENT = f"DECIMAL(37,{QUOTIENT_SCALE})"


# A numeric(p,s) column's DuckDB type: its values keep their scale in json (1.50), as
# PostgreSQL's numeric does; not an unconstrained numeric's DECIMAL(38,16) nor a
# quotient's DECIMAL(36/37, s), printed trimmed
_SCALED_DECIMAL = r"^DECIMAL\((\d|[12]\d|3[0-5]),"


def _sum_avg_macros() -> list[str]:
    """hw_sum / hw_avg (and _distinct, and hw_avg_w for windows): overloads by argument
    type give PostgreSQL's result types: sum of int2/int4 is int8 (DuckDB: hugeint), of
    int8 numeric (a decimal, so that dividing it is numeric division); avg
    of integers and numerics is numeric (DuckDB: double), exact, as DECIMAL(37,16),
    which catalog/pgtypes/numeric.py prints at PostgreSQL's division scale. Other types keep
    DuckDB's sum/avg (an overload for them would cast decimals to it)."""
    out = []
    for d in ("", "DISTINCT "):
        sfx = "_distinct" if d else ""
        sums = [f"(x {t}) AS CAST(sum({d}x) AS BIGINT)" for t in ("SMALLINT", "INTEGER")]
        sums += [f"(x {t}) AS CAST(sum({d}x) AS {_NUMERIC})" for t in ("BIGINT", "HUGEINT")]
        # intervals: months, days and microseconds summed apart, as PostgreSQL keeps them
        sums.append(
            f"(x INTERVAL) AS to_months(CAST(sum({d}datepart('year', x) * 12"
            f" + datepart('month', x)) AS INTEGER)) + to_days(CAST(sum({d}datepart('day', x))"
            f" AS INTEGER)) + to_microseconds(CAST(sum({d}datepart('hour', x) * 3600000000"
            " + datepart('minute', x) * 60000000 + datepart('microseconds', x)) AS BIGINT))"
        )
        out.append(f"CREATE OR REPLACE MACRO hw_sum{sfx}{', '.join(sums)}, (x) AS sum({d}x)")
        avgs = [
            f"(x {t}) AS hw_avg_int(CAST(sum({d}x) AS DECIMAL(38,0)), count({d}x))"
            for t in _INT_TYPES
        ]
        avgs.append(f"(x {_NUMERIC}) AS hw_avg_exact(sum({d}x), count({d}x))")
        out.append(f"CREATE OR REPLACE MACRO hw_avg{sfx}{', '.join(avgs)}, (x) AS avg({d}x)")
    # avg over a window (a macro cannot hold the window): DuckDB's avg a, or, for integers
    # and numerics, the window's exact sum s over its count n
    out.append(f"CREATE OR REPLACE MACRO hw_try_numeric(x) AS TRY_CAST(x AS {_NUMERIC})")
    out.append(
        "CREATE OR REPLACE MACRO hw_array_to_json_pretty(a) AS '[' || array_to_string("
        "list_transform(a, lambda x: CAST(to_json(x) AS VARCHAR)), ',' || chr(10) || ' ') || ']'"
    )
    out.append(
        "CREATE OR REPLACE MACRO hw_json_key(k, n) AS CASE WHEN k IS NULL THEN"
        " error('[SQLSTATE 22004] argument ' || n || ' cannot be null')"
        " ELSE CAST(to_json(CAST(k AS VARCHAR)) AS VARCHAR) END"
    )
    out.append(
        "CREATE OR REPLACE MACRO hw_json_value(v) AS coalesce(CASE WHEN"
        f" regexp_matches(typeof(v), '{_SCALED_DECIMAL}') THEN CAST(v AS VARCHAR)"
        " ELSE CAST(to_json(v) AS VARCHAR) END, 'null')"
    )
    win = [f"(a, x {t}, s, n) AS hw_avg_exact(s, n)" for t in (*_INT_TYPES, _NUMERIC)]
    out.append(f"CREATE OR REPLACE MACRO hw_avg_w{', '.join(win)}, (a, x, s, n) AS a")
    pairs = (
        "list([CAST(y AS DOUBLE), CAST(x AS DOUBLE)])"
        " FILTER (WHERE y IS NOT NULL AND x IS NOT NULL)"
    )
    for name in PAIR_STATISTICS:
        out.append(f"CREATE OR REPLACE MACRO hw_{name}(y, x) AS hw_pairs_{name}({pairs})")
    for kind in sorted(set(_SPREADS.values())):
        for d in ("", "DISTINCT "):
            sfx = "_distinct" if d else ""
            exact = [
                f"(x {t}) AS hw_spread_{kind}(list({d}CAST(x AS {_NUMERIC})))"
                for t in (*_INT_TYPES, _NUMERIC)
            ]
            exact += [
                f"(x {t}) AS hw_float_{kind}(list({d}CAST(x AS DOUBLE)))"
                for t in ("DOUBLE", "FLOAT")
            ]
            out.append(
                f"CREATE OR REPLACE MACRO hw_{kind}{sfx}{', '.join(exact)}, (x) AS {kind}({d}x)"
            )
    return out


def _numeric_div_udf(dividends: Any, divisors: Any) -> Any:
    """numeric / numeric as PostgreSQL divides (DuckDB's decimal division is a double):
    rounded half away from zero at select_div_scale's scale, here at most 16 digits."""
    import pyarrow as pa

    out = []
    for a, b in zip(dividends.to_pylist(), divisors.to_pylist(), strict=True):
        if a is None or b is None:
            out.append(None)
            continue
        if not b:
            raise ZeroDivisionError("Division by zero")
        a, b = a.normalize(_DIV), b.normalize(_DIV)
        scales = (max(0, -x.as_tuple().exponent) for x in (a, b))
        r = min(numeric_div_scale(a, b, *scales), QUOTIENT_SCALE)
        q = _DIV.divide(a, b).quantize(Decimal(1).scaleb(-r), context=_DIV)
        out.append(_in_quotient_range(q))
    return pa.array(out, pa.decimal128(37, QUOTIENT_SCALE))


def _in_quotient_range(q: Decimal, precision: int = QUOTIENT_PRECISION) -> Decimal:
    if q.adjusted() >= precision - QUOTIENT_SCALE:
        raise ValueError(f"numeric value out of range for DECIMAL({precision},{QUOTIENT_SCALE})")
    return q


def _float_spread_udf(kind: str) -> Any:
    """stddev/variance of float8/float4 values (a list) as float8_accum sums them
    (Youngs-Cramer, step by step in the same doubles) and float8_var_samp & co. end."""
    sample, root = kind.endswith("_samp"), kind.startswith("stddev")

    def spread(lists: Any) -> Any:
        import pyarrow as pa

        out: list[float | None] = []
        for values in lists.to_pylist():
            n = sx = sxx = 0.0
            for x in values or ():
                if x is None:
                    continue
                n0, sx0 = n, sx
                n += 1.0
                sx += x
                if n0 > 0.0:
                    t = x * n - sx
                    sxx += t * t / (n * n0)
                    if math.isinf(sx) or math.isinf(sxx):
                        if not math.isinf(sx0) and not math.isinf(x):
                            raise ValueError("value out of range: overflow")
                        sxx = math.nan
                elif math.isnan(x) or math.isinf(x):
                    sxx = math.nan
            if n == 0.0 or (sample and n <= 1.0):
                out.append(None)
                continue
            v = sxx / (n - 1.0 if sample else n)
            out.append(math.sqrt(v) if root else v)
        return pa.array(out, pa.float64())

    return spread


def _pair_sums(pairs: list[list[float]]) -> tuple[float, float, float, float, float, float]:
    """float8_regr_accum: N, Sx, Sxx, Sy, Syy, Sxy by the Youngs-Cramer algorithm,
    step by step as PostgreSQL takes it (the same doubles, the same roundings)."""
    n = sx = sxx = sy = syy = sxy = 0.0
    for y, x in pairs:
        n0, sx0, sy0 = n, sx, sy
        n += 1.0
        sx += x
        sy += y
        if n0 > 0.0:
            tx, ty = x * n - sx, y * n - sy
            scale = 1.0 / (n * n0)
            sxx += tx * tx * scale
            syy += ty * ty * scale
            sxy += tx * ty * scale
            if any(map(math.isinf, (sx, sxx, sy, syy, sxy))):
                finite_x = not math.isinf(sx0) and not math.isinf(x)
                finite_y = not math.isinf(sy0) and not math.isinf(y)
                if (
                    ((math.isinf(sx) or math.isinf(sxx)) and finite_x)
                    or ((math.isinf(sy) or math.isinf(syy)) and finite_y)
                    or (math.isinf(sxy) and finite_x and finite_y)
                ):
                    raise ValueError("value out of range: overflow")
                sxx, syy, sxy = (math.nan if math.isinf(v) else v for v in (sxx, syy, sxy))
        else:
            if math.isnan(x) or math.isinf(x):
                sxx = sxy = math.nan
            if math.isnan(y) or math.isinf(y):
                syy = sxy = math.nan
    return n, sx, sxx, sy, syy, sxy


def _pair_statistic(
    name: str, n: float, sx: float, sxx: float, sy: float, syy: float, sxy: float
) -> float | None:
    """float8_corr, float8_covar_pop, ... from the sums (NULL on no pairs)."""
    if n < 1.0 or (name == "covar_samp" and n < 2.0):
        return None
    if name in ("corr", "regr_slope", "regr_intercept", "regr_r2") and sxx == 0:
        return None  # a vertical line
    if name == "corr":
        return None if syy == 0 else sxy / math.sqrt(sxx * syy)
    if name == "regr_r2":
        return 1.0 if syy == 0 else (sxy * sxy) / (sxx * syy)
    return {
        "covar_pop": lambda: sxy / n,
        "covar_samp": lambda: sxy / (n - 1.0),
        "regr_avgx": lambda: sx / n,
        "regr_avgy": lambda: sy / n,
        "regr_slope": lambda: sxy / sxx,
        "regr_intercept": lambda: (sy - sx * sxy / sxx) / n,
        "regr_sxx": lambda: sxx,
        "regr_syy": lambda: syy,
        "regr_sxy": lambda: sxy,
    }[name]()


def _pairs_udf(name: str) -> Any:
    """Arrow UDF: the statistic `name` of each group's list of [y, x] pairs."""

    def statistic(lists: Any) -> Any:
        import pyarrow as pa

        return pa.array(
            [_pair_statistic(name, *_pair_sums(pairs or ())) for pairs in lists.to_pylist()],
            pa.float64(),
        )

    return statistic


def _spread_udf(kind: str) -> Any:
    """stddev/variance over a group's values (a list) as PostgreSQL's numeric computes
    them (numeric_stddev_internal): N*sum(x^2) - sum(x)^2 exactly, divided at
    select_div_scale's scale, the square root taken at that same scale."""
    sample, root = kind.endswith("_samp"), kind.startswith("stddev")

    def spread(lists: Any) -> Any:
        import pyarrow as pa

        out = []
        for values in lists.to_pylist():
            xs = [v.normalize(_DIV) for v in values or () if v is not None]
            n = len(xs)
            if n == 0 or (sample and n == 1):
                out.append(None)
                continue
            total = sum(xs, Decimal(0))
            num = n * sum((x * x for x in xs), Decimal(0)) - total * total
            if num <= 0:
                out.append(Decimal(0))
                continue
            den = Decimal(n * (n - 1) if sample else n * n)
            dscale = 2 * max(max(0, -x.as_tuple().exponent) for x in xs)
            r = min(numeric_div_scale(num, den, dscale), QUOTIENT_SCALE)
            quantum = Decimal(1).scaleb(-r)
            v = _DIV.divide(num, den).quantize(quantum, context=_DIV)
            if root:
                v = v.sqrt(_DIV).quantize(quantum, context=_DIV)
            out.append(_in_quotient_range(v, SPREAD_PRECISION))
        return pa.array(out, pa.decimal128(SPREAD_PRECISION, QUOTIENT_SCALE))

    return spread


# Connections that registered functions: DuckDB 2.0 crashes when one is closed while
# its functions are still in the catalog.
_REGISTRARS: list[Any] = []


def _jsonb_in_udf(texts: Any) -> Any:
    import pyarrow as pa

    from headwater.errors import SQLError

    out = []
    for s in texts.to_pylist():
        try:
            out.append(None if s is None else normalize_jsonb(s))
        except SQLError:
            # DuckDB's wording, which storage/duckdb_errors.py reports as 22P02
            raise ValueError(f"Could not convert string '{s}' to JSON") from None
    return pa.array(out, pa.string())


def install_functions(db: Any) -> None:
    """Register on a DuckDB connection (and so its cursors) what PostgreSQL has and
    DuckDB does not: `interval / number` (DuckDB's integer_division makes `/` the `//`
    operator, which has no interval form; this adds one, with PostgreSQL's rounding),
    numeric / numeric (exact, as PostgreSQL rounds it), jsonb input of non-constant
    text, sum and avg with PostgreSQL's result types (hw_sum, hw_avg)."""
    db.create_function("//", _interval_div_udf, ["INTERVAL", "DOUBLE"], "INTERVAL", type="arrow")
    # x::jsonb of a non-constant: normalized as jsonb input is
    db.create_function("hw_jsonb_in", _jsonb_in_udf, ["VARCHAR"], "VARCHAR", type="arrow")
    # A second "//": a connection registers one function per name, DuckDB's catalog
    # keeps them all as overloads (decimal operands: numeric division)
    other = db.cursor()
    other.create_function("//", _numeric_div_udf, [_NUMERIC, _NUMERIC], _QUOTIENT, type="arrow")
    _REGISTRARS.append(other)
    # avg from an exact sum and a count, at most 16 decimals (DECIMAL(37,16)): reads,
    # and views' running sums (engine/rules/linear_aggregate.py; Spark: the same UDF)
    for name, total in (("hw_avg_int", "DECIMAL(38,0)"), ("hw_avg_exact", _NUMERIC)):
        db.create_function(name, _avg_udf(16), [total, "BIGINT"], "DECIMAL(37,16)", type="arrow")
    # statistics of a group's values (a list; NULL on none, or one row's sample)
    kinds = sorted(set(_SPREADS.values()))
    spread = f"DECIMAL({SPREAD_PRECISION},{QUOTIENT_SCALE})"
    statistics = [(f"hw_spread_{k}", _spread_udf(k), f"{_NUMERIC}[]", spread) for k in kinds]
    statistics += [(f"hw_float_{k}", _float_spread_udf(k), "DOUBLE[]", "DOUBLE") for k in kinds]
    pairs = PAIR_STATISTICS
    statistics += [(f"hw_pairs_{n}", _pairs_udf(n), "DOUBLE[][]", "DOUBLE") for n in pairs]
    for name, udf, arg, result in statistics:
        db.create_function(name, udf, [arg], result, type="arrow", null_handling="special")
    for sql in _sum_avg_macros():
        db.execute(sql)
    functions.install(db)  # date/time and formatting functions (planner/functions/)
