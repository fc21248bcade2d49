"""CREATE FUNCTION ... LANGUAGE sql and DROP FUNCTION; and every statement's calls of
those functions inlined before it runs (planner/sql_functions.py).

A function's body is one SELECT (`AS $$ SELECT ... $$`, `RETURN expr`, or `BEGIN ATOMIC
SELECT ...; END`): reads, writes, defaults, CHECKs and views calling it get the body in
its place, so a materialized view calling one is maintained on Spark like any other.
A view keeps the inlined text: dropping or replacing the function later does not change
it (PostgreSQL's view would call the new body, or refuse the DROP).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass, replace
from typing import Any

import pglast.ast as A
from headwater.catalog.catalog import Catalog
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Function, MaterializedView, Param, Relation, Table, View
from headwater.catalog.privileges import function_acl, memberships
from headwater.catalog.types import ColumnType
from headwater.planner.ddl import type_of
from headwater.planner.pg_compat import AGGREGATES, copy_tree
from headwater.planner.plpgsql import compile_trigger, parse_function
from headwater.planner.relations import deparse
from headwater.planner.sql_functions import POLYMORPHIC, has_calls, inline
from headwater.planner.syntax import nodes, replaced
from headwater.server import plpgsql_exec, triggers
from headwater.server.binders import user_types
from headwater.server.owners import new_owner
from headwater.server.results import Result
from headwater.server.session import Session, WriteTxn
from pglast import parse_sql
from pglast.enums import (
    BoolExprType,
    DropBehavior,
    FunctionParameterMode,
    ObjectType,
    SubLinkType,
)
from pglast.enums.parsenodes import A_Expr_Kind
from pglast.parser import ParseError

from headwater.errors import (
    DependentObjects,
    FeatureNotSupported,
    InsufficientPrivilege,
    SQLError,
    SyntaxErr,
    UndefinedFunction,
)

_VOLATILITY = {"immutable": "i", "stable": "s", "volatile": "v"}
# options that change nothing here (the planner's estimates, parallel safety)
_IGNORED = frozenset(("cost", "rows", "parallel", "leakproof"))
_INVALID = "42P13"  # invalid_function_definition


# -- CREATE FUNCTION ---------------------------------------------------------------------
def create(s: Session, w: WriteTxn, stmt: A.CreateFunctionStmt) -> Result:
    cat = w.catalog
    names = [n.sval for n in stmt.funcname]
    name = names[-1]
    options = {o.defname: o.arg for o in stmt.options or ()}
    language = options["language"].sval.lower() if "language" in options else None
    if language is None and stmt.sql_body is None:
        raise SQLError("no language specified", _INVALID)
    if language not in (None, "sql", "plpgsql"):
        raise FeatureNotSupported(
            f'language "{language}" is not supported',
            hint="Headwater runs LANGUAGE sql functions (inlined where they are called) and"
            " procedures, and plpgsql functions and procedures.",
        )
    for option in options:
        if option not in ("language", "as", "volatility", "strict", "security", *_IGNORED):
            raise FeatureNotSupported(f"function option {option.upper()} is not supported")
    if "security" in options and options["security"].boolval:
        raise FeatureNotSupported(
            "SECURITY DEFINER functions are not supported",
            hint="An inlined body runs with the caller's privileges.",
        )
    schema = cat.creation_schema(names[0] if len(names) > 1 else None, s.search_path())
    types = user_types(s, w)

    def type_text(tn: A.TypeName) -> str:
        if tn.pct_type:
            raise FeatureNotSupported("%TYPE in a function's signature is not supported")
        written = tn.names[-1].sval.lower()
        if written in POLYMORPHIC or written in ("record", "void", "trigger"):
            return written
        return ColumnType(type_of(tn, types).pg).sql()  # without its typmod, as PostgreSQL

    params: list[Param] = []  # what a call gives
    columns: list[tuple[str, str]] = []  # what it returns: RETURNS TABLE's, OUT's
    declared: list[Param] = []
    for p in stmt.parameters or ():
        if p.mode == FunctionParameterMode.FUNC_PARAM_TABLE:
            columns.append((p.name, type_text(p.argType)))
            continue
        mode = _MODES.get(p.mode)
        if mode is None:
            raise FeatureNotSupported(
                f"{p.mode.name.removeprefix('FUNC_PARAM_')} parameters are not supported",
                hint="Give the values as an array parameter instead.",
            )
        default = deparse(p.defexpr) if p.defexpr is not None else None
        inputs = [q for q in declared if q.mode != "o"]
        if mode != "o" and default is None and inputs and inputs[-1].default is not None:
            raise SQLError(
                "input parameters after one with a default value must also have defaults",
                _INVALID,
            )
        param = Param(p.name or "", type_text(p.argType), default, mode)
        declared.append(param)
        if mode != "o" or stmt.is_procedure:  # (CALL gives a procedure's OUT ones too)
            params.append(param)
        if mode != "i":
            columns.append((p.name or f"column{len(columns) + 1}", param.type))
    outs = [p for p in declared if p.mode != "i"]
    ret = stmt.returnType
    if outs and not stmt.is_procedure:  # the result is the OUT parameters' row
        single = outs[0].type if len(outs) == 1 else "record"
        if ret is None:
            ret = type_name(single)
        elif type_text(ret) != single:
            raise SQLError(
                f"function result type must be {single} because of OUT parameters", _INVALID
            )
    if stmt.is_procedure:
        ret = A.TypeName(names=(A.String(sval="void"),), typemod=-1)
    if ret is None:
        raise SQLError("function result type must be specified", _INVALID)
    rowtype = _rowtype(s, cat, ret)
    if rowtype is not None:  # RETURNS SETOF a_table: its columns
        if not ret.setof:
            raise FeatureNotSupported(
                f"a function returning one row of {rowtype.name} is not supported",
                hint=f"Declare it RETURNS SETOF {rowtype.name} and call it in FROM.",
            )
        returns = rowtype.name  # (the body's SELECT names the columns)
    else:
        returns = type_text(ret)
    volatility = _VOLATILITY[options["volatility"].sval] if "volatility" in options else "v"
    strict = bool("strict" in options and options["strict"].boolval)
    if language == "plpgsql" and returns == "trigger":
        fn = _trigger_function(schema, name, returns, params, options, volatility, strict)
        return _put(s, cat, stmt, fn)
    declared_if = tuple(declared) if outs else ()
    if language == "plpgsql" or stmt.is_procedure:  # run statement by statement
        fn = Function(
            0,
            schema,
            name,
            tuple(params),
            returns,
            bool(ret.setof),
            "",
            "",
            volatility,
            strict,
            tuple(columns),
            language=language or "sql",
            prokind="p" if stmt.is_procedure else "f",
            declared=declared_if,
        )
        return _put(s, cat, stmt, _routine(stmt, fn, options))
    if returns == "trigger":
        raise SQLError("SQL functions cannot return type trigger", _INVALID)
    if returns == "void":
        raise FeatureNotSupported(
            "functions returning void are not supported",
            hint="A SQL function here returns the value of one SELECT.",
        )
    returns_set = bool(ret.setof)
    body, source = _body(stmt, options, name)
    width = len(columns) or 1
    if not returns_set and len(body.targetList or ()) != width and returns != "record":
        raise SQLError(
            f"return type mismatch in function declared to return {returns}",
            _INVALID,
            detail="Final statement must return exactly one column.",
        )
    fn = Function(
        0,
        schema,
        name,
        tuple(params),
        returns,
        returns_set,
        deparse(body),
        source,
        volatility,
        strict,
        tuple(columns),
        declared=declared_if,
    )
    return _put(s, cat, stmt, fn)


_MODES = {
    FunctionParameterMode.FUNC_PARAM_DEFAULT: "i",
    FunctionParameterMode.FUNC_PARAM_IN: "i",
    FunctionParameterMode.FUNC_PARAM_OUT: "o",
    FunctionParameterMode.FUNC_PARAM_INOUT: "b",
}


def _routine(stmt: A.CreateFunctionStmt, fn: Function, options: dict[str, Any]) -> Function:
    """A plpgsql function or procedure, or a SQL procedure (`fn` without its body): its
    body is checked now and run a statement at a time when called
    (server/routine_calls.py)."""
    name, language = fn.name, fn.language
    if any(p.type in POLYMORPHIC for p in fn.params):
        raise FeatureNotSupported(
            f"polymorphic parameters of a {language} routine are not supported"
        )
    if language == "sql":  # a procedure: its statements, parsed now
        source = options["as"][0].sval if "as" in options else ""
        if stmt.sql_body is not None:  # BEGIN ATOMIC ... END
            source = ";\n".join(deparse(b) for b in _statements(stmt.sql_body))
        try:
            parse_sql(source)
        except ParseError as e:
            raise SyntaxErr(f"{e.args[0]} in the body of procedure {name}") from None
    else:
        if "as" not in options:
            raise SQLError("no function body specified", _INVALID)
        source = options["as"][0].sval
        kind = "procedure" if stmt.is_procedure else "function"
        typed, result = plpgsql_signature(fn)
        tree = parse_function(source, f"{kind} {name}", result, typed, stmt.is_procedure)
        plpgsql_exec.check(tree["action"], setof=fn.returns_set)  # 0A000 for what it lacks
    return replace(fn, body=source, source=source)


def plpgsql_signature(fn: Function) -> tuple[tuple[tuple[str, ...], ...], str]:
    """The parameters (name, type[, mode]) and RETURNS clause (`integer`, `SETOF t`,
    `TABLE (a integer, ...)`) pglast's PL/pgSQL parser is given for a body."""
    if fn.declared:  # OUT parameters: the result is theirs
        typed = tuple((p.name, p.type, p.mode_word) for p in fn.declared)
        return typed, f"SETOF {fn.returns}" if fn.returns_set else fn.returns
    typed = tuple((p.name, p.type) for p in fn.params)
    if fn.columns:
        return typed, f"TABLE ({', '.join(f'{quote_ident(n)} {t}' for n, t in fn.columns)})"
    return typed, f"SETOF {fn.returns}" if fn.returns_set else fn.returns


