"""The code a gate keeps from the target, read from the syntax around it.

What runs after a statement (the rest of its block and of the blocks around it),
what reads the names a branch binds, the calls whose results a test reads, what a
flag set on ``self`` decides, what a skip keeps from the target.  Pure syntax: no
evaluation, so the same answer for every GPU.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from contrib.analysis.pywalk import single_assignment, walk


def function_of(node: ast.AST | None, parents: dict[int, ast.AST]) -> ast.AST | None:
    """The function holding ``node`` (``node`` itself when it is one); None at module level."""
    while node is not None and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        node = parents.get(id(node))
    return node


def runs_after(statement: ast.AST, parents: dict[int, ast.AST]) -> list[ast.AST]:
    """The statements that run after ``statement`` completes: the rest of its block,
    then of each enclosing block, up to its function or module."""
    out: list[ast.AST] = []
    child, block = statement, parents.get(id(statement))
    while block is not None:
        for name in ("body", "orelse", "finalbody"):
            statements = getattr(block, name, None)
            if isinstance(statements, list) and child in statements:
                out += statements[statements.index(child) + 1:]
                break
        if isinstance(block, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                      | ast.Module | ast.Lambda):
            break
        child, block = block, parents.get(id(block))
    return out


def producers(node: ast.If, parents: dict[int, ast.AST]) -> tuple[ast.AST, ...]:
    """The calls whose results the test of ``node`` reads through local names, each
    name's nearest binding above it in its function: sglang's ``fused =
    flashinfer_allreduce_residual_rmsnorm(...)`` then ``if fused[0] is not None: return
    fused``; the call decides (its refusal gives ``None`` on the target), so its code
    is the specialised path the admitted archs take."""
    function = function_of(node, parents)
    read = {n.id for n in walk(node.test) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if function is None or not read:
        return ()
    nearest: dict[str, ast.Call] = {}
    for statement in sorted(_own_statements(getattr(function, "body", [])), key=lambda s: s.lineno):
        if statement.lineno >= node.lineno:
            break
        pair = single_assignment(statement)
        if pair and isinstance(pair[0], ast.Name) and pair[0].id in read and isinstance(pair[1], ast.Call):
            nearest[pair[0].id] = pair[1]
    return tuple(nearest.values())


def readers_after(node: ast.If, parents: dict[int, ast.AST]) -> tuple[ast.AST, ...]:
    """The statements after ``node`` (in its block and the blocks around it, up to its
    function) that read a name or ``self`` attribute its body assigns or imports: a branch that
    picks a value (``fmha_backend = "cutlass"`` on SM100) decides what those run
    (``Wrapper(..., backend=fmha_backend)``), and what reads a name assigned from it."""
    names: set[str] = set()
    for inner in _own_statements(node.body):
        if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(inner.name)  # `if ok: def fast(): ...`; its locals are its own
            continue
        if isinstance(inner, ast.Import | ast.ImportFrom):  # `if ok: from x import fast`
            names |= {(a.asname or a.name).split(".")[0] for a in inner.names if a.name != "*"}
        targets = inner.targets if isinstance(inner, ast.Assign) else (
            [inner.target] if isinstance(inner, ast.AnnAssign | ast.AugAssign) else [])
        for target in targets:
            names |= _bound(target)
    if not names:
        return ()

    def reads(n: ast.AST) -> bool:
        return (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names
                or isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
                and isinstance(n.value, ast.Name) and f"{n.value.id}.{n.attr}" in names)

    out: list[ast.AST] = []
    for statement in runs_after(node, parents):
        if not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if any(reads(n) for n in walk(statement)):
                out.append(statement)
                # a value made from it is the choice too: `backend = Backend(backend_str)`,
                # then `if backend.is_cutedsl(): ...`
                derived = statement.targets if isinstance(statement, ast.Assign) else (
                    [statement.target] if isinstance(statement, ast.AnnAssign) else [])
                names |= {t.id for t in derived if isinstance(t, ast.Name)}
            continue
        # A function defined after it reads the name where it runs: the statements
        # holding the read, not the whole function.
        out += [inner for inner in walk(statement) if isinstance(inner, ast.stmt)
                and not isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and any(reads(n) for n in ast.iter_child_nodes(inner)
                        if not isinstance(n, ast.stmt) for n in walk(n))]
    return tuple(out)


def _bound(target: ast.expr) -> set[str]:
    """What assigning to ``target`` binds: a name, ``self.attr``, the names of a tuple
    unpacked, and the container an item is stored in (``cfg["k"] = v``: ``cfg``).  Not
    the ``self`` of ``self.attr = v``: code after it reading other attributes of
    ``self`` reads nothing the branch chose."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Attribute):
        if isinstance(target.value, ast.Name) and target.value.id == "self":
            return {"self." + target.attr}
        return set()
    if isinstance(target, ast.Tuple | ast.List):
        return set().union(*(_bound(e) for e in target.elts))
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        return {target.value.id}
    return set()


