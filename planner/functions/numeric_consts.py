"""numeric's transcendental functions of constants, computed as PostgreSQL computes them.

DuckDB has exp, ln, log, power and sqrt of doubles only; PostgreSQL's numeric forms
(chosen when an argument is numeric: `exp(1.0)`, `2 ^ 0.5`, `log(2, 64)`) give exact digits
at a scale of their own (numeric.c: at least 16 significant digits, never less than the
arguments' scales). A call whose arguments are constants is computed here, at plan time,
with Python's decimal arithmetic and PostgreSQL's scale rules, and becomes a numeric
constant. Calls over columns keep DuckDB's double.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

import pglast.ast as A
from pglast.enums import A_Expr_Kind

from headwater.errors import SQLError

_CTX = Context(prec=80, rounding=ROUND_HALF_UP, Emax=10**6, Emin=-(10**6))
_MIN_SIG_DIGITS = 16  # NUMERIC_MIN_SIG_DIGITS
_MAX_DISPLAY_SCALE = 1000  # NUMERIC_MAX_DISPLAY_SCALE
_DUCKDB_MAX_PRECISION = 38
FUNCS = frozenset({"exp", "ln", "log", "log10", "power", "pow", "sqrt"})


@dataclass(frozen=True)
class Num:
    value: Decimal
    scale: int  # PostgreSQL's display scale (dscale)
    numeric: bool  # numeric, not an integer (integers pick the float8 forms)


def _scale_of(d: Decimal) -> int:
    return max(0, -d.as_tuple().exponent)  # type: ignore[operator]


def _type_name(tc: A.TypeCast) -> str:
    names = [n.sval.lower() for n in tc.typeName.names if isinstance(n, A.String)]
    return names[-1] if names else ""


def evaluate(node: Any) -> Num | None:
    """The value of a constant integer/numeric expression (literals, ::numeric, unary
    minus, + - * /), None when it is anything else."""
    if isinstance(node, A.A_Const) and not node.isnull:
        if isinstance(node.val, A.Integer):
            return Num(Decimal(node.val.ival), 0, False)
        if isinstance(node.val, A.Float):
            d = Decimal(node.val.fval)
            return Num(d, _scale_of(d), True)
        return None
    if isinstance(node, A.TypeCast) and not node.typeName.typmods:
        inner = evaluate(node.arg)
        name = _type_name(node)
        if inner is None:
            return None
        if name in ("numeric", "decimal"):
            return Num(inner.value, inner.scale, True)
        if name in ("int4", "int8", "int2", "integer", "bigint", "smallint") and not inner.numeric:
            return inner
        return None
    if isinstance(node, A.A_Expr) and node.kind == A_Expr_Kind.AEXPR_OP:
        names = [n.sval for n in node.name or () if isinstance(n, A.String)]
        op = names[-1] if names else ""
        right = evaluate(node.rexpr)
        if right is None:
            return None
        if node.lexpr is None:
            return Num(-right.value, right.scale, right.numeric) if op == "-" else None
        left = evaluate(node.lexpr)
        if left is None:
            return None
        return _arith(op, left, right)
    return None


def _arith(op: str, a: Num, b: Num) -> Num | None:
    numeric = a.numeric or b.numeric
    if op in ("+", "-"):
        v = a.value + b.value if op == "+" else a.value - b.value
        return Num(v, max(a.scale, b.scale), numeric)
    if op == "*":
        return Num(a.value * b.value, a.scale + b.scale, numeric)
    if op == "/" and b.value:
        if not numeric:
            q = abs(a.value) // abs(b.value)
            return Num(q if (a.value < 0) == (b.value < 0) else -q, 0, False)
        scale = div_scale(a, b)
        return Num(_round(_CTX.divide(a.value, b.value), scale), scale, True)
    return None


def _weight_first(v: Decimal) -> tuple[int, int]:
    """PostgreSQL's base-10000 weight and first digit of |v| (0, 0 for zero)."""
    if not v:
        return 0, 0
    a = abs(v)
    w = a.adjusted() // 4
    return w, int(a.scaleb(-4 * w, _CTX))


def div_scale(a: Num, b: Num) -> int:
    """select_div_scale."""
    w1, f1 = _weight_first(a.value)
    w2, f2 = _weight_first(b.value)
    qweight = w1 - w2 - (1 if f1 <= f2 else 0)
    return _clamp(_MIN_SIG_DIGITS - 4 * qweight, a.scale, b.scale)


def _clamp(rscale: int, *scales: int) -> int:
    return min(max(rscale, *scales, 0), _MAX_DISPLAY_SCALE)


def _round(v: Decimal, scale: int) -> Decimal:
    return v.quantize(Decimal(1).scaleb(-scale), context=_CTX)