def _trigger_function(
    schema: str,
    name: str,
    returns: str,
    params: list[Param],
    options: dict[str, Any],
    volatility: str,
    strict: bool,
) -> Function:
    """LANGUAGE plpgsql: a trigger function of the form planner/plpgsql.py runs."""
    if returns != "trigger":
        raise FeatureNotSupported(
            'language "plpgsql" is supported for trigger functions only',
            hint="Write the function in LANGUAGE sql (one SELECT or RETURN expression).",
        )
    if params:
        raise SQLError(
            "trigger functions cannot have declared arguments",
            _INVALID,
            hint="The arguments of the trigger can be accessed through TG_NARGS and TG_ARGV"
            " instead.",
        )
    if "as" not in options:
        raise SQLError("no function body specified", _INVALID)
    source = options["as"][0].sval
    compile_trigger(name, source)  # 0A000 now for what it could not run
    return Function(
        0,
        schema,
        name,
        (),
        "trigger",
        False,
        source,
        source,
        volatility,
        strict,
        language="plpgsql",
    )


def _put(s: Session, cat: Catalog, stmt: A.CreateFunctionStmt, fn: Function) -> Result:
    """CREATE [OR REPLACE]: `fn` added, or put in place of the one it replaces."""
    schema, name, returns, returns_set = fn.schema, fn.name, fn.returns, fn.returns_set
    same = [f for f in cat.find_functions(schema, name, ()) if f.identity == fn.identity]
    if same:
        old = same[0]
        if not stmt.replace:
            raise SQLError(f'function "{name}" already exists with same argument types', "42723")
        if (old.returns, old.returns_set, old.columns) != (returns, returns_set, fn.columns):
            raise SQLError(
                "cannot change return type of existing function",
                _INVALID,
                hint=f"Use DROP FUNCTION {name}({','.join(p.type for p in old.params)}) first.",
            )
        users = dependents(cat, old)
        if users:
            raise FeatureNotSupported(
                f"cannot replace function {_signature(old)}: {users[0].kind} {users[0].name}"
                " holds its body",
                detail="\n".join(
                    f"{r.kind} {r.name} depends on function {_signature(old)}" for r in users
                ),
                hint="Headwater inlines a SQL function where it is called: drop the dependent"
                " objects, replace the function, and create them again.",
            )
        cat.put_function(
            replace(fn, oid=old.oid, owner=old.owner, acl=old.acl, comment=old.comment)
        )
        return Result(_tag("CREATE", fn))
    for other in cat.find_functions(schema, name, ()):
        if _overlap(other, fn):
            raise FeatureNotSupported(
                f"function {name}({fn.identity}) would overload {name}({other.identity})"
                " with as many arguments",
                hint="Headwater tells a function's overloads apart by their number of"
                " arguments; give this one another name.",
            )
    cat.put_function(replace(fn, oid=cat.allocate_oid()))
    return Result(_tag("CREATE", fn))


