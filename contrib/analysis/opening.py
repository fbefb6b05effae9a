"""How an architecture test opens to the target, by the form of its code: one answer
that the audit's class and ``contrib enable``'s edit both take.

A gate turns the target away; what a patch to it does depends on how its test (the
source lines of the gate, read with :mod:`ast`) names architectures:

* :attr:`Opens.LIST`: a literal list of majors or capabilities
  (``supported_major_versions=[9, 10]``, ``@supported_compute_capability([100, 103])``,
  ``cc in [90, 100]``) gains the target's;
* :attr:`Opens.PREDICATE`: a condition over predicates whose names carry an SM number
  (``is_sm90_supported() or _is_sm100_supported``) gains the target's own;
* :attr:`Opens.COMPARISON`: an arch value compared with one value, a major
  (``cap[0] == 10``, ``props.major != 9``) or a capability (``device_arch != 80``,
  ``get_device_capability(dev) == (10, 0)``), is compared with it and the target's
  (``cap[0] in (10, 12)``);
* :attr:`Opens.NAMES_TARGET`: the test names the target's family or the target itself
  (``is_sm12x_supported()``, ``major == 12``, ``cc in [120, 121]``) and turns it away
  all the same: upstream refused the target by name.  A widening adds a
  term true on the target, and the test holds one already; what turns the target away
  is the rest of the condition (``uses_chunked and is_sm12x_supported(...)``): upstream's
  intent or kernel work, which a person drops, not a gate a patch opens;
* :attr:`Opens.NO_FORM`: none of these: the test holds no arch term of its own (it
  tests a value decided elsewhere, ``if deep_gemm_wrapper.DEEPGEMM_SCALE_UE8M0:``, a
  local computed from a decision function), or one no edit widens (an order
  ``major < 12``, the target's own major beside a minor test).

:func:`opening` decides it.  The audit keeps the answer on each excluding gate
(:attr:`~contrib.audit.model.AuditGate.opens`) and calls a gate ``gate-only`` only where
it widens (:meth:`~contrib.audit.model.AuditGate.classed`); ``contrib enable`` edits by it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from enum import StrEnum

from contrib.arch import KNOWN, Arch

# the SM number a predicate's name carries: ``_is_sm100_supported`` -> "100"
SM_DIGITS = re.compile(r"(?<=sm)_?(\d{2,3})(?=[af]?(?:_|\b|$))", re.I)
# what names an architecture value: a major, a capability, an SM version
_ARCHISH = re.compile(r"major|capabilit|\bcc\b|\bcap\b|sm_?version|device_sm|\barch\b|"
                      r"device_arch|compute", re.I)
_MAJORS = range(7, 21)  # a literal that can be a major


class Opens(StrEnum):
    """How a gate's test opens to the target (see the module's words)."""

    LIST = "list"
    PREDICATE = "predicate"
    COMPARISON = "comparison"
    NAMES_TARGET = "names-target"
    NO_FORM = "no-form"

    @property
    def widens(self) -> bool:
        """Whether an edit of the gate's own test admits the target."""
        return self in (Opens.LIST, Opens.PREDICATE, Opens.COMPARISON)


@dataclass(frozen=True)
class Opening:
    """How one gate's test opens (``opens``), and the nodes an edit works on: the list or the
    comparison (``node``), the predicate terms (``terms``); for a refusal by name, the
    term naming the target's family (``node``)."""

    opens: Opens
    node: ast.expr | None = None
    terms: tuple[ast.expr, ...] = ()


class Spans:
    """A module's expressions by the line they start on, and their parents: made once
    per file, indexed when first asked (a file whose gates all admit the target never
    is)."""

    def __init__(self, module: ast.Module, parents: dict[int, ast.AST] | None = None) -> None:
        self.module = module
        self.parents = parents if parents is not None else {
            id(c): n for n in ast.walk(module) for c in ast.iter_child_nodes(n)}
        self._by_line: dict[int, list[ast.expr]] | None = None

    def expressions(self, first: int, last: int) -> list[ast.expr]:
        """The expressions starting on lines ``first``..``last``."""
        if self._by_line is None:
            self._by_line = {}
            for node in ast.walk(self.module):
                if isinstance(node, ast.expr):
                    self._by_line.setdefault(node.lineno, []).append(node)
        return [n for line in range(first, last + 1) for n in self._by_line.get(line, ())]


