"""The CUDA sources a JIT build function names: the units and templates it compiles.

flashinfer's ``gen_cutlass_fused_moe_sm100_module`` gates its flags and hands them
to ``gen_cutlass_fused_moe_module``, which lists ``fused_moe_sm100_binding.cu``
and the templates it renders.  What a gate's function builds is read from its
string literals (f-strings expanded over the literal lists it loops over and the
module's tables of strings) and from those of the functions it builds through,
one call down; a unit added only under an ``if`` for another arch is that arch's
build's.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from contrib.analysis.hostarch import written_for
from contrib.analysis.includes import CUDA_SUFFIXES
from contrib.analysis.pywalk import single_assignment, walk

TEMPLATE_SUFFIXES = (".jinja", ".j2")  # rendered into generated units at build time


def source_literals(function: ast.AST, major: int | None = None,
                    constants: Mapping[str, list[str]] | None = None) -> list[str]:
    """The C/C++/CUDA files ``function`` names, in order, unique: string literals, and
    f-strings whose fields are known (``f"{prefix}_sm100_kernel_inst.jinja"`` for each
    ``prefix`` of a literal list it loops over; ``f"{_STEMS[variant]}_binding.cu"`` for
    each value of a module-level table of literals in ``constants``), the files of such a
    table it reads by name (flashinfer's ``[_copy(f) for f in _SOURCE_FILES]``): the templates it
    renders into generated units, whose ``#include`` closure is what those units
    compile, and the units themselves.  A field nothing here knows is a wildcard
    (``f"cake_router_gemm_m{tokens}_k{hidden}_device.cu"``: every such unit of the tree,
    see :func:`contrib.analysis.includes.find_units`) when a stem of its own starts the
    name.  For a build for ``major``: a unit named for other archs (SM 9.0 or newer)
    that the builder adds only under an ``if`` is that arch's build's (flashinfer's xqa
    appends ``xqa/mha_sm90.cu`` when ``has_sm90``), not this one's."""
    names: list[str] = []
    loops = {**(constants or {}), **_literal_loops(function)}
    elsewhere = _conditional(function) if major is not None else set()
    nodes = walk(function)
    parts = {id(p) for n in nodes if isinstance(n, ast.JoinedStr) for p in n.values}
    for node in nodes:
        if id(node) in parts:  # a piece of an f-string: the f-string names the file
            continue
        if id(node) in elsewhere and isinstance(node, ast.Constant) and isinstance(node.value, str):
            written = written_for([node.value.strip()])
            if written and major not in written and min(written) >= 9:
                continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            values = [node.value.strip()]
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and constants \
                and node.id in constants:  # a module table of units: ``for f in _SOURCE_FILES``
            values = [v.strip() for v in constants[node.id]]
        elif isinstance(node, ast.JoinedStr):
            values = [v for v in _expanded(node, loops) if _named_unit(v)]
        else:
            continue
        for value in values:
            if (value.lower().endswith(CUDA_SUFFIXES + TEMPLATE_SUFFIXES) and "\n" not in value
                    and value not in names):
                names.append(value)
    return names


WILDCARD = "*"
_STEM = 6  # the fewest characters a wildcard name's own stem has


def _named_unit(value: str) -> bool:
    """An f-string's text that names a file: no wildcard, or a stem of at least
    :data:`_STEM` characters before the first (``*_binding.cu`` names nothing)."""
    if WILDCARD not in value:
        return True
    stem = value.split(WILDCARD, 1)[0].rsplit("/", 1)[-1]
    return len(stem) >= _STEM and any(c.isalpha() for c in stem)


def module_strings(module: ast.AST) -> dict[str, list[str]]:
    """The module-level names bound to string literals, lists, tuples or sets of them,
    or tables whose values are all string literals: each name's strings."""
    found: dict[str, list[str]] = {}
    for statement in getattr(module, "body", []):
        pair = single_assignment(statement)
        if pair is None:
            continue
        target, value = pair
        if not isinstance(target, ast.Name):
            continue
        items = (value.values if isinstance(value, ast.Dict)
                 else value.elts if isinstance(value, ast.List | ast.Tuple | ast.Set)
                 else [value])
        strings = [e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if strings and len(strings) == len(items):
            found[target.id] = strings
    return found


def _conditional(function: ast.AST) -> set[int]:
    """The nodes of ``function`` inside a branch of an ``if`` (by id)."""
    inside: set[int] = set()
    for node in walk(function):
        if isinstance(node, ast.If):
            inside |= {id(n) for statement in (*node.body, *node.orelse) for n in ast.walk(statement)}
    return inside


def _literal_loops(function: ast.AST) -> dict[str, list[str]]:
    """``for name in ["a", "b"]`` in ``function``: each loop name's literal strings."""
    loops: dict[str, list[str]] = {}
    for node in walk(function):
        if (isinstance(node, ast.For) and isinstance(node.target, ast.Name)
                and isinstance(node.iter, ast.List | ast.Tuple)):
            items = [e.value for e in node.iter.elts
                     if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if items and len(items) == len(node.iter.elts):
                loops.setdefault(node.target.id, []).extend(items)
    return loops


def _expanded(node: ast.JoinedStr, loops: Mapping[str, list[str]]) -> list[str]:
    """An f-string's texts: a field that is a name of ``loops`` (or a subscript of one)
    takes each of its strings; any other field is a :data:`WILDCARD`."""
    texts = [""]
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            texts = [t + part.value for t in texts]
            continue
        if not isinstance(part, ast.FormattedValue) or part.format_spec is not None:
            return []
        value = part.value.value if isinstance(part.value, ast.Subscript) else part.value
        known = loops.get(value.id) if isinstance(value, ast.Name) else None
        texts = [t + v for t in texts for v in known] if known else [t + WILDCARD for t in texts]
    return texts


def builders(functions: dict[str, ast.AST], function: str,
             constants: Mapping[str, list[str]] | None = None) -> list[str]:
    """``function`` and the module-level functions of its file it calls that name CUDA
    sources: what a JIT gate's function builds through.  flashinfer's
    ``gen_cutlass_fused_moe_sm100_module`` gates its flags and hands them to
    ``gen_cutlass_fused_moe_module``, which lists the units; ``_gen_module`` of
    selective_state_update likewise.  One call down, as the calls are written."""
    node = functions.get(function)
    found = [function]
    if node is None:
        return found
    for call in walk(node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
            callee = functions.get(call.func.id)
            if (callee is not None and call.func.id not in found
                    and source_literals(callee, None, constants)):
                found.append(call.func.id)
    return found


def built_sources(functions: dict[str, ast.AST], function: str, major: int | None = None,
                  constants: Mapping[str, list[str]] | None = None) -> list[str]:
    """CUDA file names a gate's function builds, its own and its builders', in order
    (for a build for ``major``, and the module tables ``constants``: see
    :func:`source_literals`)."""
    names: list[str] = []
    for name in builders(functions, function, constants):
        node = functions.get(name)
        names += [n for n in source_literals(node, major, constants) if n not in names] if node else []
    return names