def _tag(verb: str, fn: Function) -> str:
    return f"{verb} {'PROCEDURE' if fn.prokind == 'p' else 'FUNCTION'}"


def _rowtype(s: Session, cat: Catalog, tn: A.TypeName) -> Relation | None:
    """The table or view a result type names (its row type), if it names one."""
    names = [n.sval for n in tn.names]
    if len(names) > 2 or tn.arrayBounds or names[0] == "pg_catalog":
        return None
    if cat.type_named(names, s.search_path()) is not None:
        return None
    rel = cat.resolve(names[0] if len(names) == 2 else None, names[-1], s.search_path())
    return rel if isinstance(rel, Table | View | MaterializedView) else None


def _overlap(a: Function, b: Function) -> bool:
    """Whether a call with some number of arguments could mean either."""
    return a.required <= len(b.params) and b.required <= len(a.params)


def _body(stmt: A.CreateFunctionStmt, options: dict[str, Any], name: str) -> tuple[Any, str]:
    """The SELECT a call stands for, and the body as written (prosrc)."""
    if stmt.sql_body is not None:
        body = stmt.sql_body
        if isinstance(body, A.ReturnStmt):
            return A.SelectStmt(targetList=(A.ResTarget(val=body.returnval),)), ""
        return _one_select(_statements(body), name), ""
    if "as" not in options:
        raise SQLError("no function body specified", _INVALID)
    source = options["as"][0].sval
    try:
        statements = [r.stmt for r in parse_sql(source)]
    except ParseError as e:
        raise SyntaxErr(f"{e.args[0]} in the body of function {name}") from None
    return _one_select(statements, name), source


def _statements(body: Any) -> list[Any]:
    """BEGIN ATOMIC's statements."""
    return [st for group in body for st in (group if isinstance(group, tuple) else (group,))]


def _one_select(statements: list[Any], name: str) -> A.SelectStmt:
    if len(statements) != 1 or not isinstance(statements[0], A.SelectStmt):
        raise FeatureNotSupported(
            f"the body of function {name} must be one SELECT",
            hint="Headwater inlines a SQL function's body where it is called: one SELECT"
            " (or RETURN expression), no INSERT, UPDATE or DELETE.",
        )
    select = statements[0]
    if select.intoClause is not None:
        raise FeatureNotSupported(f"SELECT INTO in the body of function {name}")
    return select


