"""PL/pgSQL run a statement at a time in the session that sent it: DO blocks, CALL of
a procedure, `SELECT f(...)` of a function (server/routine_calls.py).

A body is parsed by pglast's PL/pgSQL parser (PostgreSQL's own grammar) and
interpreted here. Each SQL statement, and each expression (PL/pgSQL evaluates `n + 1`
as `SELECT n + 1`), goes through the session's Executor as a client's statement
would, the block's variables bound as parameters ($n) of SELECT, INSERT, UPDATE and
DELETE; as in PostgreSQL, utility statements (CREATE, ALTER, ...) take no variables
(`EXECUTE format(...)` builds them). The block is atomic as PostgreSQL's is: outside
a transaction block it runs in a transaction of its own (COMMIT and ROLLBACK inside it
end that one and begin the next); a BEGIN ... EXCEPTION block is a savepoint, rolled
back before its handler runs.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pglast.ast as A
from headwater.catalog.pgtypes import SessionFormat, text_encoder
from headwater.catalog.types import PgType
from headwater.planner.plpgsql import parse_function
from headwater.planner.syntax import replaced
from headwater.server.results import Field, Result
from headwater.server.statements import parse_statements
from pglast import parse_sql
from pglast.enums import TransactionStmtKind
from pglast.parser import ParseError

from headwater.errors import FeatureNotSupported, SQLError, SyntaxErr
from headwater.sqlstates import CONDITIONS

if TYPE_CHECKING:
    from headwater.server.executor import Executor

# elog levels of RAISE (PostgreSQL's elog.h); client_min_messages filters them
# (server/connection.py send_notice)
_LEVELS = {14: "DEBUG", 15: "LOG", 17: "INFO", 18: "NOTICE", 19: "WARNING", 21: "ERROR"}
# RAISE ... USING option numbers (plpgsql.h PLpgSQL_raise_option_type)
_OPTIONS = ["errcode", "message", "detail", "hint", "column", "constraint", "datatype", "table"]
_ROWS_TAG = re.compile(r"^(?:INSERT \d+|UPDATE|DELETE|SELECT|MERGE|COPY|FETCH|MOVE) (\d+)$")
_SPECIAL = re.compile(r"^(found|sqlstate|sqlerrm|__Case__Variable_\d+__)$")
_SUPPORTED = {
    f"PLpgSQL_stmt_{k}"
    for k in """block assign if case loop while fori fors dynfors foreach_a exit return raise
    assert execsql dynexecute perform getdiag commit rollback return_next
    return_query open fetch close forc call""".split()
}
_HINT = (
    "Headwater runs PL/pgSQL's variables, assignments, IF, CASE, loops (FOR over integers,"
    " queries, cursors and arrays, WHILE, EXIT, CONTINUE), SQL statements with INTO,"
    " EXECUTE, PERFORM, cursors (OPEN, FETCH, MOVE, CLOSE), RETURN NEXT / QUERY, RAISE,"
    " ASSERT, GET DIAGNOSTICS, EXCEPTION handlers, COMMIT and ROLLBACK."
)


@dataclass(frozen=True)
class Rows:
    """What a set-returning function returns: its columns' types (RETURN QUERY's columns
    must have them)."""

    types: tuple[A.TypeName, ...]
    pg: tuple[PgType, ...]


@dataclass
class _Cursor:
    """An open cursor: its rows and its position (0 before the first, len + 1 after)."""

    fields: list[Field]
    rows: list[tuple[Any, ...]]
    pos: int = 0


@dataclass
class _Record:
    """A record variable's row: its columns (names, types) and values."""

    fields: list[Field]
    values: tuple[Any, ...]

    def get(self, name: str) -> Any:
        for f, v in zip(self.fields, self.values, strict=True):
            if f.name == name:
                return v
        raise SQLError(f'record has no field "{name}"', "42703")


class _Leave(Exception):
    """EXIT, CONTINUE (kind 'exit' / 'continue', with an optional label) or RETURN."""

    def __init__(self, kind: str, label: str | None = None) -> None:
        super().__init__(kind)
        self.kind, self.label = kind, label


async def run(ex: Executor, stmt: A.DoStmt) -> Result:
    """Execute a DO statement; its RAISE NOTICEs come with its result."""
    opts = {d.defname: d.arg.sval for d in stmt.args}
    language = opts.get("language", "plpgsql").lower()
    if language != "plpgsql":
        if language in ("sql", "internal", "c"):
            raise FeatureNotSupported(
                f'language "{language}" does not support inline code execution'
            )
        raise SQLError(f'language "{language}" does not exist', "42704")
    fn = parse_function(opts["as"], None, "void")
    _, notices = await execute(ex, fn, [], "inline_code_block", controls=True)
    return Result("DO", notices=notices)


async def execute(
    ex: Executor,
    fn: dict[str, Any],
    args: list[Any],
    name: str,
    *,
    controls: bool,
    returns: A.TypeName | None = None,
    rows: Rows | None = None,
    outputs: tuple[int, ...] = (),
) -> tuple[Any, list[SQLError]]:
    """Run the parsed body `fn` (pglast's PLpgSQL_function) with its parameters set to
    `args` (every parameter in declared order, OUT ones NULL, RETURNS TABLE's columns
    last): its RETURN's value (cast to `returns`), or the values of the `outputs`
    parameters (OUT, INOUT) when it ends, or a set-returning function's list of rows
    shaped as `rows` says (RETURN NEXT without an expression: the `outputs`' values);
    and its notices. `controls`: COMMIT and ROLLBACK are allowed (a DO block, a CALL
    outside a transaction block); `name` is how errors' CONTEXT names the function."""
    check(fn["action"], setof=rows is not None)
    interp = _Interpreter(ex, fn, args, name, returns)
    interp.rows = None if rows is None else (rows, [])
    interp.outputs = outputs
    implicit = ex.s.status == "I"
    if implicit:
        await interp.control(TransactionStmtKind.TRANS_STMT_BEGIN)
    interp.implicit = implicit and controls
    try:
        try:
            await interp.st_block(fn["action"]["PLpgSQL_stmt_block"])
        except _Leave as leave:
            if leave.kind != "return":  # the parser allows EXIT only inside a loop or block
                raise SQLError("EXIT cannot be used outside a loop", "42601") from None
        if implicit:
            interp.notices.extend(await interp.control(TransactionStmtKind.TRANS_STMT_COMMIT))
    except BaseException:
        if implicit and ex.s.status != "I":
            await interp.control(TransactionStmtKind.TRANS_STMT_ROLLBACK)
        ex.s.settings.notices.extend(interp.notices)  # sent before ReadyForQuery
        raise
    if interp.rows is not None:
        return interp.rows[1], list(interp.notices)
    if outputs:
        return tuple(interp.values.get(i) for i in outputs), list(interp.notices)
    return interp.returned, list(interp.notices)


