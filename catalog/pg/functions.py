"""The rows CREATE FUNCTION adds to the system catalogs: pg_proc's (appended to the
static built-in rows, catalog/pg/tables.py), and the texts pg_get_functiondef(),
pg_get_function_arguments(), pg_get_function_identity_arguments() and
pg_get_function_result() print, as _hw_defs rows (psql's \\df and \\sf read them)."""

from __future__ import annotations

import re
from typing import Any

from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import BOOTSTRAP_ROLE_OID, Function
from headwater.catalog.pg import specs
from headwater.catalog.pg.roles import acl
from headwater.catalog.pg.snapshot import Builder
from headwater.catalog.types import type_named

LANGUAGE_OIDS = {"sql": 14, "plpgsql": 13563}
# _hw_defs' hw_n of each text (0 is the whole definition, as for the other objects)
RESULT, ARGUMENTS, IDENTITY = -2, -3, -4

_TYPE_OIDS = {row[1]: row[0] for row in specs.TYPES}  # typname -> oid (pseudo-types too)
_ARRAYS = {row[0]: row[14] for row in specs.TYPES}  # oid -> its array type's oid
_VOLATILITY = {"i": " IMMUTABLE", "s": " STABLE", "v": ""}


def functions(b: Builder) -> list[Function]:
    return sorted((f for fs in b.catalog.functions.values() for f in fs), key=lambda f: f.oid)


def type_oid(b: Builder, text: str) -> int:
    """The oid of a type as format_type() printed it (`integer`, `numeric(10,2)`,
    `text[]`, an enum's name, `anyelement`)."""
    base = re.sub(r"\(.*\)", "", text)
    if base.endswith("[]"):
        element = type_oid(b, base[:-2])
        return _ARRAYS.get(element, 0) or next(
            (t.array_oid for t in b.catalog.types.values() if t.oid == element), 0
        )
    pg = type_named(base)
    if pg is not None:
        return pg.oid
    if base in _TYPE_OIDS:
        return _TYPE_OIDS[base]
    name = base.rsplit(".", 1)[-1].strip('"')
    return next((t.oid for t in b.catalog.types.values() if t.name == name), 0)


def pg_proc_rows(b: Builder) -> list[dict[str, Any]]:
    out = []
    for f in functions(b):
        table = bool(f.columns)  # RETURNS TABLE (...) or OUT parameters
        if f.declared:
            all_types = [type_oid(b, p.type) for p in f.declared]
            names = [p.name for p in f.declared]
            modes = [p.mode for p in f.declared]
        else:
            all_types = [type_oid(b, p.type) for p in f.params]
            all_types += [type_oid(b, t) for _, t in f.columns]
            names = [p.name for p in f.params] + [n for n, _ in f.columns]
            modes = ["i"] * len(f.params) + ["t"] * len(f.columns)
        inputs = [p for p in f.params if p.mode != "o"]  # (a procedure's OUT ones too)
        out.append(
            {
                "oid": f.oid,
                "proname": f.name,
                "pronamespace": b.nsp_oid(f.schema),
                "proowner": f.owner or BOOTSTRAP_ROLE_OID,
                "prolang": LANGUAGE_OIDS[f.language],
                "procost": 100.0,
                "prorows": 1000.0 if f.returns_set else 0.0,
                "provariadic": 0,
                "prosupport": "-",
                "prokind": f.prokind,
                "prosecdef": False,
                "proleakproof": False,
                "proisstrict": f.strict,
                "proretset": f.returns_set,
                "provolatile": f.volatility,
                "proparallel": "u",
                "pronargs": len(inputs),
                "pronargdefaults": sum(1 for p in inputs if p.default is not None),
                "prorettype": type_oid(
                    b, "record" if f.declared and f.prokind == "p" else f.returns
                ),
                "proargtypes": " ".join(str(type_oid(b, p.type)) for p in inputs),
                "proallargtypes": all_types if table else None,
                "proargmodes": modes if table else None,
                "proargnames": names if any(names) else None,
                "proargdefaults": None,
                "protrftypes": None,
                "prosrc": f.source,
                "probin": None,
                "prosqlbody": None,
                "proconfig": None,
                "proacl": acl(b, f),
            }
        )
    return out


