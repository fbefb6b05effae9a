"""Architecture gates in Python: which GPU majors a piece of code admits.

Three shapes of gate, all found with :mod:`ast` (no import, no execution):

* ``get_nvcc_flags_list(supported_major_versions=[9, 10])``: the literal list;
* boolean expressions over predicate names (``is_sm90_supported()``,
  ``_is_sm100_supported``, ``is_sm12x``, ``is_hopper``, ``is_blackwell``);
* comparisons on compute capability (``major >= 9``, ``cc[0] in [9, 10]``,
  ``torch.cuda.get_device_capability() >= (9, 0)``, ``get_device_sm() >= 90``).

A boolean gate is evaluated for every major version contrib knows; terms that
say nothing about the architecture (``server_args.enable_x``) do not constrain it.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from contrib.analysis.includes import CUDA_SUFFIXES
from contrib.arch import Arch, all_majors
from contrib.record.finding import ERROR, INFO, Finding

KEYWORD = "supported_major_versions"
_SM_NAME = re.compile(r"^_*is_(?:cuda_)?sm_?(\d{1,3})(x?)[af]?(?:_supported|_available)?$", re.I)
_FAMILY = {"ampere": {8}, "ada": {8}, "hopper": {9}, "blackwell": {10}, "blackwell_dc": {10}}
_FAMILY_NAME = re.compile(
    r"^_*is_(ampere|ada|hopper|blackwell|blackwell_dc)(?:_supported|_available)?$", re.I
)
_MAJORS = tuple(all_majors())
_CAP_CALLS = {
    "get_device_capability",
    "get_compute_capability",
    "get_cuda_capability",
    "device_capability",
}
_SM_CALLS = {"get_device_sm", "get_sm_version", "get_cuda_arch", "get_sm", "sm_version"}
_MAJOR_NAMES = re.compile(r"^_*(?:cc_|sm_|device_|gpu_|compute_|capability_|cuda_)?major$", re.I)
_CAP_NAMES = re.compile(
    r"^_*(?:device_|compute_|cuda_|gpu_)?(?:capability|cc|compute_cap|sm_version|sm)$", re.I
)


@dataclass(frozen=True)
class Gate:
    """One gate in one version of a file."""

    file: str
    line: int
    end_line: int
    function: str  # qualified name of the enclosing function, "<module>" at top level
    kind: str  # "supported_major_versions" or "condition"
    text: str
    majors: frozenset[int] | None  # None: present but not a literal we can evaluate
    index: int = 0  # ordinal among gates of the same function and kind

    @property
    def key(self) -> tuple[str, str, int]:
        """How a gate is paired across the patch: function, kind, ordinal."""
        return (self.function, self.kind, self.index)


@dataclass
class TouchedGate:
    """A gate the patch changed (or added), before and after."""

    after: Gate
    before: Gate | None
    sources: list[str] = field(default_factory=list)  # file names listed in its function
    builders: list[str] = field(default_factory=list)  # its function and the ones it builds through

    @property
    def majors_before(self) -> frozenset[int]:
        """Majors admitted before the patch (empty for a new gate)."""
        return self.before.majors or frozenset() if self.before else frozenset()

    def admits(self, arch: Arch) -> bool | None:
        """Whether the patched gate admits ``arch`` (None: cannot tell)."""
        return None if self.after.majors is None else arch.major in self.after.majors

    def to_dict(self, arch: Arch) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "location": f"{self.after.file}:{self.after.line}",
            "function": self.after.function,
            "kind": self.after.kind,
            "text": self.after.text,
            "majors_before": sorted(self.majors_before) if self.before else None,
            "majors_after": None if self.after.majors is None else sorted(self.after.majors),
            "admits_target": self.admits(arch),
            "sources": self.sources,
        }


def _name_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


@functools.lru_cache(maxsize=4096)
def _predicate_majors(name: str) -> frozenset[int] | None:
    """``is_sm90_supported`` -> {9}; ``is_sm12x`` -> {12}; ``is_hopper`` -> {9}."""
    family = _FAMILY_NAME.match(name)
    if family:
        return frozenset(_FAMILY[family[1].lower()])
    match = _SM_NAME.match(name)
    if match is None:
        return None
    digits, family_x = match.groups()
    if family_x:
        return frozenset({int(digits)})
    return frozenset({int(digits[:-1])}) if len(digits) >= 2 else None


def _cap_kind(node: ast.expr) -> str | None:
    """How a capability operand compares: "major", "tuple" or "sm" (major*10+minor)."""
    if isinstance(node, ast.Subscript):
        base = node.value
        index = node.slice
        if _cap_kind(base) == "tuple" and isinstance(index, ast.Constant) and index.value == 0:
            return "major"
        return None
    if isinstance(node, ast.Call):
        name = _name_of(node.func)
        return "tuple" if name in _CAP_CALLS else "sm" if name in _SM_CALLS else None
    name = _name_of(node)
    if name is None or not isinstance(getattr(node, "ctx", None), ast.Load):
        return None
    if _MAJOR_NAMES.match(name):
        return "major"
    return "cap" if _CAP_NAMES.match(name) else None


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _value_for(kind: str, major: int, const: object, container: bool) -> object:
    """The operand's value on a GPU of ``major``, shaped like the constant it meets."""
    if kind == "major":
        return major
    if kind == "tuple":
        return (major, 0)
    if kind == "sm":
        return major * 10
    # A name like `capability`: its shape follows the constant it is compared with.
    sample = (
        next(iter(const), None) if container and isinstance(const, list | tuple | set) else const
    )
    if isinstance(sample, tuple):
        return (major, 0)
    return major * 10 if isinstance(sample, int) and sample >= 20 else major


