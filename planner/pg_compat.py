"""Rewrite what PostgreSQL clients send about the catalog into SQL DuckDB runs.

psql, pgjdbc and SQLAlchemy query pg_catalog with PostgreSQL's functions, casts and
operators: `'t'::regclass`, `c.oid::regclass::text`, `pg_get_indexdef(oid, 0, true)`,
`pg_table_is_visible(c.oid)`, `OPERATOR(pg_catalog.~)`, `COLLATE pg_catalog.default`,
`current_user`, `information_schema._pg_expandarray(...)`, ... This pass turns them
into plain expressions, or into scalar subqueries over the system relations of
catalog/system.py (the internal `pg_catalog._hw_*` relations carry what the
functions need). The Binder then resolves those relations like any other.

The pass works on the pglast tree in place, before binding, and is idempotent: what
it produces is never rewritten again, so a prepared statement may pass through it at
every execution. Values never become SQL text: arguments stay tree nodes, and
constants the pass introduces are A_Const nodes that the deparser quotes.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

import pglast.ast as A
from pglast import parse_sql
from pglast.enums import A_Expr_Kind, BoolExprType, NullTestType, SQLValueFunctionOp
from pglast.stream import RawStream

SYSTEM_QUALIFIERS = ("pg_catalog", "information_schema")
SERVER_VERSION_TEXT = (
    "PostgreSQL 15.0 (Headwater 0.1.0) on x86_64-pc-linux-gnu, "
    "compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit"
)

_REG_TYPES = ("regclass", "regtype", "regnamespace", "regrole", "regproc", "regprocedure")
_TEXT_TYPES = ("text", "varchar", "name", "bpchar", "char")

# Casts to PostgreSQL-only types: the DuckDB type that stores their values.
_TYPE_MAP: dict[str, tuple[str, bool]] = {  # name -> (DuckDB type, list of it)
    "oid": ("int8", False),
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
    "oidvector": ("int8", True),
    "sql_identifier": ("text", False),
    "character_data": ("text", False),
    "yes_or_no": ("text", False),
    "cardinal_number": ("int4", False),
}

_NULL_TEXT_FUNCS = frozenset(
    {
        "obj_description",
        "col_description",
        "shobj_description",
        "pg_get_partkeydef",
        "pg_get_serial_sequence",
        "pg_get_statisticsobjdef_columns",
        "pg_get_ruledef",
        "pg_get_triggerdef",
        "pg_get_functiondef",
        "pg_get_function_arguments",
        "pg_get_function_identity_arguments",
        "pg_get_function_result",
        "pg_get_constraintdef_ext",
        "inet_server_addr",
        "inet_client_addr",
    }
)
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
_TABLE_VISIBLE = (
    "(SELECT bool_or(_hw_v.hw_visible) FROM pg_catalog._hw_relvis _hw_v "
    "WHERE _hw_v.hw_oid = __hwarg0)"
)
_SETTING = (
    "(SELECT min(_hw_g.hw_setting) FROM pg_catalog._hw_settings _hw_g "
    "WHERE _hw_g.hw_name = lower(__hwarg0))"
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
_EXPANDARRAY = "struct_pack(x := unnest(__hwarg0), n := generate_subscripts(__hwarg0, 1))"
_ARRAY_UPPER = "CASE WHEN len(__hwarg0) > 0 THEN len(__hwarg0) END"
_ARRAY_LOWER = "CASE WHEN len(__hwarg0) > 0 THEN 1 END"

_template_cache: dict[str, str] = {}


def _deparse(node: Any) -> str:
    return str(RawStream()(node))


def _copy(node: Any) -> Any:
    """A fresh copy of an expression node (the Binder rewrites nodes in place)."""
    return parse_sql(f"SELECT {_deparse(node)}")[0].stmt.targetList[0].val


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


def _cast(node: Any, type_name: str, array: bool = False) -> Any:
    return A.TypeCast(arg=node, typeName=_type_name(type_name, array))


def _names(node_names: Any) -> list[str]:
    return [n.sval for n in node_names if isinstance(n, A.String)]


def _type_of(tc: A.TypeCast) -> str:
    names = _names(tc.typeName.names)
    return names[-1].lower() if names else ""


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


# -- the pass ----------
def rewrite(stmt: Any, array_literals: bool = True) -> None:
    """Rewrite `stmt` in place (see the module docstring). `array_literals=False`
    leaves '{1,2}' string constants as written (values an INSERT or UPDATE stores)."""
    token = _ARRAY_LITERALS.set(array_literals)
    try:
        _visit(stmt)
    finally:
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
    if isinstance(node, A.SelectStmt) and node.targetList:
        # A bare `x::regclass` output column shows the relation's name.
        for rt in node.targetList:
            if (
                isinstance(rt, A.ResTarget)
                and isinstance(rt.val, A.TypeCast)
                and _type_of(rt.val) in _REG_TYPES
            ):
                rt.val = _cast(rt.val, "text")
            # SELECT generate_series(1, 3): three rows, as in PostgreSQL
            if (
                isinstance(rt, A.ResTarget)
                and isinstance(rt.val, A.FuncCall)
                and rt.val.over is None
                and "".join(_names(rt.val.funcname)[-1:]).lower() in _LIST_SRFS
            ):
                rt.val = A.FuncCall(funcname=(A.String(sval="unnest"),), args=(rt.val,))
    new = _transform(node)
    if new is not node:
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


def _transform(node: Any) -> Any:
    """The replacement of `node`, or `node` itself."""
    if isinstance(node, A.FuncCall):
        return _func(node)
    if isinstance(node, A.TypeCast):
        return _typecast(node)
    if isinstance(node, A.SQLValueFunction):
        return _sql_value_function(node)
    if isinstance(node, A.A_Expr):
        return _a_expr(node)
    if isinstance(node, A.CollateClause):
        return node.arg
    if isinstance(node, A.ColumnRef):
        fields = node.fields
        if (
            len(fields) >= 3
            and isinstance(fields[0], A.String)
            and fields[0].sval in SYSTEM_QUALIFIERS
        ):
            node.fields = fields[1:]
        return node
    return node


def _func(fc: A.FuncCall) -> Any:
    names = _names(fc.funcname)
    if len(names) == 2 and names[0] in SYSTEM_QUALIFIERS:
        fc.funcname = (A.String(sval=names[1]),)
        names = names[1:]
    if len(names) != 1:
        return fc
    name = names[0].lower()
    args = list(fc.args or ())
    if name in _RENAMED:
        fc.funcname = (A.String(sval=_RENAMED[name]),)
        return fc
    if name in ("sum", "avg") and len(args) == 1 and not (fc.agg_order or fc.agg_within_group):
        return _sum_avg(fc, name, args[0])
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
    if name == "pg_backend_pid" and not args:
        return _template(_SESSION.format(col="pid"))
    if name == "current_setting" and args:
        return _template(_SETTING, args[0])
    if name == "format_type" and len(args) == 2:
        return _template(_FORMAT_TYPE, args[0], args[1])
    if name == "pg_get_expr" and args:
        return args[0]
    if name == "pg_get_indexdef" and args:
        n = args[1] if len(args) >= 2 else _const(0)
        return _template(_DEF, args[0], n)
    if name in ("pg_get_constraintdef", "pg_get_viewdef") and args:
        target = args[0]
        n = _const(0)
        if name == "pg_get_viewdef":
            if _stringish(target):
                target = _template(_RELNAME_OID, target)
            if len(args) > 1:  # pretty (or a wrap column, which implies pretty)
                n = _template("CASE WHEN CAST(__hwarg0 AS boolean) THEN -1 ELSE 0 END", args[1])
        return _template(_DEF, target, n)
    if name == "pg_table_is_visible" and len(args) == 1:
        return _template(_TABLE_VISIBLE, args[0])
    if name in _VISIBLE_FUNCS and len(args) == 1:
        return _template("(__hwarg0 IS NOT NULL)", args[0])
    if name in _NULL_TEXT_FUNCS:
        return _cast(_const(None), "text")
    if name in _PRIV_FUNCS and len(args) >= 2:
        # (object, privilege) or (role, object, privilege): the session's role is asked
        obj, priv = (args[-2], args[-1]) if name != "has_column_privilege" else (args[-3], args[-1])
        if len(args) == 4 or (name == "has_column_privilege" and len(args) < 3):
            return _const(True)
        kind = "regnamespace" if name == "has_schema_privilege" else "regclass"
        return _template(_HAS_PRIV, _oid_of(kind, obj), priv)
    if name in _TRUE_FUNCS:
        return _const(True)
    if name in _FALSE_FUNCS:
        return _const(False)
    if name == "pg_get_userbyid" and len(args) == 1:
        return _template(_USERBYID, args[0])
    if name == "pg_encoding_to_char" and len(args) == 1:
        return _template(_ENCODING, args[0])
    if name in _SIZE_FUNCS and args:
        return _cast(_const(0), "int8")
    if name == "pg_size_pretty" and len(args) == 1:
        return _template(_SIZE_PRETTY, args[0])
    if name == "quote_ident" and len(args) == 1:
        return _template(_QUOTE_IDENT, args[0])
    if name == "to_regclass" and len(args) == 1:
        return _template(_RELNAME_OID, args[0])
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
        return _cast(_const(0), "int8")
    return fc


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
        return A.FuncCall(funcname=(A.String(sval="hw_avg_w"),), args=(fc, _copy(arg)))
    suffix = "_distinct" if fc.agg_distinct else ""
    return A.FuncCall(funcname=(A.String(sval=f"hw_{name}{suffix}"),), args=(arg,), over=fc.over)


_AGGREGATES = frozenset(
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
        if node.over is not None or fname in _AGGREGATES or fname.startswith("hw_"):
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
        return _cast(arg, "int8")
    if reg == "regclass":
        return _template(_RELNAME_OID, arg)
    if reg == "regtype":
        return _template(_TYPNAME_OID, arg)
    if reg == "regnamespace":
        return _template(_NSPNAME_OID, arg)
    if reg == "regrole":
        return _template(_ROLNAME_OID, arg)
    return _cast(arg, "int8")


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


def _typecast(tc: A.TypeCast) -> Any:
    fixed = interval_literal(tc)
    if fixed is not None:
        return fixed
    tn = tc.typeName
    if tn.arrayBounds:
        _to_duckdb_list(tc.arg)  # '{1,2}'::int[]
    elif _names(tn.names)[-1:] == ["jsonb"]:
        return _jsonb(tc.arg)
    elif _names(tn.names)[-1:] in (["numeric"], ["decimal"]) and not tn.typmods:
        return _numeric(tc.arg)
    names = _names(tn.names)
    if len(names) == 2 and names[0] in SYSTEM_QUALIFIERS:
        tn.names = (A.String(sval=names[1]),)
        names = names[1:]
    if len(names) != 1:
        return tc
    name = names[0].lower()
    arg = tc.arg
    # x::regclass::text and friends: the object's name
    if name in _TEXT_TYPES and isinstance(arg, A.TypeCast) and _type_of(arg) in _REG_TYPES:
        inner = _type_of(arg)
        if inner in ("regproc", "regprocedure"):
            return _typecast(arg)
        oid = _oid_of(inner, arg.arg)
        if inner == "regclass":
            return _template(_RELVIS_DISPLAY, oid)
        if inner == "regtype":
            return _template(_FORMAT_TYPE, oid, _cast(_const(None), "int4"))
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
        return A.TypeCast(arg=arg, typeName=_type_name(duck, is_list or bool(tn.arrayBounds)))
    return tc


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
            from headwater.server.values import normalize_jsonb  # 22P02 as PostgreSQL

            arg = _const(normalize_jsonb(arg.val.sval))
        return _cast(arg, "json")
    call = A.FuncCall(funcname=(A.String(sval="hw_jsonb_in"),), args=(_cast(arg, "text"),))
    return _cast(call, "json")


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
    return node


def _a_expr(node: A.A_Expr) -> Any:
    names = _names(node.name or ())
    if len(names) == 2 and names[0] in SYSTEM_QUALIFIERS:
        node.name = (A.String(sval=names[1]),)
        names = names[1:]
    if node.kind in (A_Expr_Kind.AEXPR_OP_ANY, A_Expr_Kind.AEXPR_OP_ALL) and len(names) == 1:
        return _any_all(node, names[0])
    if node.kind == A_Expr_Kind.AEXPR_OP and names and names[-1] in _COMPARISONS:
        # arr = '{1,2}': the constant takes the other side's type, an array
        for const, other in ((node.lexpr, node.rexpr), (node.rexpr, node.lexpr)):
            if _ARRAY_LITERALS.get() and isinstance(const, A.A_Const):
                kind = _arrayish(other)
                if kind == "array" or (kind == "maybe" and _numbers_only(const)):
                    _to_duckdb_list(const)
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


def parse_array_literal(text: str) -> list[Any] | None:
    """The elements of PostgreSQL's array input syntax ('{1,"a b",NULL,{2}}'): strings,
    None for NULL, lists for sub-arrays; None if `text` is not such a literal (or has
    dimension decorations, which are left to DuckDB to refuse)."""
    pos = 0
    n = len(text)

    def skip_ws() -> None:
        nonlocal pos
        while pos < n and text[pos].isspace():
            pos += 1

    def parse_array() -> list[Any] | None:
        nonlocal pos
        pos += 1  # "{"
        out: list[Any] = []
        skip_ws()
        if pos < n and text[pos] == "}":
            pos += 1
            return out
        while True:
            skip_ws()
            if pos >= n:
                return None
            c = text[pos]
            if c == "{":
                sub = parse_array()
                if sub is None:
                    return None
                out.append(sub)
            elif c == '"':
                pos += 1
                buf = []
                while pos < n and text[pos] != '"':
                    if text[pos] == "\\":
                        pos += 1
                    if pos < n:
                        buf.append(text[pos])
                        pos += 1
                if pos >= n:
                    return None
                pos += 1
                out.append("".join(buf))
            else:
                buf, raw_end, quoted = [], 0, False
                while pos < n and text[pos] not in ",}{\"":
                    if text[pos] == "\\":
                        pos += 1
                        if pos >= n:
                            return None
                        quoted = True
                        buf.append(text[pos])
                        raw_end = len(buf)
                    else:
                        buf.append(text[pos])
                        if not text[pos].isspace():
                            raw_end = len(buf)
                    pos += 1
                if pos < n and text[pos] in '{"':
                    return None
                word = "".join(buf[:raw_end])
                if not word:
                    return None
                out.append(None if word.upper() == "NULL" and not quoted else word)
            skip_ws()
            if pos >= n:
                return None
            if text[pos] == ",":
                pos += 1
                continue
            if text[pos] == "}":
                pos += 1
                return out
            return None

    skip_ws()
    if pos >= n or text[pos] != "{":
        return None
    elements = parse_array()
    skip_ws()
    return elements if elements is not None and pos == n else None


def _duckdb_list_text(elements: list[Any]) -> str:
    """DuckDB's list input syntax for the same elements (every string quoted)."""
    parts = []
    for e in elements:
        if e is None:
            parts.append("NULL")
        elif isinstance(e, list):
            parts.append(_duckdb_list_text(e))
        else:
            parts.append('"' + e.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "[" + ", ".join(parts) + "]"


def _to_duckdb_list(node: Any) -> None:
    """A '{...}' string constant in place of an array: rewritten in DuckDB's syntax."""
    if isinstance(node, A.A_Const) and isinstance(node.val, A.String):
        elements = parse_array_literal(node.val.sval)
        if elements is not None:
            node.val = A.String(sval=_duckdb_list_text(elements))


def _numbers_only(const: A.A_Const) -> bool:
    elements = parse_array_literal(const.val.sval) if isinstance(const.val, A.String) else None
    return bool(elements) and all(
        e is None or (isinstance(e, str) and _NUMBER.fullmatch(e)) for e in elements or ()
    )


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
            return A.BoolExpr(boolop=BoolExprType.OR_EXPR if is_any else BoolExprType.AND_EXPR,
                              args=tuple(tests))
        return node  # not an array: DuckDB's error
    if isinstance(arr, A.A_ArrayExpr) or (
        isinstance(arr, A.TypeCast)
        and isinstance(arr.arg, A.A_Const)
        and not arr.arg.isnull
    ):
        return node  # never NULL
    test = A.NullTest(arg=_copy(arr), nulltesttype=NullTestType.IS_NULL)
    return A.CaseExpr(
        args=(A.CaseWhen(expr=test, result=_cast(_const(None), "bool")),),
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
        from headwater.server.values import numeric_div_scale

        out = []
        for total, n in zip(sums.to_pylist(), counts.to_pylist(), strict=True):
            if total is None or not n:
                out.append(None)
                continue
            d = Decimal(n)
            total_scale = max(0, -total.normalize().as_tuple().exponent)
            r = min(numeric_div_scale(total, d, total_scale), scale)
            out.append(_DIV.divide(total, d).quantize(Decimal(1).scaleb(-r), context=_DIV))
        return pa.array(out, pa.decimal128(37, scale))

    return avg


_INT_TYPES = ("SMALLINT", "INTEGER", "BIGINT")
_DIV = Context(prec=120, rounding=ROUND_HALF_UP)
_NUMERIC = "DECIMAL(38,16)"  # unconstrained numeric


def _sum_avg_macros() -> list[str]:
    """hw_sum / hw_avg (and _distinct, and hw_avg_w for windows): overloads by argument
    type give PostgreSQL's result types: sum of int2/int4 is int8 (DuckDB: hugeint), of
    int8 numeric (a decimal, so that dividing it is numeric division); avg
    of integers and numerics is numeric (DuckDB: double), exact, as DECIMAL(37,16),
    which server/values.py prints at PostgreSQL's division scale. Other types keep
    DuckDB's sum/avg (an overload for them would cast decimals to it)."""
    out = []
    for d in ("", "DISTINCT "):
        sfx = "_distinct" if d else ""
        sums = [f"(x {t}) AS CAST(sum({d}x) AS BIGINT)" for t in ("SMALLINT", "INTEGER")]
        sums += [f"(x {t}) AS CAST(sum({d}x) AS {_NUMERIC})" for t in ("BIGINT", "HUGEINT")]
        out.append(f"CREATE OR REPLACE MACRO hw_sum{sfx}{', '.join(sums)}, (x) AS sum({d}x)")
        avgs = [
            f"(x {t}) AS hw_avg_int(CAST(sum({d}x) AS DECIMAL(38,0)), count({d}x))"
            for t in _INT_TYPES
        ]
        avgs.append(f"(x {_NUMERIC}) AS hw_avg_numeric(sum({d}x), count({d}x))")
        out.append(f"CREATE OR REPLACE MACRO hw_avg{sfx}{', '.join(avgs)}, (x) AS avg({d}x)")
    # avg over a window: DuckDB's (a double), typed by the argument x; its shortest text
    # is the numeric (a macro holding the window would need exactly one aggregate)
    win = [
        f"(a, x {t}) AS CAST(CAST(a AS VARCHAR) AS DECIMAL(37,16))"
        for t in (*_INT_TYPES, _NUMERIC)
    ]
    out.append(f"CREATE OR REPLACE MACRO hw_avg_w{', '.join(win)}, (a, x) AS a")
    return out


def _numeric_div_udf(dividends: Any, divisors: Any) -> Any:
    """numeric / numeric as PostgreSQL divides (DuckDB's decimal division is a double):
    rounded half away from zero at select_div_scale's scale, here at most 16 digits."""
    import pyarrow as pa
    from headwater.server.values import numeric_div_scale

    out = []
    for a, b in zip(dividends.to_pylist(), divisors.to_pylist(), strict=True):
        if a is None or b is None:
            out.append(None)
            continue
        if not b:
            raise ZeroDivisionError("Division by zero")
        a, b = a.normalize(_DIV), b.normalize(_DIV)
        scales = (max(0, -x.as_tuple().exponent) for x in (a, b))
        r = min(numeric_div_scale(a, b, *scales), 16)
        q = _DIV.divide(a, b).quantize(Decimal(1).scaleb(-r), context=_DIV)
        if q.adjusted() >= 21:
            raise ValueError("numeric value out of range for DECIMAL(37,16)")
        out.append(q)
    return pa.array(out, pa.decimal128(37, 16))


# Connections that registered functions: DuckDB 2.0 crashes when one is closed while
# its functions are still in the catalog.
_REGISTRARS: list[Any] = []


def _jsonb_in_udf(texts: Any) -> Any:
    import pyarrow as pa
    from headwater.server.values import normalize_jsonb

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
    db.create_function(
        "//", _interval_div_udf, ["INTERVAL", "DOUBLE"], "INTERVAL", type="arrow"
    )
    # x::jsonb of a non-constant: normalized as jsonb input is
    db.create_function("hw_jsonb_in", _jsonb_in_udf, ["VARCHAR"], "VARCHAR", type="arrow")
    # A second "//": a connection registers one function per name, DuckDB's catalog
    # keeps them all as overloads (decimal operands: numeric division)
    other = db.cursor()
    other.create_function(
        "//", _numeric_div_udf, [_NUMERIC, _NUMERIC], "DECIMAL(37,16)", type="arrow"
    )
    _REGISTRARS.append(other)
    for name, total in (("hw_avg_int", "DECIMAL(38,0)"), ("hw_avg_numeric", _NUMERIC)):
        db.create_function(name, _avg_udf(16), [total, "BIGINT"], "DECIMAL(37,16)", type="arrow")
    for sql in _sum_avg_macros():
        db.execute(sql)