def check(node: Any, *, setof: bool = False) -> None:
    """0A000 before anything runs for a statement kind this interpreter lacks; 42804
    for RETURN NEXT / QUERY outside a set-returning function."""
    if isinstance(node, list):
        for n in node:
            check(n, setof=setof)
    elif isinstance(node, dict):
        for key, value in node.items():
            what = key.removeprefix("PLpgSQL_stmt_").upper().replace("_", " ")
            if key == "PLpgSQL_stmt_foreach_a" and value.get("slice"):
                raise FeatureNotSupported("FOREACH ... SLICE is not supported", hint=_HINT)
            if key.startswith("PLpgSQL_stmt_") and key not in _SUPPORTED:
                raise FeatureNotSupported(f"PL/pgSQL statement {what} is not supported", hint=_HINT)
            if key.startswith("PLpgSQL_stmt_return_") and not setof:
                raise SQLError(f"cannot use {what} in a non-SETOF function", "42804")
            check(value, setof=setof)


class _Interpreter:
    def __init__(
        self,
        ex: Executor,
        fn: dict[str, Any],
        args: list[Any],
        name: str,
        returns: A.TypeName | None,
    ) -> None:
        self.ex, self.s = ex, ex.s
        self.datums: list[dict[str, Any]] = [next(iter(d.values())) for d in fn["datums"]]
        # a `t%ROWTYPE` variable holds a record (pglast, without a catalog, types it
        # as a scalar of type 't%rowtype')
        self.kinds = [
            "PLpgSQL_rec" if _typname(d).endswith("%rowtype") else k
            for k, d in ((next(iter(d)), next(iter(d.values()))) for d in fn["datums"])
        ]
        # the parameters come first, then FOUND: set now, in the outermost scope
        self.args = args
        self.values: dict[int, Any] = dict(enumerate(args))
        base = {d["refname"]: i for i, d in enumerate(self.datums) if _special(d)}
        base.update({self.datums[i]["refname"]: i for i in range(len(args))})
        self.scopes: list[tuple[str | None, dict[str, int]]] = [(None, base)]
        self.decls = _declarations(fn["action"], self.datums, self.kinds, len(args))
        self.where = f"PL/pgSQL function {name}"
        self.returns, self.returned = returns, None
        self.rows: tuple[Rows, list[tuple[Any, ...]]] | None = None  # a set's, so far
        self.outputs: tuple[int, ...] = ()  # the OUT parameters' variables
        self.cursors: dict[int, _Cursor] = {}  # open cursors, by their variable
        self.notices: list[SQLError] = []
        self.row_count = 0
        self.handling: list[SQLError] = []  # errors whose handlers are running
        self.savepoints = itertools.count()
        self.depth = 0  # savepoints open (COMMIT inside one is refused)
        self.implicit = False

    # -- transaction control -----------------------------------------------------------
    async def control(self, kind: TransactionStmtKind, name: str | None = None) -> list[Any]:
        stmt = A.TransactionStmt(kind=kind, savepoint_name=name, chain=False)
        return (await self.ex.execute(stmt, [])).notices

    # -- blocks and statements --------------------------------------------------------
    async def st_block(self, b: dict[str, Any]) -> None:
        names: dict[str, int] = {}
        self.scopes.append((b.get("label"), names))
        try:
            for dno in self.decls.get(id(b), ()):
                names[self.datums[dno]["refname"]] = dno
                await self._initialize(dno)
            if b.get("exceptions"):
                await self._guarded(b)
            else:
                await self.statements(b.get("body", []))
        except _Leave as leave:
            if not (leave.kind == "exit" and leave.label and leave.label == b.get("label")):
                raise
        finally:
            self.scopes.pop()

    async def _initialize(self, dno: int) -> None:
        d = self.datums[dno]
        default = d.get("default_val")
        value = await self._value(default, self._type(dno)) if default else None
        if value is None and d.get("notnull"):
            raise SQLError(
                f'variable "{d["refname"]}" must have a default value,'
                " since it's declared NOT NULL",
                "22004",
            )
        self.values[dno] = value

    async def _guarded(self, b: dict[str, Any]) -> None:
        """A block with EXCEPTION handlers: its statements under a savepoint."""
        name = f"_hw_do_{next(self.savepoints)}"
        await self.control(TransactionStmtKind.TRANS_STMT_SAVEPOINT, name)
        self.depth += 1
        try:
            await self.statements(b.get("body", []))
        except SQLError as e:
            handler = _handler(b["exceptions"]["PLpgSQL_exception_block"], e)
            if handler is None or e.sqlstate == "57014":  # a cancel is never caught
                raise
            self.depth -= 1
            await self.control(TransactionStmtKind.TRANS_STMT_ROLLBACK_TO, name)
            await self.control(TransactionStmtKind.TRANS_STMT_RELEASE, name)
            await self._handle(handler, e)
            return
        except BaseException:
            self.depth -= 1
            raise
        self.depth -= 1
        await self.control(TransactionStmtKind.TRANS_STMT_RELEASE, name)

    async def _handle(self, handler: dict[str, Any], e: SQLError) -> None:
        names = {
            self.datums[i]["refname"]: i
            for i, k in enumerate(self.kinds)
            if self.datums[i]["refname"] in ("sqlstate", "sqlerrm")
        }
        for name, dno in names.items():
            self.values[dno] = e.sqlstate if name == "sqlstate" else e.message
        self.scopes.append((None, names))
        self.handling.append(e)
        try:
            await self.statements(handler.get("action", []))
        finally:
            self.handling.pop()
            self.scopes.pop()

    async def statements(self, stmts: list[dict[str, Any]]) -> None:
        for node in stmts:
            kind, body = next(iter(node.items()))
            try:
                await getattr(self, "st_" + kind.removeprefix("PLpgSQL_stmt_"))(body)
            except SQLError as e:
                if id(self) not in _levels(e):  # this body's line, once (innermost)
                    _levels(e).add(id(self))
                    at = _statement_name(kind, body)
                    line = f"{self.where} line {body.get('lineno', 0)} at {at}"
                    e.context = f"{e.context}\n{line}" if e.context else line
                raise

    async def st_assign(self, body: dict[str, Any]) -> None:
        dno = body.get("varno", 0)
        text = body["expr"]["PLpgSQL_expr"]["query"]
        expr = _assigned_expression(text)
        label = f'PL/pgSQL assignment "{text}"'
        kind = self.kinds[dno]
        if kind == "PLpgSQL_recfield":
            parent = self.datums[dno].get("recparentno", 0)
            rec = self.values.get(parent)
            if not isinstance(rec, _Record):
                raise SQLError(
                    f'record "{self.datums[parent]["refname"]}" is not assigned yet', "55000"
                )
            value = await self._value({"PLpgSQL_expr": {"query": expr}}, None, label)
            values = list(rec.values)
            values[[f.name for f in rec.fields].index(self.datums[dno]["fieldname"])] = value
            rec.values = tuple(values)
            return
        if kind not in ("PLpgSQL_var", "PLpgSQL_rec"):
            raise FeatureNotSupported(f"assignment {text!r} is not supported", hint=_HINT)
        if self.datums[dno].get("isconst"):
            raise SQLError(
                f'variable "{self.datums[dno]["refname"]}" is declared CONSTANT', "22005"
            )
        self._set(dno, await self._value({"PLpgSQL_expr": {"query": expr}}, self._type(dno), label))

    def _set(self, dno: int, value: Any) -> None:
        d = self.datums[dno]
        if value is None and d.get("notnull"):
            raise SQLError(
                f'null value cannot be assigned to variable "{d["refname"]}" declared NOT NULL',
                "22004",
            )
        self.values[dno] = value

    async def _set_target(self, target: dict[str, Any] | None, result: Result) -> None:
        """SELECT ... INTO, FOR r IN ...: the row's values into the variables."""
        if target is None:
            return
        kind, t = next(iter(target.items()))
        row = result.rows[0] if result.rows else None
        fields = result.fields or []
        if kind == "PLpgSQL_rec":
            self.values[t.get("dno", 0)] = (
                None if row is None else _Record(list(fields), tuple(row))
            )
            return
        varnos = (
            [f.get("varno", 0) for f in t["fields"]] if kind == "PLpgSQL_row" else [t.get("dno", 0)]
        )
        if len(varnos) == 1 and self.kinds[varnos[0]] == "PLpgSQL_rec":  # INTO a %ROWTYPE
            self.values[varnos[0]] = None if row is None else _Record(list(fields), tuple(row))
            return
        for i, dno in enumerate(varnos):
            self._set(dno, None if row is None or i >= len(row) else row[i])

    async def _cast(self, dno: int) -> None:
        """A value stored by INTO takes the variable's type, as PostgreSQL's assignment."""
        if self.values.get(dno) is not None and self._type(dno) is not None:
            self.values[dno] = await self._value(
                {"PLpgSQL_expr": {"query": self.datums[dno]["refname"]}}, self._type(dno)
            )

    async def _into(self, body: dict[str, Any], result: Result, text: str) -> None:
        if body.get("strict"):
            if not result.rows:
                raise SQLError("query returned no rows", "P0002")
            if len(result.rows) > 1:
                raise SQLError("query returned more than one row", "P0003", hint=_STRICT_HINT)
        await self._set_target(body["target"], result)
        kind, t = next(iter(body["target"].items()))
        if kind == "PLpgSQL_row":
            for f in t["fields"]:
                await self._cast(f.get("varno", 0))

    # -- control flow -----------------------------------------------------------------
    async def st_if(self, body: dict[str, Any]) -> None:
        branches = [(body["cond"], body.get("then_body", []))]
        branches += [
            (e["PLpgSQL_if_elsif"]["cond"], e["PLpgSQL_if_elsif"].get("stmts", []))
            for e in body.get("elsif_list", [])
        ]
        for cond, stmts in branches:
            if await self._condition(cond):
                await self.statements(stmts)
                return
        await self.statements(body.get("else_body", []))

    async def st_case(self, body: dict[str, Any]) -> None:
        if body.get("t_expr"):
            self.values[body.get("t_varno", 0)] = await self._value(body["t_expr"])
        for w in body.get("case_when_list", []):
            w = w["PLpgSQL_case_when"]
            if await self._condition(w["expr"]):
                await self.statements(w.get("stmts", []))
                return
        if not body.get("have_else"):
            raise SQLError("case not found", "20000", hint="CASE statement is missing ELSE part.")
        await self.statements(body.get("else_stmts", []))

    async def _loop_body(self, body: dict[str, Any]) -> bool:
        """One pass of a loop's statements: False when an EXIT ends the loop."""
        try:
            await self.statements(body.get("body", []))
        except _Leave as leave:
            mine = leave.label is None or leave.label == body.get("label")
            if leave.kind == "exit" and mine:
                return False
            if leave.kind == "continue" and mine:
                return True
            raise
        return True

    async def st_loop(self, body: dict[str, Any]) -> None:
        while await self._loop_body(body):
            pass

    async def st_while(self, body: dict[str, Any]) -> None:
        while await self._condition(body["cond"]) and await self._loop_body(body):
            pass

    async def st_fori(self, body: dict[str, Any]) -> None:
        var = body["var"]["PLpgSQL_var"]
        dno = _loop_var(self.datums, self.kinds, var)
        lower = await self._bound(body["lower"], "lower")
        upper = await self._bound(body["upper"], "upper")
        step = await self._bound(body["step"], "BY") if body.get("step") else 1
        if step <= 0:
            raise SQLError("BY value of FOR loop must be greater than zero", "22023")
        reverse = bool(body.get("reverse"))
        i, found = lower, False
        self.scopes.append((body.get("label"), {var["refname"]: dno}))
        try:
            while (i >= upper) if reverse else (i <= upper):
                found = True
                self.values[dno] = i
                if not await self._loop_body(body):
                    break
                i = i - step if reverse else i + step
        finally:
            self.scopes.pop()
        self._found(found)

    async def _bound(self, expr: dict[str, Any], what: str) -> int:
        value = await self._value(expr, _type_name("int4"))
        if value is None:
            raise SQLError(f"{what} bound of FOR loop cannot be null", "22004")
        return int(value)

    async def st_fors(self, body: dict[str, Any]) -> None:
        result = await self._sql(body["query"]["PLpgSQL_expr"]["query"], rows=True)
        await self._over_rows(body, result)

    async def st_dynfors(self, body: dict[str, Any]) -> None:
        result = await self._dynamic(body)
        await self._over_rows(body, result)

    async def _over_rows(self, body: dict[str, Any], result: Result) -> None:
        found = False
        for row in list(result.rows):
            found = True
            one = Result("SELECT 1", result.fields, [row])
            await self._set_target(body["var"], one)
            if not await self._loop_body(body):
                break
        self._found(found)

    async def st_foreach_a(self, body: dict[str, Any]) -> None:
        items = await self._value(body["expr"])
        if items is None:
            raise SQLError("FOREACH expression must not be null", "22004")
        for item in _flatten(items):
            self._set(body.get("varno", 0), item)
            if not await self._loop_body(body):
                break

    # -- cursors (their query's rows are read when they are opened) -------------------
    async def st_open(self, body: dict[str, Any]) -> None:
        dno = self._closed(body)
        self.cursors[dno] = await self._cursor(body)
        if self.values.get(dno) is None:  # an unbound refcursor names its portal
            self.values[dno] = f"<unnamed portal {len(self.cursors)}>"

    async def st_forc(self, body: dict[str, Any]) -> None:
        dno = self._closed(body)
        cursor = await self._cursor(body)
        self.cursors[dno] = cursor
        rec = body["var"]["PLpgSQL_rec"]  # (the loop's own record variable)
        self.scopes.append((body.get("label"), {rec["refname"]: rec.get("dno", 0)}))
        try:
            await self._over_rows(body, Result("SELECT", cursor.fields, cursor.rows))
        finally:
            self.scopes.pop()
            self.cursors.pop(dno, None)

    async def st_fetch(self, body: dict[str, Any]) -> None:
        cursor = self._open(body)
        count = body.get("how_many", 1)
        if body.get("expr") is not None:
            count = int(await self._value(body["expr"], _type_name("int8")) or 0)
        n = len(cursor.rows)
        direction = body.get("direction", 0)  # FORWARD, BACKWARD, ABSOLUTE, RELATIVE
        if direction == 2:
            pos = count if count >= 0 else n + 1 + count
        else:
            pos = cursor.pos + (-count if direction == 1 else count)
        cursor.pos = max(0, min(n + 1, pos))
        row = cursor.rows[cursor.pos - 1] if 1 <= cursor.pos <= n else None
        if not body.get("is_move"):
            one = Result("SELECT", cursor.fields, [] if row is None else [row])
            await self._set_target(body.get("target"), one)
        self._found(row is not None)

    async def st_close(self, body: dict[str, Any]) -> None:
        self._open(body)
        del self.cursors[body.get("curvar", 0)]

    def _closed(self, body: dict[str, Any]) -> int:
        dno = body.get("curvar", 0)
        if dno in self.cursors:
            raise SQLError(f'cursor "{self.datums[dno]["refname"]}" already in use', "42P03")
        return dno

    def _open(self, body: dict[str, Any]) -> _Cursor:
        dno = body.get("curvar", 0)
        cursor = self.cursors.get(dno)
        if cursor is None:
            d = self.datums[dno]
            if "cursor_explicit_expr" not in d and self.values.get(dno) is None:
                raise SQLError(f'cursor variable "{d["refname"]}" is null', "22004")
            raise SQLError(f'cursor "{d["refname"]}" does not exist', "34000")
        return cursor

    async def _cursor(self, body: dict[str, Any]) -> _Cursor:
        """OPEN's rows: of the bound cursor's query (its arguments set first), of OPEN
        ... FOR query, or of OPEN ... FOR EXECUTE text [USING ...]."""
        if "dynquery" in body:
            dynamic = {"query": body["dynquery"], "params": body.get("params", [])}
            result = await self._dynamic(dynamic)
            return _Cursor(result.fields or [], list(result.rows))
        query = body.get("query")
        if query is None:  # a bound cursor: DECLARE c CURSOR [(params)] FOR query
            d = self.datums[body.get("curvar", 0)]
            query = d.get("cursor_explicit_expr")
            if query is None:
                raise SQLError(f'cursor "{d["refname"]}" has no query bound', "42601")
            argrow = d.get("cursor_explicit_argrow", -1)
            if argrow >= 0 and body.get("argquery") is not None:
                text = body["argquery"]["PLpgSQL_expr"]["query"]
                args = await self._sql(f"SELECT {text}", rows=True)
                await self._set_target({"PLpgSQL_row": self.datums[argrow]}, args)
        result = await self._sql(query["PLpgSQL_expr"]["query"], rows=True)
        return _Cursor(result.fields or [], list(result.rows))

    async def st_exit(self, body: dict[str, Any]) -> None:
        if body.get("cond") is None or await self._condition(body["cond"]):
            raise _Leave("exit" if body.get("is_exit") else "continue", body.get("label"))

    async def st_return(self, body: dict[str, Any]) -> None:
        if body.get("expr") is not None:
            self.returned = await self._value(body["expr"], self.returns)
        raise _Leave("return")

    async def st_return_next(self, body: dict[str, Any]) -> None:
        assert self.rows is not None
        shape, rows = self.rows
        expr = body.get("expr")
        if expr is None:  # RETURNS TABLE (...), OUT parameters: their variables
            rows.append(tuple(self.values.get(i) for i in self.outputs))
            return
        record = self._record(expr)
        if record is not None:
            if len(record.values) != len(shape.types):
                raise SQLError(
                    "wrong record type supplied in RETURN NEXT",
                    "42804",
                    detail=f"Number of returned columns ({len(record.values)}) does not match"
                    f" expected column count ({len(shape.types)}).",
                )
            rows.append(record.values)
        elif len(shape.types) == 1:
            rows.append((await self._value(expr, shape.types[0]),))
        else:
            raise SQLError("RETURN NEXT must specify a record or row variable", "42804")

    async def st_return_query(self, body: dict[str, Any]) -> None:
        assert self.rows is not None
        shape, rows = self.rows
        if "dynquery" in body:
            result = await self._dynamic(
                {"query": body["dynquery"], "params": body.get("params", [])}
            )
        else:
            text = body["query"]["PLpgSQL_expr"]["query"]
            result = await self._sql(text, rows=True)
        fields = result.fields or []
        detail = None
        if len(fields) != len(shape.pg):
            detail = (
                f"Number of returned columns ({len(fields)}) does not match expected column"
                f" count ({len(shape.pg)})."
            )
        for i, (f, pg) in enumerate(zip(fields, shape.pg, strict=False)):
            if detail is None and f.type.pg.oid != pg.oid:
                detail = (
                    f"Returned type {f.type.pg.sql_name} does not match expected type"
                    f" {pg.sql_name} in column {i + 1}."
                )
        if detail is not None:
            e = SQLError(
                "structure of query does not match function result type", "42804", detail=detail
            )
            if "dynquery" not in body:
                e.context = f'SQL statement "{text}"'
            raise e
        rows.extend(tuple(r) for r in result.rows)
        self._found(bool(result.rows))

    def _record(self, expr: dict[str, Any]) -> _Record | None:
        """The record a bare variable name holds (`RETURN NEXT r`), else None."""
        stmt = _one(f"SELECT {expr['PLpgSQL_expr']['query']}")
        val = stmt.targetList[0].val if isinstance(stmt, A.SelectStmt) else None
        found = self._lookup(val) if isinstance(val, A.ColumnRef) else None
        return found[0] if found is not None and isinstance(found[0], _Record) else None

    async def st_commit(self, body: dict[str, Any]) -> None:
        await self._end(TransactionStmtKind.TRANS_STMT_COMMIT, body)

    async def st_rollback(self, body: dict[str, Any]) -> None:
        await self._end(TransactionStmtKind.TRANS_STMT_ROLLBACK, body)

    async def _end(self, kind: TransactionStmtKind, body: dict[str, Any]) -> None:
        if not self.implicit:
            raise SQLError("invalid transaction termination", "2D000")
        if self.depth:
            word = "commit" if kind == TransactionStmtKind.TRANS_STMT_COMMIT else "roll back"
            raise SQLError(f"cannot {word} while a subtransaction is active", "2D000")
        self.notices.extend(await self.control(kind))
        await self.control(TransactionStmtKind.TRANS_STMT_BEGIN)

    # -- SQL --------------------------------------------------------------------------
    async def st_execsql(self, body: dict[str, Any]) -> None:
        text = body["sqlstmt"]["PLpgSQL_expr"]["query"]
        result = await self._sql(text, rows=bool(body.get("into")))
        if body.get("into"):
            await self._into(body, result, text)
            self._found(bool(result.rows))
        elif result.tag.split(" ")[0] in ("INSERT", "UPDATE", "DELETE", "MERGE"):
            self._found(self.row_count > 0)

    async def st_call(self, body: dict[str, Any]) -> None:
        """CALL p(...): a procedure's OUT and INOUT values go back into the variables
        given for them."""
        text = body["expr"]["PLpgSQL_expr"]["query"]
        result = await self._sql(text, rows=True)
        if not result.rows:
            return
        call = _one(text).funccall
        names = [n.sval for n in call.funcname]
        given = list(call.args or ())
        found = self.s.catalog.find_functions(
            names[0] if len(names) == 2 else None, names[-1], self.s.search_path()
        )
        fn = next(f for f in found if f.prokind == "p" and len(given) <= len(f.params))
        outs = [i for i, p in enumerate(fn.params) if p.mode != "i"]
        for i, value in zip(outs, result.rows[0], strict=False):
            arg = given[i] if i < len(given) else None
            found_var = self._lookup(arg) if isinstance(arg, A.ColumnRef) else None
            if found_var is None:
                raise SQLError(
                    f'procedure parameter "{fn.params[i].name}" is an output parameter but'
                    " corresponding argument is not writable",
                    "42601",
                )
            self._set(self._dno(arg.fields[-1].sval), value)

    async def st_perform(self, body: dict[str, Any]) -> None:
        await self._sql(body["expr"]["PLpgSQL_expr"]["query"], rows=True)
        self._found(self.row_count > 0)

    async def st_dynexecute(self, body: dict[str, Any]) -> None:
        result = await self._dynamic(body)
        if body.get("into"):
            await self._into(body, result, "")

    async def _dynamic(self, body: dict[str, Any]) -> Result:
        """EXECUTE text [USING ...]: the text parsed now, the USING values as $1, $2, ..."""
        text = await self._value(body["query"])
        if text is None:
            raise SQLError("query string argument of EXECUTE is null", "22004")
        params = [await self._value(p) for p in body.get("params", [])]
        stmts = parse_statements(str(text))
        if not stmts:
            self.row_count = 0
            return Result("EMPTY")
        result = Result("EMPTY")
        for stmt, source in stmts:
            result = await self._execute(stmt, params, source)
        return result

    async def _sql(self, text: str, *, rows: bool) -> Result:
        stmt = _one(text)
        if isinstance(stmt, _BINDS):
            stmt, params = self._bind(stmt)
        else:
            params = []
        if not rows and isinstance(stmt, A.SelectStmt) and stmt.intoClause is None:
            raise SQLError(
                "query has no destination for result data",
                "42601",
                hint="If you want to discard the results of a SELECT, use PERFORM instead.",
            )
        if isinstance(stmt, A.TransactionStmt):
            raise FeatureNotSupported(
                "transaction statements other than COMMIT and ROLLBACK are not supported in"
                " PL/pgSQL",
                hint="PL/pgSQL uses BEGIN ... EXCEPTION blocks for savepoints.",
            )
        return await self._execute(stmt, params, text)

    async def _execute(self, stmt: Any, params: list[Any], text: str) -> Result:
        result = await _in_context(self.ex.execute(stmt, params), f'SQL statement "{text}"', text)
        self.notices.extend(result.notices)  # (a nested CALL's RAISEs, DROP ... IF EXISTS)
        m = _ROWS_TAG.match(result.tag)
        self.row_count = int(m.group(1)) if m else len(result.rows)
        return result

    # -- expressions ------------------------------------------------------------------
    async def _condition(self, expr: dict[str, Any]) -> bool:
        value = await self._value(expr, _type_name("bool"))
        return bool(value)

    async def _value(
        self, expr: dict[str, Any], cast: A.TypeName | None = None, label: str | None = None
    ) -> Any:
        value, _ = await self._typed(expr, cast, label)
        return value

    async def _typed(
        self, expr: dict[str, Any], cast: A.TypeName | None = None, label: str | None = None
    ) -> tuple[Any, Field | None]:
        """An expression's value and its column (PL/pgSQL runs `SELECT expr`); `label`
        names it in an error's CONTEXT (default: `PL/pgSQL expression "..."`)."""
        text = expr["PLpgSQL_expr"]["query"].strip()
        stmt = _one(f"SELECT {text}")
        if not isinstance(stmt, A.SelectStmt) or stmt.targetList is None:
            raise SyntaxErr(f'syntax error in expression "{text}"')
        known = self._known(stmt)
        if known is not _UNKNOWN and (cast is None or known is None):
            return known, None
        if cast is not None and len(stmt.targetList) == 1:
            target = stmt.targetList[0]
            target.val = A.TypeCast(arg=target.val, typeName=cast)
        stmt, params = self._bind(stmt)
        context = label or f'PL/pgSQL expression "{text}"'
        result = await _in_context(self.ex.execute(stmt, params), context, text)
        fields = result.fields or []
        if len(fields) != 1:
            raise SQLError(f'query "SELECT {text}" returned {len(fields)} columns', "42601")
        if len(result.rows) > 1:
            raise SQLError(f'query "SELECT {text}" returned more than one row', "21000")
        return (result.rows[0][0] if result.rows else None), fields[0]

    def _known(self, stmt: A.SelectStmt) -> Any:
        """The value of `SELECT <constant or variable>` without a query, else _UNKNOWN."""
        if len(stmt.targetList) != 1 or any(
            getattr(stmt, a) for a in ("fromClause", "whereClause", "groupClause", "limitCount")
        ):
            return _UNKNOWN
        val = stmt.targetList[0].val
        if isinstance(val, A.A_Const):
            if val.isnull:
                return None
            if isinstance(val.val, A.Integer | A.Boolean):
                return val.val.ival if isinstance(val.val, A.Integer) else val.val.boolval
            return _UNKNOWN
        if isinstance(val, A.ColumnRef):
            found = self._lookup(val)
            if found is not None and not isinstance(found[0], _Record):
                return found[0]
        return _UNKNOWN

    def _lookup(self, ref: A.ColumnRef) -> tuple[Any, A.TypeName | None] | None:
        """A variable (or record field) `ref` names, with its type; None: not one."""
        parts = [f.sval for f in ref.fields if isinstance(f, A.String)]
        if len(parts) != len(ref.fields) or not 1 <= len(parts) <= 2:
            return None
        if len(parts) == 2:  # label.var, or record.field
            for label, names in reversed(self.scopes):
                if label == parts[0] and parts[1] in names:
                    dno = names[parts[1]]
                    return self.values.get(dno), self._type(dno)
            dno = self._dno(parts[0])
            if dno is None or self.kinds[dno] != "PLpgSQL_rec":
                return None
            rec = self.values.get(dno)
            if not isinstance(rec, _Record):
                raise SQLError(
                    f'record "{parts[0]}" is not assigned yet',
                    "55000",
                    detail="The tuple structure of a not-yet-assigned record is indeterminate.",
                )
            return rec.get(parts[1]), None
        dno = self._dno(parts[0])
        return None if dno is None else (self.values.get(dno), self._type(dno))

    def _dno(self, name: str) -> int | None:
        for _, names in reversed(self.scopes):
            if name in names:
                return names[name]
        return None

    def _type(self, dno: int) -> A.TypeName | None:
        d = self.datums[dno]
        if self.kinds[dno] != "PLpgSQL_var" or d["refname"].startswith("__Case__"):
            return None  # a record, or CASE's value (pglast types it int4: it has no catalog)
        return _type_name(d["datatype"]["PLpgSQL_type"]["typname"])

    def _bind(self, stmt: Any) -> tuple[Any, list[Any]]:
        """`stmt` with each variable it names as a parameter (typed as declared)."""
        params: list[Any] = []

        def swap(node: A.Node) -> Any:
            if isinstance(node, A.ParamRef) and 0 < node.number <= len(self.args):
                found = self.values.get(node.number - 1), self._type(node.number - 1)
            elif isinstance(node, A.ColumnRef):
                found = self._lookup(node)
            else:
                return None
            if found is None:
                return None
            value, typ = found
            if isinstance(value, _Record):
                raise FeatureNotSupported(
                    "a whole record variable in an expression is not supported in PL/pgSQL",
                    hint="Name its fields (r.col).",
                )
            params.append(value)
            ref = A.ParamRef(number=len(params), location=node.location)
            return ref if typ is None else A.TypeCast(arg=ref, typeName=typ)

        return replaced(stmt, swap), params

    # -- RAISE, ASSERT, GET DIAGNOSTICS -----------------------------------------------
    async def st_raise(self, body: dict[str, Any]) -> None:
        level = _LEVELS.get(body.get("elog_level", 21), "ERROR")
        options: dict[str, str] = {}
        for o in body.get("options", []):
            o = o["PLpgSQL_raise_option"]
            name = _OPTIONS[o.get("opt_type", 0)] if o.get("opt_type", 0) < 8 else "schema"
            if name in options:
                raise SQLError(f"RAISE option already specified: {name.upper()}", "42601")
            options[name] = await self._text(o["expr"])
        if "message" not in body and "condname" not in body and not options:
            if not self.handling:  # bare RAISE: the error being handled, again
                raise SQLError(
                    "RAISE without parameters cannot be used outside an exception handler", "0Z002"
                )
            raise self.handling[-1]
        code = body.get("condname")
        if code is not None:
            code = code if re.fullmatch(r"[0-9A-Z]{5}", code) else CONDITIONS.get(code)
        if "errcode" in options:
            given = options["errcode"]
            code = given if re.fullmatch(r"[0-9A-Z]{5}", given) else CONDITIONS.get(given)
            if code is None:
                raise SQLError(f'unrecognized exception condition "{given}"', "42704")
        message = body.get("message")
        if message is not None:
            message = await self._format(message, body.get("params", []))
        elif "message" in options:
            message = options["message"]
        else:
            message = body.get("condname") or code or "P0001"
        if level == "ERROR":
            raise SQLError(
                message, code or "P0001", detail=options.get("detail"), hint=options.get("hint")
            )
        notice = SQLError(
            message,
            code or ("01000" if level == "WARNING" else "00000"),
            detail=options.get("detail"),
            hint=options.get("hint"),
            severity=level,
        )
        notice.context = f"{self.where} line {body['lineno']} at RAISE"
        self.notices.append(notice)

    async def _format(self, message: str, params: list[dict[str, Any]]) -> str:
        out, it = [], iter(params)
        i = 0
        while i < len(message):
            ch = message[i]
            if ch == "%" and message[i + 1 : i + 2] == "%":
                out.append("%")
                i += 2
                continue
            if ch == "%":
                p = next(it, None)
                if p is None:
                    raise SQLError("too few parameters specified for RAISE", "42601")
                out.append(await self._text(p))
            else:
                out.append(ch)
            i += 1
        if next(it, None) is not None:
            raise SQLError("too many parameters specified for RAISE", "42601")
        return "".join(out)

    async def _text(self, expr: dict[str, Any]) -> str:
        """An expression's value as its type's output function prints it (NULL: <NULL>)."""
        text = expr["PLpgSQL_expr"]["query"]
        ref = _one(f"SELECT {text}")
        val = ref.targetList[0].val if isinstance(ref, A.SelectStmt) and ref.targetList else None
        if isinstance(val, A.ColumnRef):
            found = self._lookup(val)
            if found is not None and isinstance(found[0], _Record):
                return _record_text(found[0], self.s.text_format())
        value, field = await self._typed(expr)
        if value is None:
            return "<NULL>"
        if field is None:
            return ("t" if value else "f") if isinstance(value, bool) else str(value)
        return text_encoder(field.type, session=self.s.text_format())(value).decode()

    async def st_assert(self, body: dict[str, Any]) -> None:
        if await self._value(body["cond"], _type_name("bool")):
            return
        message = await self._text(body["message"]) if body.get("message") else "assertion failed"
        raise SQLError(message, "P0004")

    async def st_getdiag(self, body: dict[str, Any]) -> None:
        stacked = body.get("is_stacked")
        if stacked and not self.handling:
            raise SQLError(
                "GET STACKED DIAGNOSTICS cannot be used outside an exception handler", "0Z002"
            )
        for item in body.get("diag_items", []):
            item = item["PLpgSQL_diag_item"]
            kind = item["kind"]
            if stacked:
                e = self.handling[-1]
                value = {
                    "RETURNED_SQLSTATE": e.sqlstate,
                    "MESSAGE_TEXT": e.message,
                    "PG_EXCEPTION_DETAIL": e.detail or "",
                    "PG_EXCEPTION_HINT": e.hint or "",
                    "PG_EXCEPTION_CONTEXT": "",
                }.get(kind, "")
            elif kind == "ROW_COUNT":
                value = self.row_count
            else:
                value = ""  # PG_CONTEXT: no call stack to show
            self._set(item.get("target", 0), value)
            await self._cast(item.get("target", 0))

    def _found(self, value: bool) -> None:
        for dno, d in enumerate(self.datums):
            if d.get("refname") == "found" and self.kinds[dno] == "PLpgSQL_var":
                self.values[dno] = value
                return