def opening(spans: Spans, first: int, last: int, arch: Arch, *, jit: bool,
            hops: int = 2) -> Opening:
    """How the excluding test on lines ``first``..``last`` opens to ``arch`` (``jit``: a
    JIT list's keyword).  A term naming the target's family or the target itself makes
    it a refusal by name; a sibling named (``is_sm120_supported`` for sm_121a,
    ``@supported_compute_capability([120])``) is a minor-precise test the target's own
    minor widens.  A test holding no arch term of its own that reads a name the module
    binds once (``if ENABLE_FLASHINFER_GEMM:`` after ``ENABLE_FLASHINFER_GEMM = ... and
    is_sm100_supported()``) opens where the name is bound: the nodes returned stand
    there, and an edit works on them (``hops``: names followed so, at most)."""
    found = _own_opening(spans, first, last, arch, jit)
    if found.opens is not Opens.NO_FORM or hops <= 0:
        return found
    for bound in _bindings(spans, first, last):
        source = opening(spans, bound.lineno, bound.end_lineno or bound.lineno, arch,
                         jit=False, hops=hops - 1)
        if source.opens is not Opens.NO_FORM:
            return source
    return found


def _bindings(spans: Spans, first: int, last: int) -> list[ast.expr]:
    """The values the names read on lines ``first``..``last`` are bound to, where the
    module binds each once (at its top level or in one function), above those lines."""
    read = [n for n in spans.expressions(first, last)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    if not read:
        return []
    names, where = {n.id for n in read}, _function_of(read[0], spans.parents)
    bound: dict[str, list[tuple[ast.expr, ast.AST | None]]] = {}
    for node in ast.walk(spans.module):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in names:
                    bound.setdefault(target.id, []).append(
                        (node.value, _function_of(node, spans.parents)))
    return [value for ((value, home),) in (b for b in bound.values() if len(b) == 1)
            if value.lineno < first and home in (None, where)]


def _function_of(node: ast.AST, parents: dict[int, ast.AST]) -> ast.AST | None:
    """The function holding ``node``, or None at a module's top level."""
    up = parents.get(id(node))
    while up is not None and not isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef):
        up = parents.get(id(up))
    return up


def _own_opening(spans: Spans, first: int, last: int, arch: Arch, jit: bool) -> Opening:
    """:func:`opening` on the test's own lines."""
    nodes = spans.expressions(first, last)
    named = [node for node, how in family_terms(nodes, arch, spans.parents)
             if how != _SIBLING]
    if named:
        return Opening(Opens.NAMES_TARGET, named[0])
    lists = lists_at(nodes)
    terms = predicate_terms(nodes, spans.parents)
    if jit or (lists and not terms):
        if not lists or _holds_target(lists[0], arch):
            return Opening(Opens.NO_FORM)
        return Opening(Opens.LIST, lists[0])
    if terms:
        target = f"{arch.major}{arch.minor}"
        if any(sm_digits(predicate_name(t) or "") == target for t in terms):
            return Opening(Opens.NO_FORM)
        return Opening(Opens.PREDICATE, terms=tuple(terms))
    compared = comparisons(nodes)
    if compared and not _names_target_value(compared[0], arch):
        return Opening(Opens.COMPARISON, compared[0])
    return Opening(Opens.NO_FORM)


def _ordered(nodes: list[ast.expr]) -> list[ast.expr]:
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))


# -- the target's family, named ----------------------------------------------------------

_EXACT, _FAMILY, _SIBLING = "exact", "family", "sibling"


