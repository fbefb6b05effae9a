"""Every architecture gate of a Python file, and whether it turns the target away.

validate's gate parser finds the conditions on the arch; most of them only
choose between paths (``if major == 10: ... elif major == 12: ...``).  A gate
*excludes* the target when, on the target, it refuses:

* a ``supported_major_versions`` list without the target's major;
* a skip: ``if cond: raise|return None|pytest.skip()``, ``skipif(cond)``,
  ``assert cond``;
* an ``if`` the target fails whose ``elif``/``else`` chain leaves it no path
  (no else, or an else that raises), and whose body is not an early exit with
  the rest of the function as the fallback.

Everything else (a value, an argument, a choice) is recorded as not excluding.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import NamedTuple

from contrib.analysis.gates import KEYWORD, Gate, arch_truth, builders, built_sources, find_gates
from contrib.arch import Arch
from contrib.audit.model import (
    BENCHMARK,
    CAPABILITY,
    JIT,
    PREDICATE,
    RUNTIME,
    TEST,
    AuditGate,
)
from contrib.audit.toolkit import on_toolkit

_PREDICATE_TEXT = re.compile(r"\b_*is_(?:cuda_)?(?:sm_?\d|ampere|ada|hopper|blackwell)", re.I)
_REFUSAL_WORDS = re.compile(
    r"\b(?:not|no|unsupported|exclud\w*|intentional\w*|on purpose|deliberate\w*|skip\w*|"
    r"disabl\w*|lacks?|doesn't|don't|won't|cannot|can't)\b", re.I)  # fmt: skip
_TO_DO = re.compile(r"\b(?:not yet|yet to|todo|fixme|for now|currently|temporar\w*|"
                    r"work in progress|wip|until)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.;!?])\s+")
_COMMENT = re.compile(r"#(.*)$")


def family_pattern(arch: Arch) -> re.Pattern[str]:
    """How a comment names the target's family: ``sm120``, ``SM12x``, ``sm_120a``, ``12.0``."""
    m = arch.major
    return re.compile(
        rf"\bsm_?{m}(?:\d|x)\w*\b|\b{m}\.[0-9x]\b|\bcompute capability {m}\b|\bcc ?{m}\b", re.I
    )


def scope_of(path: str, function: str, text: str) -> str:
    """``test``, ``benchmark`` or ``runtime``: by path, then by test function or skip marker."""
    parts = [p.lower() for p in PurePosixPath(path).parts]
    name = parts[-1]
    if any(p in ("benchmarks", "benchmark", "bench") for p in parts[:-1]) or name.startswith(
        ("bench_", "benchmark_")
    ):
        return BENCHMARK
    if (
        any(p in ("tests", "test", "testing") for p in parts[:-1])
        or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
        or any(part.startswith(("test_", "Test")) for part in function.split("."))
        or "skipif" in text or "pytest.skip" in text
    ):  # fmt: skip
        return TEST
    return RUNTIME


def gates_of_file(path: str, text: str, arch: Arch) -> list[AuditGate]:
    """The audited gates of one Python file (none when it does not parse)."""
    try:
        found, functions = find_gates(path, text)
        module = ast.parse(text, filename=path) if found else None
    except (SyntaxError, ValueError, RecursionError):
        return []
    if module is None:
        return []
    parents = _parents(module)
    lines = text.splitlines()
    local = {n.name: n for n in ast.walk(module)
             if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}  # fmt: skip
    out = []
    for gate in found:
        function = functions.get(gate.function)
        if gate.kind != KEYWORD and on_toolkit(gate.text, function, gate.line):
            continue  # the CUDA toolkit's version, not the GPU's
        node = _node_of(module, gate)
        effect = _effect(gate, node, parents, arch)
        jit = gate.kind == KEYWORD and function is not None
        out.append(AuditGate(
            file=path, line=gate.line, function=gate.function, kind=_kind(gate),
            admits=_admits(gate), excludes_target=effect.excludes, text=gate.text,
            effect=effect.why, message=effect.message,
            scope=scope_of(path, gate.function, gate.text), comment=_comment(lines, gate),
            units=built_sources(functions, gate.function) if jit else [],
            builders=builders(functions, gate.function)[1:] if jit else [],
            calls=_one_level(list(effect.calls), local), index=gate.index,
            parser_kind=gate.kind, end_line=gate.end_line,
        ))  # fmt: skip
    return out


