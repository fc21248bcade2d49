"""CREATE / ALTER SEQUENCE options, serial and identity columns: statements to catalog
objects, with PostgreSQL 15's checks and messages (sequence.c init_params; no side
effects: the DDL executor applies them)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pglast.ast as A
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Column, Relation, Sequence, Table
from headwater.catalog.types import BOOL, INT8, ColumnType
from headwater.planner.relations import deparse
from headwater.planner.syntax import nodes
from pglast import parse_sql
from pglast.enums import ConstrType

from headwater.errors import (
    SQLError,
    UndefinedColumn,
    UndefinedTable,
    WrongObjectType,
)

# Columns of a sequence read as a relation (SELECT * FROM s)
SEQUENCE_COLUMNS = (
    Column("last_value", ColumnType(INT8), True),
    Column("log_cnt", ColumnType(INT8), True),
    Column("is_called", ColumnType(BOOL), True),
)
TYPE_RANGES = {
    "int2": (-(2**15), 2**15 - 1),
    "int4": (-(2**31), 2**31 - 1),
    "int8": (-(2**63), 2**63 - 1),
}
SQL_TYPE = {"int2": "smallint", "int4": "integer", "int8": "bigint"}
SERIAL_TYPES = {"smallserial": "int2", "serial": "int4", "bigserial": "int8"}


@dataclass
class Options:
    """What a CREATE / ALTER SEQUENCE (or an identity column's options) asked for."""

    sequence: Sequence
    restart: int | None = None  # ALTER ... RESTART [WITH n]: the new last_value
    owned_by: tuple[str, ...] | None = None  # OWNED BY names (('none',) for NONE)


def _invalid(msg: str) -> SQLError:
    return SQLError(msg, "22023")


def _int(d: A.DefElem) -> int:
    v = d.arg
    if isinstance(v, A.Integer):
        return v.ival
    if isinstance(v, A.Float):
        try:
            return int(v.fval)
        except ValueError:
            pass
    raise SQLError(f"{d.defname} requires a numeric value", "42601")


def _type_name(tn: A.TypeName) -> str:
    names = [n.sval for n in tn.names]
    name = names[-1]
    alias = {"smallint": "int2", "integer": "int4", "int": "int4", "bigint": "int8"}
    name = alias.get(name, name)
    if name not in TYPE_RANGES or tn.arrayBounds:
        raise _invalid("sequence type must be smallint, integer, or bigint")
    return name


def new_sequence(oid: int, schema: str, name: str) -> Sequence:
    return Sequence(oid, schema, name, SEQUENCE_COLUMNS, nonce=secrets.randbits(62))


def apply_options(
    seq: Sequence, options: Any, creating: bool, last_value: int | None = None
) -> Options:
    """`seq` with `options` applied (init_params); `last_value` is the current one (ALTER)."""
    given: dict[str, A.DefElem] = {}
    for d in options or ():
        if d.defname in given:
            at = getattr(d, "location", None)
            raise SQLError(
                "conflicting or redundant options",
                "42601",
                position=at + 1 if at is not None and at >= 0 else None,
            )
        given[d.defname] = d
    old_type = seq.type_name
    type_name = _type_name(given["as"].arg) if "as" in given else old_type
    lo, hi = TYPE_RANGES[type_name]
    old_lo, old_hi = TYPE_RANGES[old_type]
    increment = _int(given["increment"]) if "increment" in given else seq.increment
    if increment == 0:
        raise _invalid("INCREMENT must not be zero")
    cycle = bool(given["cycle"].arg.boolval) if "cycle" in given else seq.cycle
    # MAXVALUE / MINVALUE: given, NO ... (the default), or kept; ALTER ... AS resets
    # bounds that were the old type's limits (sequence.c init_params)
    reset_max = not creating and "as" in given and seq.max_value == old_hi
    reset_min = not creating and "as" in given and seq.min_value == old_lo
    if "maxvalue" in given and given["maxvalue"].arg is not None:
        max_value = _int(given["maxvalue"])
    elif "maxvalue" in given or creating or reset_max:
        max_value = hi if increment > 0 or reset_max else -1
    else:
        max_value = seq.max_value
    if "minvalue" in given and given["minvalue"].arg is not None:
        min_value = _int(given["minvalue"])
    elif "minvalue" in given or creating or reset_min:
        min_value = lo if increment < 0 or reset_min else 1
    else:
        min_value = seq.min_value
    sql_type = SQL_TYPE[type_name]
    if not lo <= max_value <= hi:
        raise _invalid(f"MAXVALUE ({max_value}) is out of range for sequence data type {sql_type}")
    if not lo <= min_value <= hi:
        raise _invalid(f"MINVALUE ({min_value}) is out of range for sequence data type {sql_type}")
    if min_value >= max_value:
        raise _invalid(f"MINVALUE ({min_value}) must be less than MAXVALUE ({max_value})")
    if "start" in given:
        start = _int(given["start"])
    elif creating:
        start = min_value if increment > 0 else max_value
    else:
        start = seq.start
    if start < min_value:
        raise _invalid(f"START value ({start}) cannot be less than MINVALUE ({min_value})")
    if start > max_value:
        raise _invalid(f"START value ({start}) cannot be greater than MAXVALUE ({max_value})")
    restart: int | None = None
    if "restart" in given:
        restart = start if given["restart"].arg is None else _int(given["restart"])
    check = restart if restart is not None else (start if creating else last_value)
    if check is not None and check < min_value:
        raise _invalid(f"RESTART value ({check}) cannot be less than MINVALUE ({min_value})")
    if check is not None and check > max_value:
        raise _invalid(f"RESTART value ({check}) cannot be greater than MAXVALUE ({max_value})")
    cache = _int(given["cache"]) if "cache" in given else seq.cache
    if cache <= 0:
        raise _invalid(f"CACHE ({cache}) must be greater than zero")
    owned = None
    if "owned_by" in given:
        owned = tuple(n.sval for n in given["owned_by"].arg)
    for name in given:
        if (
            name
            not in (
                "as increment cycle maxvalue minvalue start restart cache owned_by sequence_name"
            ).split()
        ):
            raise SQLError(f'option "{name}" not recognized', "42601")
    out = replace(
        seq,
        type_name=type_name,
        start=start,
        increment=increment,
        min_value=min_value,
        max_value=max_value,
        cache=cache,
        cycle=cycle,
    )
    return Options(out, restart, owned)


def resolve_owned_by(
    catalog: Catalog, seq: Sequence, names: tuple[str, ...], search_path: tuple[str, ...]
) -> tuple[int, str] | None:
    """OWNED BY table.column (or NONE): the (table oid, column) it names."""
    if names == ("none",):
        return None
    if len(names) < 2:
        raise SQLError(
            "invalid OWNED BY option",
            "42601",
            hint="Specify OWNED BY table.column or OWNED BY NONE.",
        )
    *rel_names, column = names
    schema = rel_names[-2] if len(rel_names) > 1 else None
    table = catalog.resolve(schema, rel_names[-1], search_path)
    if table is None:
        raise UndefinedTable(f'relation "{".".join(rel_names)}" does not exist')
    if not isinstance(table, Table):
        raise WrongObjectType(f'referenced relation "{table.name}" is not a table or foreign table')
    if table.schema != seq.schema:
        raise SQLError("sequence must be in same schema as table it is linked to", "55000")
    if table.column(column) is None:
        raise UndefinedColumn(f'column "{column}" of relation "{table.name}" does not exist')
    return (table.oid, column)


def choose_name(catalog: Catalog, schema: str, table: str, column: str) -> str:
    """PostgreSQL's ChooseRelationName(table, column, "seq"): t_c_seq, t_c_seq1, ..."""
    base = f"{table}_{column}_seq"
    name, n = base, 0
    while catalog.resolve(schema, name, ()) is not None:
        n += 1
        name = f"{base}{n}"
    return name


@dataclass
class ColumnSequence:
    """The sequence a serial or identity column of a CREATE TABLE gets."""

    column: str
    type_name: str
    options: Any  # identity options (DefElems), or ()
    identity: str  # 'a' / 'd' for identity columns, '' for serial


def expand_columns(elts: Any, table: str) -> list[ColumnSequence]:
    """Turn the serial and identity columns among `elts` (ColumnDefs of table `table`:
    CREATE TABLE, or ALTER TABLE ... ADD COLUMN) into plain integer columns, NOT NULL
    (the DEFAULT is added once the sequence is named: `column_default`)."""
    out: list[ColumnSequence] = []
    for elt in elts or ():
        if not isinstance(elt, A.ColumnDef):
            continue
        tn = elt.typeName
        last = tn.names[-1].sval if tn is not None and tn.names else ""
        cons = list(elt.constraints or ())
        identity = [c for c in cons if c.contype == ConstrType.CONSTR_IDENTITY]
        if last in SERIAL_TYPES and len(tn.names) == 1 and not tn.arrayBounds:
            if any(c.contype == ConstrType.CONSTR_DEFAULT for c in cons):
                raise SQLError(
                    f'multiple default values specified for column "{elt.colname}" of table '
                    f'"{table}"',
                    "42601",
                )
            type_name = SERIAL_TYPES[last]
            elt.typeName = A.TypeName(names=(A.String(sval=type_name),), typemod=-1)
            out.append(ColumnSequence(elt.colname, type_name, (), ""))
        elif identity:
            if len(identity) > 1:
                raise SQLError(
                    f'multiple identity specifications for column "{elt.colname}" of table '
                    f'"{table}"',
                    "42601",
                )
            if any(c.contype == ConstrType.CONSTR_DEFAULT for c in cons):
                raise SQLError(
                    f'both default and identity specified for column "{elt.colname}" of table '
                    f'"{table}"',
                    "42601",
                )
            try:
                type_name = _type_name(tn)
            except SQLError:
                raise SQLError(
                    "identity column type must be smallint, integer, or bigint", "22023"
                ) from None
            con = identity[0]
            out.append(
                ColumnSequence(elt.colname, type_name, con.options or (), con.generated_when)
            )
        else:
            continue
        kept = tuple(c for c in cons if c.contype != ConstrType.CONSTR_IDENTITY)
        elt.constraints = kept + (A.Constraint(contype=ConstrType.CONSTR_NOTNULL),)
    return out


def parse_regclass(text: str) -> tuple[str | None, str]:
    """'s', 'public.s', '"My Seq"': (schema, name) as PostgreSQL's regclass input reads."""
    parts: list[str] = []
    cur, quoted, i = "", False, 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            if quoted and i + 1 < len(text) and text[i + 1] == '"':
                cur += '"'
                i += 1
            else:
                quoted = not quoted
        elif ch == "." and not quoted:
            parts.append(cur)
            cur = ""
        elif quoted:
            cur += ch
        else:
            cur += ch.lower()
        i += 1
    parts.append(cur)
    if len(parts) == 1:
        return None, parts[0]
    return parts[-2], parts[-1]


def check_default_sequences(elts: Any, resolve: Callable[[str | None, str], Relation]) -> None:
    """42P01 / 3F000 for a DEFAULT nextval('name') of a missing sequence, with the
    position PostgreSQL reports (the name, right after "nextval(")."""
    for elt in elts or ():
        if isinstance(elt, A.ColumnDef):
            for con in elt.constraints or ():
                if con.contype != ConstrType.CONSTR_DEFAULT:
                    continue
                for call, name in nextval_calls(con.raw_expr):
                    if name.isdigit():
                        continue
                    try:
                        resolve(*parse_regclass(name))
                    except SQLError as e:
                        if call.location is not None and e.sqlstate in ("42P01", "3F000"):
                            e.position = call.location + len("nextval(") + 1
                        raise


def nextval_calls(tree: Any) -> Iterator[tuple[A.FuncCall, str]]:
    """Each nextval('name') call of `tree` with its name's text (an oid where it names the
    sequence by oid, as stored defaults do)."""
    for n in nodes(tree):
        if isinstance(n, A.FuncCall) and n.funcname[-1].sval == "nextval" and n.args:
            arg = n.args[0]
            inner = arg.arg if isinstance(arg, A.TypeCast) else arg
            if isinstance(inner, A.A_Const) and isinstance(inner.val, A.String):
                yield n, inner.val.sval


def column_default(seq: Sequence) -> str:
    """The DEFAULT a serial column gets. Like PostgreSQL's, it names the sequence by oid
    (renames and the search path do not change which sequence it calls); pg_get_expr
    shows the name (catalog/pg/column_default.py)."""
    return f"nextval('{seq.oid}'::regclass)"


def sequence_calls_by_oid(
    default: str | None, resolve: Callable[[str | None, str], Relation]
) -> str | None:
    """A DEFAULT whose nextval('name') calls name their sequence by oid instead, as
    PostgreSQL stores them (42P01 now for a missing one); None: unchanged."""
    if default is None or "nextval" not in default:
        return None
    node = parse_sql(f"SELECT {default}")[0].stmt.targetList[0].val
    changed = False
    for call, text in nextval_calls(node):
        if not text.isdigit():
            text = str(resolve(*parse_regclass(text)).oid)
        # spelled 'oid'::regclass after deparsing (RawStream writes CAST(...))
        mark = f"__hw_sequence_{text}__"
        call.args = (A.A_Const(isnull=False, val=A.String(sval=mark)), *call.args[1:])
        changed = True
    if not changed:
        return None
    return re.sub(r"'__hw_sequence_(\d+)__'", r"'\1'::regclass", deparse(node))


def with_sequence_defaults(
    table: Table,
    made: dict[str, tuple[Sequence, str]],
    resolve: Callable[[str | None, str], Relation],
) -> Table:
    """`table` whose serial / identity columns default to their sequence's nextval, and
    whose other defaults name the sequences they call by oid."""
    cols = []
    for c in table.columns:
        if c.name in made:
            seq, identity = made[c.name]
            c = Column(c.name, c.type, True, column_default(seq), identity)
        else:
            by_oid = sequence_calls_by_oid(c.default, resolve)
            if by_oid is not None:
                c = replace(c, default=by_oid)
        cols.append(c)
    return replace(table, columns=tuple(cols))


def identity_defaults(stmt: A.InsertStmt, targets: list[Column]) -> set[str]:
    """The identity columns among an INSERT's targets that take their default anyway
    (OVERRIDING USER VALUE); 428C9 for a value given to a GENERATED ALWAYS column
    without OVERRIDING SYSTEM VALUE (PostgreSQL's rewriteTargetListIU)."""
    override = getattr(stmt.override, "name", "")
    src = stmt.selectStmt
    out: set[str] = set()
    for i, col in enumerate(targets):
        if not col.identity:
            continue
        if override == "OVERRIDING_USER_VALUE":
            out.add(col.name)
            continue
        if col.identity != "a" or override == "OVERRIDING_SYSTEM_VALUE":
            continue
        rows = src.valuesLists if isinstance(src, A.SelectStmt) and src.valuesLists else None
        if rows is not None and all(i < len(r) and isinstance(r[i], A.SetToDefault) for r in rows):
            continue
        raise SQLError(
            f'cannot insert a non-DEFAULT value into column "{col.name}"',
            "428C9",
            detail=f'Column "{col.name}" is an identity column defined as GENERATED ALWAYS.',
            hint="Use OVERRIDING SYSTEM VALUE to override.",
        )
    return out


def check_identity_update(col: Column, value: Any) -> None:
    """UPDATE of a GENERATED ALWAYS identity column: only to DEFAULT (428C9)."""
    if col.identity == "a" and not isinstance(value, A.SetToDefault):
        raise SQLError(
            f'column "{col.name}" can only be updated to DEFAULT',
            "428C9",
            detail=f'Column "{col.name}" is an identity column defined as GENERATED ALWAYS.',
        )
