"""Which views and materialized views name a relation: what DROP, ALTER and the
renames of relations and types consult. A view's set is remembered per instance
(Instance.view_deps: CREATE VIEW records it, DROP forgets it) and otherwise read from
its definition by binding it."""

from __future__ import annotations

from headwater.catalog.objects import MaterializedView, Relation, View
from headwater.server.binders import write_binder
from headwater.server.session import Session, WriteTxn
from pglast import parse_sql

from headwater.errors import SQLError


def dependents(s: Session, w: WriteTxn, oid: int) -> list[Relation]:
    """The views and materialized views that name relation `oid` directly."""
    out: list[Relation] = []
    view_deps = s.instance.view_deps
    for view in [*w.catalog.views(), *w.catalog.matviews()]:
        deps = view_deps.get(view.oid)
        if deps is None:
            deps = view_deps[view.oid] = _names_in(s, w, view)
        if oid in deps:
            out.append(view)
    return out


def dependency_order(s: Session, w: WriteTxn, rel: Relation) -> list[tuple[Relation, Relation]]:
    """Everything that depends on `rel`, directly or not, each once with the object it
    was reached from, in PostgreSQL's order (findDependentObjects: dependents in
    descending OID order, depth first, each added after its own dependents; reported
    last added first)."""
    seen = {rel.oid}
    post: list[tuple[Relation, Relation]] = []

    def visit(obj: Relation) -> None:
        for d in sorted(dependents(s, w, obj.oid), key=lambda r: r.oid, reverse=True):
            if d.oid not in seen:
                seen.add(d.oid)
                visit(d)
                post.append((d, obj))

    visit(rel)
    return post[::-1]


def _names_in(s: Session, w: WriteTxn, view: View | MaterializedView) -> set[int]:
    """The relations a view's definition names (after a restart, from its text)."""
    binder = write_binder(s, w)
    try:
        if isinstance(view, View):
            binder.view_sql(view)
        else:
            stmt = parse_sql(view.definition)[0].stmt
            binder.bind(stmt, frozenset())
    except SQLError:
        pass
    return set(binder.depends)