_OPS: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}  # fmt: skip


def _compare(node: ast.Compare, major: int) -> bool | None:
    operands = [node.left, *node.comparators]
    result: bool | None = None
    for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
        lk, rk = _cap_kind(left), _cap_kind(right)
        if (lk is None) == (rk is None) or type(op) not in _OPS:
            continue
        const = _literal(right if lk else left)
        if const is None:
            continue
        container = isinstance(op, ast.In | ast.NotIn)
        value = _value_for(lk or rk or "", major, const, container)
        try:
            outcome = bool(_OPS[type(op)](value, const) if lk else _OPS[type(op)](const, value))
        except TypeError:
            continue
        result = outcome if result is None else result and outcome
    return result


def arch_truth(node: ast.expr, major: int) -> bool | None:
    """Truth of ``node`` on a GPU of ``major``; None when it says nothing about the arch."""
    if isinstance(node, ast.BoolOp):
        values = [v for v in (arch_truth(x, major) for x in node.values) if v is not None]
        if not values:
            return None
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = arch_truth(node.operand, major)
        return None if inner is None else not inner
    if isinstance(node, ast.Compare):
        return _compare(node, major)
    target = node.func if isinstance(node, ast.Call) else node
    name = _name_of(target) if isinstance(target, ast.Name | ast.Attribute) else None
    if name is None or not isinstance(getattr(target, "ctx", ast.Load()), ast.Load):
        return None
    majors = _predicate_majors(name)
    return None if majors is None else major in majors


def admitted_majors(node: ast.expr) -> frozenset[int] | None:
    """The majors a boolean gate admits, or None if it does not depend on the arch."""
    majors = _MAJORS
    # Whether a term speaks of the arch does not depend on the major: one probe
    # answers "no" for the (vast) majority of expressions of a whole tree.
    if arch_truth(node, majors[-1]) is None:
        return None
    truths = {m: arch_truth(node, m) for m in majors}
    return frozenset(m for m, t in truths.items() if t)