# -- DROP FUNCTION, and the statements that name one ---------------------------------------
def _matching(
    s: Session, cat: Catalog, obj: A.ObjectWithArgs
) -> tuple[tuple[Function, ...], str, str]:
    """The functions `f` or `f(types)` names, PostgreSQL's error when there are none,
    and how a notice names it (the types as written: TypeNameListToString)."""
    names = [n.sval for n in obj.objname]
    schema = names[0] if len(names) > 1 else None
    overloads = cat.find_functions(schema, names[-1], s.search_path())
    written = ".".join(names)
    if obj.args_unspecified:
        if len(overloads) > 1:
            raise SQLError(
                f'function name "{written}" is not unique',
                "42725",
                hint="Specify the argument list to select the function unambiguously.",
            )
        return overloads, f'could not find a function named "{written}"', f"{written}()"
    types = lambda names: cat.type_named(names, s.search_path())  # noqa: E731
    wanted = ", ".join(_arg_text(a, types) for a in _in_args(obj))
    overloads = tuple(f for f in overloads if f.identity == wanted)
    shown = f"{written}({','.join(map(_as_written, _in_args(obj)))})"
    return overloads, f"function {written}({wanted}) does not exist", shown


def named(s: Session, cat: Catalog, obj: A.ObjectWithArgs) -> Function:
    """The one function `obj` names (COMMENT ON, GRANT, ALTER FUNCTION), or 42883."""
    found, missing, _ = _matching(s, cat, obj)
    if not found:
        raise UndefinedFunction(missing)
    return found[0]


def drop(s: Session, w: WriteTxn, stmt: A.DropStmt, drop_relation: Callable[..., None]) -> Result:
    """DROP FUNCTION; views and materialized views holding a body go with CASCADE
    (`drop_relation`: server/ddl.py's)."""
    cat = w.catalog
    notices: list[str | SQLError] = []
    found: list[Function] = []
    for obj in stmt.objects:
        overloads, missing, shown = _matching(s, cat, obj)
        if not overloads:
            if not stmt.missing_ok:
                raise UndefinedFunction(missing)
            notices.append(f"function {shown} does not exist, skipping")
            continue
        found.extend(overloads)
    for fn in found:
        users = dependents(cat, fn)
        fired = triggers.users(cat, fn)
        lines = [f"{r.kind} {r.name} depends on function {_signature(fn)}" for r in users]
        lines += [
            f"trigger {trg.name} on table {t.name} depends on function {_signature(fn)}"
            for t, trg in fired
        ]
        if lines and stmt.behavior != DropBehavior.DROP_CASCADE:
            raise DependentObjects(
                f"cannot drop function {_signature(fn)} because other objects depend on it",
                detail="\n".join(lines),
                hint="Use DROP ... CASCADE to drop the dependent objects too.",
            )
        for r in users:
            if isinstance(r, Table):  # (its defaults or CHECKs: not dropped here)
                raise FeatureNotSupported(
                    f"DROP FUNCTION ... CASCADE would change table {r.name}: a default or"
                    f" CHECK of it calls {fn.name}()",
                    hint="Drop or change that default or CHECK first.",
                )
            if cat.by_oid(r.oid) is not None:  # (not gone with an earlier one)
                drop_relation(s, w, r, cascade=True)
            notices.append(f"drop cascades to {r.kind} {r.name}")
        for t, trg in fired:
            current = cat.by_oid(t.oid)
            if isinstance(current, Table):
                triggers.without(cat, current, trg)
            notices.append(f"drop cascades to trigger {trg.name} on table {t.name}")
        cat.drop_function(fn)
    tag = "DROP PROCEDURE" if stmt.removeType == ObjectType.OBJECT_PROCEDURE else "DROP FUNCTION"
    return Result(tag, notices=notices)


def rename(s: Session, w: WriteTxn, stmt: A.RenameStmt) -> Result:
    """ALTER FUNCTION f(...) RENAME TO g."""
    cat = w.catalog
    fn = named(s, cat, stmt.object)
    new = replace(fn, name=stmt.newname)
    for other in cat.find_functions(fn.schema, stmt.newname, ()):
        if other.identity == fn.identity:
            raise SQLError(
                f'function {stmt.newname}({fn.identity}) already exists in schema "{fn.schema}"',
                "42723",
            )
        if _overlap(other, new):
            raise FeatureNotSupported(
                f"function {stmt.newname}({fn.identity}) would overload"
                f" {stmt.newname}({other.identity}) with as many arguments"
            )
    cat.drop_function(fn)
    cat.put_function(new)
    return Result("ALTER FUNCTION")