_UNKNOWN = object()
# how PostgreSQL's CONTEXT names a statement (pl_funcs.c plpgsql_stmt_typename)
_NAMES = {
    "block": "statement block",
    "assign": "assignment",
    "fori": "FOR with integer loop variable",
    "fors": "FOR over SELECT rows",
    "dynfors": "FOR over EXECUTE statement",
    "foreach_a": "FOREACH over array",
    "execsql": "SQL statement",
    "dynexecute": "EXECUTE",
    "getdiag": "GET DIAGNOSTICS",
    "return_next": "RETURN NEXT",
    "open": "OPEN",
    "close": "CLOSE",
    "forc": "FOR over cursor",
    "return_query": "RETURN QUERY",
}


def _statement_name(kind: str, body: dict[str, Any]) -> str:
    short = kind.removeprefix("PLpgSQL_stmt_")
    if short == "exit":
        return "EXIT" if body.get("is_exit") else "CONTINUE"
    if short == "fetch":
        return "MOVE" if body.get("is_move") else "FETCH"
    if short == "getdiag" and body.get("is_stacked"):
        return "GET STACKED DIAGNOSTICS"
    return _NAMES.get(short, short.upper())


async def _in_context(call: Any, context: str, query: str) -> Result:
    """A statement's result; its error says which statement of the block it came from
    (its position pointed into that statement, not into the DO's text)."""
    try:
        return await call
    except SQLError as e:
        if e.context is None and e.position:  # PostgreSQL's QUERY and its cursor
            e.internal_query, e.internal_position, e.position = query, e.position, None
        else:  # (a function it called has said where in it: this statement comes next)
            e.context = f"{e.context}\n{context}" if e.context else context
        raise


