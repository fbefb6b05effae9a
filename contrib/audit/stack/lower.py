"""The upstream below at the version the upper pins: its tree, its audit, its package.

:class:`Lower` answers for one lower tree what a call of its public API
(``flashinfer.comm.trtllm_allreduce_fusion``) reaches: the function it names (re-exports
through ``__init__`` followed by the arch evaluator), the lower gates on the way
(:meth:`Lower.below`), and, where no gate stands on the way, the class of what it runs
(:meth:`Lower.behind`).
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from contrib.analysis.archtoolkit import ASSUMED, Cuda
from contrib.analysis.archvalues import Frame, Func, ModRef, ordered, truth_of
from contrib.analysis.includes import IncludeResolver
from contrib.analysis.jittarget import JitReading, JitTarget
from contrib.analysis.reach.backends import (
    Key,
    decorator_keys,
    named_choice,
    parameter_key,
)
from contrib.analysis.reach.endpoints import Endpoint
from contrib.analysis.reach.objects import classes_of
from contrib.analysis.reach.tree import PyTree
from contrib.analysis.reach.walk import reach
from contrib.analysis.tree import GitTree
from contrib.arch import Arch
from contrib.audit.chains import Fix
from contrib.audit.classing.behind import Behind, Verdict
from contrib.audit.engine import TreeAudit
from contrib.audit.model import JIT, RUNTIME, AuditGate, Call
from contrib.audit.stack.reading import Function
from contrib.audit.stack.requirements import (
    Dispatch,
    Way,
    decorator_lines,
    dispatch_frame,
    ways,
)
from contrib.audit.stack.skips import Skips
from contrib.audit.stack.walk import MAX_DEPTH

_RUN_ON_USE = ("__init__", "__call__")  # private methods constructing or calling runs
MAX_BELOW = 400  # functions of the lower tree followed from one entry point
_SKIP_ROOTS = frozenset({"tests", "test", "benchmarks", "docs", "examples", "scripts"})


@dataclass
class Lower:
    """The lower upstream at the tag the upper pins: its tree, its audit, its package."""

    name: str
    tag: str
    commit: str
    audit: TreeAudit
    tree: GitTree
    arch: Arch | None = None  # the target the audit was made for: a parameter dispatch on it
    cuda: Cuda = ASSUMED  # the toolkit its JIT builds with
    ev: PyTree = field(init=False)
    roots: dict[str, str] = field(init=False)  # top-level package -> folder prefix
    _below: dict[tuple[str, tuple[tuple[str, str], ...], bool],
                 list[tuple[AuditGate, Call]]] = field(default_factory=dict)
    _targets: dict[tuple[str, tuple[tuple[str, str], ...]], list[Endpoint]] = field(
        default_factory=dict)
    _behind: Behind | None = None
    _at: dict[tuple[str, int], AuditGate] | None = None
    _jit: JitReading | None = None
    # (file, function, arch) -> the first release admitting the target there (chain.py)
    fixes: dict[tuple[str, str, str], Fix | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        paths = [p for p in self.tree.paths() if p.endswith(".py")]
        self.ev = PyTree(self.tree.read_text, paths)
        self._paths = set(paths)
        self.roots = package_roots(paths)
        self.skips = Skips(self.audit.gates)
        self._held: dict[str, list[AuditGate]] = {}
        self._owners: dict[str, dict[int, ast.ClassDef]] = {}  # per file: function -> class
        self._checks: set[int] = set()  # requirement functions a decorator runs (_ways)
        for gate in self.audit.gates:
            if gate.scope == RUNTIME:
                self._held.setdefault(gate.file, []).append(gate)

    def jit_target(self, arch: Arch) -> JitTarget | None:
        """What the tree's JIT builds for ``arch`` with :attr:`cuda`
        (:class:`~contrib.analysis.jittarget.JitReading`), read once."""
        if self._jit is None:
            self._jit = JitReading(self.tree.read_text, sorted(self._paths))
        return self._jit.target(arch, self.cuda)

    def gate_at(self, file: str, line: int) -> AuditGate | None:
        """The lower audit's gate at ``file``:``line`` (what an upper gate's ``below``
        entry names)."""
        if self._at is None:
            self._at = {(g.file, g.line): g for g in self.audit.gates}
        return self._at.get((file, line))

    def behind(self, dotted: str, arch: Arch, keys: tuple[tuple[str, str], ...] = ()) -> Verdict | None:
        """The class of what a call of ``dotted`` reaches in the lower tree when no gate
        of it stands on the path (``flashinfer.BatchPrefillWithRaggedKVCacheWrapper``:
        a class, whose methods build the JIT modules): judged as a gate of the lower
        tree is (:class:`~contrib.audit.behind.Behind`), on the target's branches."""
        if self._behind is None:
            jit = {(g.file, g.function): g for g in self.audit.gates if g.kind == JIT}
            self._behind = Behind(self.tree, IncludeResolver(self.tree), arch, jit)
        if (dotted, keys) not in self._targets:
            targets: list[Endpoint] = []
            for func in self.resolve(dotted, methods=True):
                frame = Frame(func.path, self.ev.function_scope(func.node), None, id(func.node))
                found = reach(self.ev, frame, list(func.node.body), (arch.major, arch.minor),
                              self._key(func, keys))
                targets += [t for t in found.endpoints if t not in targets]
            self._targets[(dotted, keys)] = targets
        return self._behind.of(self._targets[(dotted, keys)])

    def refused_every_way(self, dotted: str, arch: Arch,
                          keys: tuple[tuple[str, str], ...] = ()) -> Verdict | None:
        """The verdict of what a call of ``dotted`` reaches when every way it can take
        ends at a C/C++ host check raising on the target (flashinfer's
        ``trtllm_ragged_attention_deepseek``: one launcher, refusing SM120); None when
        one way may serve it or cannot be read (a wrapper whose other backends build
        modules for it is no crash, whichever its trtllm-gen backend refuses)."""
        if self.behind(dotted, arch, keys) is None or self._behind is None:
            return None
        ways = self._targets[(dotted, keys)]
        verdicts = [self._behind.of([t]) for t in ways]
        if not ways or any(v is None or v.refused is None for v in verdicts):
            return None
        return verdicts[0]

    def resolve(self, dotted: str, methods: bool = False) -> list[Func]:
        """The functions of the tree that ``dotted`` (``pkg.mod.name``) names."""
        parts = dotted.split(".")
        prefix = self.roots.get(parts[0])
        if prefix is None:
            return []
        for cut in range(len(parts), 0, -1):
            stem = prefix + "/".join(parts[:cut])
            path = next((p for p in (f"{stem}.py", f"{stem}/__init__.py") if p in self._paths),
                        None)
            if path is None:
                continue
            values: set[Any] = {ModRef(path)}
            for attr in parts[cut:]:
                values = {v for m in values if isinstance(m, ModRef)
                          for v in self.ev.global_(attr, m.path)}
            found = [v for v in ordered(frozenset(values)) if isinstance(v, Func)]
            if methods and not found and cut < len(parts):
                found = self._methods(path, parts[cut:])
            return found
        return []

    def _methods(self, path: str, names: list[str]) -> list[Func]:
        """The methods of a class ``names`` leads to from the module at ``path`` (imports
        followed): a wrapper constructed above runs them all (``plan``, ``run``)."""
        for _ in range(6):
            module = self.ev.module(path)
            if module is None or len(names) != 1:
                return []
            bindings = module[1].names.get(names[0], [])
            for binding in bindings:
                if binding.kind == "class" and isinstance(binding.node, ast.ClassDef):
                    return [Func(path, item) for item in binding.node.body
                            if isinstance(item, Function) and (not item.name.startswith("_")
                                                               or item.name in _RUN_ON_USE)]
            imported = next((b for b in bindings if b.kind == "import" and b.attr), None)
            target = self.ev.index.find(imported.module, path, imported.level) if imported else None
            if imported is None or target is None:
                return []
            path, names = target, [imported.attr]
        return []

    def chosen(self, dotted: str, keys: tuple[tuple[str, str], ...]) -> Key | None:
        """The backend a call of ``dotted`` passing ``keys`` chooses, with every name of
        the callee's registry (None: it chooses none)."""
        return next((k for k in (self._key(f, keys) for f in self.resolve(dotted)) if k), None)

    def _key(self, func: Func, keys: tuple[tuple[str, str], ...]) -> Key | None:
        """The backend a call chooses of the callee's registry: the first string it
        passes by keyword that names one (the registry read from the callee's
        decorators), else a string passed for a parameter its code (its class's) tests
        (:func:`~contrib.analysis.reach.backends.parameter_key`)."""
        if not keys:
            return None
        taken = self._ways(func, keys)
        if taken is not None:
            return taken[0].key
        names = decorator_keys(func.node)
        chosen = next((v for _, v in keys if v in names), None)
        if chosen is not None:
            return chosen, names
        if func.path not in self._owners:
            module = self.ev.module(func.path)
            self._owners[func.path] = classes_of(module[0]) if module else {}
        return parameter_key(self._owners[func.path].get(id(func.node)), func.node, keys)

    def _ways(self, func: Func, keys: tuple[tuple[str, str], ...]) -> list[Way] | None:
        """The backends a call passing ``keys`` takes through ``func``'s requirement
        decorator (:func:`~contrib.audit.stack.requirements.ways`), kept; the checks
        they run are marked, whose decorators' gates are theirs to hold."""
        found = ways(self.ev, self.skips, self.gate_at, func, keys)
        for way in found or ():
            self._checks.update(id(c.node) for c in way.checks)
        return found

    def below(self, dotted: str, keys: tuple[tuple[str, str], ...] = (),
              methods: bool = False) -> list[tuple[AuditGate, Call]]:
        """The lower gates a call of ``dotted`` reaches, each with the calls leading to it;
        ``keys``: the strings the call passes by keyword, one of which may choose a
        backend of the callee's registry (``bmm_fp8(..., backend="cublas")``).  With
        the lower tree's ``arch``, on the target's own way: a branch the GPU decides
        against it is not followed (:meth:`_decider`).  ``methods``: a class's methods
        are followed (a feature's call of a wrapper runs its ``plan`` and ``run``)."""
        if (dotted, keys, methods) not in self._below:
            found: dict[tuple[str, int], tuple[AuditGate, Call]] = {}
            entries = self.resolve(dotted, methods=methods)
            called = {id(f.node) for f in entries}
            for func, chain, aside in self._reached(entries, keys):
                # a requirement check's decorator (its arch gate) holds its gate
                marks = decorator_lines(func) if id(func.node) in self._checks else None
                for gate in self._held.get(func.path, []):
                    if (_holds(func.node, gate, id(func.node) in called) or (marks is not None and marks[0] <= gate.line
                                                    <= marks[1])) and not any(
                            first <= gate.line <= last for first, last in aside):
                        found.setdefault((gate.file, gate.line), (gate, chain))
            self._below[(dotted, keys, methods)] = sorted(found.values(),
                                                          key=lambda p: (p[0].file, p[0].line))
        return self._below[(dotted, keys, methods)]

    def _reached(self, entries: list[Func], keys: tuple[tuple[str, str], ...] = ()
                 ) -> list[tuple[Func, Call, list[tuple[int, int]]]]:
        """The functions a call of ``entries`` reaches, each with the calls leading to it
        and the lines of its branches the backend chosen by ``keys`` does not take."""
        seen: dict[tuple[int, Key | None], tuple[Func, Call, list[tuple[int, int]]]] = {}
        queue: deque[tuple[Func, Call, int, Key | None, Dispatch | None]] = deque()
        for f in entries:
            taken = self._ways(f, keys)
            if taken is None:
                queue.append((f, (f.node.name,), 0, self._key(f, keys), None))
                continue
            for way in taken:  # the checks its requirement decorator runs, then its body
                queue += [(c, (f.node.name, c.node.name), 1, way.key, None)
                          for c in (*way.checks, *way.runs)]
                if way.body:
                    queue.append((f, (f.node.name,), 0, way.key, None))
        while queue and len(seen) < MAX_BELOW:
            func, chain, depth, key, bound = queue.popleft()
            if (id(func.node), key) in seen:
                continue
            aside: list[tuple[int, int]] = []
            seen[(id(func.node), key)] = (func, chain, aside)
            if depth >= MAX_DEPTH:
                continue
            frame = Frame(func.path, self.ev.function_scope(func.node), None, id(func.node))
            decide = self._decider(bound, frame) if self.arch is not None else None
            for node in self.skips.walk(func.path, func.node.body, key=key, aside=aside,
                                        decide=decide):
                if isinstance(node, ast.Call):
                    self.ev.cap = (0, 0)
                    for value in ordered(self.ev.eval(node.func, frame)):
                        if isinstance(value, Func) and (id(value.node), key) not in seen:
                            queue.append((value, (*chain, value.node.name), depth + 1, key,
                                          dispatch_frame(self.ev, self.arch, node, frame, value)))
        return list(seen.values())

    def _decider(self, bound: Dispatch | None, frame: Frame) -> Callable[[ast.If], bool | None]:
        """Whether the target takes an ``if``: one testing a parameter its caller passed
        the GPU's value in (:func:`~contrib.audit.stack.requirements.dispatch_frame`),
        one whose value the GPU decides in the function's own frame (``if backend ==
        "fa3"`` where ``backend`` is what ``determine_attention_backend()`` returns on
        it), or a name written for other archs (``"cutlass_sm10x" in runner_names``:
        :func:`~contrib.analysis.reach.backends.named_choice`, over the backend's test)."""
        def decide(node: ast.If) -> bool | None:
            assert self.arch is not None
            asked = bound.frame if bound is not None and bound.decides(node.test) else None
            own = asked is None
            self.ev.cap, self.ev.touched = (self.arch.major, self.arch.minor), False
            try:
                truth = truth_of(self.ev.eval(node.test, asked or frame))
            finally:
                self.ev.cap = (0, 0)
            if len(truth) == 1 and (self.ev.touched or not own):
                return next(iter(truth))
            return named_choice(node.test, self.arch.major)
        return decide


def package_roots(paths: Iterable[str]) -> dict[str, str]:
    """The importable top-level packages of a tree (``flashinfer``; sglang's
    ``python/sglang``), each with the folder it sits in."""
    roots: dict[str, str] = {}
    for path in paths:
        parts = path.split("/")
        if parts[-1] != "__init__.py" or len(parts) not in (2, 3):
            continue
        if len(parts) == 3 and parts[0] not in ("python", "src"):
            continue
        name = parts[-2]
        if name not in _SKIP_ROOTS and name.isidentifier():
            roots.setdefault(name, "/".join(parts[:-2]) + "/" if len(parts) == 3 else "")
    return roots


def _holds(node: Function, gate: AuditGate, called: bool = False) -> bool:
    """Whether ``gate`` stands in ``node``; ``called``: the function the call names, whose
    decorators are its own declaration (flashinfer's ``@supported_compute_capability(
    [120])`` on the API itself), where on a helper it reaches they are metadata the
    helper's callers may not check (a requirement decorator's ``common_check``)."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) if called \
        else node.lineno
    last = node.end_lineno or node.lineno
    return (first <= gate.line <= last
            and gate.function.rsplit(".", 1)[-1] == node.name)