def alter(s: Session, w: WriteTxn, stmt: A.AlterFunctionStmt | A.AlterOwnerStmt) -> Result:
    """ALTER FUNCTION f(...) OWNER TO role / IMMUTABLE | STABLE | VOLATILE, [NOT] STRICT."""
    cat = w.catalog
    if isinstance(stmt, A.AlterOwnerStmt):
        fn = named(s, cat, stmt.object)
        cat.put_function(replace(fn, owner=new_owner(s, cat, stmt.newowner)))
        return Result("ALTER FUNCTION")
    fn = named(s, cat, stmt.func)
    for action in stmt.actions:
        if action.defname == "volatility":
            fn = replace(fn, volatility=_VOLATILITY[action.arg.sval])
        elif action.defname == "strict":
            strict = bool(action.arg.boolval)
            if strict != fn.strict and (users := dependents(cat, fn)):
                raise FeatureNotSupported(
                    f"cannot change whether function {_signature(fn)} is strict:"
                    f" {users[0].kind} {users[0].name} holds its body",
                    hint="Drop the dependent objects, alter the function, and create them again.",
                )
            fn = replace(fn, strict=strict)
        elif action.defname not in _IGNORED:
            raise FeatureNotSupported(
                f"ALTER FUNCTION ... {action.defname.upper()} is not supported"
            )
    cat.put_function(fn)
    return Result("ALTER FUNCTION")


def _in_args(obj: A.ObjectWithArgs) -> list[A.TypeName]:
    """The argument types DROP FUNCTION names (OUT and TABLE ones do not count)."""
    if obj.objfuncargs is None:
        return list(obj.objargs or ())
    return [
        p.argType
        for p in obj.objfuncargs
        if p.mode
        not in (FunctionParameterMode.FUNC_PARAM_OUT, FunctionParameterMode.FUNC_PARAM_TABLE)
    ]


def _as_written(tn: A.TypeName) -> str:
    return ".".join(n.sval for n in tn.names) + "[]" * len(tn.arrayBounds or ())


def _arg_text(tn: A.TypeName, types: Any) -> str:
    written = tn.names[-1].sval.lower()
    return written if written in POLYMORPHIC else ColumnType(type_of(tn, types).pg).sql()


def in_schema(cat: Catalog, schema: str) -> list[Function]:
    """The functions of a schema (DROP SCHEMA names or drops them)."""
    return [f for (sch, _), fs in cat.functions.items() if sch == schema for f in fs]


# -- calls, inlined -----------------------------------------------------------------------
_MEMO_SIZE = 256


def inlined(s: Session, stmt: Any) -> Any:
    """`stmt` with the calls of the session's visible SQL functions inlined: a new tree
    the first time a statement is seen with the catalog's functions as they are now
    (then remembered, so that plans cached by tree stay cached), else `stmt` itself.
    `s.functions_used` is set to the functions inlined."""
    cat = s.catalog
    s.functions_used = frozenset()
    if not cat.functions or isinstance(stmt, A.CallStmt | A.DoStmt | A.PrepareStmt):
        return stmt  # (CALL's arguments: inlined when server/routine_calls.py runs them;
        # a PREPAREd query's when it is described, and when EXECUTE runs it)
    memo = s.inlined_memo
    key = id(stmt)
    path = s.search_path()
    hit = memo.get(key)
    if hit is not None and hit[:4] == (stmt, cat.functions, path, s.role_oid):
        memo.move_to_end(key)
        s.functions_used = hit[5]
        return hit[4]
    role = cat.roles.get(s.role_oid)
    everything = role is None or role.superuser

    def find(names: list[str]) -> tuple[Function, ...]:
        if len(names) > 2:
            return ()
        found = cat.find_functions(names[0] if len(names) == 2 else None, names[-1], path)
        if found and not everything and not may_execute(cat, s.role_oid, found[0]):
            raise InsufficientPrivilege(f"permission denied for function {names[-1]}")
        return found

    def columns(names: list[str]) -> list[str] | None:
        rel = cat.resolve(names[0] if len(names) == 2 else None, names[-1], path)
        return [c.name for c in rel.columns] if rel is not None else None

    out, used = stmt, frozenset[int]()
    if calls_plpgsql(s, stmt):  # (run before the statement: stand-ins for their results)
        out = _stubbed(s, _copy(stmt))
    if _calls(out, find):
        out, used = _inline_wrapped(out if out is not stmt else _copy(stmt), find, columns)
    memo[key] = (stmt, cat.functions, path, s.role_oid, out, used)
    while len(memo) > _MEMO_SIZE:
        memo.popitem(last=False)
    s.functions_used = used
    return out


def plpgsql_function(s: Session, call: Any) -> Function | None:
    """The PL/pgSQL function (not a trigger's) a call names, by name and number of
    arguments; None if it names none."""
    if not isinstance(call, A.FuncCall) or call.over is not None or call.agg_star:
        return None
    names = [n.sval for n in call.funcname]
    args = call.args or ()
    if len(names) > 2 or any(isinstance(a, A.NamedArgExpr) for a in args):
        return None
    schema = names[0] if len(names) == 2 else None
    for fn in s.catalog.find_functions(schema, names[-1], s.search_path()):
        if fn.language == "plpgsql" and fn.prokind == "f" and fn.returns != "trigger":
            if fn.required <= len(args) <= len(fn.params):
                return fn
    return None