def _kind(gate: Gate) -> str:
    if gate.kind == KEYWORD:
        return JIT
    return PREDICATE if _PREDICATE_TEXT.search(gate.text) else CAPABILITY


def _admits(gate: Gate) -> str:
    if gate.majors is None:
        return "unknown"
    return "majors " + (", ".join(map(str, sorted(gate.majors))) or "none")


def _parents(module: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(module) for child in ast.iter_child_nodes(node)}


def _node_of(module: ast.Module, gate: Gate) -> ast.expr | None:
    """The expression node the gate was found at (outermost on its lines with its text)."""
    text = gate.text.removeprefix("skipped when ")
    for node in ast.walk(module):
        if (isinstance(node, ast.expr) and node.lineno == gate.line
                and node.end_lineno == gate.end_line
                and ast.unparse(node)[:200] == text[:200]):  # fmt: skip
            return node
    return None


class _Effect(NamedTuple):
    """What a gate does to the target: whether it refuses it, why, the functions the
    code it denies the target calls, and what the refusal says (its raise's text)."""

    excludes: bool
    why: str
    calls: tuple[str, ...] = ()
    message: str = ""


def _effect(gate: Gate, node: ast.expr | None, parents: dict[int, ast.AST],
            arch: Arch) -> _Effect:  # fmt: skip
    admitted = None if gate.majors is None else arch.major in gate.majors
    if gate.kind == KEYWORD:
        if admitted is None:
            return _Effect(False, "a supported_major_versions list contrib cannot read")
        return _Effect(not admitted, "the JIT build list " + ("admits" if admitted else "omits")
                       + f" major {arch.major}")  # fmt: skip
    if admitted is None:
        return _Effect(False, "cannot tell what it admits")
    parent = parents.get(id(node)) if node is not None else None
    if gate.kind == "skip-condition":
        if admitted:
            return _Effect(False, "runs on the target")
        how = "skipped" if "skipif" in gate.text or isinstance(parent, ast.Call) else "refused"
        return _Effect(True, f"{how} on the target", _denied_calls(node, parent, parents),
                       _skip_text(node, parent))
    if isinstance(parent, ast.Assert) and parent.test is node:
        if admitted:
            return _Effect(False, "an assert")
        return _Effect(True, "an assert the target fails", message=_text_of(parent.msg))
    if isinstance(parent, ast.If) and parent.test is node:
        return _branch(parent, admitted, arch, _chain_above(parent, parents))
    if isinstance(parent, ast.IfExp) and parent.test is node:
        return _Effect(False, "chooses between two values")
    return _Effect(False, "a value or argument, not a branch" + ("" if admitted else
                                                                 " (false on the target)"))


def _branch(node: ast.If, admitted: bool, arch: Arch, above: list[ast.If]) -> _Effect:
    """An ``if`` (or ``elif``) on the arch; ``above``: the ifs before it in its chain."""
    if admitted:
        return _Effect(False, "the target takes this branch")
    # flashinfer's `if major >= 8: ok = True  elif major == 7 and minor >= 5: ...` never
    # reaches the elif on the target; an elif of an arch chain is one refusal with it.
    if any(arch_truth(earlier.test, arch.major) is True for earlier in above):
        return _Effect(False, "an earlier branch of its if/elif chain serves the target")
    if above and arch_truth(above[-1].test, arch.major) is not None:
        return _Effect(False, f"an elif of the chain at line {above[-1].lineno}, "
                              "which is judged there")  # fmt: skip
    calls = tuple(sorted(set(_called(node.body))))
    for branch in _chain(node.orelse):
        if isinstance(branch, ast.If):
            if arch_truth(branch.test, arch.major) is False:
                continue
            body, which, other = branch.body, "the branch the target takes", "another branch"
        else:
            body, which, other = branch, "the else branch the target takes", "the else branch"
        if _bails(body):
            return _Effect(True, f"{which} refuses it", calls, _raised(body[0]))
        return _Effect(False, f"chooses between paths; {other} serves the target", calls)
    if _exits(node.body):  # no branch takes the target: it goes on after the if
        return _Effect(False, "an early exit; the target takes the code after it", calls)
    return _Effect(True, "the target skips this code and has no other branch", calls)