def _ln_dweight(v: Decimal) -> int:
    """estimate_ln_dweight: the decimal weight of ln(v)."""
    if Decimal("0.9") <= v <= Decimal("1.1"):
        d = v - 1
        return d.adjusted() if d else 0
    return int(math.log10(abs(float(v.ln(_CTX)))))


def _log_domain(v: Decimal) -> None:
    if not v:
        raise SQLError("cannot take logarithm of zero", "2201E")
    if v < 0:
        raise SQLError("cannot take logarithm of a negative number", "2201E")


def _exp(x: Num) -> Num:
    weight = max(min(float(x.value) * 0.434294481903252, 2000.0), -2000.0)
    scale = _clamp(_MIN_SIG_DIGITS - int(weight), x.scale)
    return Num(_round(x.value.exp(_CTX), scale), scale, True)


def _ln(x: Num) -> Num:
    _log_domain(x.value)
    scale = _clamp(_MIN_SIG_DIGITS - _ln_dweight(x.value), x.scale)
    return Num(_round(x.value.ln(_CTX), scale), scale, True)


def _log(base: Num, x: Num) -> Num:
    _log_domain(base.value)
    _log_domain(x.value)
    if base.value == 1:
        raise SQLError("division by zero", "22012")
    dweight = _ln_dweight(x.value) - _ln_dweight(base.value)
    scale = _clamp(_MIN_SIG_DIGITS - dweight, base.scale, x.scale)
    v = _CTX.divide(x.value.ln(_CTX), base.value.ln(_CTX))
    return Num(_round(v, scale), scale, True)


def _sqrt(x: Num) -> Num:
    if x.value < 0:
        raise SQLError("cannot take square root of a negative number", "2201F")
    weight, _ = _weight_first(x.value)
    sweight = int((weight + 1) * 4 / 2) - 1  # C's division truncates toward zero
    scale = _clamp(_MIN_SIG_DIGITS - sweight, x.scale)
    return Num(_round(x.value.sqrt(_CTX), scale), scale, True)


def _power(base: Num, exp: Num) -> Num | None:
    if not base.value and exp.value < 0:
        raise SQLError("zero raised to a negative power is undefined", "2201F")
    if exp.value == exp.value.to_integral_value():
        n = int(exp.value)
        if abs(n) > 10_000:
            return None
        scale = _clamp(_MIN_SIG_DIGITS, base.scale)
        if not base.value:
            return Num(_round(Decimal(1 if n == 0 else 0), scale), scale, True)
        return Num(_round(_CTX.power(base.value, n), scale), scale, True)
    if base.value < 0:
        raise SQLError(
            "a negative number raised to a non-integer power yields a complex result", "2201F"
        )
    if not base.value:
        return None
    ln_num = base.value.ln(_CTX) * exp.value
    weight = max(min(float(ln_num) * 0.434294481903252, 2000.0), -2000.0)
    scale = _clamp(_MIN_SIG_DIGITS - int(weight), base.scale, exp.scale)
    return Num(_round(ln_num.exp(_CTX), scale), scale, True)


def _literal(n: Num) -> Any | None:
    """The numeric constant `n` at its scale, or None when DuckDB's decimal cannot hold it."""
    from pglast import parse_sql

    text = format(n.value, "f")
    digits = len(text.lstrip("-").replace(".", "").lstrip("0")) or 1
    precision = max(digits, n.scale + 1)
    if precision > _DUCKDB_MAX_PRECISION:
        return None
    sql = f"SELECT CAST('{text}' AS numeric({precision}, {n.scale}))"
    return parse_sql(sql)[0].stmt.targetList[0].val


def fold_call(name: str, args: list[Any]) -> Any | None:
    """exp/ln/log/log10/power/pow/sqrt of constants, with a numeric argument, as the
    numeric constant PostgreSQL computes; None to leave the call to DuckDB."""
    if name not in FUNCS or not args or len(args) > 2:
        return None
    values = [evaluate(a) for a in args]
    if any(v is None for v in values):
        return None
    nums: list[Num] = values  # type: ignore[assignment]
    if len(nums) == 1 and name in ("exp", "ln", "log", "log10", "sqrt") and nums[0].numeric:
        x = nums[0]
        if name == "exp":
            return _literal(_exp(x))
        if name == "ln":
            return _literal(_ln(x))
        if name == "sqrt":
            return _literal(_sqrt(x))
        return _literal(_log(Num(Decimal(10), 0, True), x))
    if len(nums) == 2 and name == "log":  # log(b, x) exists for numeric only
        return _literal(_log(nums[0], nums[1]))
    if len(nums) == 2 and name in ("power", "pow") and (nums[0].numeric or nums[1].numeric):
        result = _power(nums[0], nums[1])
        return None if result is None else _literal(result)
    return None


def fold_power_operator(left: Any, right: Any) -> Any | None:
    """`a ^ b` of constants with a numeric operand (integers: float8's ^, left to DuckDB)."""
    return fold_call("power", [left, right]) if left is not None else None
