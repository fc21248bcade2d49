"""The front end's pieces alone: name resolution (planner/scope.py), the PostgreSQL
translation's rules (planner/pg_compat.py, their docstring examples), and that
neither translating nor binding changes the tree a client's statement was parsed to."""

from __future__ import annotations

import copy
import doctest

import pytest
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Column, Table
from headwater.catalog.types import INT4, TEXT, ColumnType
from headwater.planner import analysis, pg_compat, scope
from headwater.planner.relations import Binder
from pglast import parse_sql
from pglast.stream import RawStream

from headwater.errors import AmbiguousColumn, FeatureNotSupported, UndefinedColumn, UndefinedTable


@pytest.mark.parametrize("module", [scope, pg_compat, analysis], ids=lambda m: m.__name__)
def test_docstring_examples(module) -> None:  # type: ignore[no-untyped-def]
    globs = {"parse_sql": parse_sql, "catalog": Catalog(), "path": ("public",), **vars(module)}
    result = doctest.testmod(module, globs=globs, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def _catalog() -> Catalog:
    cat = Catalog()
    for oid, name, cols in ((50001, "t", ("a", "b")), (50002, "u", ("a", "c"))):
        columns = tuple(Column(c, ColumnType(INT4 if c != "c" else TEXT)) for c in cols)
        cat.add_relation(Table(oid, "public", name, columns))
    return cat


def _stmt(sql: str):  # type: ignore[no-untyped-def]
    return parse_sql(sql)[0].stmt


def test_named_relations_skip_ctes_in_scope() -> None:
    stmt = _stmt(
        "WITH t AS (SELECT 1) SELECT * FROM t, u WHERE EXISTS "
        "(WITH u AS (SELECT 2) SELECT * FROM u, v) AND x IN (SELECT y FROM t)"
    )
    names = [r.relname for r in scope.named_relations(stmt)]
    assert names == ["u", "v"]
    skip = stmt.fromClause[1]
    assert [r.relname for r in scope.named_relations(stmt, skip=skip)] == ["v"]


def test_resolve_relation_errors() -> None:
    cat = _catalog()
    missing = _stmt("SELECT * FROM nope").fromClause[0]
    with pytest.raises(UndefinedTable) as e:
        scope.resolve_relation(cat, missing, ("public",))
    assert e.value.position == 15
    system = _stmt("SELECT * FROM pg_catalog.pg_class").fromClause[0]
    with pytest.raises(FeatureNotSupported):
        scope.resolve_relation(cat, system, ("public",))
    assert scope.may_be_system(cat, _stmt("SELECT * FROM pg_class").fromClause[0], ("public",))
    assert not scope.may_be_system(cat, _stmt("SELECT * FROM t").fromClause[0], ("public",))


def test_column_lookup_errors() -> None:
    outer: scope.Scope[str] = scope.Scope([scope.Item("o", [("z", "c9")])])
    s: scope.Scope[str] = scope.Scope(
        [scope.Item("a", [("x", "c1")]), scope.Item("b", [("x", "c2"), ("y", "c3")])],
        parent=outer,
    )
    assert s.lookup(["b", "x"], None) == "c2"
    assert s.lookup(["y"], None) == "c3"
    assert s.lookup(["z"], None) == "c9" and s.outer_refs == {"c9"}
    with pytest.raises(AmbiguousColumn):
        s.lookup(["x"], None)
    with pytest.raises(UndefinedColumn):
        s.lookup(["w"], 4)
    with pytest.raises(UndefinedColumn):
        s.lookup(["a", "w"], None)
    with pytest.raises(UndefinedTable, match="missing FROM-clause entry"):
        s.lookup(["q", "x"], None)


def test_translate_leaves_the_tree_alone() -> None:
    stmt = _stmt(
        "SELECT c.oid::regclass::text, btrim(s), current_user, sum(n), generate_series(1, 2) "
        "FROM pg_catalog.pg_class c WHERE s LIKE 'a\\_%' AND n = ANY($1)"
    )
    before = copy.deepcopy(stmt)
    out = pg_compat.translate(stmt)
    assert stmt == before
    assert out != before
    again = copy.deepcopy(before)
    pg_compat.rewrite(again)  # the in-place form gives the same tree
    assert again == out
    assert pg_compat.translate(out) == out  # idempotent


def test_copy_tree_shares_no_node() -> None:
    stmt = _stmt("SELECT a, count(*) FROM t WHERE b IN (1, $1) GROUP BY a ORDER BY 2 LIMIT 3")
    out = pg_compat.copy_tree(stmt)
    assert out == stmt == copy.deepcopy(stmt)
    assert str(RawStream()(out)) == str(RawStream()(stmt))

    def nodes(n):  # type: ignore[no-untyped-def]
        if isinstance(n, tuple | list):
            return [x for c in n for x in nodes(c)]
        return [n, *(x for a in n for x in nodes(getattr(n, a)))] if hasattr(n, "__slots__") else []

    assert not {id(n) for n in nodes(out)} & {id(n) for n in nodes(stmt)}


def test_binding_leaves_the_tree_alone() -> None:
    cat = _catalog()
    stmt = _stmt("WITH w AS (SELECT a FROM u) SELECT t.a FROM t JOIN w ON t.a = w.a")
    before = copy.deepcopy(stmt)
    binder = Binder(cat, ("public",), lambda table: f"(SELECT * FROM tbl_{table.name})")
    sql = binder.to_sql(stmt)
    assert stmt == before
    assert "tbl_t" in sql and "tbl_u" in sql and sql.count("tbl_") == 2
    assert binder.tables == {50001, 50002}
