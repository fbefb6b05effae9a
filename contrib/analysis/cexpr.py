"""Evaluate C preprocessor ``#if`` expressions (C/C++ semantics, no I/O).

``evaluate("defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 1200", macros)`` expands
object-like macros from ``macros``, turns ``defined X``/``defined(X)`` into 1/0,
replaces every other identifier with 0 (as the C standard says) and evaluates
with C precedence, short-circuiting ``&&``/``||``/``?:``.  The result says which
unknown identifiers the value actually depended on, so a caller can warn that a
guard was decided by a macro it could not see.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

ARCH_MACRO = "__CUDA_ARCH__"


class ExprError(ValueError):
    """The expression is malformed (or divides by zero)."""


@dataclass(frozen=True)
class Macro:
    """A ``#define``: ``params`` is None for object-like macros."""

    name: str
    body: str
    params: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Evaluation:
    """The value of an #if expression and what it depended on."""

    value: int
    unknown: frozenset[str]  # identifiers taken as 0 that the value depended on
    mentions_arch: bool  # __CUDA_ARCH__ appears, directly or through a macro

    @property
    def true(self) -> bool:
        """C truthiness."""
        return self.value != 0


_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*)"
    r"|(?P<char>'(?:\\.|[^'\\])+')"
    r"|(?P<ident>[A-Za-z_]\w*)"
    r"|(?P<op>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%<>!~&|^?:(),]))"
)
_ESCAPES = {"n": 10, "t": 9, "r": 13, "0": 0, "\\": 92, "'": 39, '"': 34, "a": 7}


def tokenize(text: str) -> list[tuple[str, str]]:
    """Split an expression into (kind, text) tokens; kind is num/ident/op."""
    tokens: list[tuple[str, str]] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ExprError(f"unexpected {text[pos:].strip()[:20]!r} in #if expression")
        kind = match.lastgroup or "op"
        value = match.group(kind)
        if kind == "char":
            kind, value = "num", str(_char_value(value))
        tokens.append((kind, value))
        pos = match.end()
    return tokens


def _char_value(literal: str) -> int:
    inner = literal[1:-1]
    if inner.startswith("\\"):
        return _ESCAPES.get(inner[1], ord(inner[1]))
    return ord(inner[0])


def _int_literal(text: str) -> int:
    digits = text.rstrip("uUlL")
    if digits[:2] in ("0x", "0X"):
        return int(digits, 16)
    if len(digits) > 1 and digits[0] == "0":
        try:
            return int(digits, 8)
        except ValueError as exc:
            raise ExprError(f"bad octal literal {text!r}") from exc
    return int(digits)


# Expanded token: ("num", value, None) or ("unk", 0, name) or ("op", text, None).
Tok = tuple[str, object, str | None]


class _Expander:
    """Macro expansion for #if: defined, object-like macros, unknown -> 0."""

    def __init__(self, macros: Mapping[str, Macro]) -> None:
        self.macros = macros
        self.mentions_arch = False

    def expand(self, tokens: list[tuple[str, str]], hidden: frozenset[str]) -> list[Tok]:
        out: list[Tok] = []
        i = 0
        while i < len(tokens):
            kind, text = tokens[i]
            i += 1
            if text == ARCH_MACRO:
                self.mentions_arch = True
            if kind == "num":
                out.append(("num", _int_literal(text), None))
            elif kind == "op":
                out.append(("op", text, None))
            elif text == "defined":
                name, i = self._defined_operand(tokens, i)
                out.append(("num", int(name in self.macros), None))
            else:
                i = self._expand_ident(text, tokens, i, hidden, out)
        return out

    def _defined_operand(self, tokens: list[tuple[str, str]], i: int) -> tuple[str, int]:
        paren = i < len(tokens) and tokens[i][1] == "("
        j = i + 1 if paren else i
        if j >= len(tokens) or tokens[j][0] != "ident":
            raise ExprError("'defined' needs a macro name")
        name = tokens[j][1]
        if name == ARCH_MACRO:
            self.mentions_arch = True
        if paren:
            if j + 1 >= len(tokens) or tokens[j + 1][1] != ")":
                raise ExprError(f"missing ')' after 'defined({name}'")
            return name, j + 2
        return name, j + 1

    def _expand_ident(
        self,
        name: str,
        tokens: list[tuple[str, str]],
        i: int,
        hidden: frozenset[str],
        out: list[Tok],
    ) -> int:
        macro = self.macros.get(name)
        if name in ("true", "false") and macro is None:  # C++: true is 1 in #if
            out.append(("num", int(name == "true"), None))
        elif macro is None or name in hidden:
            out.append(("unk", 0, name))
        elif macro.params is None:
            body = tokenize(macro.body)
            out.extend(self.expand(body, hidden | {name}))
        elif i < len(tokens) and tokens[i][1] == "(":
            # A function-like macro call: we do not expand those; its value is unknown.
            depth, i = 1, i + 1
            while i < len(tokens) and depth:
                depth += {"(": 1, ")": -1}.get(tokens[i][1], 0)
                i += 1
            out.append(("unk", 0, f"{name}(...)"))
        else:
            out.append(("unk", 0, name))
        return i


