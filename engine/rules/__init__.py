"""The incremental rule of every operator, one module each (DBSP's operator/ is the model).

A rule maps its operator's inputs' changes and its state to its changes, for the
epochs of one batch (rules/context.py); docs/engine.md has the table with the
reasoning:

    rules/sources.py            Scan, Values         no state
    rules/linear.py             Filter, Project,     no state
                                Difference, UNION ALL
    rules/join.py               inner / cross Join   both inputs (rows, weights)
    rules/linear_aggregate.py   COUNT/SUM/AVG,       accumulators per group
                                DISTINCT
    rules/general_aggregate.py  MIN/MAX/STRING_AGG/  the group's rows + last output
                                BOOL_*/DISTINCT calls
    rules/setop.py              INTERSECT, EXCEPT    counts per row on each side
    rules/window.py             window functions,    the input's rows + last output
                                top-N                (partitions recomputed)
    rules/recursive.py          WITH RECURSIVE       each input's rows + last output
                                (monotone)           (the fixpoint recomputed)
    rules/output.py             the view's output    versions and change log

`changes(node, op, ctx)` picks the rule of a node; `state_schemas` the state
tables it keeps. (Semi-, anti- and outer joins are lowered to these operators by
planner/incremental.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headwater.engine.rules.context import BatchContext, Delta, Operator
from headwater.engine.rules.general_aggregate import general_aggregate, general_aggregate_states
from headwater.engine.rules.join import join, join_states
from headwater.engine.rules.linear import difference, filter_, project, union_all
from headwater.engine.rules.linear_aggregate import (
    is_linear,
    linear_aggregate,
    linear_aggregate_states,
)
from headwater.engine.rules.recursive import recursive, recursive_states
from headwater.engine.rules.setop import setop, setop_states
from headwater.engine.rules.sources import scan, values
from headwater.engine.rules.window import window, window_states
from headwater.planner.ir import (
    Aggregate,
    Difference,
    Distinct,
    Filter,
    Join,
    Node,
    Project,
    Recursive,
    Scan,
    SetOp,
    Values,
    Window,
)

Rule = Callable[[Any, Operator, BatchContext], Delta]  # (node, op, ctx) -> Delta


def rule_of(node: Node) -> Rule:
    """The rule of an operator."""
    if isinstance(node, Scan):
        return scan
    if isinstance(node, Values):
        return values
    if isinstance(node, Filter):
        return filter_
    if isinstance(node, Project):
        return project
    if isinstance(node, Difference):
        return difference
    if isinstance(node, Join):
        return join
    if isinstance(node, Aggregate | Distinct):
        return linear_aggregate if is_linear(node) else general_aggregate
    if isinstance(node, SetOp):
        return union_all if node.op == "union" else setop
    if isinstance(node, Window):
        return window
    if isinstance(node, Recursive):
        return recursive
    raise TypeError(f"no rule for {type(node).__name__}")


def changes(node: Node, op: Operator, ctx: BatchContext) -> Delta:
    """The operator's changes for the batch, and the steps that make them."""
    return rule_of(node)(node, op, ctx)


def state_schemas(
    node: Node, program: int | str, op: int, empty: Callable[[Node], str], family: bool
) -> list[tuple[str, str]]:
    """The state tables an operator keeps: (name, a query of their columns) from
    `empty(n)`, the empty change table of operator `n` (the node or a child)."""
    if isinstance(node, Join):
        return join_states(program, op, empty(node.left), empty(node.right))
    if isinstance(node, Aggregate | Distinct):
        if is_linear(node):
            return linear_aggregate_states(node, program, op, empty(node.input), family)
        assert isinstance(node, Aggregate)
        return general_aggregate_states(node, program, op, empty(node.input), empty(node))
    if isinstance(node, SetOp) and node.op != "union":
        return setop_states(program, op, empty(node))
    if isinstance(node, Window):
        return window_states(program, op, empty(node.input), empty(node))
    if isinstance(node, Recursive):
        return recursive_states(node, program, op, [empty(s) for s in node.inputs], empty(node))
    return []