def family_terms(nodes: list[ast.expr], arch: Arch,
                 parents: dict[int, ast.AST]) -> list[tuple[ast.expr, str]]:
    """The terms among ``nodes`` (a test's expressions) naming the target's major, each with how:
    the whole family or the target itself (``is_sm12x_supported``, ``major == 12``,
    ``cc == 120`` for sm_120a) or a sibling of it (``is_sm120_supported`` for sm_121a)."""
    found: list[tuple[ast.expr, str]] = []
    for node in _ordered(nodes):
        parent = parents.get(id(node))
        inner = isinstance(node, ast.Name | ast.Attribute) and (
            isinstance(parent, ast.Attribute)
            or (isinstance(parent, ast.Call) and parent.func is node))  # read with its call
        if isinstance(node, ast.Name | ast.Attribute | ast.Call) and not inner:
            how = _named_family(predicate_name(node) or "", arch)
            if how:
                found.append((node, how))
        for value in _arch_literals(node, parents):
            how = _value_family(value, arch)
            if how:
                found.append((node, how))
    return found


def _named_family(name: str, arch: Arch) -> str:
    """How a name carrying an SM number names the target's family: ``sm12x``, ``sm_12``
    (the family), ``sm121`` (the target), ``sm120`` (a sibling); empty: it does not."""
    match = re.search(rf"(?<![a-z])sm_?{arch.major}(\d?)(x?)[af]?(?![0-9a-z])", name, re.I)
    if match is None or "is_" not in name.lower() and not name.lower().startswith("sm"):
        return ""
    minor = match[1]
    if not minor:
        return _FAMILY
    return _EXACT if int(minor) == arch.minor else _SIBLING


def _value_family(value: tuple[int, int | None], arch: Arch) -> str:
    """How a major (minor None) or a capability names the target's family."""
    major, minor = value
    if major != arch.major:
        return ""
    if minor is None:
        return _FAMILY
    return _EXACT if minor == arch.minor else _SIBLING


def _arch_literals(node: ast.expr, parents: dict[int, ast.AST]) -> list[tuple[int, int | None]]:
    """The majors and capabilities a literal stands for where an arch value meets it:
    compared with one (``cap[0] == 12``, ``cc in [120, 121]``, ``cap == (12, 0)``), or
    an argument of a call or keyword named for one (``supported_major_versions=[9]``)."""
    if not isinstance(node, ast.Constant | ast.List | ast.Tuple | ast.Set):
        return []
    holder = parents.get(id(node))
    if isinstance(holder, ast.List | ast.Tuple | ast.Set):
        return []  # read with its list, or its pair
    if isinstance(holder, ast.keyword):
        archish = _ARCHISH.search(holder.arg or "") is not None
    elif isinstance(holder, ast.Call) and node in holder.args:
        archish = _ARCHISH.search(predicate_name(holder) or "") is not None
    elif isinstance(holder, ast.Compare):
        sides = [holder.left, *holder.comparators]
        archish = any(s is not node and _is_arch_value(s) for s in sides)
    else:
        archish = False
    return _values(node) if archish else []


def _is_pair(node: ast.AST) -> bool:
    """``(10, 0)``: a capability as a major and a minor (``(9, 10)`` is two majors)."""
    if not (isinstance(node, ast.Tuple) and len(node.elts) == 2):
        return False
    major, minor = (_int(e) for e in node.elts)
    return (major, minor) in KNOWN