def _levels(e: SQLError) -> set[int]:
    """The interpreters that have added their line to `e`'s CONTEXT."""
    if not hasattr(e, "_hw_levels"):
        e._hw_levels = set()  # type: ignore[attr-defined]
    return e._hw_levels  # type: ignore[attr-defined]


_BINDS = A.SelectStmt | A.InsertStmt | A.UpdateStmt | A.DeleteStmt | A.CallStmt
_STRICT_HINT = "Make sure the query returns a single row, or use LIMIT 1."


def _special(d: dict[str, Any]) -> bool:
    return bool(_SPECIAL.match(d.get("refname", "")))


def _declarations(
    action: dict[str, Any], datums: list[dict[str, Any]], kinds: list[str], params: int
) -> dict[int, list[int]]:
    """Which block declares each variable. pglast's tree does not say, so a block
    takes, outermost first, the next variables in declaration order that are declared
    on or before its BEGIN's line, up to a name it already has (a FOR loop's integer
    variable is the loop's own)."""
    loop_vars = set()
    blocks: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for n in node:
                walk(n)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key == "PLpgSQL_stmt_block":
                    blocks.append(value)
                if key == "PLpgSQL_stmt_fori":
                    loop_vars.add(_loop_var(datums, kinds, value["var"]["PLpgSQL_var"]))
                if key == "PLpgSQL_stmt_forc":
                    loop_vars.add(value["var"]["PLpgSQL_rec"].get("dno", 0))
                walk(value)

    walk(action)
    free = [
        i
        for i, d in enumerate(datums)
        if kinds[i] in ("PLpgSQL_var", "PLpgSQL_rec")
        and not _special(d)
        and i not in loop_vars
        and i >= params
    ]
    out: dict[int, list[int]] = {}
    for b in blocks:
        line = b.get("lineno", -1)
        mine: list[int] = []
        for i in free:  # a block declares a name once: a repeat is an inner block's
            if datums[i].get("lineno", 0) > line or any(
                datums[j]["refname"] == datums[i]["refname"] for j in mine
            ):
                break
            mine.append(i)
        out[id(b)] = mine
        free = [i for i in free if i not in mine]
    return out


