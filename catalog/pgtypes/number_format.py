"""PostgreSQL 15's to_char of numbers and to_number (formatting.c's NUMDesc_prepare and
NUM_processor, over C strings as PostgreSQL does: a digit string ends at its NUL), in the
C locale ('.' and ',', no currency symbol). numeric and integers are exact; float8 and
real keep DBL_DIG (15) or FLT_DIG (6) digits as PostgreSQL does."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from functools import lru_cache

from headwater.catalog.pgtypes.format_template import Node, ordinal_suffix, parse_format

from headwater.errors import SQLError

_CTX = Context(prec=1000, rounding=ROUND_HALF_UP)


# -- to_char of numbers ----------
@dataclass
class NumDesc:
    pre: int = 0
    post: int = 0
    lsign: str = ""  # "", "pre", "post"
    pre_lsign_num: int = 0
    multi: int = 0
    zero_start: int = 0
    zero_end: int = 0
    decimal: bool = False
    zero: bool = False
    fillmode: bool = False
    minus: bool = False
    plus: bool = False
    minus_post: bool = False
    plus_post: bool = False
    bracket: bool = False
    roman: bool = False
    is_multi: bool = False
    eeee: bool = False
    blank: bool = False


def _num_error(message: str) -> SQLError:
    return SQLError(message, "42601")


@lru_cache(maxsize=256)
def num_format(fmt: str) -> tuple[tuple[Node, ...], NumDesc]:
    """NUMDesc_prepare over the template: digit counts and flags."""
    nodes = parse_format(fmt, True)
    d = NumDesc()
    for n in nodes:
        if n.kind != "action":
            continue
        u = n.upper
        if d.eeee and u != "EEEE":
            raise _num_error('"EEEE" must be the last pattern used')
        if u == "9":
            if d.bracket:
                raise _num_error('"9" must be ahead of "PR"')
            if d.is_multi:
                d.multi += 1
            elif d.decimal:
                d.post += 1
            else:
                d.pre += 1
        elif u == "0":
            if d.bracket:
                raise _num_error('"0" must be ahead of "PR"')
            if not d.zero and not d.decimal:
                d.zero = True
                d.zero_start = d.pre + 1
            if not d.decimal:
                d.pre += 1
            else:
                d.post += 1
            d.zero_end = d.pre
        elif u == "B":
            if d.pre == 0 and d.post == 0 and not d.zero:
                d.blank = True
        elif u in ("D", "."):
            if d.decimal:
                raise _num_error("multiple decimal points")
            if d.is_multi:
                raise _num_error('cannot use "V" and decimal point together')
            d.decimal = True
        elif u == "FM":
            d.fillmode = True
        elif u == "S":
            if d.lsign:
                raise _num_error('cannot use "S" twice')
            if d.plus or d.minus or d.bracket:
                raise _num_error('cannot use "S" and "PL"/"MI"/"SG"/"PR" together')
            if not d.decimal:
                d.lsign = "pre"
                d.pre_lsign_num = d.pre
            else:
                d.lsign = "post"
        elif u == "MI":
            if d.lsign:
                raise _num_error('cannot use "S" and "MI" together')
            d.minus = True
            d.minus_post = d.decimal
        elif u == "PL":
            if d.lsign:
                raise _num_error('cannot use "S" and "PL" together')
            d.plus = True
            d.plus_post = d.decimal
        elif u == "SG":
            if d.lsign:
                raise _num_error('cannot use "S" and "SG" together')
            d.minus = d.plus = True
        elif u == "PR":
            if d.lsign or d.plus or d.minus:
                raise _num_error('cannot use "PR" and "S"/"PL"/"MI"/"SG" together')
            d.bracket = True
        elif u == "RN":
            d.roman = True
        elif u == "V":
            if d.decimal:
                raise _num_error('cannot use "V" and decimal point together')
            d.is_multi = True
        elif u == "EEEE":
            if d.eeee:
                raise _num_error('cannot use "EEEE" twice')
            if (
                d.blank
                or d.fillmode
                or d.lsign
                or d.bracket
                or d.minus
                or d.plus
                or d.roman
                or d.is_multi
            ):
                raise _num_error('"EEEE" is incompatible with other formats')
            d.eeee = True
    return nodes, d


def _roman(value: int) -> str:
    if not 1 <= value <= 3999:
        return "#" * 15
    out = []
    for n, s in (
        (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
        (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
    ):  # fmt: skip
        while value >= n:
            out.append(s)
            value -= n
    return "".join(out)


def _overflow(d: NumDesc) -> str:
    s = ["#"] * (d.pre + d.post + 1)
    s[d.pre] = "."
    return "".join(s)


def _split_sign(text: str, d: NumDesc) -> tuple[str, str, int]:
    """(sign, digits, spaces before them), '#'s when the digits overflow the template."""
    sign = "-" if text.startswith("-") else "+"
    digits = text.lstrip("-")
    pre_len = digits.find(".") if "." in digits else len(digits)
    if pre_len < d.pre:
        return sign, digits, d.pre - pre_len
    if pre_len > d.pre:
        return sign, _overflow(d), 0
    return sign, digits, 0


def _sci(value: Decimal, post: int) -> str:
    """numeric_out_sci: d.ddde+XX, the significand rounded half away from zero."""
    if not value:
        exponent = 0
    else:
        exponent = value.adjusted()
    sig = (value.scaleb(-exponent, _CTX)).quantize(Decimal(1).scaleb(-post), context=_CTX)
    text = format(sig, "f")
    if text.startswith("-") and not sig:
        text = text[1:]
    return f"{text}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"


def numeric_to_char(value: Decimal, fmt: str) -> str:
    """to_char(numeric or integer, text)."""
    nodes, base = num_format(fmt)
    d = NumDesc(**base.__dict__)
    if not fmt:
        return ""
    if d.roman:
        if not value.is_finite():
            number = "#" * 15
        else:
            number = _roman(int(value.quantize(Decimal(1), context=_CTX)))
        return _render(fmt, nodes, d, number, 0, "+")
    if d.eeee:
        if value.is_nan() or value.is_infinite():
            s = ["#"] * (d.pre + d.post + 6)
            s[0], s[d.pre + 1] = " ", "."
            number = "".join(s)
        else:
            number = _sci(value, d.post)
            number = number if number.startswith("-") else " " + number
        return _render(fmt, nodes, d, number, 0, "+")
    if value.is_nan():
        text = "NaN"
    elif value.is_infinite():
        text = "Infinity" if value > 0 else "-Infinity"
    else:
        if d.is_multi:
            value = value.scaleb(d.multi, _CTX)
            d.pre += d.multi
        rounded = value.quantize(Decimal(1).scaleb(-d.post), context=_CTX)
        text = format(rounded, "f")
        if not rounded and text.startswith("-"):
            text = text[1:]
    sign, number, spaces = _split_sign(text, d)
    return _render(fmt, nodes, d, number, spaces, sign)


def float_to_char(value: float, fmt: str, max_digits: int) -> str:
    """to_char(float8 or real, text): at most DBL_DIG (15) or FLT_DIG (6) digits."""
    nodes, base = num_format(fmt)
    d = NumDesc(**base.__dict__)
    if not fmt:
        return ""
    if d.roman:
        number = "#" * 15 if not math.isfinite(value) else _roman(round(value))
        return _render(fmt, nodes, d, number, 0, "+")
    if d.eeee:
        if not math.isfinite(value):
            s = ["#"] * (d.pre + d.post + 6)
            s[0], s[d.pre + 1] = " ", "."
            number = "".join(s)
        else:
            number = f"{value:+.{d.post}e}"
            if number[0] == "+":
                number = " " + number[1:]
        return _render(fmt, nodes, d, number, 0, "+")
    if not math.isfinite(value):
        text = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
        sign, number, spaces = _split_sign(text, d)
        return _render(fmt, nodes, d, number, spaces, sign)
    if d.is_multi:
        value *= 10.0**d.multi
        d.pre += d.multi
    pre_len = len(f"{abs(value):.0f}")
    if pre_len >= max_digits:
        d.post = 0
    elif pre_len + d.post > max_digits:
        d.post = max_digits - pre_len
    text = f"{value:.{d.post}f}"
    sign, number, spaces = _split_sign(text, d)
    return _render(fmt, nodes, d, number, spaces, sign)


def _last_relevant(number: str) -> int | None:
    """get_last_relevant_decnum: index of the last non-zero digit after the point (or
    of the point itself)."""
    p = number.find(".")
    if p < 0:
        return None
    result = p
    for i in range(p + 1, len(number)):
        if number[i] != "0":
            result = i
    return result


_MARK = 0xE000  # private-use characters: "the digit at this index of the number"


def _mask(number: str) -> str:
    """`number` with every digit the processor does not test replaced by 1: it looks at
    whether the first digit and those after the point are zeros, never at their values."""
    dot = number.find(".")
    return "".join(
        c if not c.isdigit() else ("0" if c == "0" else "1") if i == 0 or -1 < dot < i else "1"
        for i, c in enumerate(number)
    )


@lru_cache(maxsize=4096)
def _layout(fmt: str, pre: int, post: int, masked: str, spaces: int, sign: str) -> str:
    """The output for numbers that look alike to the processor, digits marked by index."""
    nodes, base = num_format(fmt)
    d = NumDesc(**base.__dict__)
    d.pre, d.post = pre, post
    return _num_processor(nodes, d, masked, spaces, sign, marks=True)


def _render(fmt: str, nodes: tuple[Node, ...], d: NumDesc, number: str, spaces: int,
            sign: str) -> str:  # fmt: skip
    """NUM_processor's output, from a cached layout unless the digits' values matter."""
    if d.roman or d.eeee or number.startswith("#") or any(n.upper == "TH" for n in nodes):
        return _num_processor(nodes, d, number, spaces, sign).split("\0")[0]
    layout = _layout(fmt, d.pre, d.post, _mask(number), spaces, sign)
    num = number + "\0"
    text = "".join(num[ord(c) - _MARK] if ord(c) >= _MARK else c for c in layout)
    return text.split("\0")[0]


def _num_processor(nodes: tuple[Node, ...], d: NumDesc, number: str, spaces: int,
                   sign: str, marks: bool = False) -> str:  # fmt: skip
    """NUM_processor in the to_char direction, over C strings: `number` ends in NUL (the
    result too). `marks`: digits copied from `number` come out as _MARK + their index."""
    num = number + "\0"
    out: list[str] = []
    if d.zero_start:
        d.zero_start -= 1
    if d.eeee:
        return number
    if d.roman:
        fill = d.fillmode
        d = NumDesc(roman=True, fillmode=fill)
        spaces = 0
        sign = ""
    sign_wrote = False
    if d.plus or d.minus:
        sign_wrote = not (d.plus and not d.minus)
    else:
        if sign != "-" and d.fillmode:
            d.bracket = False
        sign_wrote = sign == "+" and d.fillmode and not d.lsign
        if d.lsign == "pre" and d.pre == d.pre_lsign_num:
            d.lsign = "post"
    num_count = d.post + d.pre - 1
    last_relevant: int | None = None
    if d.fillmode and d.decimal:
        last_relevant = _last_relevant(number)
        if last_relevant is not None and d.zero_end > spaces:
            last_zero = min(len(number) - 1, d.zero_end - spaces)
            if last_relevant < last_zero:
                last_relevant = last_zero
    if not sign_wrote and spaces == 0:
        num_count += 1
    state = {"num_in": False, "num_curr": 0, "p": 0, "sign_wrote": sign_wrote}

    def predec_space() -> bool:
        return not d.zero and state["p"] == 0 and num[0] == "0" and d.post != 0

    def numpart(kind: str) -> None:
        if d.roman:
            return
        state["num_in"] = False
        cur = state["num_curr"]
        if (
            not state["sign_wrote"]
            and (cur >= spaces or (d.zero and d.zero_start == cur))
            and (not predec_space() or (last_relevant is not None and num[last_relevant] == "."))
        ):
            if d.lsign:
                if d.lsign == "pre":
                    out.append("-" if sign == "-" else "+")
                    state["sign_wrote"] = True
            elif d.bracket:
                out.append(" " if sign == "+" else "<")
                state["sign_wrote"] = True
            elif sign == "+":
                if not d.fillmode:
                    out.append(" ")
                state["sign_wrote"] = True
            elif sign == "-":
                out.append("-")
                state["sign_wrote"] = True
        if cur < spaces and (d.zero_start > cur or not d.zero):
            if not d.fillmode:
                out.append(" ")
        elif d.zero and cur < spaces and d.zero_start <= cur:
            out.append("0")
            state["num_in"] = True
        else:
            p = state["p"]
            if num[p] == ".":
                if last_relevant is None or num[last_relevant] != ".":
                    out.append(".")
                elif d.fillmode:
                    out.append(".")
            else:
                if last_relevant is not None and p > last_relevant and kind != "0":
                    pass
                elif predec_space():
                    if not d.fillmode:
                        out.append(" ")
                    elif last_relevant is not None and num[last_relevant] == ".":
                        out.append("0")
                else:
                    out.append(chr(_MARK + p) if marks else num[p])
                    state["num_in"] = True
            if num[p] != "\0":
                state["p"] = p + 1
        end = num_count + (1 if spaces else 0) + (1 if d.decimal else 0)
        if last_relevant is not None and last_relevant == state["p"]:
            end = cur
        if cur + 1 == end:
            if state["sign_wrote"] and d.bracket:
                out.append(" " if sign == "+" else ">")
            elif d.lsign == "post":
                out.append("-" if sign == "-" else "+")
        state["num_curr"] = cur + 1

    for n in nodes:
        if n.kind != "action":
            out.append(n.text)
            continue
        u, k = n.upper, n.key
        if u in ("9", "0", ".", "D"):
            numpart(u)
        elif u in (",", "G"):
            if not state["num_in"]:
                if not d.fillmode:
                    out.append(" ")
            else:
                out.append(",")
        elif u == "L":
            out.append(" ")
        elif u == "RN":
            text = num[state["p"] :].split("\0")[0]
            text = text if k == "RN" else text.lower()
            out.append(text if d.fillmode else f"{text:>15}")
        elif u == "TH":
            if d.roman or number.startswith("#") or sign == "-" or d.decimal:
                continue
            out.append(ordinal_suffix(number, k == "TH"))
        elif u == "MI":
            if sign == "-":
                out.append("-")
            elif not d.fillmode:
                out.append(" ")
        elif u == "PL":
            if sign == "+":
                out.append("+")
            elif not d.fillmode:
                out.append(" ")
        elif u == "SG":
            out.append(sign)
    return "".join(out)


# -- to_number ----------
def to_number(text: str, fmt: str) -> Decimal:
    nodes, base = num_format(fmt)
    d = NumDesc(**base.__dict__)
    if d.eeee:
        raise SQLError('"EEEE" not supported for input', "0A000")
    if d.roman:
        raise SQLError('"RN" not supported for input', "0A000")
    inp = text
    n_in = len(inp)
    number = [" "]
    st = {"p": 0, "read_pre": 0, "read_post": 0, "read_dec": False}

    def at(i: int) -> str:
        return inp[i] if i < n_in else "\0"

    def overload() -> bool:
        return st["p"] >= n_in

    def amount(s: int) -> bool:
        return st["p"] <= n_in - s

    def eat_non_data(count: int) -> None:
        while count > 0:
            count -= 1
            if overload() or at(st["p"]) in "0123456789.,+-":
                break
            st["p"] += 1

    def numpart(kind: str) -> None:
        isread = False
        for _ in range(2):
            if at(st["p"]) == " ":
                st["p"] += 1
            if overload():
                return
        if number[0] == " " and kind in ("0", "9") and st["read_pre"] + st["read_post"] == 0:
            c = at(st["p"])
            if d.lsign == "pre":
                if c in "-+":
                    number[0] = c
                    st["p"] += 1
            elif c == "-" or (d.bracket and c == "<"):
                number[0] = "-"
                st["p"] += 1
            elif c == "+":
                number[0] = "+"
                st["p"] += 1
        if overload():
            return
        c = at(st["p"])
        if c.isdigit() and c.isascii():
            if st["read_dec"] and st["read_post"] == d.post:
                return
            number.append(c)
            if st["read_dec"]:
                st["read_post"] += 1
            else:
                st["read_pre"] += 1
            isread = True
        elif d.decimal and not st["read_dec"] and amount(1) and c == ".":
            number.append(".")
            st["read_dec"] = True
            isread = True
        if overload():
            return
        if number[0] == " " and st["read_pre"] + st["read_post"] > 0:
            if d.lsign and isread and st["p"] + 1 < n_in and not at(st["p"] + 1).isdigit():
                tmp = st["p"]
                st["p"] += 1
                if amount(1) and at(st["p"]) in "-+":
                    number[0] = at(st["p"])
                else:
                    st["p"] = tmp
            elif not isread and not d.lsign and (d.plus or d.minus):
                if c in "-+":
                    number[0] = c

    for n in nodes:
        if overload():
            break
        if n.kind != "action":
            st["p"] += 1
            continue
        u = n.upper
        if u in ("9", "0", ".", "D"):
            numpart(u)
        elif u in (",", "G"):
            if d.fillmode or at(st["p"]) != ",":
                continue
        elif u == "L":
            eat_non_data(1)
            continue
        elif u == "TH":
            if d.roman or d.decimal:
                continue
            eat_non_data(2)
            continue
        elif u in ("MI", "PL", "SG"):
            c = at(st["p"])
            if (u == "MI" and c == "-") or (u == "PL" and c == "+") or (u == "SG" and c in "-+"):
                number[0] = c
            else:
                eat_non_data(1)
                continue
        else:
            continue
        st["p"] += 1
    if number[-1] == ".":
        number.pop()
    digits = "".join(number)
    try:
        value = Decimal(digits.strip() or "x")
    except InvalidOperation:
        raise SQLError(f'invalid input syntax for type numeric: "{digits}"', "22P02") from None
    scale = st["read_post"]
    precision = d.pre + d.multi + scale
    value = value.quantize(Decimal(1).scaleb(-scale), context=_CTX)
    if value and value.adjusted() >= precision - scale:
        raise SQLError("numeric field overflow", "22003")
    if d.is_multi:
        value = value * Decimal("1").scaleb(-d.multi).quantize(Decimal("1e-16"))
    return value
