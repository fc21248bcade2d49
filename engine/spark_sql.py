"""The rules' DuckDB SQL rendered as Spark SQL: one rule text, two executors.

The delta rules (engine/rules/) produce DuckDB SQL. `to_spark` parses it with
sqlglot (`read="duckdb"`), applies the fix-ups below (each a small pure function
over the syntax tree: what sqlglot's transpiler leaves that Spark 4.3 refuses or
reads differently), and prints it for Spark (`write="spark"`). sqlglot already
handles `EXCLUDE` -> `EXCEPT`, `x::T` -> `CAST`, `any_value` -> `ANY_VALUE(x)
IGNORE NULLS`, `range(n)` -> `EXPLODE(SEQUENCE(...))`, DuckDB's default
`NULLS LAST` made explicit in ORDER BY, `string_agg` -> `LISTAGG ... WITHIN GROUP`.

A state update (`DELETE ... USING`, `UPDATE ... FROM`, `INSERT INTO`) has no
Spark SQL form over a temp view or a Parquet table (Spark's DML needs a v2 table
format whose jars are not reachable here), so `state_update` renders it as the
relation the state becomes: a query over the old state (`replace`), or rows to
append to it (`append`). The executor (engine/spark_batch.py) rebinds the state's
name to that relation.

Integer division: the engine runs DuckDB with `integer_division` on, so `/` of two
integers truncates; Spark's `/` is always a fractional division. `to_spark` takes
the column types (`types`: column name -> DuckDB type; a plan's internal column
names are unique) and turns `/` of two integer operands into Spark's `DIV`.

Functions the serving path installs in DuckDB (planner/pg_compat.py
`install_functions`) and their Spark forms: `SPARK_FUNCTIONS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import sqlglot
from headwater.planner.functions import text_casts
from sqlglot import exp

Types = Mapping[str, str]  # column name -> DuckDB type


def to_spark(sql: str, types: Types | None = None) -> str:
    """A DuckDB SELECT of the rules as Spark SQL.

    >>> to_spark("SELECT * EXCLUDE (_e), sum(_w)::BIGINT AS _w FROM d GROUP BY ALL")
    'SELECT * EXCEPT (_e), CAST(SUM(_w) AS BIGINT) AS _w FROM d GROUP BY ALL'
    """
    return render(parse(sql), types)


def parse(sql: str) -> exp.Expression:
    tree = sqlglot.parse_one(sql, read="duckdb")
    assert tree is not None
    return tree


def render(tree: exp.Expression, types: Types | None = None) -> str:
    """Apply every fix-up to a parsed DuckDB statement and print it for Spark."""
    for fix in FIXUPS:
        tree = fix(tree)
    if types is not None:
        tree = integer_division(tree, types)
    tree = collection_aggs(tree, types or {})
    tree = hw_functions(tree, types or {})
    return tree.sql(dialect="spark")


# -- fix-ups: what sqlglot leaves that Spark refuses or reads differently -------------
def drop_materialized(tree: exp.Expression) -> exp.Expression:
    """Spark has no `AS MATERIALIZED` CTE (it decides reuse itself).

    >>> to_spark("WITH _m AS MATERIALIZED (SELECT 1 AS x) SELECT x FROM _m")
    'WITH _m AS (SELECT 1 AS x) SELECT x FROM _m'
    """
    for cte in tree.find_all(exp.CTE):
        cte.set("materialized", None)
    return tree


def row_to_struct(tree: exp.Expression) -> exp.Expression:
    """DuckDB's `row(a, b)` (a tuple, compared with IS DISTINCT FROM) is Spark's
    `STRUCT(a, b)`; both compare field by field, NULL-safe under IS DISTINCT FROM.

    >>> to_spark("SELECT lag(row(a, b)) OVER w IS DISTINCT FROM row(a, b) FROM t")
    'SELECT LAG(STRUCT(a, b)) OVER w IS DISTINCT FROM STRUCT(a, b) FROM t'
    """

    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Anonymous) and node.name.lower() == "row":
            return exp.Struct(expressions=list(node.expressions))
        return node

    return tree.transform(fix)


def lateral_series(tree: exp.Expression) -> exp.Expression:
    """`FROM x, range(x.n)` (a series per row of x, DuckDB joins it laterally) is
    `FROM x, LATERAL EXPLODE(SEQUENCE(0, n - 1)) AS _rg(range)` in Spark, which
    reads no column of an earlier FROM item without LATERAL.

    >>> to_spark("SELECT * FROM ms AS m, range(m.n)")[:69]
    'SELECT * FROM ms AS m, LATERAL EXPLODE(IF((m.n) - 1 < 0, ARRAY(), SEQ'
    """
    for join in list(tree.find_all(exp.Join)):
        table = join.this
        if not isinstance(table, exp.Table) or not isinstance(table.this, exp.GenerateSeries):
            continue
        series = table.this
        if not series.args.get("is_end_exclusive"):
            continue
        end = exp.Sub(this=exp.paren(series.args["end"].copy()), expression=exp.Literal.number(1))
        seq = exp.Anonymous(this="SEQUENCE", expressions=[series.args["start"].copy(), end])
        # SEQUENCE(0, -1) counts down in Spark; DuckDB's range(0) is empty
        empty = exp.LT(this=end.copy(), expression=exp.Literal.number(0))
        guarded = exp.If(this=empty, true=exp.Array(expressions=[]), false=seq)
        lateral = exp.Lateral(
            this=exp.Explode(this=guarded),
            alias=exp.TableAlias(
                this=exp.to_identifier("_rg"), columns=[exp.to_identifier("range")]
            ),
        )
        join.set("this", lateral)
    return tree


_FRAMELESS = (exp.Lead, exp.Lag, exp.RowNumber, exp.Rank, exp.DenseRank, exp.Ntile)


def frameless_ranking(tree: exp.Expression) -> exp.Expression:
    """lead/lag/row_number over a named window with a frame: DuckDB ignores the
    frame for them, Spark refuses it ("Cannot specify window frame for lead
    function"); they get the window's partition and order inline, without frame.

    >>> to_spark("SELECT sum(x) OVER w, lead(e) OVER w FROM q WINDOW w AS (PARTITION"
    ...          " BY k ORDER BY e ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)")[:61]
    'SELECT SUM(x) OVER w, LEAD(e) OVER (PARTITION BY k ORDER BY e'
    """
    for select in list(tree.find_all(exp.Select)):
        named = {w.name: w for w in select.args.get("windows") or []}
        if not named:
            continue
        for win in list(select.find_all(exp.Window)):
            ref = win.args.get("alias")
            if (
                not isinstance(win.this, _FRAMELESS)
                or ref is None
                or ref.name not in named
                or win.args.get("partition_by")
                or win.args.get("order")
            ):
                continue
            spec = named[ref.name]
            win.set("alias", None)
            win.set("partition_by", [p.copy() for p in spec.args.get("partition_by") or []])
            order = spec.args.get("order")
            win.set("order", order.copy() if order is not None else None)
    return tree


# DuckDB types Spark lacks, as the Spark type that holds every value
SPARK_TYPES = {
    exp.DataType.Type.INT128: "DECIMAL(38, 0)",  # sum() of integers in DuckDB
    exp.DataType.Type.UINT128: "DECIMAL(38, 0)",
    exp.DataType.Type.UBIGINT: "DECIMAL(20, 0)",
    exp.DataType.Type.UINT: "BIGINT",
    exp.DataType.Type.USMALLINT: "INT",
    exp.DataType.Type.UTINYINT: "SMALLINT",
    exp.DataType.Type.JSON: "STRING",  # Headwater's json/jsonb are normalized text
    exp.DataType.Type.UUID: "STRING",
}


def spark_types(tree: exp.Expression) -> exp.Expression:
    """Casts to DuckDB types Spark has not: HUGEINT (DuckDB's sum of integers) as
    DECIMAL(38, 0), JSON (text here) as STRING, ...

    >>> to_spark("SELECT CAST(s AS HUGEINT), CAST(j AS JSON) FROM t")
    'SELECT CAST(s AS DECIMAL(38, 0)), CAST(j AS STRING) FROM t'
    """
    for dt in list(tree.find_all(exp.DataType)):
        to = SPARK_TYPES.get(dt.this)  # type: ignore[call-overload]
        if to is not None:
            dt.replace(exp.DataType.build(to, dialect="spark"))
    return tree


def array_subscripts(tree: exp.Expression) -> exp.Expression:
    """`arr[i]` as `get(arr, i - 1)`: NULL past the end, as PostgreSQL's subscript and
    DuckDB's (Spark's `arr[i]` raises INVALID_ARRAY_INDEX under ANSI mode); sqlglot has
    already made a constant index 0-based, not an expression.

    >>> to_spark("SELECT nums[2], nums[i + 1], m['k'] FROM t")
    "SELECT GET(nums, 1), GET(nums, (i + 1) - 1), m['k'] FROM t"
    """

    def fix(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Bracket) or len(node.expressions) != 1:
            return node
        index = node.expressions[0]
        if isinstance(index, exp.Slice) or (isinstance(index, exp.Literal) and index.is_string):
            return node
        if not (isinstance(index, exp.Literal) and index.is_int):
            index = exp.Sub(this=exp.paren(index.copy()), expression=exp.Literal.number(1))
        return exp.Anonymous(this="GET", expressions=[node.this.copy(), index])

    return tree.transform(fix)


def array_concat_nulls(tree: exp.Expression) -> exp.Expression:
    """`list_concat(a, b)` (PostgreSQL's array || array) skips a NULL array, as DuckDB's
    does; Spark's CONCAT of arrays is NULL if either is (planner/functions/arrays.py
    keeps NULL || NULL as NULL itself).

    >>> to_spark("SELECT list_concat(a, b) FROM t")
    'SELECT CONCAT(COALESCE(a, ARRAY()), COALESCE(b, ARRAY())) FROM t'
    """

    for node in reversed(list(tree.find_all(exp.ArrayConcat))):  # (inner ones first)
        if node.args.get("null_propagation"):
            continue
        parts = [node.this, *node.expressions]
        fixed = exp.ArrayConcat(
            this=exp.Coalesce(this=parts[0].copy(), expressions=[exp.Array()]),
            expressions=[exp.Coalesce(this=p.copy(), expressions=[exp.Array()]) for p in parts[1:]],
        )
        if node is tree:
            return fixed
        node.replace(fixed)
    return tree


FIXUPS: list[Callable[[exp.Expression], exp.Expression]] = [
    drop_materialized,
    row_to_struct,
    lateral_series,
    frameless_ranking,
    spark_types,
    array_subscripts,
    array_concat_nulls,
]


# -- typed fix-ups: integer division, the installed functions ------------------------
_INTEGERS = {"TINYINT", "SMALLINT", "INTEGER", "INT", "BIGINT", "HUGEINT", "INT128"}
_INTEGERS |= {"UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "INT2", "INT4", "INT8"}
_META = {"_w": "BIGINT", "_e": "BIGINT", "_n": "BIGINT", "_i": "BIGINT", "_cnt": "BIGINT"}


def type_of(node: exp.Expression, types: Types) -> str | None:
    """The DuckDB type family of a scalar expression: 'int', 'decimal', 'float',
    'other', or None when unknown. Columns are typed by name (`types`, plus the
    rules' own `_w`, `_e`, ...): a plan's internal names are unique.

    >>> type_of(parse("SELECT (c1 + 2) * c2").expressions[0], {"c1": "INTEGER", "c2": "BIGINT"})
    'int'
    >>> type_of(parse("SELECT CASE WHEN c1 THEN c2 END").expressions[0], {"c2": "DECIMAL(9,2)"})
    'decimal'
    """
    if isinstance(node, exp.Paren | exp.Neg):
        return type_of(node.this, types)
    if isinstance(node, exp.Column):
        t = types.get(node.name) or _META.get(node.name)
        return None if t is None else _family(t)
    if isinstance(node, exp.Cast):
        return _family(node.to.sql(dialect="duckdb"))
    if isinstance(node, exp.Literal):
        if node.is_string:
            return "other"
        return "int" if node.is_int else "decimal"
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Mod | exp.IntDiv):
        a, b = type_of(node.this, types), type_of(node.expression, types)
        for family in (None, "other", "float", "decimal"):
            if family in (a, b):
                return family
        return "int"
    if isinstance(node, exp.Div):
        a, b = type_of(node.this, types), type_of(node.expression, types)
        if None in (a, b):
            return None
        if (a, b) == ("int", "int"):
            return "int"
        return "decimal" if "decimal" in (a, b) and {a, b} <= {"decimal", "int"} else "float"
    if isinstance(node, exp.Case):  # a FILTER as CASE WHEN f THEN x END: x's family
        values = [i.args["true"] for i in node.args.get("ifs") or []]
        values += [node.args["default"]] if node.args.get("default") else []
        families = {type_of(v, types) for v in values if not isinstance(v, exp.Null)}
        return families.pop() if len(families) == 1 else None
    return None


def _family(duck_type: str) -> str:
    t = duck_type.upper().split("(")[0].strip()
    if t in _INTEGERS:
        return "int"
    if t in ("DECIMAL", "NUMERIC"):
        return "decimal"
    if t in ("DOUBLE", "FLOAT", "REAL", "FLOAT4", "FLOAT8"):
        return "float"
    return "other"


def integer_division(tree: exp.Expression, types: Types) -> exp.Expression:
    """`a / b` of two integers is DuckDB's truncating division here (the engine sets
    `integer_division`), Spark's `a DIV b` (which truncates toward zero too, and
    raises on a zero divisor under ANSI mode, Spark 4's default). `a / b` with a
    numeric operand (and no float one) is DuckDB's `//` overload for decimals,
    PostgreSQL's numeric division: the `hw_numeric_div` UDF (engine/spark_executor.py
    registers it). Divisions whose operands' types are not known are left as they
    are (fractional in Spark).

    >>> to_spark("SELECT c1 / 2, CAST(c1 AS DOUBLE) / 2 FROM t", {"c1": "INTEGER"})
    'SELECT c1 DIV 2, CAST(c1 AS DOUBLE) / 2 FROM t'
    >>> to_spark("SELECT c2 / 3 FROM t", {"c2": "DECIMAL(38,16)"})
    'SELECT HW_NUMERIC_DIV(CAST(c2 AS DECIMAL(38, 16)), CAST(3 AS DECIMAL(38, 16))) FROM t'
    """

    def fix(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Div):
            return node
        if type_of(node, types) == "int":
            return exp.IntDiv(this=node.this, expression=node.expression)
        families = {type_of(node.this, types), type_of(node.expression, types)}
        if "decimal" in families and families <= {"decimal", "int"}:
            a, b = (
                f"CAST({x.sql(dialect='spark')} AS DECIMAL(38, 16))"
                for x in (node.this, node.expression)
            )
            return sqlglot.parse_one(f"hw_numeric_div({a}, {b})", read="spark")
        return node

    return tree.transform(fix)


# -- collection aggregates: array_agg, json(b)_agg & co., mode ------------------------
def collection_aggs(tree: exp.Expression, types: Types) -> exp.Expression:
    """DuckDB's `list(x ORDER BY k) FILTER (WHERE f)` (array_agg; json_agg & co. read
    it through `to_json`) and `mode(x ORDER BY x)` in PostgreSQL's terms on Spark.
    sqlglot's COLLECT_LIST(x) drops NULLs and the order: each element is collected as
    a struct of its sort keys and itself (a struct with NULL fields is kept), sorted
    by the keys (`array_sort` with a comparator: direction and NULLS FIRST/LAST per
    key), then mapped to the element; DISTINCT (whose ORDER BY PostgreSQL restricts
    to the argument) removes equal structs first; no rows is NULL, as in PostgreSQL.
    json_agg & co.: the list's JSON text by DuckDB's own to_json (`hw_json_list`, an
    Arrow UDF, engine/spark_executor.py), the element's DuckDB type when known. mode:
    Spark's `mode() WITHIN GROUP (ORDER BY x)`, which picks among equally frequent
    values by the order, as PostgreSQL does.

    >>> to_spark("SELECT list(x ORDER BY k DESC) FROM t")[:71]
    "SELECT IF(SIZE(COLLECT_LIST(NAMED_STRUCT('_k0', k, '_v', x))) = 0, NULL"
    >>> to_spark("SELECT mode(x ORDER BY x DESC) FILTER (WHERE f) FROM t")
    'SELECT MODE() WITHIN GROUP (ORDER BY x DESC) FILTER(WHERE f) FROM t'
    """
    for agg in list(tree.find_all(exp.ArrayAgg)):  # (the replacements hold new ones)
        target: exp.Expression = agg
        where = None
        if isinstance(agg.parent, exp.Filter):
            target, where = agg.parent, agg.parent.expression
        up = target.parent
        if isinstance(up, exp.Anonymous) and up.name.lower() == "to_json":
            up.replace(_json_list(agg, where, types))
        else:
            target.replace(_spark_list(agg, where))
    for node in list(tree.find_all(exp.Mode)):
        target = node.parent if isinstance(node.parent, exp.Filter) else node
        order = node.this
        if not isinstance(order, exp.Order):
            continue
        keys = ", ".join(o.sql(dialect="spark") for o in order.expressions)
        sql = f"mode() WITHIN GROUP (ORDER BY {keys})"
        if target is not node:
            sql += f" FILTER (WHERE {target.expression.this.sql(dialect='spark')})"
        target.replace(sqlglot.parse_one(sql, read="spark"))
    return tree


def _spark_list(agg: exp.ArrayAgg, where: exp.Expression | None) -> exp.Expression:
    """DuckDB's list(...) as a Spark array in the call's order, NULLs kept (NULL on no
    rows)."""
    inner = agg.this
    order: list[exp.Ordered] = []
    if isinstance(inner, exp.Order):
        order = list(inner.expressions)
        inner = inner.this
    distinct = isinstance(inner, exp.Distinct)
    elem = inner.expressions[0] if distinct else inner
    sp = {"dialect": "spark"}
    fields = [f"'_k{i}', {o.this.sql(**sp)}" for i, o in enumerate(order)]
    fields.append(f"'_v', {elem.sql(**sp)}")
    collect = f"COLLECT_LIST({_NAMED}({', '.join(fields)}))"
    if where is not None:
        collect += f" FILTER (WHERE {where.this.sql(**sp)})"
    items = f"ARRAY_DISTINCT({collect})" if distinct else collect
    if order:
        items = f"ARRAY_SORT({items}, (_l, _r) -> {_comparator(order)})"
    sql = f"IF(SIZE({collect}) = 0, NULL, TRANSFORM({items}, _s -> _s._v))"
    tree = sqlglot.parse_one(sql, read="spark")
    for node in tree.find_all(exp.Anonymous):
        if node.name.upper() == _NAMED:
            node.set("this", "NAMED_STRUCT")
    return tree


# Spark's NAMED_STRUCT (sqlglot would print it STRUCT(x AS name), which Spark 4.3 fails
# to resolve in a Python UDF's argument: "Cannot evaluate expression: name")
_NAMED = "_HW_NAMED_STRUCT"


def _comparator(order: list[exp.Ordered]) -> str:
    """array_sort's comparator of two structs by their keys _k0, _k1, ... (DuckDB's
    ORDER BY: NULLS LAST ascending, NULLS FIRST descending unless said)."""
    whens = []
    for i, o in enumerate(order):
        desc = bool(o.args.get("desc"))
        nulls_first = bool(o.args.get("nulls_first"))
        lo, hi = ("1", "-1") if desc else ("-1", "1")
        nl, nr = ("-1", "1") if nulls_first else ("1", "-1")
        a, b = f"_l._k{i}", f"_r._k{i}"
        whens += [
            f"WHEN {a} IS NULL AND {b} IS NOT NULL THEN {nl}",
            f"WHEN {a} IS NOT NULL AND {b} IS NULL THEN {nr}",
            f"WHEN {a} < {b} THEN {lo}",
            f"WHEN {a} > {b} THEN {hi}",
        ]
    return f"CASE {' '.join(whens)} ELSE 0 END"


def _json_list(agg: exp.ArrayAgg, where: exp.Expression | None, types: Types) -> exp.Expression:
    """`to_json(list(...))` (json_agg & co.) on Spark: the ordered array given to the
    `hw_json_list` UDF, which prints it as DuckDB's to_json does. json_object_agg's
    elements, DuckDB's `json_object(CAST(k AS VARCHAR), v)`, are collected as
    struct(k, v) and made objects by the UDF."""
    kind = "list"
    inner = agg.this.this if isinstance(agg.this, exp.Order) else agg.this
    elem = inner.expressions[0] if isinstance(inner, exp.Distinct) else inner
    value = elem
    if isinstance(elem, exp.JSONObject) and len(elem.expressions) == 1:
        pair = elem.expressions[0]  # JSONKeyValue(key, value)
        kind, value = "object", pair.expression
        k, v = exp.Literal.string("k"), exp.Literal.string("v")
        fields = [k, pair.this.copy(), v, pair.expression.copy()]
        elem.replace(exp.Anonymous(this=_NAMED, expressions=fields))
    array = _spark_list(agg, where)
    vtype = _duck_type(value, types)
    return exp.Anonymous(
        this="hw_json_list",
        expressions=[array, exp.Literal.string(kind), exp.Literal.string(vtype)],
    )


def _duck_type(node: exp.Expression, types: Types) -> str:
    """A value's DuckDB type when the rules' SQL says it (a column, a cast), else ''."""
    if isinstance(node, exp.Column):
        return types.get(node.name) or ""
    if isinstance(node, exp.Cast):
        return node.to.sql(dialect="duckdb")
    return ""


@dataclass(frozen=True)
class SparkFunction:
    """How a function installed in DuckDB (planner/pg_compat.py) runs in Spark:
    `sql` (a Spark SQL expression, `{x}` its argument, by argument type family) or
    `udf` (no Spark SQL form: an Arrow UDF of that name, wrapping the DuckDB UDF's
    Arrow function; engine/spark_executor.py registers it) or `none` (no Spark form)."""

    duckdb: str
    spark: str
    kind: str  # "sql" | "udf" | "none"
    why: str


SPARK_FUNCTIONS = (
    SparkFunction(
        "hw_sum(x) of SMALLINT/INTEGER -> BIGINT",
        "CAST(SUM(x) AS BIGINT)",
        "sql",
        "Spark's sum of int is already bigint",
    ),
    SparkFunction(
        "hw_sum(x) of BIGINT/HUGEINT -> DECIMAL(38,16)",
        "CAST(SUM(CAST(x AS DECIMAL(38, 0))) AS DECIMAL(38, 16))",
        "sql",
        "summed as a decimal: no overflow (Spark's bigint sum raises under ANSI)",
    ),
    SparkFunction("hw_sum(x), other types", "SUM(x)", "sql", "same as DuckDB's sum"),
    SparkFunction(
        "hw_avg(x) of integers/numeric -> DECIMAL(37,16), PostgreSQL's scale",
        "hw_avg_exact(CAST(SUM(x) AS DECIMAL(38, 16)), COUNT(x))",
        "udf",
        "the result's scale depends on the value (PostgreSQL's select_div_scale): "
        "no Spark decimal type has a value-dependent scale",
    ),
    SparkFunction(
        "hw_avg(x), other types (double)", "AVG(x)", "sql", "same as DuckDB's avg (double)"
    ),
    SparkFunction(
        "a / b, integers (integer_division)", "a DIV b", "sql", "truncating, as DuckDB's"
    ),
    SparkFunction(
        '"//"(DECIMAL, DECIMAL): numeric / numeric',
        "hw_numeric_div(CAST(a AS DECIMAL(38, 16)), CAST(b AS DECIMAL(38, 16)))",
        "udf",
        "PostgreSQL rounds at a value-dependent scale; Spark's decimal division "
        "fixes the scale by the types (DECIMAL(38,16)/DECIMAL(38,16) -> scale 6)",
    ),
    SparkFunction(
        '"//"(INTERVAL, DOUBLE): interval / number',
        "-",
        "none",
        "Spark has no interval of months, days and microseconds as a column type "
        "(only YEAR TO MONTH or DAY TO SECOND); such views stay on DuckDB",
    ),
    SparkFunction(
        "hw_jsonb_in(text): jsonb input of a non-constant",
        "hw_jsonb_in(x)",
        "udf",
        "PostgreSQL's jsonb key order (by length, then bytes) and spacing; Spark's "
        "VARIANT orders keys by name and prints compactly",
    ),
    SparkFunction(
        "hw_avg_w(avg OVER w, x)", "-", "none", "window functions are not in views' scope"
    ),
    SparkFunction(
        "hw_sign(x), hw_octet_length(x), hw_bit_length(x): PostgreSQL's result types",
        "CAST(SIGN(x) AS DOUBLE) (DECIMAL(38, 16) of a decimal), CAST(OCTET_LENGTH(x) AS INT)",
        "sql",
        "Spark's own functions, cast as the DuckDB macros are (_SCALAR_FORMS)",
    ),
    SparkFunction("hw_gcd, hw_lcm", "-", "none", "Spark has neither; such views stay on DuckDB"),
    SparkFunction(
        "hw_text(x): x::text, numbers as PostgreSQL prints them",
        "CASE typeof(x) WHEN 'double' THEN hw_pg_text(CAST(x AS STRING), 'float8') ... END",
        "udf",
        "Java prints doubles its own way ('1.0E15', 'NaN'); the same Python as DuckDB's "
        "reformats its (round-trip exact) text (planner/functions/text_casts.py)",
    ),
    SparkFunction(
        "hw_text_out(x): format('%s', x) and concat()'s arguments",
        "CASE WHEN typeof(x) = 'boolean' THEN ... 't' / 'f' ... ELSE <hw_text(x)> END",
        "udf",
        "booleans print t / f there (their cast to text is true / false), numbers as hw_text",
    ),
)


# one-argument macros of planner/functions/ by the argument's type family ("*": any)
_SCALAR_FORMS: dict[str, dict[str, str]] = {
    "hw_sign": {
        "decimal": "CAST(SIGN({x}) AS DECIMAL(38, 16))",
        "int": "CAST(SIGN({x}) AS DOUBLE)",
        "float": "CAST(SIGN({x}) AS DOUBLE)",
    },
    "hw_octet_length": {"*": "CAST(OCTET_LENGTH({x}) AS INT)"},
    "hw_bit_length": {"*": "CAST(OCTET_LENGTH({x}) * 8 AS INT)"},
}


def hw_functions(tree: exp.Expression, types: Types) -> exp.Expression:
    """The installed functions by their Spark forms (SPARK_FUNCTIONS), typed by the
    argument where DuckDB's macro overloads are.

    >>> to_spark("SELECT hw_sum(c1), hw_avg(c3) FROM t", {"c1": "INTEGER", "c3": "DOUBLE"})
    'SELECT CAST(SUM(c1) AS BIGINT), AVG(c3) FROM t'
    >>> to_spark("SELECT hw_sum(c2) FROM t", {"c2": "BIGINT"})
    'SELECT CAST(SUM(CAST(c2 AS DECIMAL(38, 0))) AS DECIMAL(38, 16)) FROM t'
    >>> to_spark("SELECT hw_sign(c1 - 2), hw_sign(c4) FROM t", {"c1": "INT", "c4": "DECIMAL(9,2)"})
    'SELECT CAST(SIGN(c1 - 2) AS DOUBLE), CAST(SIGN(c4) AS DECIMAL(38, 16)) FROM t'
    >>> to_spark("SELECT hw_octet_length(c5) FROM t", {"c5": "VARCHAR"})
    'SELECT CAST(OCTET_LENGTH(c5) AS INT) FROM t'
    """

    def fix(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Anonymous):
            return node
        name = node.name.lower()
        if name in (text_casts.NAME, text_casts.OUT_NAME):  # its argument fixed first: it
            arg = node.expressions[0].transform(fix)  # appears in each branch
            sql = text_casts.spark_sql("_hw_x", out=name == text_casts.OUT_NAME)
            case = sqlglot.parse_one(sql, read="spark")
            return case.transform(
                lambda n: arg.copy() if isinstance(n, exp.Column) and n.name == "_hw_x" else n
            )
        if name in _SCALAR_FORMS and len(node.expressions) == 1:
            x = node.expressions[0].transform(fix)
            form = _SCALAR_FORMS[name].get(type_of(x, types) or "", _SCALAR_FORMS[name].get("*"))
            if form is None:  # (the argument's type unknown: stays hw_, a DuckDB view)
                return node
            return sqlglot.parse_one(form.format(x=x.sql(dialect="spark")), read="spark")
        if name not in ("hw_sum", "hw_sum_distinct", "hw_avg", "hw_avg_distinct"):
            return node
        x = node.expressions[0]
        d = "DISTINCT " if name.endswith("_distinct") else ""
        arg = f"{d}{x.sql(dialect='spark')}"
        family = type_of(x, types)
        duck = (types.get(x.name) or "").upper() if isinstance(x, exp.Column) else ""
        if name.startswith("hw_sum"):
            if family == "int" and duck in ("SMALLINT", "INTEGER", "INT2", "INT4"):
                sql = f"CAST(SUM({arg}) AS BIGINT)"
            elif family == "int":
                dec = f"{d}CAST({x.sql(dialect='spark')} AS DECIMAL(38, 0))"
                sql = f"CAST(SUM({dec}) AS DECIMAL(38, 16))"
            else:
                sql = f"SUM({arg})"
        elif family in ("int", "decimal"):
            # the sum as DuckDB's hw_avg_int / hw_avg_exact get it: exact, as a decimal
            total = f"{d}CAST({x.sql(dialect='spark')} AS DECIMAL(38, 16))"
            sql = f"hw_avg_exact(CAST(SUM({total}) AS DECIMAL(38, 16)), COUNT({arg}))"
        else:
            sql = f"AVG({arg})"
        return sqlglot.parse_one(sql, read="spark")

    return tree.transform(fix)


# -- state updates as relations ------------------------------------------------------
@dataclass(frozen=True)
class StateUpdate:
    """A state table's next value: `replace` (the state becomes `select`, a query
    that reads its old value under its own name) or `append` (`select`'s rows are
    added, cast to the state's columns by position)."""

    table: str
    kind: str  # "replace" | "append"
    select: str


def state_update(sql: str, columns: list[str], types: Types | None = None) -> StateUpdate:
    """A DuckDB DELETE/UPDATE/INSERT of a state table as the relation it leaves;
    `columns`: the table's columns (for UPDATE's select list).

    >>> state_update("DELETE FROM s USING (SELECT k FROM r) q WHERE s.k = q.k", ["k"]).select
    'SELECT * FROM s WHERE NOT EXISTS(SELECT 1 FROM (SELECT k FROM r) AS q WHERE s.k = q.k)'
    >>> state_update("INSERT INTO s SELECT k FROM r", ["k"])
    StateUpdate(table='s', kind='append', select='SELECT k FROM r')
    """
    tree = parse(sql)
    if isinstance(tree, exp.Insert):
        table = tree.this.name
        return StateUpdate(table, "append", render(tree.expression, types))
    if isinstance(tree, exp.Delete):
        return StateUpdate(tree.this.name, "replace", render(_delete_as_select(tree), types))
    if isinstance(tree, exp.Update):
        return StateUpdate(
            tree.this.name, "replace", render(_update_as_select(tree, columns), types)
        )
    raise ValueError(f"not a state update: {sql[:80]}")


def _delete_as_select(tree: exp.Delete) -> exp.Expression:
    """DELETE FROM t USING u WHERE c -> the rows of t with no match in u: a NOT
    EXISTS, which Spark plans as a left anti join (hash join on `<=>` keys)."""
    table = tree.this.name
    using = tree.args.get("using") or []
    where = tree.args.get("where")
    cond = where.this if where is not None else exp.true()
    if not using:
        return exp.select("*").from_(table).where(exp.not_(cond))
    sub = exp.select("1").from_(using[0].copy())
    for other in using[1:]:
        sub = sub.join(other.copy())
    sub = sub.where(cond.copy())
    return exp.select("*").from_(table).where(exp.not_(exp.Exists(this=sub)))


def _update_as_select(tree: exp.Update, columns: list[str]) -> exp.Expression:
    """UPDATE t SET col = e FROM u WHERE c -> t left joined to u on c, each SET
    column `CASE WHEN matched THEN e ELSE col END` (the rules' updates match each
    row of t at most once, as DuckDB requires)."""
    table = tree.this.name
    sets = {eq.this.name: eq.expression for eq in tree.expressions}
    src = tree.args["from_"].this
    alias = src.alias_or_name
    inner = src.copy()
    inner.set("alias", exp.TableAlias(this=exp.to_identifier("_hw_u")))
    hit = exp.Subquery(
        this=exp.select("*", "TRUE AS _hw_hit").from_(inner),
        alias=exp.TableAlias(this=exp.to_identifier(alias)),
    )
    cond = tree.args["where"].this.copy() if tree.args.get("where") else exp.true()
    out = []
    for c in columns:
        col = exp.column(c, table=table)
        if c in sets:
            out.append(
                exp.alias_(
                    exp.Case().when(exp.column("_hw_hit", table=alias), sets[c].copy()).else_(col),
                    c,
                )
            )
        else:
            out.append(col)
    return exp.select(*out).from_(table).join(hit, on=cond, join_type="left")