def calls_plpgsql(s: Session, stmt: Any) -> bool:
    """Whether `stmt` is a SELECT (or INSERT's) that calls PL/pgSQL functions where
    server/routine_calls.py runs them before it: in a SELECT without FROM (an
    expression's, `SELECT f(1)`), in VALUES, in FROM (`SELECT * FROM f(1) ...`), or per
    row of a query (`SELECT f(x) FROM t`: once per distinct argument)."""
    if not _has_plpgsql(s.catalog):
        return False
    if isinstance(stmt, A.InsertStmt):
        stmt = stmt.selectStmt
    if not isinstance(stmt, A.SelectStmt) or any(getattr(stmt, a) for a in _CLAUSES):
        return False
    if stmt.valuesLists:
        return any(plpgsql_function(s, n) is not None for n in nodes(stmt.valuesLists))
    if stmt.fromClause:
        if any(plpgsql_from(s, item) is not None for item in _items(stmt.fromClause)):
            return True
        if any(plpgsql_from(s, item, per_row=True) for item in stmt.fromClause):
            return True  # (at the top level: `FROM t, f(t.x)`)
        return bool(per_row_calls(s, stmt))
    if any(getattr(stmt, a) for a in _ROW_CLAUSES):
        return False
    return any(plpgsql_function(s, n) is not None for n in nodes(stmt.targetList))


def per_row_calls(s: Session, stmt: A.SelectStmt) -> list[tuple[A.FuncCall, Function]]:
    """The calls of PL/pgSQL functions (not set-returning) in a query's select list,
    WHERE, HAVING and ORDER BY, outside subqueries, whose arguments call none: what
    server/routine_calls.py computes per distinct argument before the query runs."""
    out = []
    for clause in (stmt.targetList, stmt.whereClause, stmt.havingClause, stmt.sortClause):
        for n in nodes(clause, skip=A.SubLink):
            fn = plpgsql_function(s, n)
            if fn is None or fn.returns_set:
                continue
            inner = list(nodes(n.args or (), skip=A.SubLink))
            if not any(plpgsql_function(s, m) or _aggregates(m) for m in inner):
                out.append((n, fn))
    return out


def _aggregates(node: Any) -> bool:
    """An aggregate or window call (a per-row call's argument may not have one)."""
    if not isinstance(node, A.FuncCall):
        return False
    name = node.funcname[-1].sval.lower() if isinstance(node.funcname[-1], A.String) else ""
    return node.over is not None or node.agg_star or name in AGGREGATES


_CLAUSES = ("withClause", "intoClause", "op")
_any: list[Any] = [None, False]  # the catalog's functions, and whether one is PL/pgSQL


def _has_plpgsql(cat: Catalog) -> bool:
    """Whether the catalog has a PL/pgSQL function a query may call (remembered while
    its functions are the same: a change replaces the dict)."""
    if _any[0] is not cat.functions:
        _any[:] = [
            cat.functions,
            any(
                f.language == "plpgsql" and f.prokind == "f" and f.returns != "trigger"
                for fs in cat.functions.values()
                for f in fs
            ),
        ]
    return bool(_any[1])


_ROW_CLAUSES = ("whereClause", "groupClause", "havingClause", "sortClause", "limitCount")
_ROW_CLAUSES += ("limitOffset",)


def plpgsql_from(s: Session, item: Any, per_row: bool = False) -> Function | None:
    """The PL/pgSQL function a FROM item calls (`f(1) AS x`), run before the statement;
    `per_row`: one whose arguments name other items' columns (`FROM t, f(t.x)`)."""
    if not isinstance(item, A.RangeFunction) or item.is_rowsfrom:
        return None
    if len(item.functions) != 1 or (per_row and item.ordinality):
        return None
    call = item.functions[0][0]
    fn = plpgsql_function(s, call)
    inner = list(nodes(call.args or ()))
    if fn is None or per_row != any(isinstance(n, A.ColumnRef) for n in inner):
        return None
    if per_row and any(plpgsql_function(s, n) or _aggregates(n) for n in inner):
        return None
    return fn


def _items(from_clause: Any) -> list[Any]:
    """FROM's items, joins' sides included."""
    out: list[Any] = []
    for item in from_clause:
        out += _items((item.larg, item.rarg)) if isinstance(item, A.JoinExpr) else [item]
    return out


def result_columns(s: Session, fn: Function) -> tuple[list[tuple[str, str]], bool]:
    """What a function returns as columns (name, type), and whether it returns a
    single value per row (named after the function, or after the alias in FROM)."""
    if fn.columns:
        return list(fn.columns), False
    rel = s.catalog.resolve(None, fn.returns, s.search_path()) if fn.returns_set else None
    if rel is None and fn.returns_set:
        rel = s.catalog.resolve(fn.schema, fn.returns, s.search_path())
    if rel is not None:  # SETOF a table: its columns now
        return [(c.name, c.type.sql()) for c in rel.columns], False
    return [(fn.name, "text" if fn.returns == "void" else fn.returns)], True


def column_type(s: Session, text: str) -> ColumnType:
    """A type as format_type() printed it, resolved (enums and domains included)."""
    cat, path = s.catalog, s.search_path()
    return type_of(
        type_name(text),
        lambda names: cat.domain_column_type(names, path) or cat.type_named(names, path),
    )


