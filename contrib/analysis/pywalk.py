"""Walks of Python syntax trees, in :func:`ast.walk`'s order, at a fraction of its cost.

The audit looks at every expression of every file that may hold a gate, often
more than once (may it read the GPU, does it hold a JIT list, whose child is
it).  :func:`ast.walk` is a generator over a generator (``iter_child_nodes``
over ``iter_fields``) per node: two thirds of a first audit's walking time was
that machinery.  These walks visit the same nodes in the same breadth-first
order, so every answer read from them is the one ``ast.walk`` gave.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

_AST = ast.AST


def walk(node: ast.AST) -> list[ast.AST]:
    """``node`` and everything below it, in :func:`ast.walk`'s order."""
    out = [node]
    for current in out:  # the list grows while it is read: breadth first
        for name in current._fields:
            value = getattr(current, name, None)
            if isinstance(value, _AST):
                out.append(value)
            elif isinstance(value, list):
                out += [item for item in value if isinstance(item, _AST)]
    return out


def walk_all(nodes: list[ast.AST] | tuple[ast.AST, ...]) -> Iterator[ast.AST]:
    """Each node's walk in turn (what ``for n in nodes: ast.walk(n)`` visits)."""
    for node in nodes:
        yield from walk(node)


def parents(module: ast.AST) -> dict[int, ast.AST]:
    """The parent of every node below ``module``, by ``id`` (a node listed twice, such
    as a shared ``Load`` context, maps to its last parent, as a walk would leave it)."""
    found: dict[int, ast.AST] = {}
    for node in walk(module):
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, _AST):
                found[id(value)] = node
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, _AST):
                        found[id(item)] = node
    return found


def single_assignment(node: ast.AST) -> tuple[ast.expr, ast.expr] | None:
    """``(target, value)`` of ``x = v`` (one target) or ``x: T = v``; None otherwise."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return node.targets[0], node.value
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return node.target, node.value
    return None


def passes_on(call: ast.Call, parents: dict[int, ast.AST]) -> bool:
    """Whether ``call`` is what its function returns, whole (``return f(x)``): the
    function hands the callee's answer to its own callers."""
    statement = parents.get(id(call))
    return isinstance(statement, ast.Return) and statement.value is call


def own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of the functions or classes nested in it."""
    stack = list(getattr(function, "body", []))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def callee_name(call: ast.Call) -> str | None:
    """The name a call calls: ``f`` of ``f()``, ``m`` of ``obj.m()``, ``k`` of ``k[grid]()``;
    None for a call of anything else (``f()()``)."""
    func = call.func.value if isinstance(call.func, ast.Subscript) else call.func  # kernel[grid](...)
    return name_of(func)


def name_of(node: ast.expr) -> str | None:
    """The name an expression ends with: ``f``, ``m`` of ``obj.m``, and of a decorator
    called (``@register("x")``) the one it calls; None for anything else."""
    node = node.func if isinstance(node, ast.Call) else node
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(
        node, ast.Attribute) else None