def arguments(f: Function, defaults: bool = True) -> str:
    """pg_get_function_arguments (with defaults) / _identity_arguments (without)."""
    out = []
    for p in f.declared or f.params:
        text = f"{quote_ident(p.name)} {p.type}" if p.name else p.type
        if p.mode != "i" or f.prokind == "p":  # OUT, INOUT; a procedure's modes all
            text = f"{p.mode_word} {text}"
        if defaults and p.default is not None:
            text += f" DEFAULT {p.default}"
        out.append(text)
    return ", ".join(out)


def result(f: Function) -> str | None:
    """pg_get_function_result: `integer`, `SETOF integer`, `TABLE(x integer, y text)`;
    NULL for a procedure."""
    if f.prokind == "p":
        return None
    if f.columns and not f.declared:
        return "TABLE(" + ", ".join(f"{quote_ident(n)} {t}" for n, t in f.columns) + ")"
    return f"SETOF {f.returns}" if f.returns_set else f.returns


def definition(f: Function) -> str:
    """pg_get_functiondef: the CREATE OR REPLACE FUNCTION that makes `f` again."""
    name = f"{quote_ident(f.schema)}.{quote_ident(f.name)}"
    attributes = _VOLATILITY[f.volatility] + (" STRICT" if f.strict else "")
    if f.prokind == "p":
        text = f"CREATE OR REPLACE PROCEDURE {name}({arguments(f)})\n"
    else:
        text = f"CREATE OR REPLACE FUNCTION {name}({arguments(f)})\n RETURNS {result(f)}\n"
    text += f" LANGUAGE {f.language}\n" + (f"{attributes}\n" if attributes else "")
    if f.source:
        return text + f"AS $function${f.source}$function$\n"
    return text + f"BEGIN ATOMIC\n {f.body};\nEND\n"  # a RETURN or BEGIN ATOMIC body


def trigger_rows(b: Builder) -> list[dict[str, Any]]:
    """pg_trigger: CREATE TRIGGER's (BEFORE, FOR EACH ROW)."""
    return [
        {
            "oid": trg.oid,
            "tgrelid": t.oid,
            "tgparentid": 0,
            "tgname": trg.name,
            "tgfoid": trg.function,
            "tgtype": 1 | 2 | (4 if "i" in trg.events else 0) | (16 if "u" in trg.events else 0),
            "tgenabled": "O" if trg.enabled else "D",
            "tgisinternal": False,
            "tgconstrrelid": 0,
            "tgconstrindid": 0,
            "tgconstraint": 0,
            "tgdeferrable": False,
            "tginitdeferred": False,
            "tgnargs": 0,
            "tgattr": "",
            "tgargs": b"",
            "tgqual": None,
            "tgoldtable": None,
            "tgnewtable": None,
        }
        for t in sorted(b.catalog.tables(), key=lambda t: t.oid)
        for trg in t.triggers
    ]


def trigger_definition(b: Builder, table: Any, trg: Any, pretty: bool) -> str:
    """pg_get_triggerdef(oid[, pretty])."""
    events = " OR ".join(e for e, k in (("INSERT", "i"), ("UPDATE", "u")) if k in trg.events)
    visible = table.schema in b.session.search_path
    name = quote_ident(table.name)
    if not (pretty and visible):
        name = f"{quote_ident(table.schema)}.{name}"
    fn = b.catalog.function(trg.function)
    called = quote_ident(fn.name) if fn is not None else str(trg.function)
    if fn is not None and fn.schema not in b.session.search_path:
        called = f"{quote_ident(fn.schema)}.{called}"
    when = ""
    if trg.when is not None:
        when = f" WHEN ({trg.when})" if pretty else f" WHEN (({trg.when}))"
    return (
        f"CREATE TRIGGER {quote_ident(trg.name)} BEFORE {events} ON {name} FOR EACH ROW{when}"
        f" EXECUTE FUNCTION {called}()"
    )


def def_rows(b: Builder) -> list[dict[str, Any]]:
    out = []
    for t in b.catalog.tables():
        for trg in t.triggers:
            out.append({"oid": trg.oid, "n": 0, "def": trigger_definition(b, t, trg, False)})
            out.append({"oid": trg.oid, "n": -1, "def": trigger_definition(b, t, trg, True)})
    for f in functions(b):
        out.append({"oid": f.oid, "n": 0, "def": definition(f)})
        out.append({"oid": f.oid, "n": RESULT, "def": result(f)})
        out.append({"oid": f.oid, "n": ARGUMENTS, "def": arguments(f)})
        out.append({"oid": f.oid, "n": IDENTITY, "def": arguments(f, defaults=False)})
    return out
