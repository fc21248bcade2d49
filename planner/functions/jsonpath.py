"""A small SQL/JSON path evaluator for jsonb_path_* and @? / @@: lax and strict modes,
member and element accessors, filters, comparisons, arithmetic, exists(), variables and
the size/type/floor/ceiling/abs/double/datetime methods."""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

_TOKEN = re.compile(
    r'\s*(?:(?P<num>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(?P<str>"(?:[^"\\]|\\.)*")'
    r"|(?P<var>\$[A-Za-z_]\w*)|(?P<op>==|!=|<>|<=|>=|&&|\|\||[$@.\[\]()?*<>!+\-/%,])"
    r"|(?P<word>[A-Za-z_]\w*))"
)


class PathError(ValueError):
    """A path that cannot be evaluated, with PostgreSQL's SQLSTATE in the text DuckDB
    keeps of a UDF's exception (storage/duckdb_errors.py reads it back)."""

    def __init__(self, message: str, sqlstate: str = "42601") -> None:
        super().__init__(f"[SQLSTATE {sqlstate}] {message}")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise PathError(f'syntax error at or near "{text[pos:]}" of jsonpath input')
        kind = m.lastgroup or "op"
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, value: str | None = None) -> bool:
        if self.i >= len(self.toks):
            return False
        return value is None or self.toks[self.i][1] == value

    def take(self, value: str | None = None) -> tuple[str, str]:
        if not self.peek(value):
            raise PathError("syntax error in jsonpath input")
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def parse(self) -> tuple[bool, Any]:
        strict = False
        if self.peek("strict") or self.peek("lax"):
            strict = self.take()[1] == "strict"
        node = self.or_()
        if self.i != len(self.toks):
            raise PathError("syntax error in jsonpath input")
        return strict, node

    def or_(self) -> Any:
        node = self.and_()
        while self.peek("||"):
            self.take()
            node = ("or", node, self.and_())
        return node

    def and_(self) -> Any:
        node = self.not_()
        while self.peek("&&"):
            self.take()
            node = ("and", node, self.not_())
        return node

    def not_(self) -> Any:
        if self.peek("!"):
            self.take()
            return ("not", self.not_())
        return self.cmp()

    def cmp(self) -> Any:
        node = self.add()
        for op in ("==", "!=", "<>", "<=", ">=", "<", ">"):
            if self.peek(op):
                self.take()
                return ("cmp", op, node, self.add())
        return node

    def add(self) -> Any:
        node = self.mul()
        while self.peek("+") or self.peek("-"):
            node = ("arith", self.take()[1], node, self.mul())
        return node

    def mul(self) -> Any:
        node = self.unary()
        while self.peek("*") or self.peek("/") or self.peek("%"):
            node = ("arith", self.take()[1], node, self.unary())
        return node

    def unary(self) -> Any:
        if self.peek("-"):
            self.take()
            return ("neg", self.unary())
        node = self.primary()
        steps = []
        while True:
            if self.peek("."):
                self.take()
                if self.peek("*"):
                    self.take()
                    steps.append(("anykey",))
                    continue
                kind, name = self.take()
                if kind == "str":
                    name = _string(name)
                if self.peek("(") and kind == "word":
                    self.take()
                    self.take(")")
                    steps.append(("method", name))
                else:
                    steps.append(("key", name))
            elif self.peek("["):
                self.take()
                if self.peek("*"):
                    self.take()
                    steps.append(("anyelem",))
                else:
                    idx = self.or_()
                    steps.append(("elem", idx))
                self.take("]")
            elif self.peek("?"):
                self.take()
                self.take("(")
                steps.append(("filter", self.or_()))
                self.take(")")
            else:
                break
        return ("path", node, steps) if steps else node

    def primary(self) -> Any:
        kind, value = self.take()
        if value in ("$", "@"):
            return (value,)
        if kind == "var":
            return ("var", value[1:])
        if kind == "num":
            return ("lit", Decimal(value))
        if kind == "str":
            return ("lit", _string(value))
        if value == "true" or value == "false":
            return ("lit", value == "true")
        if value == "null":
            return ("lit", None)
        if value == "exists":
            self.take("(")
            node = self.or_()
            self.take(")")
            return ("exists", node)
        if value == "(":
            node = self.or_()
            self.take(")")
            return node
        raise PathError(f'syntax error at or near "{value}" of jsonpath input')