def _values(node: ast.expr) -> list[tuple[int, int | None]]:
    """``12`` -> (12, None); ``120`` -> (12, 0); ``(12, 0)`` -> (12, 0); a list: each."""
    if _is_pair(node):
        assert isinstance(node, ast.Tuple)
        return [(_int(node.elts[0]) or 0, _int(node.elts[1]))]
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [v for e in node.elts for v in _values(e)]
    value = _int(node)
    if value is None:
        return []
    if value in _MAJORS:
        return [(value, None)]
    return [(value // 10, value % 10)] if _capability(value) else []


def _int(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _capability(value: int) -> bool:
    """``80``, ``100``, ``121``: a major and minor spelled as one number."""
    return (value // 10, value % 10) in KNOWN


def _is_arch_value(node: ast.expr) -> bool:
    """An expression standing for an arch value: a capability's first item, or a name,
    attribute or call named for a major, capability or SM version (not a minor)."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value == 0
    text = ast.unparse(node)
    return _ARCHISH.search(text) is not None and "minor" not in text.lower()


def _holds_target(node: ast.expr, arch: Arch) -> bool:
    """A list of majors holding the target's, or of capabilities holding its own."""
    values = int_values(node) or []
    return (arch.major * 10 + arch.minor in values) if is_capability_list(values) else (
        arch.major in values)


def _names_target_value(node: ast.Compare, arch: Arch) -> bool:
    value = node.comparators[0]
    wanted = (arch.major,) if _int(value) in _MAJORS else (
        arch.major * 10 + arch.minor, (arch.major, arch.minor))
    read = _int(value) if _int(value) is not None else (
        tuple(_int(e) for e in value.elts) if isinstance(value, ast.Tuple) else None)
    return read in wanted


# -- the forms ------------------------------------------------------------------------------

def int_values(node: ast.expr) -> list[int] | None:
    """The ints of a list/tuple/set literal of int constants, else None."""
    if not isinstance(node, ast.List | ast.Tuple | ast.Set):
        return None
    values = [e.value for e in node.elts if isinstance(e, ast.Constant)
              and isinstance(e.value, int) and not isinstance(e.value, bool)]
    return values if len(values) == len(node.elts) else None


def is_capability_list(values: list[int]) -> bool:
    """``[100, 103]`` spells capabilities (major*10+minor); ``[9, 10]`` spells majors."""
    return bool(values) and all(v >= 20 for v in values)


def lists_at(nodes: list[ast.expr]) -> list[ast.expr]:
    """The int-list literals among ``nodes``, outermost first (a capability pair
    ``(10, 0)`` is no list)."""
    return _ordered([n for n in nodes if isinstance(n, ast.List | ast.Tuple | ast.Set)
                     and int_values(n) and not _is_pair(n)])


def comparisons(nodes: list[ast.expr]) -> list[ast.Compare]:
    """The comparisons of an arch value with one literal among ``nodes``:
    a major (``cap[0] == 10``, ``major != 9``, ``props.major == 10``: a capability's first
    item, or a name or attribute called major), or a capability (``device_arch != 80``,
    ``get_device_capability(dev) == (10, 0)``); ``==`` and ``!=`` only (an order admits
    newer archs)."""
    found: list[ast.Compare] = []
    for node in nodes:
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1
                and isinstance(node.ops[0], ast.Eq | ast.NotEq)):
            continue
        value, left = node.comparators[0], node.left
        number = _int(value)
        if number in _MAJORS:
            first_item = (isinstance(left, ast.Subscript) and isinstance(left.slice, ast.Constant)
                          and left.slice.value == 0)
            if first_item or re.search(r"major", ast.unparse(left), re.I):
                found.append(node)
        elif ((number is not None and _capability(number)) or _is_pair(value)) \
                and _is_arch_value(left) and not isinstance(left, ast.Subscript):
            found.append(node)
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def sm_digits(name: str) -> str | None:
    """The SM number a predicate's name carries (``_is_sm100_supported`` -> "100")."""
    match = SM_DIGITS.search(name) if "is_" in name.lower() else None
    return match[1] if match else None


def predicate_name(node: ast.expr) -> str | None:
    """The name a predicate term tests: ``x``, ``f()``, ``mod.f(dev)``, ``mod.x``."""
    inner = node.func if isinstance(node, ast.Call) else node
    if isinstance(inner, ast.Name):
        return inner.id
    if isinstance(inner, ast.Attribute):
        return inner.attr
    return None


def predicate_terms(nodes: list[ast.expr], parents: dict[int, ast.AST]) -> list[ast.expr]:
    """The terms among ``nodes`` whose name carries an SM number."""
    terms = []
    for node in nodes:
        name = predicate_name(node)
        parent = parents.get(id(node))
        callee = isinstance(parent, ast.Call) and parent.func is node  # `f` of `f()`
        inner = isinstance(node, ast.Name | ast.Attribute) and isinstance(parent, ast.Attribute)
        if name and sm_digits(name) and not callee and not inner:
            terms.append(node)
    return _ordered(terms)