def _chain_above(node: ast.If, parents: dict[int, ast.AST]) -> list[ast.If]:
    """The ifs before ``node`` in its ``if``/``elif`` chain, nearest first."""
    above = []
    parent = parents.get(id(node))
    while isinstance(parent, ast.If) and parent.orelse == [node]:
        above.append(parent)
        node, parent = parent, parents.get(id(parent))
    return above


def _denied_calls(node: ast.expr | None, parent: ast.AST | None,
                  parents: dict[int, ast.AST]) -> tuple[str, ...]:
    """What a skip keeps from the target: the calls after ``if cond: raise`` in its block
    (``if not is_sm100a_supported(): raise ...`` then ``get_fmha_module()``), or in the
    function a ``skipif(cond)`` marks."""
    if isinstance(parent, ast.If) and parent.test is node:
        block = parents.get(id(parent))
        for name in ("body", "orelse", "finalbody"):
            statements = getattr(block, name, None)
            if isinstance(statements, list) and parent in statements:
                after = statements[statements.index(parent) + 1:]
                return tuple(sorted(set(_called(after))))
        return ()
    marked = parents.get(id(parent)) if isinstance(parent, ast.Call) else None
    while marked is not None and not isinstance(marked, ast.FunctionDef | ast.AsyncFunctionDef):
        marked = parents.get(id(marked))
    return tuple(sorted(set(_called(marked.body)))) if marked is not None else ()


def _skip_text(node: ast.expr | None, parent: ast.AST | None) -> str:
    """The message of a skip: ``if cond: raise X("...")``, ``skipif(cond, reason="...")``."""
    if isinstance(parent, ast.If) and parent.test is node and _bails(parent.body):
        return _raised(parent.body[0])
    if isinstance(parent, ast.Call):
        return next((_text_of(k.value) for k in parent.keywords if k.arg == "reason"), "")
    return ""


def _raised(statement: ast.stmt) -> str:
    exc = statement.exc if isinstance(statement, ast.Raise) else None
    return _text_of(exc.args[0]) if isinstance(exc, ast.Call) and exc.args else ""


def _text_of(node: ast.expr | None) -> str:
    """A message's text: a string, an f-string (``{expr}`` kept as written), or a sum."""
    return " ".join(_raw_text(node).split())[:300]


def _raw_text(node: ast.expr | None) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else
                       "{" + ast.unparse(getattr(v, "value", v)) + "}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _raw_text(node.left) + _raw_text(node.right)
    return ""


def _chain(orelse: list[ast.stmt]) -> Iterator[ast.If | list[ast.stmt]]:
    """The elif/else chain after an if: each elif's If node, then the else body."""
    while orelse:
        if len(orelse) == 1 and isinstance(orelse[0], ast.If):
            yield orelse[0]
            orelse = orelse[0].orelse
        else:
            yield orelse
            return


def _exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Return | ast.Continue | ast.Break)


def _bails(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[0], ast.Raise)


def _called(body: list[ast.stmt]) -> Iterator[str]:
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if isinstance(name, str):
                    yield name


def _one_level(calls: list[str],
               local: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]) -> list[str]:
    """``calls`` plus, for each one defined in the same file, what it calls as ``f>g``."""
    deeper = [f"{name}>{inner}" for name in calls if name in local
              for inner in sorted(set(_called([local[name]]))) if inner != name]  # fmt: skip
    return calls + deeper


def _comment(lines: list[str], gate: Gate) -> str:
    """The ``#`` comments just above the gate and on its lines, joined."""
    picked: list[str] = []
    above = gate.line - 2
    while above >= 0 and lines[above].strip().startswith("#") and gate.line - above <= 6:
        picked.insert(0, lines[above].strip()[1:].strip())
        above -= 1
    for number in range(gate.line - 1, min(gate.end_line, len(lines))):
        match = _COMMENT.search(lines[number])
        if match and "'" not in match.string[: match.start()] and '"' not in lines[number]:
            picked.append(match[1].strip())
    return " ".join(p for p in picked if p)[:300]


def says_intentional(comment: str, arch: Arch) -> bool:
    """Whether ``comment`` says the target's family is left out on purpose (not "not
    yet", "for now", "TODO": work to come is not a choice)."""
    family = family_pattern(arch)
    return any(family.search(sentence) and _REFUSAL_WORDS.search(sentence)
               and not _TO_DO.search(sentence) for sentence in _SENTENCE.split(comment))


__all__ = ["CAPABILITY", "JIT", "PREDICATE", "RUNTIME", "gates_of_file", "says_intentional"]