def _loop_var(datums: list[dict[str, Any]], kinds: list[str], var: dict[str, Any]) -> int:
    for i, d in enumerate(datums):
        if (
            kinds[i] == "PLpgSQL_var"
            and d.get("refname") == var["refname"]
            and d.get("lineno") == var.get("lineno")
        ):
            return i
    raise SQLError(f'loop variable "{var["refname"]}" not found', "XX000")


def _handler(block: dict[str, Any], e: SQLError) -> dict[str, Any] | None:
    """The first handler whose conditions take `e` (OTHERS: all but a failed ASSERT)."""
    for exc in block.get("exc_list", []):
        exc = exc["PLpgSQL_exception"]
        for cond in exc.get("conditions", []):
            name = cond["PLpgSQL_condition"]["condname"]
            if name == "others":
                if e.sqlstate != "P0004":
                    return exc
                continue
            code = name if re.fullmatch(r"[0-9A-Z]{5}", name) else CONDITIONS.get(name)
            if code is None:
                raise SQLError(f'unrecognized exception condition "{name}"', "42704")
            if code == e.sqlstate or (code.endswith("000") and code[:2] == e.sqlstate[:2]):
                return exc
    return None


def _assigned_expression(text: str) -> str:
    """`x := expr` (how pglast gives an assignment): the `expr`."""
    m = re.match(r'^\s*(?:"(?:[^"]|"")+"|[\w$]+)(?:\s*\.\s*(?:"(?:[^"]|"")+"|[\w$]+))*\s*:?=', text)
    if m is None:
        raise FeatureNotSupported(f"assignment {text!r} is not supported", hint=_HINT)
    return text[m.end() :]


