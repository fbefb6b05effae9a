"""What a piece of code reaches: the functions its calls lead to, at any depth in the tree.

A gate's class comes from what stands behind it: sglang's
``if _use_fused(): out = fused_allreduce(x)`` reaches flashinfer's module getter
three calls down, in another file.  Calls are resolved by the arch evaluator's
bindings (the callee's definition in the tree, imports followed), breadth first;
each reached function is written as its chain of calls, ``a>b>get_x_module``,
and a Triton kernel (``@triton.jit``) as ``triton:name`` at the end of its chain.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Iterator

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import Frame, Func
from contrib.analysis.pywalk import walk

MAX_REACHED = 120  # chains kept per gate
MAX_DEPTH = 6  # calls followed below the gated code


def reached(ev: TreeEval, frame: Frame, code: list[ast.AST]) -> list[str]:
    """The calls in ``code`` and, through the tree's definitions, everything they call."""
    found: list[str] = []
    seen_names: set[str] = set()
    visited: set[int] = set()
    queue: deque[tuple[Frame, Iterable[ast.AST], str, int]] = deque([(frame, code, "", 0)])
    while queue and len(found) < MAX_REACHED:
        where, nodes, prefix, depth = queue.popleft()
        for call in _calls(nodes):
            name = _callee_name(call)
            if name is None:
                continue
            chain = f"{prefix}>{name}" if prefix else name
            if chain in seen_names:
                continue
            seen_names.add(chain)
            for func in _callees(ev, where, call):
                if _is_triton(func.node):
                    chain = f"{prefix}>triton:{name}" if prefix else f"triton:{name}"
                elif id(func.node) not in visited and depth < MAX_DEPTH:
                    visited.add(id(func.node))
                    inner = Frame(func.path, ev.function_scope(func.node), None, id(func.node))
                    queue.append((inner, func.node.body, chain, depth + 1))
            found.append(chain)
    return found[:MAX_REACHED]


def _calls(nodes: Iterable[ast.AST]) -> Iterator[ast.Call]:
    for statement in nodes:
        for node in walk(statement):
            if isinstance(node, ast.Call):
                yield node


def _callee_name(call: ast.Call) -> str | None:
    func = call.func.value if isinstance(call.func, ast.Subscript) else call.func  # kernel[grid](...)
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name if isinstance(name, str) else None


def _callees(ev: TreeEval, frame: Frame, call: ast.Call) -> list[Func]:
    func = call.func.value if isinstance(call.func, ast.Subscript) else call.func
    ev.cap = (0, 0)
    return [v for v in ev.eval(func, frame) if isinstance(v, Func)]


def _is_triton(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``@triton.jit`` / ``@triton.autotune(...)`` / ``@jit`` from triton."""
    for decorator in node.decorator_list:
        text = ast.unparse(decorator)
        if text.startswith(("triton.", "tl.")) or text in ("jit", "triton_jit"):
            return True
    return False