def rows_relation(
    s: Session,
    fn: Function,
    cells: list[tuple[Any, ...]],
    item: A.RangeFunction,
    args: Any = (),
    keys: Any = (),
) -> A.RangeSubselect:
    """The call in FROM `item` of a PL/pgSQL function as the relation of its rows:
    `(SELECT _hw_rows.* FROM (VALUES (CAST($n AS type), ...), ...) AS _hw_rows(columns))
    AS f`, named as PostgreSQL names a function's relation (WITH ORDINALITY: numbered);
    without rows, a row of NULLs filtered out; `args` (cast to the parameters' types)
    join it so that Describe types the call's parameters. With `keys` (the arguments of
    a call per row, `FROM t, f(t.x)`), each cell starts with the arguments it was
    computed for, and the LATERAL relation keeps the rows of the arguments at hand."""
    columns, scalar = result_columns(s, fn)
    name = item.alias.aliasname if item.alias is not None else fn.name
    shown = [name] if scalar else [n for n, _ in columns]
    if item.ordinality:
        columns, shown = [*columns, ("ordinality", "bigint")], [*shown, "ordinality"]
        cells = [(*row, A.A_Const(val=A.Integer(ival=i + 1))) for i, row in enumerate(cells)]
    keyed = [(f"_hw_k{i}", p.type) for i, p in enumerate(fn.params[: len(keys)])]
    names = tuple(A.String(sval=n) for n, _ in [*keyed, *columns])
    null = (A.A_Const(isnull=True),) * len(names)
    values = tuple(
        tuple(_typed(v, t) for v, (_, t) in zip(row, [*keyed, *columns], strict=True))
        for row in cells or [null]
    )
    from_: tuple[Any, ...] = (
        A.RangeSubselect(
            subquery=A.SelectStmt(valuesLists=values),
            alias=A.Alias(aliasname="_hw_rows", colnames=names),
        ),
    )
    if args:
        typed = tuple(A.ResTarget(val=a, name=f"a{i}") for i, a in enumerate(args))
        from_ += (
            A.RangeSubselect(
                subquery=A.SelectStmt(targetList=typed), alias=A.Alias(aliasname="_hw_args")
            ),
        )
    targets = tuple(
        A.ResTarget(val=A.ColumnRef(fields=(A.String(sval="_hw_rows"), A.String(sval=n))))
        for n, _ in columns
    )
    where = matching("_hw_rows", [k for k, _ in keyed], keys)
    if not cells:  # (the row of NULLs)
        where = A.A_Const(val=A.Boolean(boolval=False))
    query = A.SelectStmt(targetList=targets, fromClause=from_, whereClause=where)
    given = list(item.alias.colnames or ()) if item.alias is not None else []
    colnames = (*given, *(A.String(sval=n) for n in shown[len(given) :]))
    alias = A.Alias(aliasname=name, colnames=colnames)
    return A.RangeSubselect(subquery=query, alias=alias, lateral=bool(keys))


def matching(alias: str, columns: list[str], exprs: list[Any]) -> Any:
    """`alias.c1 IS NOT DISTINCT FROM e1 AND ...` (None for no columns): the rows of a
    relation of computed calls that were computed for the arguments `exprs`."""
    conds = [
        A.A_Expr(
            kind=A_Expr_Kind.AEXPR_NOT_DISTINCT,
            name=(A.String(sval="="),),
            lexpr=A.ColumnRef(fields=(A.String(sval=alias), A.String(sval=c))),
            rexpr=copy_tree(e),
        )
        for c, e in zip(columns, exprs, strict=True)
    ]
    if len(conds) < 2:
        return conds[0] if conds else None
    return A.BoolExpr(boolop=BoolExprType.AND_EXPR, args=tuple(conds))


