"""Binding sequence functions and sequences read as relations.

`nextval(x)`, `currval(x)`, `setval(x, v[, called])`, `lastval()` become calls of the
UDFs server/sequences.py registers on DuckDB, with the session's key first; a constant
sequence name is resolved now (42P01 at bind time, as PostgreSQL's regclass input) and
passed as its oid. `SELECT * FROM s` reads last_value, log_cnt, is_called.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pglast.ast as A
from headwater.catalog.objects import Relation, Sequence
from headwater.planner.relations import Binder
from headwater.planner.sequences import parse_regclass
from headwater.server import read_only
from headwater.server.sequences import Sequences, SessionView, serial_sequence

from headwater.errors import SQLError, UndefinedFunction

_ARITY = {"nextval": (1,), "currval": (1,), "setval": (2, 3), "lastval": (0,)}


def _const(v: Any) -> A.A_Const:
    if isinstance(v, int):
        return A.A_Const(isnull=False, val=A.Integer(ival=v))
    return A.A_Const(isnull=False, val=A.String(sval=v))


def _text_cast(node: Any) -> A.TypeCast:
    return A.TypeCast(arg=node, typeName=A.TypeName(names=(A.String(sval="varchar"),)))


def _type_word(arg: Any) -> str:
    """The type PostgreSQL names for an argument in "function f(...) does not exist"."""
    if isinstance(arg, A.A_Const) and not arg.isnull:
        return {A.Integer: "integer", A.Float: "numeric", A.Boolean: "boolean"}.get(
            type(arg.val), "unknown"
        )
    if isinstance(arg, A.TypeCast):
        return arg.typeName.names[-1].sval
    return "unknown"


def _sequence_name(arg: Any) -> tuple[str, int] | None:
    """('name', location) when the argument is a constant: 's' or 's'::regclass."""
    if isinstance(arg, A.TypeCast) and arg.typeName.names[-1].sval == "regclass":
        arg = arg.arg
    if isinstance(arg, A.A_Const) and isinstance(arg.val, A.String):
        location = getattr(arg, "location", None)
        return arg.val.sval, location if location is not None else -1
    return None


@dataclass
class SequenceBinder(Binder):
    """A Binder that also binds the sequence functions of one session."""

    sequences: Sequences | None = None
    session: SessionView | None = None

    def bind(self, node: Any, ctes: frozenset[str]) -> Any:
        if isinstance(node, A.FuncCall) and self.sequences is not None:
            node = self._sequence_call(node)
        return super().bind(node, ctes)

    def _sequence_call(self, fc: A.FuncCall) -> A.FuncCall:
        """The call bound (a new node: the caller's tree is not changed), or `fc`."""
        names = [n.sval for n in fc.funcname]
        if len(names) == 2 and names[0] == "pg_catalog":
            names = names[1:]
        if len(names) != 1:
            return fc
        name = names[0].lower()
        args = list(fc.args or ())
        if name == "pg_get_serial_sequence" and len(args) == 2:
            bound = copy.copy(fc)
            bound.funcname = (A.String(sval="nullif"),)  # a constant, or NULL
            bound.args = (self._serial_sequence(args[0], args[1]), A.A_Const(isnull=True))
            return bound
        if name not in _ARITY:
            return fc
        if len(args) not in _ARITY[name] or fc.over is not None or fc.agg_star:
            kinds = ", ".join(_type_word(a) for a in args)
            raise UndefinedFunction(
                f"function {name}({kinds}) does not exist",
                hint="No function matches the given name and argument types. "
                "You might need to add explicit type casts.",
                position=fc.location + 1 if fc.location is not None else None,
            )
        assert self.sequences is not None and self.session is not None
        if name in ("nextval", "setval") and read_only.read_only(self.session):  # type: ignore[arg-type]
            raise SQLError(f"cannot execute {name}() in a read-only transaction", "25006")
        key = self.sequences.attach(self.session)
        new_args: list[Any] = [_const(key)]
        if args:
            # pglast keeps no location for constants: `nextval('s')` puts it after "("
            at = fc.location + len(names[0]) + 1 if fc.location is not None else -1
            new_args.append(self._sequence_arg(args[0], at))
            new_args.extend(args[1:])
        fn = {"setval": "hw_setval3" if len(args) == 3 else "hw_setval"}.get(name, f"hw_{name}")
        bound = copy.copy(fc)
        bound.funcname = (A.String(sval=fn),)
        bound.args = tuple(new_args)
        return bound

    def _sequence_arg(self, arg: Any, location: int) -> Any:
        const = _sequence_name(arg)
        if const is None:
            return _text_cast(arg)
        text, _ = const
        if text.isdigit():  # an oid, as stored defaults name their sequence
            return _const(text)
        schema, name = parse_regclass(text)
        try:
            rel = self.catalog.get_relation(schema, name, self.search_path)
        except SQLError as e:
            if location >= 0 and e.sqlstate in ("42P01", "3F000"):
                e.position = location + 1
            raise
        self.depends.add(rel.oid)
        return _const(str(rel.oid))

    def _serial_sequence(self, table_arg: Any, column_arg: Any) -> Any:
        """pg_get_serial_sequence('t', 'c'): the sequence the column owns, qualified."""
        null = A.TypeCast(
            arg=A.A_Const(isnull=True), typeName=A.TypeName(names=(A.String(sval="varchar"),))
        )
        table_name, column = _sequence_name(table_arg), _sequence_name(column_arg)
        if table_name is None or column is None:  # evaluated per row (SQLAlchemy's reflection)
            assert self.sequences is not None and self.session is not None
            key = self.sequences.attach(self.session)
            return A.FuncCall(
                funcname=(A.String(sval="hw_serial_sequence"),),
                args=(_const(key), _text_cast(table_arg), _text_cast(column_arg)),
            )
        found = serial_sequence(self.catalog, self.search_path, table_name[0], column[0])
        return null if found is None else _const(found)

    def relation_sql(self, rel: Relation) -> str:
        if isinstance(rel, Sequence) and self.sequences is not None:
            assert self.session is not None
            key = self.sequences.attach(self.session)
            ref = f"'{rel.oid}'"
            return (
                f"(SELECT hw_sequence_state({key}, {ref}, 0) AS last_value, "
                f"hw_sequence_state({key}, {ref}, 1) AS log_cnt, "
                f"CAST(hw_sequence_state({key}, {ref}, 2) AS BOOLEAN) AS is_called)"
            )
        return super().relation_sql(rel)
