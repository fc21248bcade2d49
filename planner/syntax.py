"""Walking pglast parse trees: one iterator for the passes that look for nodes of a kind
(column references, parameters, function calls) instead of a recursive visitor each."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pglast import ast as A


def nodes(tree: Any, skip: type | tuple[type, ...] = ()) -> Iterator[A.Node]:
    """Every node of `tree` (a node, or a tuple or list of them), parents before their
    children, in source order; nodes of a `skip` type are neither yielded nor entered.
    A node may be changed when it is yielded: its children are read afterwards."""
    stack: list[Any] = [tree]
    while stack:
        n = stack.pop()
        if isinstance(n, tuple | list):
            stack.extend(reversed(n))
        elif isinstance(n, A.Node) and not isinstance(n, skip):
            yield n
            stack.extend(getattr(n, attr) for attr in reversed(list(n)))
