"""What EXPLAIN of a materialized view says about it: its incremental plan, each
operator's delta rule (engine/rules/) and the state it keeps, who executes its
batches and why, and where it stands (frontier, status).

Built from a view's program (a view the engine maintains) or from a plan alone (a
view about to be created); no state is read. EngineAPI.explain is the way in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from headwater.engine import rules
from headwater.engine.executors import SPARK_MIN_ROWS_CLUSTER
from headwater.planner.incremental import incrementalize
from headwater.planner.ir import Node, Plan, walk

EXECUTOR = "duckdb"
EXECUTOR_REASON = (
    "every batch runs on DuckDB inside the Spark stage's foreachBatch: Spark's streaming "
    "query drives the epochs (offsets, checkpoint, replay after a crash), and each "
    "operator's delta rule runs as SQL in the engine's DuckDB database, where the "
    "operators' state lives (docs/engine.md)"
)
# what each `--executor` does, for a view that has run no batch yet (engine/executors.py)
EXECUTOR_REASONS = {
    "duckdb": EXECUTOR_REASON,
    "spark": "every batch runs as Spark SQL jobs over the state's Parquet files "
    "(docs/adr/003-shared-state.md), unless its rules have no Spark form (then DuckDB "
    "runs them and says why)",
    "auto": "with a local master, a batch whose rows and state exceed half of "
    "--memory-limit runs on Spark, the others on DuckDB (faster on one machine at every "
    f"size measured); with a cluster master, batches of {SPARK_MIN_ROWS_CLUSTER} changed "
    "rows or more too; while Spark starts, every batch on DuckDB (engine/executors.py)",
}
# what EXPLAIN says runs the batches of a view not created yet, per `--executor`
PLANNED_EXECUTORS = {"duckdb": "duckdb", "spark": "spark", "auto": "duckdb or spark, per batch"}


@dataclass(frozen=True)
class Operator:
    index: int  # the operator's number in the program (its state tables carry it)
    rule: str  # module.function of engine/rules/
    states: tuple[str, ...]  # the state tables it keeps (none: stateless)


@dataclass
class ViewExplain:
    plan: Plan  # the lowered plan the engine maintains (planner/incremental.py)
    operators: dict[int, Operator]  # id(node) -> its operator
    output_rule: str = "output.output"
    output_tables: tuple[str, ...] = ()  # versions and change log
    executor: str = EXECUTOR
    executor_reason: str = EXECUTOR_REASON
    family: str | None = None  # the family whose statements it shares (engine/family.py)
    family_size: int = 0
    frontier: int | None = None  # None: not created yet
    created: int | None = None
    status: str | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)


def rule_name(node: Node) -> str:
    fn = rules.rule_of(node)
    return f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"


def operators(plan: Plan, view: int | str) -> dict[int, Operator]:
    """Each operator of a lowered plan, numbered as ViewProgram numbers them."""
    out: dict[int, Operator] = {}
    for node in walk(plan.root):
        if id(node) in out:
            continue
        i = len(out)
        states = rules.state_schemas(node, view, i, lambda n: "_empty", False)
        out[id(node)] = Operator(i, rule_name(node), tuple(name for name, _ in states))
    return out


def explain_plan(plan: Plan, view: int | str = "{view}", executor: str = "auto") -> ViewExplain:
    """A view not created yet: its plan lowered as the engine would lower it, and who
    would run its batches under `--executor executor`."""
    lowered = incrementalize(plan)
    return ViewExplain(
        lowered,
        operators(lowered, view),
        output_tables=(f"o{view}", f"l{view}"),
        executor=PLANNED_EXECUTORS[executor],
        executor_reason=f"--executor {executor}: {EXECUTOR_REASONS[executor]}",
    )
