"""What a gate does to the target: refuses it, keeps it on a generic path, or serves it.

* *refuses*: no path for the target (a JIT list or a capability decorator
  without it, a skip, an assert, an ``if`` chain that leaves it nothing or whose
  branch for it raises);
* *falls back*: the target takes the path the oldest GPUs take while admitted
  archs take a specialised one (an ``else``, the code after an early exit, a
  boolean decision function returning false on it).  That keeps the target off
  a fast path: it excludes;
* *dispatches*: the target has its own branch, or shares one with newer archs.

The generic path is recognised by who else takes it: every major below 9
(pre-Hopper GPUs) goes the same way as the target.

The code a gate keeps from the target is read by :mod:`contrib.audit.finding.code`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import NamedTuple

from contrib.analysis.archvalues import Capabilities
from contrib.analysis.gates import (
    DECORATOR,
    KEYWORD,
    Gate,
    Scan,
)
from contrib.analysis.pywalk import callee_name
from contrib.analysis.refusal import refuses, refusing_call
from contrib.arch import Arch, all_majors
from contrib.audit.finding.code import (
    denied_code,
    flag_readers,
    function_of,
    producers,
    readers_after,
    runs_after,
)
from contrib.audit.model import Decision, EffectKind

_GENERIC = frozenset(m for m in all_majors() if m < 9)  # who takes the generic path


# A function named after an arch is a predicate: its callers' branches are the gates.
_ARCH_NAMED = re.compile(r"sm_?\d|sm\d*x|hopper|blackwell|ampere|\bada\b|_ada|arch|capab|"
                         r"family|compute_cap|device_sm|_cc\b|^cc_|major|minor", re.I)


# An arch predicate's own definition (``return cap[0] == 10``) is no decision.
_PREDICATE_VALUE = "an arch predicate's value; its callers' branches are the gates"


class Effect(NamedTuple):
    """What a gate does to the target and why, the code it keeps from the target
    (whose calls decide the class), and what the refusal says (its raise's text);
    ``flag``: the attribute a flag gate sets; ``returned``: the function whose
    returned value an excluding gate is."""

    kind: EffectKind
    why: str
    code: tuple[ast.AST, ...] = ()
    message: str = ""
    flag: str = ""
    returned: str = ""

    @property
    def excludes(self) -> bool:
        return self.kind.excludes

    def decision(self) -> Decision:
        """The decision, without the syntax it was read from."""
        return Decision(self.kind, self.why, self.flag, self.returned)


def effect(found: Scan, gate: Gate, parents: dict[int, ast.AST], arch: Arch) -> Effect:
    """The effect of ``gate`` on ``arch``."""
    admitted = None if gate.admits is None else gate.admits.admits_arch(arch)
    node = gate.node
    if gate.kind in (KEYWORD, DECORATOR):
        return _listed(gate, admitted, arch, parents)
    if admitted is None:
        return Effect(EffectKind.UNREAD, "cannot tell what it admits")
    elsewhere = _sent_elsewhere(found, node, parents, arch)
    if elsewhere is not None:
        return Effect(EffectKind.ELSEWHERE, f"the target never reaches it: the if at line {elsewhere.lineno} "
                             "sends it elsewhere")
    parent = parents.get(id(node)) if node is not None else None
    if gate.kind == "skip-condition":
        sometimes = (arch.major, arch.minor) not in (gate.clear or frozenset()) and bool(gate.clear)
        if admitted and not sometimes:
            return Effect(EffectKind.RUNS, "runs on the target")
        skipped = "skipif" in gate.text or isinstance(parent, ast.Call)
        how = EffectKind.SKIPPED if skipped else EffectKind.REFUSED
        return Effect(how, f"{how} on the target", denied_code(node, parent, parents),
                      _skip_text(node, parent))
    if isinstance(parent, ast.Assert) and parent.test is node:
        if admitted:
            return Effect(EffectKind.ASSERT_HOLDS, "an assert")
        # what the target is kept from: the code after the assert, as after `if not ok: raise`
        return Effect(EffectKind.ASSERT_FAILS, "an assert the target fails",
                      tuple(runs_after(parent, parents)), message=_text_of(parent.msg))
    if isinstance(parent, ast.If) and parent.test is node:
        return _branch(found, parent, arch, _chain_above(parent, parents), parents)
    if isinstance(parent, ast.IfExp) and parent.test is node:
        return _value(gate, arch, "chooses between two values", (parent.body,))
    if isinstance(parent, ast.Return) and node is not None:
        return _returned(gate, arch, function_of(parent, parents))
    flag = _flag_set(parent, node)
    if flag is not None and _ARCH_NAMED.search(flag.attr):
        return Effect(EffectKind.PREDICATE_VALUE, _PREDICATE_VALUE)  # `self.is_sm100 = ...`
    if flag is not None:
        name = ast.unparse(flag)
        value = _value(gate, arch, f"the flag {name} it sets", flag_readers(flag, parents))
        return value._replace(flag=name, why=f"{name}: {value.why}" if value.excludes
                              else value.why)
    return Effect(EffectKind.VALUE, "a value or argument, not a branch" + ("" if admitted else
                                                                " (false on the target)"))


def _listed(gate: Gate, admitted: bool | None, arch: Arch,
            parents: dict[int, ast.AST]) -> Effect:
    what = "JIT build list" if gate.kind == KEYWORD else "capability decorator"
    if admitted is None:
        return Effect(EffectKind.UNREAD, f"a {what} contrib cannot read")
    code: tuple[ast.AST, ...] = ()
    if gate.kind == DECORATOR:
        holder = function_of(gate.node, parents) if gate.node is not None else None
        code = tuple(getattr(holder, "body", ()))
    kind = EffectKind.LISTED if admitted else EffectKind.OMITTED
    # `[120]` omits 12.1 while it lists 12.0: the capability, not the major, is named
    named = (f"{arch.capability}" if gate.admits is not None and gate.admits.splits(arch.major)
             else f"major {arch.major}")
    return Effect(kind, f"the {what} " + ("admits " if admitted else "omits ") + named, code)


def _value(gate: Gate, arch: Arch, why: str, code: tuple[ast.AST, ...]) -> Effect:
    """A boolean the code uses as a value: it falls back when the target gets false
    while the generic path's majors do too and a newer arch gets true."""
    admits = gate.admits or Capabilities()
    if admits.admits_arch(arch):
        return Effect(EffectKind.VALUE_TRUE, why + "; true on the target")
    if admits.majors & _GENERIC or not admits.majors:
        return Effect(EffectKind.VALUE, why)
    return Effect(EffectKind.VALUE_FALLS_BACK, f"falls back: false on the target, true on "
                        f"{admits.text()}", code)


def _flag_set(parent: ast.AST | None, node: ast.AST | None) -> ast.Attribute | None:
    """The attribute ``node`` is assigned to (``self.enable_flashinfer_bmm =
    is_sm100_supported() and ...``): one the object's other methods test, which the
    evaluator does not follow, so set from the GPU it is the decision (a module-level or
    local name is followed to the tests that read it, and those are the gates)."""
    if isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1:
        target: ast.expr = parent.targets[0]
    elif isinstance(parent, ast.AnnAssign) and parent.value is node:
        target = parent.target
    else:
        return None
    return target if isinstance(target, ast.Attribute) else None


def _returned(gate: Gate, arch: Arch, function: ast.AST | None) -> Effect:
    name = getattr(function, "name", "")
    if not name or _ARCH_NAMED.search(name):
        return Effect(EffectKind.PREDICATE_VALUE, _PREDICATE_VALUE)
    # `return _fused_gemm(a, b)`: the call returned is what runs (a value whose arch
    # comes from a refusal below it), so its code stands behind the gate
    runs = (gate.node,) if isinstance(gate.node, ast.Call) else ()
    value = _value(gate, arch, f"the value {name}() returns", runs)
    if not value.excludes:
        return value
    return value._replace(why=f"{value.why}; it is what {name}() returns", returned=name)


def _branch(found: Scan, node: ast.If, arch: Arch, above: list[ast.If],
            parents: dict[int, ast.AST]) -> Effect:
    """An ``if`` (or ``elif``) on the arch; ``above``: the ifs before it in its chain."""
    truth = _truth(found, node.test, arch)
    if truth and node.orelse and _only_says(node.body) and not _passes(node.body) \
            and not _only_says(node.orelse) and not _refusal(node.orelse):
        return Effect(EffectKind.ONLY_SAYS, "the branch the target takes only prints a message; the work "
                            "is in the else", tuple(node.orelse), _said(node.body))
    if truth:
        return Effect(EffectKind.TAKES_BRANCH, "the target takes this branch")
    # flashinfer's `if major >= 8: ok = True  elif major == 7 and minor >= 5: ...` never
    # reaches the elif on the target; an elif of an arch chain is one refusal with it.
    if any(_truth(found, earlier.test, arch) for earlier in above):
        return Effect(EffectKind.EARLIER_BRANCH,
                      "an earlier branch of its if/elif chain serves the target")
    if above and _truth(found, above[-1].test, arch) is not None:
        return Effect(EffectKind.ELIF, f"an elif of the chain at line {above[-1].lineno}, "
                             "which is judged there")
    code = tuple(node.body) + readers_after(node, parents) + producers(node, parents)
    special = _specialised(found, node)
    for branch in _chain(node.orelse):
        if isinstance(branch, ast.If):
            if _truth(found, branch.test, arch) is False:
                continue
            body, which, other = branch.body, "the branch the target takes", "another branch"
            refused = EffectKind.BRANCH_REFUSES
            generic = _truth(found, branch.test, arch) is None
        else:
            body, which, other = branch, "the else branch the target takes", "the else branch"
            refused = EffectKind.ELSE_REFUSES
            generic = True
        if refuses(body):
            return Effect(refused, f"{which} refuses it", code, _raised(body[0]))
        if generic and special:
            return Effect(EffectKind.FALLS_BACK, f"falls back: {other}, the generic path, serves the target "
                                f"while {special} take this one", code)
        return Effect(EffectKind.CHOOSES, f"chooses between paths; {other} serves the target", code)
    if _exits(node.body):  # no branch takes the target: it goes on after the if
        if special:
            return Effect(EffectKind.FALLS_BACK, "falls back: the target takes the generic code after this "
                                f"early exit, {special} this branch", code)
        return Effect(EffectKind.EARLY_EXIT, "an early exit; the target takes the code after it", code)
    kept = _kept_values(node, parents)
    if kept and special:
        return Effect(EffectKind.FALLS_BACK, f"falls back: the target keeps the value {kept} had "
                      f"before this if, {special} set another", code)
    return Effect(EffectKind.SKIPS_CODE, "the target skips this code and has no other branch", code)


_SAYING = frozenset({"print", "info", "warning", "warn", "error", "debug", "log",
                     "warning_once", "info_once", "echo"})


def _only_says(body: list[ast.stmt]) -> bool:
    """A branch that only tells the user something (``print("Skipping ...")``, a log
    line, an ``if`` between two messages): it does no work."""
    def says(statement: ast.stmt) -> bool:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            return callee_name(statement.value) in _SAYING
        if isinstance(statement, ast.If):
            return _only_says(statement.body) and (not statement.orelse
                                                   or _only_says(statement.orelse))
        return isinstance(statement, ast.Pass)
    return bool(body) and all(says(s) for s in body)


def _said(body: list[ast.stmt]) -> str:
    """The first message a branch prints."""
    for statement in body:
        if (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
                and statement.value.args):
            return _text_of(statement.value.args[0])
    return ""


def _specialised(found: Scan, node: ast.If) -> str:
    """What an ``if`` serves when the generic path (pre-Hopper) does not take it, as
    text (``majors 10, 11``); empty when the generic path takes it too."""
    admits = found.admits.get(id(node.test))
    if admits is None or admits.majors & _GENERIC:
        return ""
    return admits.text()


def _truth(found: Scan, test: ast.expr, arch: Arch) -> bool | None:
    """Whether ``test`` can be true on ``arch``; None when the GPU does not decide it."""
    admits = found.admits.get(id(test))
    return None if admits is None else admits.admits_arch(arch)


def _sent_elsewhere(found: Scan, node: ast.AST | None, parents: dict[int, ast.AST],
                    arch: Arch) -> ast.If | None:
    """The enclosing arch ``if`` (within the gate's function) that keeps the target away
    from the gate: the gate sits in its body and its test is never true on the target,
    or in its else and the test is always true there.  That ``if`` is the gate the
    target meets; the one inside it decides nothing for the target."""
    child = node
    holder = parents.get(id(node)) if node is not None else None
    if isinstance(holder, ast.If) and holder.test is node and _is_elif(holder, parents):
        return None  # an elif's own test: its chain is judged by `_branch`
    while holder is not None and not isinstance(holder, ast.FunctionDef | ast.AsyncFunctionDef
                                                | ast.Module | ast.Lambda):
        if isinstance(holder, ast.If) and child is not holder.test:
            admits = found.admits.get(id(holder.test))
            if admits is not None:
                if child in holder.body and not admits.admits_arch(arch):
                    return holder
                if child in holder.orelse and (arch.major, arch.minor) in found.sure.get(
                        id(holder.test), ()):
                    return holder
        child, holder = holder, parents.get(id(holder))
    return None


def _is_elif(node: ast.If, parents: dict[int, ast.AST]) -> bool:
    parent = parents.get(id(node))
    return isinstance(parent, ast.If) and parent.orelse == [node]


def _chain_above(node: ast.If, parents: dict[int, ast.AST]) -> list[ast.If]:
    """The ifs before ``node`` in its ``if``/``elif`` chain, nearest first."""
    above = []
    parent = parents.get(id(node))
    while isinstance(parent, ast.If) and parent.orelse == [node]:
        above.append(parent)
        node, parent = parent, parents.get(id(parent))
    return above


def _skip_text(node: ast.expr | None, parent: ast.AST | None) -> str:
    """The message of a skip: ``if cond: raise X("...")``, ``skipif(cond, reason="...")``."""
    if isinstance(parent, ast.If) and parent.test is node and refuses(parent.body):
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


def _kept_values(node: ast.If, parents: dict[int, ast.AST]) -> str:
    """The names an ``if`` with no else only sets again, each set before it in the same
    block (``fmha_backend = "auto"`` then ``if is_sm100(): fmha_backend = "cutlass"``),
    or the attributes and entries it only sets to constants (``self.proj._interleave =
    True``, sglang's ``overrides["moe_runner_backend"] = "flashinfer_trtllm"``: flags of
    objects made before it, which keep what they had): the target skipping
    it keeps the earlier values and goes on with them.  "" otherwise."""
    set_here: list[str] = []
    flags: list[str] = []  # attributes set to a constant: kept as their objects have them
    todo: list[ast.stmt] = list(node.body)
    while todo:
        statement = todo.pop(0)
        if isinstance(statement, ast.If):
            todo += statement.body + statement.orelse
        elif isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None:
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            constant = isinstance(statement.value, ast.Constant)
            entry = ast.Attribute | ast.Subscript if constant else ast.Attribute
            if not all(isinstance(t, ast.Name | entry) for t in targets):
                return ""
            flags += [ast.unparse(t) for t in targets if constant and isinstance(t, entry)]
            set_here += [ast.unparse(t) for t in targets
                         if not (constant and isinstance(t, entry))]
        elif not isinstance(statement, ast.Pass) and not (
                isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        ) and not _only_says([statement]):  # a log line beside it changes no value
            return ""
    block = getattr(parents.get(id(node)), "body", None)
    if not set_here:
        return ", ".join(dict.fromkeys(flags))
    if not isinstance(block, list) or node not in block:
        return ""
    before = {ast.unparse(t) for s in block[:block.index(node)]
              if isinstance(s, ast.Assign) for t in s.targets}
    return ", ".join(dict.fromkeys(set_here + flags)) if set(set_here) <= before else ""


def _exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Return | ast.Continue | ast.Break)


def _passes(body: list[ast.stmt]) -> bool:
    """A branch of ``pass`` alone: the target goes on, with nothing said."""
    return all(isinstance(s, ast.Pass) for s in body)


def _refusal(body: list[ast.stmt]) -> bool:
    """A branch that refuses in any way: it raises first, or skips or exits anywhere."""
    return refuses(body) or any(isinstance(s, ast.Expr) and refusing_call(s.value) for s in body)