def _stubbed(s: Session, stmt: Any) -> Any:
    """`stmt` (a copy) with each PL/pgSQL call standing for its result, for Describe and
    for typing its parameters: `(SELECT CAST(NULL AS result) FROM (SELECT CAST(arg AS
    parameter type), ...) _hw_args)`; in FROM, the relation of no rows of its columns."""

    def args_of(fn: Function, call: A.FuncCall) -> list[Any]:
        args = [replaced(a, swap) for a in call.args or ()]
        return [_typed(a, p.type) for a, p in zip(args, fn.params[: len(args)], strict=True)]

    def swap(node: A.Node) -> Any:
        fn = plpgsql_function(s, node)
        if fn is None:
            return None
        args = args_of(fn, node)
        inner = A.SelectStmt(
            targetList=tuple(A.ResTarget(val=a, name=f"a{i}") for i, a in enumerate(args))
            or (A.ResTarget(val=A.A_Const(isnull=True), name="a"),)
        )
        result = "text" if fn.returns == "void" else fn.returns
        return A.SubLink(
            subLinkType=SubLinkType.EXPR_SUBLINK,
            subselect=A.SelectStmt(
                targetList=(A.ResTarget(val=_typed(A.A_Const(isnull=True), result)),),
                fromClause=(A.RangeSubselect(subquery=inner, alias=A.Alias(aliasname="_hw_args")),),
            ),
        )

    def relation(item: Any, top: bool = False) -> Any:
        if isinstance(item, A.JoinExpr):
            item.larg, item.rarg = relation(item.larg), relation(item.rarg)
            return item
        fn = plpgsql_from(s, item)
        if fn is None and top and (fn := plpgsql_from(s, item, per_row=True)) is not None:
            call = item.functions[0][0]
            return rows_relation(s, fn, [], item, args_of(fn, call), keys=call.args)
        if fn is None:
            return item
        return rows_relation(s, fn, [], item, args_of(fn, item.functions[0][0]))

    if isinstance(stmt, A.InsertStmt):
        stmt.selectStmt = _stubbed(s, stmt.selectStmt)
        return stmt
    if stmt.valuesLists:
        stmt.valuesLists = replaced(stmt.valuesLists, swap)
        return stmt
    for target in stmt.targetList or ():
        if target.name is None and (fn := plpgsql_function(s, target.val)) is not None:
            target.name = fn.name  # the column is named after the function
    if stmt.fromClause:
        stmt.fromClause = tuple(relation(item, top=True) for item in stmt.fromClause)
        for clause in ("targetList", "whereClause", "havingClause", "sortClause"):
            setattr(stmt, clause, replaced(getattr(stmt, clause), swap))  # per row
        return stmt
    stmt.targetList = replaced(stmt.targetList, swap)
    return stmt


def typed_call(s: Session, stmt: Any) -> Any:
    """What a Parse message's `$n` are typed from: `stmt` inlined; for CALL, a SELECT of
    the arguments cast to the procedure's parameter types."""
    if not isinstance(stmt, A.CallStmt):
        return inlined(s, stmt)
    fc = stmt.funccall
    names = [n.sval for n in fc.funcname]
    found = s.catalog.find_functions(
        names[0] if len(names) == 2 else None, names[-1], s.search_path()
    )
    args = fc.args or ()
    fn = next((f for f in found if f.required <= len(args) <= len(f.params)), None)
    if fn is None or not args:
        return stmt
    targets = tuple(
        A.ResTarget(val=_typed(a, p.type)) for a, p in zip(args, fn.params, strict=False)
    )
    return A.SelectStmt(targetList=targets)


def type_name(text: str) -> A.TypeName:
    """A type as format_type() printed it (a parameter's, a result's), as a TypeName."""
    return parse_sql(f"SELECT CAST(NULL AS {text})")[0].stmt.targetList[0].val.typeName


def _typed(arg: Any, type_text: str) -> Any:
    """An argument cast to its parameter's type (as PostgreSQL coerces it)."""
    return A.TypeCast(arg=arg, typeName=type_name(type_text))


def may_execute(cat: Catalog, role_oid: int, fn: Function) -> bool:
    roles = memberships(cat, role_oid)
    return any(g in roles and "X" in letters for g, letters in function_acl(fn))


def _calls(stmt: Any, find: Any) -> bool:
    if isinstance(stmt, A.Node):
        return has_calls(stmt, find)
    if is_dataclass(stmt):  # Headwater's own statements (SUBSCRIBE, AS OF): their SELECT
        return any(_calls(getattr(stmt, f.name), find) for f in fields(stmt))
    return False


def _copy(stmt: Any) -> Any:
    if is_dataclass(stmt) and not isinstance(stmt, A.Node):
        return replace(
            stmt, **{f.name: _copy(getattr(stmt, f.name)) for f in fields(stmt) if f.init}
        )
    return copy_tree(stmt)


def _inline_wrapped(stmt: Any, find: Any, columns: Any) -> tuple[Any, frozenset[int]]:
    if isinstance(stmt, A.Node):
        return inline(stmt, find, columns)
    used: frozenset[int] = frozenset()
    if is_dataclass(stmt):
        for f in fields(stmt):
            value = getattr(stmt, f.name)
            new, more = _inline_wrapped(value, find, columns)
            used |= more
            if new is not value:
                object.__setattr__(stmt, f.name, new)
    return stmt, used


# -- what holds an inlined body ----------------------------------------------------------
def recorded(s: Session, run: Callable[..., Result], w: WriteTxn, *args: Any) -> Result:
    """`run(w, *args)` (CREATE VIEW / TABLE / MATERIALIZED VIEW, ALTER TABLE), and the
    functions inlined into the statement recorded on each relation it made or changed."""
    used = s.functions_used
    if not used:
        return run(w, *args)
    cat = w.catalog
    before = dict(cat.changes)
    result = run(w, *args)
    for oid, obj in list(cat.changes.items()):
        if isinstance(obj, Table | View | MaterializedView) and before.get(oid) is not obj:
            cat.replace_relation(replace(obj, functions=tuple(sorted({*obj.functions, *used}))))
    return result


def dependents(cat: Catalog, fn: Function) -> list[Relation]:
    return sorted((r for r in cat.relations.values() if fn.oid in r.functions), key=lambda r: r.oid)


def _signature(fn: Function) -> str:
    return f"{fn.name}({','.join(p.type for p in fn.params)})"