def _string(tok: str) -> str:
    import json

    return str(json.loads(tok))


_PREDICATES = ("cmp", "and", "or", "not", "exists")


class _Eval:
    def __init__(self, root: Any, strict: bool, variables: dict[str, Any]) -> None:
        self.root, self.strict, self.vars = root, strict, variables

    def seq(self, node: Any, cur: Any) -> list[Any]:
        kind = node[0]
        if kind == "$":
            return [self.root]
        if kind == "@":
            return [cur]
        if kind == "lit":
            return [node[1]]
        if kind == "var":
            if node[1] not in self.vars:
                raise PathError(f'could not find jsonpath variable "{node[1]}"', "42704")
            return [self.vars[node[1]]]
        if kind in _PREDICATES:
            return [self.pred(node, cur)]
        if kind == "neg":
            return [-self.number(v) for v in self.seq(node[1], cur)]
        if kind == "arith":
            left, right = self.seq(node[2], cur), self.seq(node[3], cur)
            if len(left) != 1 or len(right) != 1:
                side = "left" if len(left) != 1 else "right"
                raise PathError(
                    f"{side} operand of jsonpath operator {node[1]} is not a single numeric value",
                    "22038",
                )
            a, b = self.number(left[0]), self.number(right[0])
            op = node[1]
            if op in ("/", "%") and b == 0:
                raise PathError("division by zero", "22012")
            result = {"+": a + b, "-": a - b, "*": a * b}.get(op)
            return [result if result is not None else (a / b if op == "/" else a % b)]
        if kind == "path":
            items = self.seq(node[1], cur)
            for step in node[2]:
                items = [y for x in items for y in self.step(step, x)]
            return items
        raise PathError("unsupported jsonpath expression")

    def number(self, v: Any) -> Decimal:
        if isinstance(v, Decimal) and not isinstance(v, bool):
            return v
        raise PathError("operand of jsonpath operator is not numeric", "2203B")

    def step(self, step: tuple[Any, ...], v: Any) -> list[Any]:
        kind = step[0]
        if kind == "key":
            if isinstance(v, dict):
                if step[1] in v:
                    return [v[step[1]]]
                if self.strict:
                    raise PathError(f'JSON object does not contain key "{step[1]}"', "2203A")
                return []
            if isinstance(v, list) and not self.strict:
                return [y for x in v for y in self.step(step, x)]
            if self.strict:
                raise PathError(
                    "jsonpath member accessor can only be applied to an object", "2203A"
                )
            return []
        if kind == "anykey":
            if isinstance(v, dict):
                return list(v.values())
            if isinstance(v, list) and not self.strict:
                return [y for x in v for y in self.step(step, x)]
            return []
        if kind == "anyelem":
            if isinstance(v, list):
                return list(v)
            if self.strict:
                raise PathError(
                    "jsonpath wildcard array accessor can only be applied to an array", "22039"
                )
            return [v]
        if kind == "elem":
            arr = v if isinstance(v, list) else [v]
            out = []
            for i in self.seq(step[1], v):
                j = int(self.number(i))
                if 0 <= j < len(arr):
                    out.append(arr[j])
                elif self.strict:
                    raise PathError("jsonpath array subscript is out of bounds", "22033")
            return out
        if kind == "filter":
            items = v if isinstance(v, list) and not self.strict else [v]
            return [x for x in items if self.pred(step[1], x) is True]
        if kind == "method":
            return [self.method(step[1], v)]
        raise PathError("unsupported jsonpath accessor")

    def method(self, name: str, v: Any) -> Any:
        if name == "size":
            return Decimal(len(v)) if isinstance(v, list) else Decimal(1)
        if name == "type":
            return json_type(v)
        if name in ("floor", "ceiling", "abs"):
            n = self.number(v)
            if name == "abs":
                return abs(n)
            rounding = ROUND_FLOOR if name == "floor" else ROUND_CEILING
            return n.to_integral_value(rounding=rounding)
        if name == "double":
            return Decimal(str(float(v)))
        if name == "datetime" and isinstance(v, str):
            return v
        raise PathError(
            f"jsonpath item method .{name}() can only be applied to a numeric value", "2203B"
        )

    def pred(self, node: Any, cur: Any) -> bool | None:
        kind = node[0]
        if kind == "and":
            a, b = self.pred(node[1], cur), self.pred(node[2], cur)
            return False if a is False or b is False else (None if None in (a, b) else True)
        if kind == "or":
            a, b = self.pred(node[1], cur), self.pred(node[2], cur)
            return True if a is True or b is True else (None if None in (a, b) else False)
        if kind == "not":
            a = self.pred(node[1], cur)
            return None if a is None else not a
        if kind == "exists":
            try:
                return bool(self.seq(node[1], cur))
            except PathError:
                return None
        if kind == "cmp":
            try:
                left, right = self.seq(node[2], cur), self.seq(node[3], cur)
            except PathError:
                return None
            found, unknown = False, False
            for a in left:
                for b in right:
                    r = _compare(node[1], a, b)
                    if r is None:
                        unknown = True
                    elif r:
                        found = True
            return True if found else (None if unknown else False)
        values = self.seq(node, cur)
        if len(values) == 1 and isinstance(values[0], bool):
            return values[0]
        return None