def _own_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of ``body`` and of the blocks nested in it, not those of the
    functions and classes it defines (which are yielded, their bodies not)."""
    todo = list(body)
    while todo:
        statement = todo.pop()
        yield statement
        if not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            todo += [c for c in ast.iter_child_nodes(statement) if isinstance(c, ast.stmt)]
            for handler in getattr(statement, "handlers", ()):
                todo += handler.body
            for case in getattr(statement, "cases", ()):
                todo += case.body


def flag_readers(flag: ast.Attribute, parents: dict[int, ast.AST]) -> tuple[ast.AST, ...]:
    """What a flag set on ``self`` decides: the code its class runs where the flag is
    true (an ``if self.flag:`` body, the else of ``if not self.flag:``, the value of
    ``a if self.flag else b``), in every method of the class."""
    if not (isinstance(flag.value, ast.Name) and flag.value.id == "self"):
        return ()
    holder: ast.AST | None = flag
    while holder is not None and not isinstance(holder, ast.ClassDef):
        holder = parents.get(id(holder))
    if holder is None:
        return ()
    code: list[ast.AST] = []
    for node in walk(holder):
        if not isinstance(node, ast.If | ast.IfExp):
            continue
        test, negated = node.test, False
        while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, not negated
        reads = any(isinstance(t, ast.Attribute) and t.attr == flag.attr
                    and isinstance(t.value, ast.Name) and t.value.id == "self"
                    for t in walk(test))
        if reads:
            branch = node.orelse if negated else node.body
            code += branch if isinstance(branch, list) else [branch]
    return tuple(code)


def denied_code(node: ast.expr | None, parent: ast.AST | None,
                 parents: dict[int, ast.AST]) -> tuple[ast.AST, ...]:
    """What a skip keeps from the target: the statements after ``if cond: raise`` in its
    block and in the blocks around it, up to its function (``if backend == "cutlass":
    if not ok: raise ...`` keeps from the target what the function does after the
    check), or the body of the function a ``skipif(cond)`` marks."""
    if isinstance(parent, ast.If) and parent.test is node:
        return tuple(runs_after(parent, parents))
    marked = function_of(parent, parents) if isinstance(parent, ast.Call) else None
    if marked is None and isinstance(parent, ast.Call):
        return _module_tests(parent, parents)
    return tuple(getattr(marked, "body", ()))


def _module_tests(call: ast.Call, parents: dict[int, ast.AST]) -> tuple[ast.AST, ...]:
    """What ``pytestmark = pytest.mark.skipif(...)`` (or a list of marks) keeps from the
    target: every test function and class of the module."""
    node: ast.AST | None = call
    while node is not None and not isinstance(node, ast.Module):
        node = parents.get(id(node))
    body = getattr(node, "body", [])
    return tuple(s for s in body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef
                                                 | ast.ClassDef))
