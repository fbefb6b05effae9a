"""The value of one expression from its operands' values: literals, operators, f-strings.

``f"{major}{minor}" in ["100", "103"]`` is a comparison of a joined string with a
list: each operand is a set of possibilities, and the result holds every outcome
of every combination (``and``/``or`` stop where Python would, with what stopped
them; an unknown operand leaves an arithmetic result unknown and a comparison
either way).  What a name, an attribute or a call is worth (the tree's bindings,
its functions run, what torch answers) is the evaluator's
(:class:`contrib.analysis.archeval.TreeEval`) to say.
"""

from __future__ import annotations

import ast
import itertools
import operator
from collections.abc import Callable
from typing import Any, Protocol

from contrib.analysis.archvalues import (
    ANY,
    BINOPS,
    LIMIT,
    UNK,
    Frame,
    Values,
    compare,
    hashable,
    index,
    safe,
    settled,
    truth_of,
    vague,
    values_of,
)


class Resolver(Protocol):
    """What an expression's names, attributes and calls need of the evaluator."""

    def eval(self, node: ast.expr, frame: Frame) -> Values: ...

    def lookup(self, name: str, frame: Frame, line: int = 0) -> Values: ...

    def attribute(self, base: Any, attr: str) -> Values: ...

    def call(self, callee: Any, args: tuple[Values, ...],
             kwargs: tuple[tuple[str, Values], ...]) -> Values: ...


def evaluate(ev: Resolver, node: ast.expr, frame: Frame) -> Values:
    """The possible values of ``node`` on the evaluator's capability (unknown for an
    expression of a kind not read here: a lambda, a comprehension, ``await``)."""
    read = _KINDS.get(type(node))
    return read(ev, node, frame) if read is not None else ANY


def _constant(ev: Resolver, node: ast.Constant, frame: Frame) -> Values:
    return frozenset({node.value}) if hashable(node.value) else ANY


def _name(ev: Resolver, node: ast.Name, frame: Frame) -> Values:
    return ev.lookup(node.id, frame, node.lineno)


def _named(ev: Resolver, node: ast.NamedExpr, frame: Frame) -> Values:
    return ev.eval(node.value, frame)


def _elements(ev: Resolver, node: ast.Tuple | ast.List | ast.Set, frame: Frame) -> Values:
    if any(isinstance(e, ast.Starred) for e in node.elts) or len(node.elts) > 64:
        return ANY
    parts = [ev.eval(e, frame) for e in node.elts]
    if any(len(p) > 1 for p in parts):
        size = 1
        for p in parts:
            size *= len(p)
        if size > LIMIT:
            return frozenset({tuple(UNK if len(p) > 1 else next(iter(p)) for p in parts)})
    return values_of(tuple(combo) for combo in itertools.product(*parts))


def _fstring(ev: Resolver, node: ast.JoinedStr, frame: Frame) -> Values:
    parts: list[Values] = []
    for value in node.values:
        if isinstance(value, ast.FormattedValue):
            inner = ev.eval(value.value, frame)
            parts.append(values_of(UNK if vague(v) else str(v) for v in inner))
        else:
            parts.append(ev.eval(value, frame))
    return values_of(UNK if any(vague(p) for p in combo) else "".join(map(str, combo))
                   for combo in itertools.product(*parts))


def _boolop(ev: Resolver, node: ast.BoolOp, frame: Frame) -> Values:
    is_and = isinstance(node.op, ast.And)
    out: set[Any] = set()
    current = ev.eval(node.values[0], frame)
    for following in node.values[1:]:
        go_on = False
        for value in current:
            truth = truth_of(frozenset({value}))
            if (not is_and) in truth:  # stops here: this value is the result
                out.add(settled(value, not is_and))
            if is_and in truth:
                go_on = True
        if not go_on:
            return values_of(out)
        current = ev.eval(following, frame)
    return values_of(out | set(current))


def _unaryop(ev: Resolver, node: ast.UnaryOp, frame: Frame) -> Values:
    operand = ev.eval(node.operand, frame)
    if isinstance(node.op, ast.Not):
        return frozenset(not t for t in truth_of(operand))
    if isinstance(node.op, ast.USub):
        return values_of(UNK if vague(v) else safe(operator.neg, v) for v in operand)
    return ANY


def _binop(ev: Resolver, node: ast.BinOp, frame: Frame) -> Values:
    op = BINOPS.get(type(node.op))
    left, right = ev.eval(node.left, frame), ev.eval(node.right, frame)
    if op is None:
        return ANY
    return values_of(UNK if vague(a) or vague(b) else safe(op, a, b)
                   for a in left for b in right)


def _compare(ev: Resolver, node: ast.Compare, frame: Frame) -> Values:
    operands = [ev.eval(x, frame) for x in (node.left, *node.comparators)]
    truths: set[bool] = {True}
    for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
        step = set()
        for a, b in itertools.product(left, right):
            step |= compare(op, a, b)
        truths = {x and y for x in truths for y in step}
    return frozenset(truths)


def _ifexp(ev: Resolver, node: ast.IfExp, frame: Frame) -> Values:
    truth = truth_of(ev.eval(node.test, frame))
    out: set[Any] = set()
    if True in truth:
        out |= ev.eval(node.body, frame)
    if False in truth:
        out |= ev.eval(node.orelse, frame)
    return values_of(out)


def _subscript(ev: Resolver, node: ast.Subscript, frame: Frame) -> Values:
    bases = ev.eval(node.value, frame)
    if isinstance(node.slice, ast.Slice):
        lower = ev.eval(node.slice.lower, frame) if node.slice.lower else frozenset({None})
        upper = ev.eval(node.slice.upper, frame) if node.slice.upper else frozenset({None})
        return values_of(index(b, slice(a, c)) if not (vague(a) or vague(c)) else UNK
                         for b in bases for a in lower for c in upper)
    keys = ev.eval(node.slice, frame)
    return values_of(index(b, k) for b in bases for k in keys)


def _attribute(ev: Resolver, node: ast.Attribute, frame: Frame) -> Values:
    return values_of(v for base in ev.eval(node.value, frame)
                   for v in ev.attribute(base, node.attr))


def _call(ev: Resolver, node: ast.Call, frame: Frame) -> Values:
    callees = ev.eval(node.func, frame)
    if any(isinstance(a, ast.Starred) for a in node.args):
        return ANY
    args = tuple(ev.eval(a, frame) for a in node.args)
    kwargs = tuple((k.arg, ev.eval(k.value, frame)) for k in node.keywords if k.arg)
    if len(kwargs) != len(node.keywords):
        return ANY
    return values_of(v for callee in callees for v in ev.call(callee, args, kwargs))


_KINDS: dict[type[ast.expr], Callable[[Resolver, Any, Frame], Values]] = {
    ast.Constant: _constant, ast.Name: _name, ast.NamedExpr: _named, ast.Tuple: _elements,
    ast.List: _elements, ast.Set: _elements, ast.JoinedStr: _fstring, ast.BoolOp: _boolop,
    ast.UnaryOp: _unaryop, ast.BinOp: _binop, ast.Compare: _compare, ast.IfExp: _ifexp,
    ast.Subscript: _subscript, ast.Attribute: _attribute, ast.Call: _call,
}