def _compare(op: str, a: Any, b: Any) -> bool | None:
    numeric = isinstance(a, Decimal) and isinstance(b, Decimal)
    if not numeric and not (
        type(a) is type(b) and isinstance(a, str | bool) or a is None or b is None
    ):
        return None
    if a is None or b is None:
        if op in ("==",):
            return a is None and b is None
        if op in ("!=", "<>"):
            return not (a is None and b is None)
        return None
    if op == "==":
        return a == b
    if op in ("!=", "<>"):
        return a != b
    if isinstance(a, bool):
        return None
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def query(doc: Any, path: str, variables: Any = None) -> list[Any]:
    """The items `path` selects in `doc` (Python values, numbers as Decimal)."""
    strict, node = _Parser(path).parse()
    if variables is not None and not isinstance(variables, dict):
        raise PathError('"vars" argument is not an object', "22023")
    return _Eval(doc, strict, variables or {}).seq(node, doc)


def match(doc: Any, path: str, variables: Any = None) -> bool | None:
    """jsonb_path_match / @@: the predicate's value (None when unknown)."""
    items = query(doc, path, variables)
    if len(items) == 1 and (isinstance(items[0], bool) or items[0] is None):
        return items[0]
    raise PathError("single boolean result is expected", "22038")


def _print(node: Any) -> str:
    kind = node[0]
    if kind in ("$", "@"):
        return kind
    if kind == "var":
        return f'$"{node[1]}"'
    if kind == "lit":
        v = node[1]
        if isinstance(v, bool):
            return "true" if v else "false"
        if v is None:
            return "null"
        return str(v) if isinstance(v, Decimal) else _quote(v)
    if kind == "cmp":
        op = "!=" if node[1] == "<>" else node[1]
        return f"{_print(node[2])} {op} {_print(node[3])}"
    if kind == "arith":
        return f"({_print(node[2])} {node[1]} {_print(node[3])})"
    if kind in ("and", "or"):
        op = "&&" if kind == "and" else "||"
        return f"({_print(node[1])} {op} {_print(node[2])})"
    if kind == "not":
        return f"!({_print(node[1])})"
    if kind == "neg":
        return f"-{_print(node[1])}"
    if kind == "exists":
        return f"exists ({_print(node[1])})"
    out = _print(node[1])
    for step in node[2]:
        s = step[0]
        if s == "key":
            out += "." + _quote(step[1])
        elif s == "anykey":
            out += ".*"
        elif s == "anyelem":
            out += "[*]"
        elif s == "elem":
            out += f"[{_print(step[1])}]"
        elif s == "filter":
            inner = _print(step[1])
            if inner.startswith("(") and inner.endswith(")"):
                inner = inner[1:-1]
            out += f"?({inner})"
        else:
            out += f".{step[1]}()"
    return out


def _quote(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)


def canonical(text: str) -> str:
    """A jsonpath as PostgreSQL prints it ('$."a"[*]?(@ > 1)'); PathError if invalid."""
    strict, node = _Parser(text).parse()
    return ("strict " if strict else "") + _print(node)


def json_type(v: Any) -> str:
    """A JSON value's type as jsonb_typeof and jsonpath's .type() name it."""
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    if isinstance(v, str):
        return "string"
    if isinstance(v, bool):
        return "boolean"
    return "null" if v is None else "number"
