"""Walking pglast parse trees: one iterator for the passes that look for nodes of a kind
(column references, parameters, function calls) instead of a recursive visitor each."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from headwater.planner.constant_lists import plain
from pglast import ast as A
from pglast.stream import RawStream
from pglast.visitors import Continue, Visitor

_WALKER = Visitor()  # (its breadth-first walk, which sets the ancestors RawStream reads)


def deparse(node: Any) -> str:
    """The SQL text of a node, as pglast's `RawStream()(node)` prints it, without that
    call's setup: it first gives every node its ancestors through a Visitor that looks
    its own methods up with inspect.getmembers on each call, about half the cost of
    printing a small expression (the planner prints each one it rewrites)."""
    if not isinstance(node, A.Node) or (isinstance(node, A.RawStmt) and node.stmt is None):
        return str(RawStream()(node))
    walk = _WALKER.iterate((node,))
    try:
        ancestors, sub = walk.send(None)
        while True:
            sub.ancestors = ancestors
            ancestors, sub = walk.send(Continue)
    except StopIteration:
        pass
    stream = RawStream()
    stream.print_node(node)
    return stream.getvalue()


def nodes(tree: Any, skip: type | tuple[type, ...] = ()) -> Iterator[A.Node]:
    """Every node of `tree` (a node, or a tuple or list of them), parents before their
    children, in source order; nodes of a `skip` type are neither yielded nor entered.
    A node may be changed when it is yielded: its children are read afterwards. With
    A_Const skipped, a list of constants is passed over whole (an IN list of 4,000
    keys: ~20 ms of this generator's steps)."""
    consts = skip is A.A_Const or (isinstance(skip, tuple) and A.A_Const in skip)
    stack: list[Any] = [tree]
    while stack:
        n = stack.pop()
        if isinstance(n, tuple | list):
            if consts and plain(n):
                continue
            stack.extend(reversed(n))
        elif isinstance(n, A.Node) and not isinstance(n, skip):
            yield n
            stack.extend(getattr(n, attr) for attr in reversed(list(n)))


def replaced(tree: Any, swap: Callable[[A.Node], Any | None]) -> Any:
    """`tree` with each node for which `swap` gives a replacement replaced by it, in
    place (the tree's own replacement is returned); a replacement is not entered."""
    if isinstance(tree, tuple):
        items = tuple(replaced(v, swap) for v in tree)
        return items if any(a is not b for a, b in zip(items, tree, strict=True)) else tree
    if not isinstance(tree, A.Node):
        return tree
    new = swap(tree)
    if new is not None:
        return new
    for attr in tree:
        value = getattr(tree, attr)
        got = replaced(value, swap)
        if got is not value:
            setattr(tree, attr, got)
    return tree


def column_field(node: Any, qualifier: str) -> A.String | A.A_Star | None:
    """What a column reference names once an optional `qualifier.` is dropped (`c`,
    `t.c`, `*`, `t.*`): its one remaining field, or None for anything else."""
    if not isinstance(node, A.ColumnRef):
        return None
    fields = node.fields
    if len(fields) == 2 and isinstance(fields[0], A.String) and fields[0].sval == qualifier:
        fields = fields[1:]
    return fields[0] if len(fields) == 1 else None