# Binary operators by precedence level, lowest first (after || and &&).
_LEVELS: tuple[tuple[str, ...], ...] = (
    ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("<<", ">>"), ("+", "-"),
    ("*", "/", "%"),
)
Node = tuple[object, ...]


class _Parser:
    """Recursive descent over expanded tokens, building a small tree."""

    def __init__(self, tokens: list[Tok]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> str | None:
        if self.pos < len(self.tokens) and self.tokens[self.pos][0] == "op":
            return str(self.tokens[self.pos][1])
        return None

    def take(self, op: str) -> bool:
        if self.peek() == op:
            self.pos += 1
            return True
        return False

    def parse(self) -> Node:
        if not self.tokens:
            raise ExprError("empty #if expression")
        node = self.conditional()
        if self.pos != len(self.tokens):
            raise ExprError(f"unexpected {self.tokens[self.pos][1]!r} in #if expression")
        return node

    def conditional(self) -> Node:
        cond = self.logical("||")
        if not self.take("?"):
            return cond
        then = self.conditional()
        if not self.take(":"):
            raise ExprError("'?' without ':' in #if expression")
        return ("?", cond, then, self.conditional())

    def logical(self, op: str) -> Node:
        sub: Callable[[], Node] = (
            (lambda: self.logical("&&")) if op == "||" else (lambda: self.binary(0))
        )
        node = sub()
        while self.take(op):
            node = (op, node, sub())
        return node

    def binary(self, level: int) -> Node:
        if level == len(_LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while (op := self.peek()) in _LEVELS[level]:
            self.pos += 1
            node = (op, node, self.binary(level + 1))
        return node

    def unary(self) -> Node:
        op = self.peek()
        if op in ("!", "-", "+", "~"):
            self.pos += 1
            return ("u" + str(op), self.unary())
        if self.take("("):
            node = self.conditional()
            if not self.take(")"):
                raise ExprError("missing ')' in #if expression")
            return node
        if self.pos >= len(self.tokens) or self.tokens[self.pos][0] == "op":
            found = self.tokens[self.pos][1] if self.pos < len(self.tokens) else "end of line"
            raise ExprError(f"expected a value, found {found!r} in #if expression")
        kind, value, name = self.tokens[self.pos]
        self.pos += 1
        return ("unk", name) if kind == "unk" else ("num", value)


def _divide(a: int, b: int, op: str) -> int:
    if b == 0:
        raise ExprError("division by zero in #if expression")
    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncates toward 0
    return quotient if op == "/" else a - b * quotient


_ARITH: dict[str, Callable[[int, int], int]] = {
    "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "&": lambda a, b: a & b,
    "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b), ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b), ">=": lambda a, b: int(a >= b),
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
}


def _shift(a: int, b: int, op: str) -> int:
    if not 0 <= b < 64:
        raise ExprError(f"shift by {b} in #if expression")
    return a << b if op == "<<" else a >> b


def _eval(node: Node, unknown: set[str]) -> int:
    tag = node[0]
    if tag == "num":
        value = node[1]
        assert isinstance(value, int)
        return value
    if tag == "unk":
        unknown.add(str(node[1]))
        return 0
    if tag == "?":
        return _eval(node[2] if _eval(node[1], unknown) else node[3], unknown)  # type: ignore[arg-type]
    if tag == "&&":
        return int(bool(_eval(node[1], unknown) and _eval(node[2], unknown)))  # type: ignore[arg-type]
    if tag == "||":
        return int(bool(_eval(node[1], unknown) or _eval(node[2], unknown)))  # type: ignore[arg-type]
    if str(tag).startswith("u"):
        value = _eval(node[1], unknown)  # type: ignore[arg-type]
        return {"u!": int(not value), "u-": -value, "u+": value, "u~": ~value}[str(tag)]
    left, right = _eval(node[1], unknown), _eval(node[2], unknown)  # type: ignore[arg-type]
    if tag in ("/", "%"):
        return _divide(left, right, str(tag))
    if tag in ("<<", ">>"):
        return _shift(left, right, str(tag))
    return _ARITH[str(tag)](left, right)


def evaluate(expression: str, macros: Mapping[str, Macro]) -> Evaluation:
    """Evaluate one #if/#elif expression against ``macros``; raise ExprError if malformed."""
    expander = _Expander(macros)
    tokens = expander.expand(tokenize(expression), frozenset())
    unknown: set[str] = set()
    value = _eval(_Parser(tokens).parse(), unknown)
    return Evaluation(value, frozenset(unknown), expander.mentions_arch)


def parse_define(rest: str) -> Macro | None:
    """``#define`` text after the keyword -> Macro (None if there is no name)."""
    match = re.match(r"\s*([A-Za-z_]\w*)(\([^)]*\))?\s*(.*)", rest, re.S)
    if match is None:
        return None
    name, params, body = match.groups()
    if params is None:
        return Macro(name, body.strip())
    names = tuple(p.strip() for p in params[1:-1].split(",") if p.strip())
    return Macro(name, body.strip(), names)
