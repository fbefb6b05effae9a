"""The gates one opening has to widen together: a JIT module and the gates above it.

A JIT list only builds the module; the runtime still refuses the target at the
gate that guards the code loading it.  The chain of one gate is:

* the JIT gates it reaches, as the audit links them (the functions its gated code
  calls, ``helper>get_x_module`` one level down, ``get_`` for ``gen_``);
* for each JIT gate, the audit's excluding runtime gates whose code calls the
  module's ``gen_``/``get_`` function;
* the requirement checks of the backend that loads the module, read from the
  tree: a call of the module's getter under ``if "cublaslt" in backends:`` whose
  key maps, in a dict of the same file, to a function whose decorator holds an
  arch list (flashinfer's ``backend_requirement({"cublaslt":
  _cublaslt_mm_bf16_requirement})`` over ``@supported_compute_capability([100,
  103])``): the audit's own gate at that decorator.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from contrib.analysis.pyparse import parse_python
from contrib.analysis.tree import SourceTree
from contrib.arch import Arch
from contrib.audit.model import JIT, RUNTIME, AuditGate

_WRAPPER_SIZE = 6  # statements: a getter that only builds and loads the module


def module_names(function: str) -> set[str]:
    """``gen_x_module`` and the ``get_x_module`` that loads it."""
    last = function.rsplit(".", 1)[-1]
    return {last, last.replace("gen_", "get_", 1), last.replace("get_", "gen_", 1)}


def called(gate: AuditGate) -> set[str]:
    """The function names the gate's code calls, at either level the audit lists."""
    return {call[-1] for call in gate.calls if call}


def gate_chain(gates: list[AuditGate], tree: SourceTree, start: AuditGate,
               arch: Arch) -> list[AuditGate]:
    """``start`` and every gate that must open with it, ``start`` first."""
    jits = [start] if start.kind == JIT else [
        g for g in gates if g.kind == JIT and g.excludes_target and module_names(g.function)
        & called(start)]
    found = [start]
    for jit in jits:
        names = module_names(jit.function)
        found += [jit]
        found += [g for g in gates if g.scope == RUNTIME and g.kind != JIT
                  and g.excludes_target and names & called(g)]
        found += list(requirements(gates, tree, names))
    unique: dict[tuple[str, int], AuditGate] = {}
    for gate in found:
        unique.setdefault((gate.file, gate.line), gate)
    return list(unique.values())


def requirements(gates: list[AuditGate], tree: SourceTree, names: set[str]) -> Iterator[AuditGate]:
    """The arch-list decorators of the backend requirements guarding calls of ``names``."""
    needles = set(names)
    files = [(p, t) for p in tree.paths() if p.endswith(".py")
             and (t := tree.read_text(p) or "") and any(n in t for n in names)]
    for path, text in files:
        module = parse_python(path, text)
        if not isinstance(module, ast.Module):
            continue
        parents = {id(c): n for n in ast.walk(module) for c in ast.iter_child_nodes(n)}
        functions = {n.name: n for n in module.body if isinstance(n, ast.FunctionDef)}
        needles |= _wrappers(functions.values(), needles)
        for key in _guard_keys(module, parents, needles):
            for required in _mapped(module, key, functions):
                yield from _decorator_gates(gates, path, required)


def _wrappers(functions: Iterable[ast.FunctionDef], names: set[str]) -> set[str]:
    """Small ``get_`` functions of the file that call one of ``names`` (the loaders)."""
    return {f.name for f in functions if f.name.startswith("get_")
            and len(f.body) <= _WRAPPER_SIZE and names & set(_calls(f))}


def _calls(node: ast.AST) -> Iterator[str]:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
            func = inner.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if isinstance(name, str):
                yield name


def _guard_keys(module: ast.Module, parents: dict[int, ast.AST],
                names: set[str]) -> set[str]:
    """The string keys of ``if "key" in ...:`` tests above a call of ``names``."""
    keys = set()
    for node in ast.walk(module):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)) not in names:
            continue
        above = parents.get(id(node))
        while above is not None:
            test = above.test if isinstance(above, ast.If) else None
            if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Constant)
                    and isinstance(test.left.value, str)
                    and isinstance(test.ops[0], ast.In)):
                keys.add(test.left.value)
            above = parents.get(id(above))
    return keys


def _mapped(module: ast.Module, key: str,
            functions: dict[str, ast.FunctionDef]) -> Iterator[ast.FunctionDef]:
    """Functions of the file that a dict literal maps ``key`` to."""
    for node in ast.walk(module):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if (isinstance(k, ast.Constant) and k.value == key
                        and isinstance(v, ast.Name) and v.id in functions):
                    yield functions[v.id]


def _decorator_gates(gates: list[AuditGate], path: str,
                     function: ast.FunctionDef) -> Iterator[AuditGate]:
    """The audit's excluding gate at each decorator of ``function`` (the audit reads
    capability decorators; a decorator it does not call a gate is none)."""
    lines = {d.lineno for d in function.decorator_list}
    yield from (g for g in gates if g.file == path and g.line in lines and g.excludes_target)