def _one(text: str) -> Any:
    """The one statement of `text` (PostgreSQL's syntax errors)."""
    try:
        stmts = parse_sql(text)
    except ParseError:
        stmts = None
    if stmts is None:
        parsed = parse_statements(text)  # PostgreSQL's syntax error, or Headwater's syntax
        if len(parsed) != 1:
            raise SyntaxErr(f"expected one statement in {text!r}")
        return parsed[0][0]
    if len(stmts) != 1:
        raise SyntaxErr(f"expected one statement in {text!r}")
    return stmts[0].stmt


def _typname(d: dict[str, Any]) -> str:
    return str(d.get("datatype", {}).get("PLpgSQL_type", {}).get("typname", ""))


def _type_name(typname: str) -> A.TypeName:
    array = typname.startswith("_")
    return A.TypeName(
        names=(A.String(sval=typname.removeprefix("_")),),
        typemod=-1,
        arrayBounds=(A.Integer(ival=-1),) if array else None,
    )


def _flatten(items: Any) -> list[Any]:
    out: list[Any] = []
    for x in items:
        out.extend(_flatten(x) if isinstance(x, list) else [x])
    return out


def _record_text(rec: _Record, fmt: SessionFormat) -> str:
    parts = []
    for f, v in zip(rec.fields, rec.values, strict=True):
        if v is None:
            parts.append("")
            continue
        s = text_encoder(f.type, session=fmt)(v).decode()
        parts.append(f'"{s}"' if re.search(r'[\s,()"\\]', s) or s == "" else s)
    return "(" + ",".join(parts) + ")"
