"""Python functions on DuckDB as vectorized Arrow UDFs: a row function applied over
the columns of a batch (NULL in, NULL out unless the function is not strict)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def register(
    db: Any,
    name: str,
    fn: Callable[..., Any],
    params: list[Any],
    result: Any,
    strict: bool = True,
    volatile: bool = False,
) -> None:
    import pyarrow as pa

    def batch(*cols: Any) -> Any:
        rows = zip(*(c.to_pylist() for c in cols), strict=True)
        if strict:
            out = [None if None in r else fn(*r) for r in rows]
        else:
            out = [fn(*r) for r in rows]
        return pa.array(out, type=_arrow_type(result))

    # DuckDB counts the Python function's parameters: one per column
    by_arity: dict[int, Callable[..., Any]] = {
        1: lambda a: batch(a),
        2: lambda a, b: batch(a, b),
        3: lambda a, b, c: batch(a, b, c),
        4: lambda a, b, c, d: batch(a, b, c, d),
        5: lambda a, b, c, d, e: batch(a, b, c, d, e),
        6: lambda a, b, c, d, e, f: batch(a, b, c, d, e, f),
        7: lambda a, b, c, d, e, f, g: batch(a, b, c, d, e, f, g),
    }
    db.create_function(
        name, by_arity[len(params)], params, result, type="arrow",
        null_handling="special", side_effects=volatile,
    )  # fmt: skip


def _arrow_type(duck_type: Any) -> Any:
    import pyarrow as pa

    text = str(duck_type).upper()
    return {
        "VARCHAR": pa.string(),
        "INTEGER": pa.int32(),
        "BIGINT": pa.int64(),
        "BLOB": pa.binary(),
        "BOOLEAN": pa.bool_(),
        "VARCHAR[]": pa.list_(pa.string()),
        "VARCHAR[][]": pa.list_(pa.list_(pa.string())),
    }[text]