class _Finder(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.scope: list[str] = []
        self.gates: list[Gate] = []
        self.functions: dict[str, ast.AST] = {}
        self.skips: set[int] = set()  # ids of conditions under which code is *skipped*

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        if not isinstance(node, ast.ClassDef):
            self.functions[".".join(self.scope)] = node
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def _add(self, node: ast.expr, kind: str, text: str, majors: frozenset[int] | None) -> None:
        function = ".".join(self.scope) or "<module>"
        index = sum(1 for g in self.gates if g.function == function and g.kind == kind)
        end = node.end_lineno or node.lineno
        self.gates.append(
            Gate(self.path, node.lineno, end, function, kind, text[:200], majors, index)
        )

    def visit_If(self, node: ast.If) -> None:
        if node.body and _bails_out(node.body[0]):
            self.skips.add(id(node.test))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if _name_of(node.func) == "skipif" and node.args:
            self.skips.add(id(node.args[0]))
        for keyword in node.keywords:
            if keyword.arg == KEYWORD:
                value = _literal(keyword.value)
                majors = None
                if isinstance(value, list | tuple | set) and all(isinstance(v, int) for v in value):
                    majors = frozenset(int(v) for v in value)
                self._add(node, KEYWORD, ast.unparse(node), majors)
        self._expression(node)

    def generic_visit(self, node: ast.AST) -> None:
        is_gate = (
            isinstance(node, ast.expr) and not isinstance(node, ast.Call) and self._expression(node)
        )
        if is_gate:
            return
        super().generic_visit(node)

    def _expression(self, node: ast.expr) -> bool:
        majors = admitted_majors(node)
        if majors is None:
            if isinstance(node, ast.Call):
                super().generic_visit(node)
            return False
        if id(node) in self.skips:
            # `skipif(cond)` / `if cond: raise|skip|return`: the code runs where cond is false.
            majors = frozenset(set(all_majors()) - majors)
            self._add(node, "skip-condition", "skipped when " + ast.unparse(node), majors)
        else:
            self._add(node, "condition", ast.unparse(node), majors)
        return True


def _bails_out(statement: ast.stmt) -> bool:
    """``raise``, a bare ``return``/``return False``, or ``skip()``/``exit()``: the branch gives up."""
    if isinstance(statement, ast.Raise):
        return True
    if isinstance(statement, ast.Return):
        value = statement.value
        return value is None or (isinstance(value, ast.Constant) and value.value in (None, False))
    call = statement.value if isinstance(statement, ast.Expr) else None
    return isinstance(call, ast.Call) and _name_of(call.func) in ("skip", "exit", "xfail")


def find_gates(path: str, text: str) -> tuple[list[Gate], dict[str, ast.AST]]:
    """All gates in a Python file and its functions by qualified name (SyntaxError propagates)."""
    finder = _Finder(path)
    finder.visit(ast.parse(text, filename=path))
    return finder.gates, finder.functions


def source_literals(function: ast.AST) -> list[str]:
    """String literals naming C/C++/CUDA files inside ``function``, in order, unique."""
    names: list[str] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value.strip()
            if value.lower().endswith(CUDA_SUFFIXES) and "\n" not in value and value not in names:
                names.append(value)
    return names


def builders(functions: dict[str, ast.AST], function: str) -> list[str]:
    """``function`` and the module-level functions of its file it calls that name CUDA
    sources: what a JIT gate's function builds through.  flashinfer's
    ``gen_cutlass_fused_moe_sm100_module`` gates its flags and hands them to
    ``gen_cutlass_fused_moe_module``, which lists the units; ``_gen_module`` of
    selective_state_update likewise.  One call down, as the calls are written."""
    node = functions.get(function)
    found = [function]
    if node is None:
        return found
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
            callee = functions.get(call.func.id)
            if (callee is not None and call.func.id not in found
                    and source_literals(callee)):  # fmt: skip
                found.append(call.func.id)
    return found


def built_sources(functions: dict[str, ast.AST], function: str) -> list[str]:
    """CUDA file names a gate's function builds, its own and its builders', in order."""
    names: list[str] = []
    for name in builders(functions, function):
        node = functions.get(name)
        names += [n for n in source_literals(node) if n not in names] if node else []
    return names


def touched_gates(
    path: str, before: str | None, after: str, changed: Iterable[int]
) -> list[TouchedGate]:
    """Gates in ``after`` whose lines intersect ``changed``, paired with their old form."""
    changed = set(changed)
    gates_after, functions = find_gates(path, after)
    old = {g.key: g for g in find_gates(path, before)[0]} if before is not None else {}
    touched = []
    for gate in gates_after:
        if not changed & set(range(gate.line, gate.end_line + 1)):
            continue
        touched.append(TouchedGate(gate, old.get(gate.key),
                                   built_sources(functions, gate.function),
                                   builders(functions, gate.function)))
    return touched


def gate_findings(touched: Iterable[TouchedGate], arch: Arch) -> list[Finding]:
    """Error for each touched gate that still rejects ``arch``; info for what each admits."""
    findings = []
    for gate in touched:
        after = gate.after
        before = sorted(gate.majors_before) if gate.before else "new gate"
        now = "unknown" if after.majors is None else sorted(after.majors)
        where = f"in {after.function}: `{after.text}` admits majors {before} -> {now}"
        admits = gate.admits(arch)
        if admits is False:
            findings.append(
                Finding(
                    "gate-rejects-target",
                    ERROR,
                    after.file,
                    after.line,
                    f"{where}; still rejects {arch.name} (major {arch.major})",
                )
            )
        elif admits is None:
            findings.append(
                Finding(
                    "gate-unknown",
                    INFO,
                    after.file,
                    after.line,
                    f"{where}; not a literal, cannot tell if it admits {arch.name}",
                )
            )
        else:
            findings.append(
                Finding("gate", INFO, after.file, after.line, f"{where}; admits {arch.name}")
            )
    return findings
