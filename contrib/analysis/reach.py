"""What a piece of code reaches: the functions its calls lead to, at any depth in the tree.

A gate's class comes from what stands behind it: a flashinfer test's
``skipif(cc[0] != 10)`` guards ``fused_moe.cutlass_fused_moe(...)``, which calls
``get_cutlass_fused_moe_module``, which builds ``gen_cutlass_fused_moe_sm100_module``
three files away.  Calls are resolved by the arch evaluator's bindings (the
callee's definition in the tree, imports followed; a class's ``__init__`` and
``__call__``), breadth first, each function once (by identity), so a deep JIT
module is reached however many helpers stand between.

Two answers: ``calls``, the chains of call names as written (``a>b>get_x_module``,
a Triton kernel as ``triton:name``; the first :data:`MAX_CALLS`, for the reader),
and ``targets``, what can class a gate, by identity, whatever its depth:

* ``jit``: a tree function that builds CUDA units (it names ``.cu`` sources or
  holds a ``supported_major_versions`` list), with the majors the literal nvcc
  flags along its chain name (``compute_100a``: 10), if any;
* ``triton``: a ``@triton.jit`` kernel;
* ``cute``: a class holding ``admissible_archs`` (CuTe DSL), with its archs; a
  ``@cute.kernel``/``@cute.jit`` function, with the archs of the arch-specific CuTe
  namespaces its module uses (``tcgen05``: 10, 11; ``warpgroup``: 9; none: generic);
* ``aot``: an ahead-of-time built op, ``torch.ops.NS.op`` (its C++ is read by the judge);
* ``lib``: a call into a vendor library that brings kernels of its own for every
  architecture its release supports (:data:`VENDOR_LIBRARIES`: cuDNN's Python
  frontend; ``triton_kernels``, Triton kernels compiled for the GPU they run on): no
  kernel of the tree does that work;
* ``checks``: the code behind the gate only checks (asserts, raises, log lines).

A name handed on as a value (``server_args.attention_backend = "trtllm_mha"``,
``return {"attention_backend": "triton"}``) leads to what a decorator registers
under it anywhere in the tree (``@register_attention_backend("trtllm_mha")`` on
the factory), and to the methods of the class that factory returns: what the
backend runs once chosen (:class:`Registry`, shared with the stack's walk).
Strings passed by keyword to another library (``graph.tensor(name="bias")``) are
its words, not leads.  What is handed on runs too: a tree function passed by name
(``Runner(forward_impl=_impl)``), and the methods of an object returned
(``return Mxfp4MoEMethod(...)``: :func:`object_methods`).  A function met at
module level (a test, a method of a test class) is read in its own frame.

A walk may also follow one backend of a registry (``key``): flashinfer's
``@backend_requirement({"cudnn": _cudnn_requirement, "cutlass": ...})`` checks
each backend's archs, and the function it decorates tests the backend's name
(``if backend == "cudnn"``, ``if "cutlass" in runner_names``); a test against the
registry's names is decided by the backend followed.

A target is written ``kind|path|qualified name|majors|chain`` (see :class:`Target`).
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import UNK, Cap, Ext, Frame, Func, ModRef, truth_of
from contrib.analysis.hostarch import CUTE_FAMILIES, written_for
from contrib.analysis.pyparse import PARSE_ERRORS, parse
from contrib.analysis.pywalk import walk

MAX_CALLS = 120  # call chains kept per gate, for the reader
MAX_FUNCTIONS = 1500  # tree functions walked per gate (each once)
MAX_DEPTH = 16  # calls followed below the gated code
MAX_DEFS = 2  # a method name defined more often than this is not followed by name
_COMMON = frozenset({"forward", "run", "apply", "get", "set", "update", "call", "build",
                     "load", "init", "reset", "close", "start", "stop", "step", "wait"})
_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)\s*\(", re.MULTILINE)  # a def, at any depth
_ARCH_FLAG = re.compile(r"\b(?:compute|sm)_(\d{2,3})[af]?\b")
_FLAG_TEXT = re.compile(r"arch=|compute_\d")  # a string that is an nvcc arch flag
_SOURCE = re.compile(r"[^./\s]\.(?:cu|cuh|cpp|cc)$")  # a file's name, not a bare suffix
_KEYWORD = "supported_major_versions"
# Libraries with kernels of their own for every architecture of their release, named
# by their top-level Python module (a fact about the library, not an upstream's).
VENDOR_LIBRARIES = {"cudnn": "NVIDIA cuDNN",
                    "triton_kernels": "Triton's triton_kernels (Triton, compiled for the GPU)"}

Key = tuple[str, frozenset[str]]  # the backend followed, and every name of its registry
CHECKS = "checks"  # a Target kind: the code behind a gate only checks (asserts, raises)


@dataclass(frozen=True)
class Target:
    """Something reached that can class a gate; ``majors``: what its build flags name."""

    kind: str  # jit, triton, cute, aot, lib, checks
    path: str
    name: str  # qualified name in ``path`` (the op's dotted name for aot)
    majors: tuple[int, ...] = ()
    chain: str = ""

    def text(self) -> str:
        """The form kept in the audit's JSON."""
        return "|".join([self.kind, self.path, self.name, ",".join(map(str, self.majors)),
                         self.chain])  # fmt: skip

    @classmethod
    def parse(cls, text: str) -> Target | None:
        """Back from :meth:`text` (None for a malformed entry)."""
        parts = text.split("|")
        if len(parts) != 5:
            return None
        kind, path, name, majors, chain = parts
        return cls(kind, path, name, tuple(int(m) for m in majors.split(",") if m.isdigit()), chain)


@dataclass
class Reached:
    """What a piece of code reaches: call chains for the reader, targets by identity."""

    calls: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)


@dataclass
class _Known:
    """Per tree function: its qualified name, its resolved calls, what it is."""

    qualname: str
    calls: list[tuple[str, list[Func | Target]]]
    kind: str  # "", jit, triton
    flags: tuple[int, ...]


class _Facts:
    """What a tree's functions and modules are whatever GPU runs them (a function's
    kind, its nvcc flags' majors, qualified names, a module's CuTe namespaces): kept
    with the evaluator, so the walks for each GPU and backend read each once."""

    def __init__(self, ev: TreeEval) -> None:
        self.ev = ev
        self.names: dict[str, dict[int, str]] = {}
        self.cute: dict[str, tuple[int, ...]] = {}
        self.kinds: dict[int, tuple[str, tuple[int, ...]]] = {}
        self.owners: dict[str, dict[int, ast.ClassDef]] = {}

    def owner(self, path: str, key: int) -> ast.ClassDef | None:
        """The class whose method is the function ``key`` (its node's id) of ``path``."""
        owners = self.owners.get(path)
        if owners is None:
            module = self.ev.parsed(path)
            owners = self.owners[path] = classes_of(module) if module is not None else {}
        return owners.get(key)

    def qualname(self, path: str, node: ast.AST) -> str:
        names = self.names.get(path)
        if names is None:
            names = self.names[path] = _qualnames(self.ev.parsed(path))
        return names.get(id(node), getattr(node, "name", "?"))

    def kind(self, func: Func, frame: Frame) -> tuple[str, tuple[int, ...]]:
        """``jit``, ``triton``, ``cute`` or "" (a plain function), and its majors."""
        found = self.kinds.get(id(func.node))
        if found is None:
            node = func.node
            kind = ("triton" if _is_triton(node) else "cute" if _is_cute(node)
                    else "jit" if _builds(node) else "")  # fmt: skip
            flags = (_flag_majors(self.ev, frame, node) if kind in ("", "jit")
                     else self.cute_majors(func.path) if kind == "cute" else ())  # fmt: skip
            found = self.kinds[id(node)] = (kind, flags)
        return found

    def cute_majors(self, path: str) -> tuple[int, ...]:
        """The archs of the arch-specific CuTe namespaces a module uses (empty: generic)."""
        if path not in self.cute:
            module = self.ev.parsed(path)
            used: set[str] = set()
            for n in walk(module) if module is not None else ():
                if isinstance(n, ast.Attribute | ast.Name):
                    used.add(n.attr if isinstance(n, ast.Attribute) else n.id)
                elif isinstance(n, ast.ImportFrom | ast.Import):
                    used |= {a.name.rsplit(".", 1)[-1] for a in n.names}
            self.cute[path] = tuple(sorted({m for name, majors in CUTE_FAMILIES.items()
                                            if name in used for m in majors}))
        return self.cute[path]


class _Graph:
    """The call graph of one tree as one GPU runs it, read lazily and kept for every
    gate of it: an ``if`` the GPU decides (``if is_sm120a_supported(dev): ... else:
    ...``) is followed into the branch ``cap`` takes only (None: every branch)."""

    def __init__(self, ev: TreeEval, cap: Cap | None = None, key: Key | None = None) -> None:
        self.ev, self.cap, self.key = ev, cap, key
        self.known: dict[int, _Known] = {}
        self._operands: dict[int, frozenset[str]] = {}  # per frame: see backend_test
        self.facts = ev.kept("reach.facts", lambda: _Facts(ev))

    def qualname(self, path: str, node: ast.AST) -> str:
        return self.facts.qualname(path, node)

    def function(self, func: Func) -> _Known:
        key = id(func.node)
        if key not in self.known:
            node = func.node
            frame = Frame(func.path, self.ev.function_scope(node), None, key)
            kind, flags = self.facts.kind(func, frame)
            calls = [] if kind else self.resolve(frame, node.body)
            self.known[key] = _Known(self.qualname(func.path, node), calls, kind, flags)
        return self.known[key]

    def resolve(self, frame: Frame, nodes: Iterable[ast.AST]) -> list[tuple[str, list[Func | Target]]]:
        out: list[tuple[str, list[Func | Target]]] = []
        if self.key is not None and frame.key and frame.key not in self._operands:
            nodes = list(nodes)
            self._operands[frame.key] = keyed_operands(nodes, self.key[1])
        for call in self._calls(frame, nodes):
            if isinstance(call, ast.FunctionDef | ast.AsyncFunctionDef):
                # a function written at module level (a test, a method): its own names
                inner = Frame(frame.path, self.ev.function_scope(call), None, id(call))
                out += self.resolve(inner, call.body)
                continue
            if isinstance(call, ast.Assign):  # `_gemm = cutedsl_gemm` (:meth:`_calls`)
                handed = named_functions(self.ev, call.value, frame)
                if handed:
                    out.append((ast.unparse(call.value), list(handed)))
                continue
            if isinstance(call, ast.Return):  # `return Mxfp4MoEMethod(...)`: the caller uses it
                if isinstance(call.value, ast.Call):
                    methods = object_methods(self.ev, call.value.func, frame)
                    if methods:
                        out.append((f"{callee_name(call.value) or 'object'}.*", list(methods)))
                continue
            if isinstance(call, str):  # a name handed on: what is registered under it
                if self.key is not None and of_registry(call, self.key):
                    continue  # the followed registry's own name: its way is the key's
                entries = registry(self.ev).of(call)
                if entries:
                    out.append((f'"{call}"', list(entries)))
                continue
            name = callee_name(call)
            if name is None:
                continue
            table = self._table(call.func, frame) if isinstance(call.func, ast.Subscript) else []
            if table:  # `modules[backend]()`: ``name[]`` in the chain, one entry per GPU
                out.append((f"{name}[]", table))
            else:
                out.append((name, self._callees(frame, call)))
            out += self._handed_functions(frame, call)
        return out

    def _handed_functions(self, frame: Frame, call: ast.Call) -> list[tuple[str, list[Func | Target]]]:
        """The tree's functions a call is handed by name (``Runner(forward_impl=_impl)``,
        ``choose_one(..., _run)``): whoever takes one runs it.  Only module-level names
        are read (a local is a value, not a function of the tree)."""
        out: list[tuple[str, list[Func | Target]]] = []
        for arg in (*call.args, *(k.value for k in call.keywords)):
            found: list[Func | Target] = list(named_functions(self.ev, arg, frame))
            if found and isinstance(arg, ast.Name):
                out.append((arg.id, found))
        return out

    def _calls(self, frame: Frame, nodes: Iterable[ast.AST]) -> Iterator[
            ast.Call | str | ast.FunctionDef | ast.AsyncFunctionDef | ast.Return | ast.Assign]:
        """The calls of ``nodes`` (each statement breadth first, as :func:`walk`), the
        branches the GPU of ``cap`` does not take left out; and the names handed on
        as values (:func:`value_literals`).  Read at module level, a function's
        definition is handed back whole, to be read in its own frame (its local
        imports: ``from flashinfer import fused_moe`` inside a test)."""
        handed_out: set[int] = set()  # keywords of calls into other libraries
        for statement in self._block(frame, list(nodes)):
            if isinstance(statement, ast.expr):  # the value a gate chooses
                yield from spread_literals(statement)
            out = [statement]
            for current in out:  # grows while it is read
                if frame.local is None and isinstance(current, ast.FunctionDef
                                                      | ast.AsyncFunctionDef):  # fmt: skip
                    yield current
                    continue
                if isinstance(current, ast.Return) and isinstance(current.value, ast.Call):
                    yield current  # an object handed on: its methods run
                if isinstance(current, ast.Assign) and isinstance(current.value, ast.Name):
                    yield current  # `_gemm = cutedsl_gemm`: who calls the name runs it
                if isinstance(current, ast.Call):
                    yield current
                    if self._outside(frame, current):  # `graph.tensor(name="bias")`
                        handed_out.update(id(k) for k in current.keywords)
                if id(current) not in handed_out:
                    yield from value_literals(current)
                if isinstance(current, ast.Dict) and self.key is not None:
                    entries = keyed_entries(current, *self.key)
                    if entries is not None:  # `{"cutlass": lambda: ..., "cudnn": ...}`
                        out += entries
                        continue
                if isinstance(current, ast.If | ast.IfExp) and self.cap is not None:
                    taken = self._taken(current.test, frame)
                    if taken is not None and not _refuses(current.body if taken else current.orelse):
                        branch = current.body if taken else current.orelse
                        out += [current.test, *(self._block(frame, list(branch))
                                                if isinstance(branch, list) else [branch])]
                        continue
                for name in current._fields:
                    value = getattr(current, name, None)
                    if isinstance(value, ast.AST):
                        out.append(value)
                    elif isinstance(value, list):
                        out += self._block(frame, [v for v in value if isinstance(v, ast.AST)])

    def _outside(self, frame: Frame, call: ast.Call) -> bool:
        """Whether ``call`` goes to a library outside the tree (``cudnn``, ``torch``): the
        strings it is passed by keyword are that library's words, not backends here."""
        if not any(isinstance(k.value, ast.Constant) for k in call.keywords):
            return False
        return self._rooted_outside(call.func, frame, 0)

    def _rooted_outside(self, node: ast.expr, frame: Frame, depth: int) -> bool:
        """Whether ``node`` (``graph.tensor``) hangs off a name bound outside the tree: an
        import of another library, or a local made by a call hanging off one
        (``graph = cudnn.pygraph(...)``, ``with cudnn.graph(h) as (graph, _)``)."""
        while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
            node = node.func if isinstance(node, ast.Call) else node.value
        if not isinstance(node, ast.Name) or depth > 3:
            return False
        local = frame.local.names.get(node.id) if frame.local is not None else None
        if local:
            return all(b.kind in ("expr", "unknown") and isinstance(b.node, ast.Call)
                       and self._rooted_outside(b.node.func, frame, depth + 1) for b in local)
        self.ev.cap = (0, 0)
        values = self.ev.global_(node.id, frame.path)
        return bool(values) and all(isinstance(v, Ext) for v in values)

    def _block(self, frame: Frame, statements: list[ast.AST]) -> list[ast.AST]:
        """A block's statements up to an ``if`` the GPU of ``cap`` takes into a branch
        that returns: what follows it is other GPUs' path.  A branch that refuses
        (raises, skips, exits) is another gate, not a path: the code after it is what
        lifting that gate too would run, so it is followed."""
        if self.cap is None:
            return statements
        for n, statement in enumerate(statements):
            if isinstance(statement, ast.If):
                taken = self._taken(statement.test, frame)
                branch = statement.body if taken else statement.orelse
                if taken is not None and branch and isinstance(branch[-1], ast.Return) \
                        and not _refuses(branch):
                    return statements[:n + 1]
        return statements

    def _taken(self, test: ast.expr, frame: Frame) -> bool | None:
        """Whether the GPU of ``cap`` takes an ``if``'s body (None: not the GPU's to say);
        a test of the backend followed is decided by its name, and of that backend's
        variants (``"cutlass_sm10x"``, ``"cutlass_sm12x"``) by the arch they are named for."""
        named = named_choice(test, self.cap[0]) if self.cap is not None else None
        if self.key is not None:
            chosen = backend_test(test, *self.key, self._operands.get(frame.key, frozenset()))
            if chosen is not None:
                return chosen if named is None else named
        if self.cap is None:
            return None
        if self.ev.may_read_gpu(test, frame):
            self.ev.cap, self.ev.touched = self.cap, False
            truth = truth_of(self.ev.eval(test, frame))
            if self.ev.touched and len(truth) == 1:
                return next(iter(truth))
        return named

    def _callees(self, frame: Frame, call: ast.Call) -> list[Func | Target]:
        func = call.func.value if isinstance(call.func, ast.Subscript) else call.func
        self.ev.cap = (0, 0)
        found: list[Func | Target] = []
        for value in self.ev.eval(func, frame):
            if isinstance(value, Func):
                found.append(value)
            elif isinstance(value, Ext) and value.dotted.startswith("torch.ops."):
                op = value.dotted.removesuffix(".default")
                found += py_ops(self.ev).of(op) or [Target("aot", "", op)]
            elif isinstance(value, Ext) and value.dotted.split(".")[0] in VENDOR_LIBRARIES:
                found.append(Target("lib", "", value.dotted))
            elif value is UNK or isinstance(value, Ext):
                found += self._unbound(func, frame) or self._wrapped(func, frame)
        return found

    def _wrapped(self, func: ast.expr, frame: Frame) -> list[Func | Target]:
        """A method of a decorated tree function called (``benchmark.run(...)`` on a
        ``@triton.testing.perf_report(...)`` function): the wrapper runs the function."""
        if not isinstance(func, ast.Attribute):
            return []
        return [v for v in self.ev.eval(func.value, frame)
                if isinstance(v, Func) and getattr(v.node, "decorator_list", None)]

    def _table(self, func: ast.Subscript, frame: Frame) -> list[Func | Target]:
        """A dispatch table called: ``backend_modules[backend]()`` where
        ``backend_modules`` is a dict literal of functions or classes.  The entry the
        key names when the key is known, else every entry (each is a path some GPU takes)."""
        if not isinstance(func.value, ast.Name):
            return []
        name = func.value.id
        local = frame.local.names.get(name) if frame.local is not None else None
        if local is None:
            module = self.ev.module(frame.path)
            local = module[1].names.get(name, []) if module is not None else []
        tables = [b.node for b in local if b.kind == "expr" and isinstance(b.node, ast.Dict)]
        if not tables:
            return []
        keys = self.ev.eval(func.slice, frame)
        found: list[Func | Target] = []
        for table in tables:
            kept = keyed_entries(table, *self.key) if self.key is not None else None
            entries = [(k, v) for k, v in zip(table.keys, table.values, strict=True)
                       if k is not None and (kept is None or v in kept)]  # fmt: skip
            chosen = [v for k, v in entries if isinstance(k, ast.Constant) and k.value in keys]
            for value in chosen or [v for _, v in entries]:
                found += [v for v in self.ev.eval(value, frame) if isinstance(v, Func)]
                found += self._class(value, frame)
        return found

    def _unbound(self, func: ast.expr, frame: Frame) -> list[Func | Target]:
        """What the evaluator leaves unknown: a function of a submodule named as an
        attribute (``flashinfer.decode.run`` with ``decode`` not bound in the
        package), a class of the tree, a method of an instance made from one."""
        found = self._class(func, frame)
        if isinstance(func, ast.Attribute):
            for path in _modules_of(self.ev, func.value, frame):
                found += [v for v in self.ev.global_(func.attr, path) if isinstance(v, Func)]
            found += instance_methods(self.ev, func, frame)
            if not found:  # the object's class unknown, or a subclass's override
                found += methods(self.ev).named(func.attr)
            found += [f for f in self._own(func, frame) if f not in found]
        return found

    def _own(self, func: ast.Attribute, frame: Frame) -> list[Func | Target]:
        """``self.method(...)`` / ``cls.method(...)`` in a method of a tree class: that
        class's method, or the one its nearest tree base defines (what Python's lookup
        finds on an object of the class itself).  A subclass may override it: the
        methods of that name found by name alone (when few define it) are kept too."""
        if not isinstance(func.value, ast.Name) or not frame.key:
            return []
        owner = self.facts.owner(frame.path, frame.key)
        method = next((m for m in owner.body if id(m) == frame.key), None) if owner else None
        if owner is None or not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            return []
        params = [*method.args.posonlyargs, *method.args.args]
        static = any(ast.unparse(d) == "staticmethod" for d in method.decorator_list)
        if static or not params or params[0].arg != func.value.id:
            return []
        return list(_lookup(self.ev, frame.path, owner, func.attr))

    def _class(self, func: ast.expr, frame: Frame) -> list[Func | Target]:
        """A class of the tree called: its CuTe ``admissible_archs``, else its
        ``__init__`` and ``__call__`` (what constructing and calling it run)."""
        found: list[Func | Target] = []
        for path, node in _classes(self.ev, func, frame):
            archs = _admissible(node)
            if archs is not None:
                found.append(Target("cute", path, self.qualname(path, node), archs))
                continue
            found += _on_making(path, node)
        return found


def _graph(ev: TreeEval, cap: Cap | None, key: Key | None) -> _Graph:
    graphs: dict[tuple[Cap | None, Key | None], _Graph] = ev.kept("reach.graphs", dict)
    graph = graphs.get((cap, key))
    if graph is None:
        graph = graphs[(cap, key)] = _Graph(ev, cap, key)
    return graph


def reach(ev: TreeEval, frame: Frame, code: list[ast.AST], cap: Cap | None = None,
          key: Key | None = None) -> Reached:  # fmt: skip
    """The calls in ``code`` and, through the tree's definitions, what they lead to;
    ``cap``: the GPU that runs it (the branches it does not take are not followed);
    ``key``: the backend of a registry the walk follows (tests of the others' names
    are not taken)."""
    graph = _graph(ev, cap, key)
    out = Reached()
    seen: set[tuple[int, tuple[int, ...]]] = set()
    queue: deque[tuple[list[tuple[str, list[Func | Target]]], str, int, tuple[int, ...]]] = deque(
        [(graph.resolve(frame, code), "", 0, ())])
    walked = 0
    while queue and walked < MAX_FUNCTIONS:
        calls, prefix, depth, flags = queue.popleft()
        for name, callees in calls:
            chain = f"{prefix}>{name}" if prefix else name
            shown = chain
            for callee in callees:
                if isinstance(callee, Target):
                    out.targets.append(Target(callee.kind, callee.path, callee.name,
                                              callee.majors, chain).text())  # fmt: skip
                    continue
                known = graph.function(callee)
                majors = flags + tuple(m for m in known.flags if m not in flags)
                visit = (id(callee.node), majors if known.kind == "jit" else ())
                if visit in seen:
                    continue
                seen.add(visit)
                walked += 1
                if known.kind:
                    kept = majors if known.kind == "jit" else known.flags
                    out.targets.append(Target(known.kind, callee.path, known.qualname, kept,
                                              chain).text())  # fmt: skip
                    if known.kind == "triton":
                        shown = f"{prefix}>triton:{name}" if prefix else f"triton:{name}"
                elif depth < MAX_DEPTH:
                    queue.append((known.calls, chain, depth + 1, majors))
            if len(out.calls) < MAX_CALLS and shown not in out.calls:
                out.calls.append(shown)
    return out


def _qualnames(module: ast.Module | None) -> dict[int, str]:
    """Every function and class of ``module`` by node id, named as the gate finder names
    them (``Outer.method``)."""
    names: dict[int, str] = {}
    stack: list[tuple[ast.AST, str]] = [(module, "")] if module is not None else []
    while stack:
        node, prefix = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}.{child.name}" if prefix else child.name
                names[id(child)] = name
                stack.append((child, name))
            elif not isinstance(child, ast.expr):
                stack.append((child, prefix))
    return names


def _classes(ev: TreeEval, func: ast.expr, frame: Frame) -> Iterator[tuple[str, ast.ClassDef]]:
    """The tree classes ``func`` (a name, or ``module.Name``) is bound to."""
    if isinstance(func, ast.Name):
        local = frame.local.names.get(func.id) if frame.local is not None else None
        if local is None:
            yield from _module_class(ev, func.id, frame.path, 0)
            return
        for binding in local:  # `from .triton_backend import TritonAttnBackend` in the function
            if binding.kind == "import" and binding.attr:
                target = ev.index.find(binding.module, frame.path, binding.level)
                if target is not None:
                    yield from _module_class(ev, binding.attr, target, 1)
    elif isinstance(func, ast.Attribute):
        for path in _modules_of(ev, func.value, frame):
            yield from _module_class(ev, func.attr, path, 0)


def _modules_of(ev: TreeEval, node: ast.expr, frame: Frame, depth: int = 0) -> list[str]:
    """The tree modules ``node`` names: a bound module, or a submodule of one named as an
    attribute (``pkg.sub`` where the package's ``__init__`` does not bind ``sub``)."""
    paths = [v.path for v in ev.eval(node, frame) if isinstance(v, ModRef)]
    if paths or depth > 4 or not isinstance(node, ast.Attribute):
        return paths
    for base in _modules_of(ev, node.value, frame, depth + 1):
        folder = base.rsplit("/", 1)[0] if base.endswith("/__init__.py") else ""
        for candidate in (f"{folder}/{node.attr}.py", f"{folder}/{node.attr}/__init__.py"):
            if folder and ev.module(candidate) is not None:
                paths.append(candidate)
    return paths


def _module_class(ev: TreeEval, name: str, path: str, depth: int) -> Iterator[tuple[str, ast.ClassDef]]:
    module = ev.module(path)
    if module is None or depth > 6:
        return
    for binding in module[1].names.get(name, []):
        if binding.kind == "class" and isinstance(binding.node, ast.ClassDef):
            yield path, binding.node
        elif binding.kind == "import" and binding.attr:
            target = ev.index.find(binding.module, path, binding.level)
            if target is not None:
                yield from _module_class(ev, binding.attr, target, depth + 1)


def _lookup(ev: TreeEval, path: str, cls: ast.ClassDef, name: str,
            depth: int = 0) -> list[Func]:  # fmt: skip
    """The method ``name`` of the tree class ``cls`` (at ``path``) as Python's attribute
    lookup finds it: in the class's own body, else in its tree bases, left to right."""
    own = [Func(path, item) for item in cls.body
           if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == name]
    if own or depth > 6:
        return own
    for base in cls.bases:
        for base_path, node in _classes(ev, base, Frame(path)):
            found = _lookup(ev, base_path, node, name, depth + 1)
            if found:
                return found
    return []


def _admissible(node: ast.ClassDef) -> tuple[int, ...] | None:
    """The majors of a CuTe DSL class's ``admissible_archs = ["sm_100a", ...]``."""
    for item in node.body:
        targets = item.targets if isinstance(item, ast.Assign) else (
            [item.target] if isinstance(item, ast.AnnAssign) else [])  # fmt: skip
        if any(isinstance(t, ast.Name) and t.id == "admissible_archs" for t in targets):
            value = getattr(item, "value", None)
            found = [int(m) // 10 for c in walk(value) if isinstance(c, ast.Constant)
                     and isinstance(c.value, str) for m in _ARCH_FLAG.findall(c.value)] if value else []
            return tuple(sorted(set(found)))
    return None


def _flag_majors(ev: TreeEval, frame: Frame, node: ast.AST) -> tuple[int, ...]:
    """The majors the literal nvcc arch flags a function names (``compute_100a``),
    its own strings and the names it reads (``sm100a_nvcc_flags``)."""
    found: set[int] = set()
    for inner in walk(node):
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            if _FLAG_TEXT.search(inner.value):
                found |= {int(m) // 10 for m in _ARCH_FLAG.findall(inner.value)}
        elif isinstance(inner, ast.Name) and "flag" in inner.id.lower():
            ev.cap = (0, 0)
            for value in ev.eval(inner, frame):
                for text in value if isinstance(value, tuple) else (value,):
                    if isinstance(text, str) and _FLAG_TEXT.search(text):
                        found |= {int(m) // 10 for m in _ARCH_FLAG.findall(text)}
    return tuple(sorted(found))


def _builds(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a function builds CUDA units: it names a source or holds a JIT list."""
    return builds([node])


def builds(code: Iterable[ast.AST]) -> bool:
    """Whether ``code`` builds CUDA units: it names a source (a literal or an f-string:
    ``f"cake_selective_state_update_{name}.cu"``) or holds a JIT list.  A bare suffix
    is no source: flashinfer's ``generate_ninja_build_for_op`` tests ``source.suffix ==
    ".cu"`` for whatever sources it is handed."""
    for inner in (n for node in code for n in walk(node)):
        if isinstance(inner, ast.keyword) and inner.arg == _KEYWORD:
            return True
        text = _string_text(inner)
        if text is not None and "\n" not in text and _SOURCE.search(text.strip()):
            return True
    return False


def _string_text(node: ast.AST) -> str | None:
    """A string literal's text, an f-string's with ``x`` for each field; None for others."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "x" for v in node.values)
    return None


def own_build(ev: TreeEval, frame: Frame, function: ast.AST | None, qualname: str,
              code: list[ast.AST]) -> str | None:
    """The JIT module a gate inside its builder guards: sglang's
    ``_jit_qprep_bf16_fp8_module`` refuses unless major 9, then ``return load_jit("...",
    cuda_files=["qprep_bf16_fp8_sm90/entry.cuh"])``.  The code the gate guards names
    the sources itself, so the build is the function's own and no call leads to it;
    the target (:meth:`Target.text`) of that function, or None."""
    if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) or not builds(code):
        return None
    majors = _flag_majors(ev, frame, function)
    return Target("jit", frame.path, qualname, majors, qualname).text()


class PyOps:
    """The ops the tree registers with torch in Python, by op name: a function decorated
    by a ``custom_op`` maker (``@torch.library.custom_op("sglang::name", ...)``,
    sglang's ``@register_custom_op(op_name=...)``, named after the function when no
    name is given), or handed to one (``direct_register_custom_op(op_name="name",
    op_func=_run)``).  ``torch.ops.sglang.name(...)`` runs that function: Python, not
    an ahead-of-time build.  The files that may register a name are found by a regex
    over the texts naming ``custom_op``; one is parsed when a name it may register
    is asked for."""

    def __init__(self, ev: TreeEval) -> None:
        self.ev = ev
        self._files: dict[str, list[str]] | None = None  # op name -> files that may register it
        self._ops: dict[str, list[Func]] = {}  # NS::name or ::name -> functions
        self._read: set[str] = set()

    def of(self, op: str) -> list[Func]:
        """The functions registered as ``op`` (``torch.ops.NS.name``: NS and name)."""
        if self._files is None:
            self._files = {}
            for path in self.ev.index.paths():
                text = (self.ev.read(path) or "") if path.endswith(".py") else ""
                if "custom_op" in text:
                    for name in {n for found in _OP_NAMES.findall(text) for n in found if n}:
                        self._files.setdefault(name, []).append(path)
        namespace, _, name = op.removeprefix("torch.ops.").rpartition(".")
        for path in self._files.get(name, [])[:MAX_REGISTERED + 1]:
            if path not in self._read:
                self._read.add(path)
                self._index(path)
        found = self._ops.get(f"{namespace}::{name}") or self._ops.get(f"::{name}", [])
        return found if len(found) <= MAX_REGISTERED else []

    def _index(self, path: str) -> None:
        module = self.ev.module(path)
        if module is None:
            return
        frame = Frame(path)
        for node in walk(module[0]):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for decorator in node.decorator_list:
                    name = _op_name(decorator, node.name)
                    if name:
                        self._ops.setdefault(name, []).append(Func(path, node))
            elif isinstance(node, ast.Call) and _is_op_maker(node.func):
                first = node.args[0] if node.args else None
                handed: ast.expr | None = first
                if isinstance(first, ast.Name):  # `register_custom_op(_run, op_name=...)`
                    name = _op_name(node, first.id)
                else:
                    name = _op_name(node, "")
                    handed = node.args[1] if len(node.args) > 1 else next(
                        (k.value for k in node.keywords if k.arg in ("op_func", "fn")), None)
                if name and handed is not None:
                    self.ev.cap = (0, 0)
                    for value in self.ev.eval(handed, frame):
                        if isinstance(value, Func):
                            self._ops.setdefault(name, []).append(value)


# What may name an op registered in Python: a string a custom_op maker is given, or
# the name of a function defined within a few lines of a decorator naming one.
_OP_NAMES = re.compile(r"custom_op\(\s*[\"'](?:\w+::)?(\w+)[\"']|\bop_name\s*=\s*[\"'](?:\w+::)?(\w+)"
                       r"|^[ \t]*@[\w.]*custom_op\b(?:.*\n){0,12}?[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)",
                       re.MULTILINE)  # fmt: skip


def _is_op_maker(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return isinstance(name, str) and "custom_op" in name


def _op_name(node: ast.expr, default: str) -> str:
    """``NS::name`` (or ``::name`` when the namespace is the maker's own) of a
    ``custom_op`` maker's call or decorator; ``default`` named bare, "" for none."""
    if isinstance(node, ast.Call):
        if not _is_op_maker(node.func):
            return ""
        first = node.args[0] if node.args and isinstance(node.args[0], ast.Constant) else None
        given = next((k.value for k in node.keywords if k.arg in ("op_name", "name")), first)
        if isinstance(given, ast.Constant) and isinstance(given.value, str):
            namespace, _, name = given.value.rpartition("::")
            return f"{namespace}::{name}" if name else ""
        return f"::{default}" if default and given is None else ""
    return f"::{default}" if default and _is_op_maker(node) else ""


def py_ops(ev: TreeEval) -> PyOps:
    """The :class:`PyOps` of the evaluator's tree (kept with it)."""
    return ev.kept("reach.pyops", lambda: PyOps(ev))


_REGISTERS = re.compile(r"^[ \t]*@[\w.]+\(\s*[\"']([\w.\-]{3,})[\"']((?:\s*,\s*[\"'][\w.\-]+[\"'])*)",
                        re.MULTILINE)  # fmt: skip
_MORE = re.compile(r"[\"']([\w.\-]+)[\"']")
MAX_REGISTERED = 3  # a name registered by more decorators than this is no lead


class Registry:
    """What the tree's decorators register under a string (``@register_attention_backend(
    "trtllm_mha")`` on ``create_trtllm_mha_backend``): the decorated function, and
    the methods of the classes it returns (``return TRTLLMHAAttnBackend(runner)``: a
    backend object is used through its methods).  Files are found by one regex over
    the tree's texts, parsed only when they register the name asked for."""

    def __init__(self, ev: TreeEval) -> None:
        self.ev = ev
        self._files: dict[str, list[str]] | None = None
        self._found: dict[str, tuple[Func, ...]] = {}

    def of(self, name: str) -> tuple[Func, ...]:
        if self._files is None:
            self._files = {}
            for path in self.ev.index.paths():
                text = self.ev.read(path) or ""
                if "@" in text:
                    names = {n for first, more in _REGISTERS.findall(text)
                             for n in _names([first, *_MORE.findall(more)])}
                    for found in names:
                        self._files.setdefault(found, []).append(path)
        if name not in self._found:
            entries: list[Func] = []
            for path in self._files.get(name, [])[:MAX_REGISTERED + 1]:
                module = self.ev.module(path)
                for node in walk(module[0]) if module is not None else ():
                    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                            name in registered_names(d) for d in node.decorator_list):
                        entries.append(Func(path, node))
            if len(entries) > MAX_REGISTERED:
                entries = []
            self._found[name] = tuple(entries) + tuple(
                m for f in entries for m in self._returned_methods(f))  # fmt: skip
        return self._found[name]

    def _returned_methods(self, func: Func) -> list[Func]:
        frame = Frame(func.path, self.ev.function_scope(func.node), None, id(func.node))
        out: list[Func] = []
        for node in walk(func.node):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
                out += object_methods(self.ev, node.value.func, frame)
        return out


def registered_names(decorator: ast.expr) -> list[str]:
    """The names a decorator call registers its function under, from its leading string
    arguments: the one (``@register_attention_backend("trtllm_mha")``), or of several
    the distinctive ones (``@register_fused_func("none", "flashinfer_trtllm")``: the
    dispatcher's ``"none"`` is a key many share, the runner's name is this one's)."""
    if not isinstance(decorator, ast.Call):
        return []
    strings: list[str] = []
    for arg in decorator.args:
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            break
        strings.append(arg.value)
    return _names(strings)


def _names(strings: list[str]) -> list[str]:
    return strings if len(strings) == 1 else [s for s in strings if distinctive(s)]


def named_functions(ev: TreeEval, node: ast.expr, frame: Frame) -> list[Func]:
    """The tree's functions ``node`` hands on by name (an argument, a returned value, a
    name it is bound to): a distinctive module-level name bound to one, or a local the
    function imports (``from ...cutedsl_bf16_gemm import cutedsl_bf16_gemm``).  Any
    other local is a value, not a function of the tree, and is not evaluated."""
    if not isinstance(node, ast.Name) or not distinctive(node.id):
        return []
    if frame.local is not None and node.id in frame.local.names:
        bindings = frame.local.names[node.id]
        if not all(b.kind == "import" for b in bindings):
            return []
        return [v for b in bindings for v in ev.imported(b, frame.path) if isinstance(v, Func)]
    return [v for v in ev.global_(node.id, frame.path) if isinstance(v, Func)]


def constructed(ev: TreeEval, func: ast.expr, frame: Frame) -> list[Func]:
    """What calling the tree class ``func`` names runs."""
    return [f for path, cls in _classes(ev, func, frame) for f in _on_making(path, cls)]


def _on_making(path: str, cls: ast.ClassDef) -> list[Func]:
    """What making (and calling) an object of ``cls`` runs: its ``__init__``, ``__call__``."""
    return [Func(path, item) for item in cls.body
            if isinstance(item, ast.FunctionDef) and item.name in ("__init__", "__call__")]


def instance_methods(ev: TreeEval, func: ast.Attribute, frame: Frame) -> list[Func]:
    """``obj.method`` where the function's ``obj`` is made by a call: the method of the
    tree class the call makes (``obj = Manager(...)``) or that the called function's
    return annotation names (``obj = _get_workspace_manager(...)`` with ``->
    FlashInferWorkspaceManager``, sglang's allreduce-fusion workspace); and
    ``Class.method`` of a tree class (``CuteDSLPagedMQALogitsRunner.forward(...)``)."""
    def named(classes: Iterable[tuple[str, ast.ClassDef]]) -> list[Func]:
        return [Func(path, item) for path, node in classes for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and item.name == func.attr]  # fmt: skip

    # `Runner.forward(...)`: a classmethod or staticmethod of a tree class
    found = named(_classes(ev, func.value, frame)) if isinstance(func.value, ast.Name | ast.Attribute) else []
    if found or not isinstance(func.value, ast.Name) or frame.local is None:
        return found
    for binding in frame.local.names.get(func.value.id, []):
        if binding.kind == "expr" and isinstance(binding.node, ast.Call):
            found += named(made_classes(ev, binding.node, frame))
    return found


def made_classes(ev: TreeEval, call: ast.Call, frame: Frame) -> list[tuple[str, ast.ClassDef]]:
    """The tree classes of what ``call`` returns: the class it calls, or the class the
    return annotation of the tree function it calls names (``Optional[X]``, ``"X"``)."""
    found = list(_classes(ev, call.func, frame))
    if found:
        return found
    for value in ev.eval(call.func, frame):
        if isinstance(value, Func) and isinstance(value.node, ast.FunctionDef | ast.AsyncFunctionDef):
            named = _annotated(value.node.returns)
            if named is not None:
                found += _classes(ev, named, Frame(value.path))
    return found


def _annotated(node: ast.expr | None) -> ast.expr | None:
    """The class an annotation names: ``X``, ``mod.X``, ``"X"``, ``Optional[X]``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = parse(node.value, mode="eval").body
        except PARSE_ERRORS:  # an annotation string that is no expression
            return None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name | ast.Attribute):
        outer = node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id
        return _annotated(node.slice) if outer == "Optional" else None
    return node if isinstance(node, ast.Name | ast.Attribute) else None


def object_methods(ev: TreeEval, func: ast.expr, frame: Frame) -> list[Func]:
    """The methods of the tree class ``func`` names, as an object of it handed on runs
    them (a factory's ``return TritonAttnBackend(runner)``, sglang's
    ``get_quant_method`` returning ``Mxfp4MoEMethod(...)``): its own methods, not its
    bases', ``__init__`` included, other dunders not."""
    return [Func(path, item) for path, cls in _classes(ev, func, frame) for item in cls.body
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            and not (item.name.startswith("__") and item.name != "__init__")]


class Methods:
    """The tree's methods by name, for a call whose object's class is unknown: one regex
    pass over ``texts`` (the files whose definitions count; read on first use) and one
    walk of each module that defines a name asked for, shared by every walk that keeps
    this index (each GPU, each backend followed).  A name is followed when it is
    distinctive, defined (as a method or a function) in at most :data:`MAX_DEFS` of
    those files, and as a method at most :data:`MAX_DEFS` times: a name that common is
    no lead."""

    def __init__(self, ev: TreeEval, texts: Callable[[], Mapping[str, str]]) -> None:
        self.ev, self._texts = ev, texts
        self._files: dict[str, list[str]] | None = None  # def name -> the files defining it
        self._modules: dict[str, dict[str, list[Func]]] = {}  # path -> method name -> methods
        self._found: dict[str, list[Func]] = {}

    def named(self, name: str) -> list[Func]:
        if not distinctive(name):
            return []
        if self._files is None:
            self._files = {}
            for path, text in self._texts().items():
                for found in set(_DEF.findall(text)):
                    self._files.setdefault(found, []).append(path)
        if name not in self._found:
            paths = self._files.get(name, [])
            out = [f for path in paths for f in self._of_module(path).get(name, [])
                   ] if len(paths) <= MAX_DEFS else []  # fmt: skip
            self._found[name] = out if len(out) <= MAX_DEFS else []
        return self._found[name]

    def _of_module(self, path: str) -> dict[str, list[Func]]:
        """Every method of the module's classes (nested ones too) by name, in one walk."""
        if path not in self._modules:
            module = self.ev.module(path)
            table: dict[str, list[Func]] = {}
            for node in walk(module[0]) if module is not None else ():
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                            table.setdefault(item.name, []).append(Func(path, item))
            self._modules[path] = table
        return self._modules[path]


def methods(ev: TreeEval) -> Methods:
    """The :class:`Methods` of every file of the evaluator's tree (kept with it)."""
    return ev.kept("reach.methods", lambda: Methods(
        ev, lambda: {p: ev.read(p) or "" for p in ev.index.paths()}))


CALLED = re.compile(r"\b([A-Za-z_]\w*)\(")  # a name called, in source text


def files_calling(ev: TreeEval, name: str) -> list[str]:
    """The tree's files in which something named ``name`` is called (``name(`` in the
    text), from one index of every file built once per evaluator."""
    return ev.kept("reach.calls", lambda: _calls_index(ev)).get(name, [])


def _calls_index(ev: TreeEval) -> dict[str, list[str]]:
    index: dict[str, list[str]] = {}
    for path in ev.index.paths():
        for called in set(CALLED.findall(ev.read(path) or "")):
            index.setdefault(called, []).append(path)
    return index


def registry(ev: TreeEval) -> Registry:
    """The tree's :class:`Registry` (kept with its evaluator)."""
    return ev.kept("reach.registry", lambda: Registry(ev))


def value_literals(node: ast.AST) -> list[str]:
    """The strings ``node`` hands on as values: what it assigns, returns or passes as a
    keyword (through dicts, lists, ``a if c else b``, ``x or "y"``), not what it
    compares, formats or indexes with."""
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.Return | ast.keyword):
        return spread_literals(node.value) if node.value is not None else []
    return []


def spread_literals(value: ast.expr) -> list[str]:
    """The strings of a value: a literal, or those of a dict's values, a list or
    tuple, both sides of ``a if c else b`` and the operands of ``or``/``and``."""
    if isinstance(value, ast.Constant):
        return [value.value] if isinstance(value.value, str) else []
    parts: list[ast.expr] = []
    if isinstance(value, ast.Dict):
        parts = [v for v in value.values if v is not None]
    elif isinstance(value, ast.List | ast.Tuple):
        parts = list(value.elts)
    elif isinstance(value, ast.IfExp):
        parts = [value.body, value.orelse]
    elif isinstance(value, ast.BoolOp):
        parts = list(value.values)
    return [s for part in parts for s in spread_literals(part)]


def backend_test(test: ast.expr, chosen: str, names: frozenset[str],
                 operands: frozenset[str] = frozenset()) -> bool | None:  # fmt: skip
    """Whether ``test`` holds when the backend is ``chosen``: a comparison with string
    literals of which one is a name of the registry or a variant of one
    (``"cutlass_sm12x"``) (``backend == "cudnn"``,
    ``backend in ("cutlass", "tgv")``, ``"cudnn" in runner_names``), and ``not``,
    ``and``, ``or`` of such.  ``operands``: the expressions (``ast.dump``) the function
    compares with the registry's names: under the backend followed they hold its
    names only, so another literal tested against one (``"tgv" in runner_names``
    beside ``"cudnn" in runner_names``) is not chosen either.  None when the test is
    not about the registry's names."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = backend_test(test.operand, chosen, names, operands)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        parts = [backend_test(v, chosen, names, operands) for v in test.values]
        decisive = isinstance(test.op, ast.Or)  # True decides an `or`, False an `and`
        if decisive in parts:
            return decisive
        return None if None in parts else not decisive
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    op, sides = test.ops[0], (test.left, test.comparators[0])
    for side, other in (sides, sides[::-1]):
        literals = _literals(side)
        if literals and (any(_variant(lit, name) for lit in literals for name in names)
                         or ast.dump(other) in operands):  # fmt: skip
            hit = any(_variant(lit, chosen) for lit in literals)
            if isinstance(op, ast.Eq | ast.In):
                return hit
            if isinstance(op, ast.NotEq | ast.NotIn):
                return not hit
    return None


def keyed_operands(code: Iterable[ast.AST], names: frozenset[str]) -> frozenset[str]:
    """The expressions ``code`` compares with a name of the registry (``runner_names`` in
    ``"cudnn" in runner_names``), as :func:`ast.dump` strings."""
    found: set[str] = set()
    for node in (n for c in code for n in walk(c)):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            sides = (node.left, node.comparators[0])
            for side, other in (sides, sides[::-1]):
                if any(_variant(lit, name) for lit in _literals(side) for name in names) \
                        and not _literals(other):
                    found.add(ast.dump(other))
    return frozenset(found)


def named_choice(test: ast.expr, major: int) -> bool | None:
    """Whether a GPU of ``major`` takes a test of a name written for other archs:
    ``"cutlass_sm10x" in runner_names``, ``backend == "vsa_sm100_blk64"`` (a runner,
    backend or kernel its code names for SM 10.x).  Such a name is chosen where its
    arch is, so the test is false elsewhere (``!=``, ``not in``: true).  Only names of
    SM 9.0 or newer say so: those are arch-specific (the ``a`` features); ``"sm80"``
    code runs on every newer GPU, and a name of the target's own major says nothing
    (None: not the names' to say)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, right, op = test.left, test.comparators[0], test.ops[0]
    literal = next((side.value for side in (left, right) if isinstance(side, ast.Constant)
                    and isinstance(side.value, str)), None)  # fmt: skip
    if literal is None or all(isinstance(side, ast.Constant) for side in (left, right)):
        return None
    if isinstance(op, ast.In | ast.NotIn) and literal is not getattr(left, "value", None):
        return None  # `x in "text"`: a substring test, not a name chosen
    majors = written_for([literal])
    if not majors or major in majors or min(majors) < 9:
        return None
    if isinstance(op, ast.Eq | ast.In):
        return False
    if isinstance(op, ast.NotEq | ast.NotIn):
        return True
    return None


def of_registry(literal: str, key: Key) -> bool:
    """Whether ``literal`` is a name (or a variant of one) of the registry ``key``
    follows: inside ``mm_bf16``'s cudnn path, ``backends = ["cudnn"]`` is that
    registry's own name, not a lead into another registry that also says "cudnn"."""
    return any(_variant(literal, name) for name in key[1])


def _variant(literal: str, name: str) -> bool:
    """Whether ``literal`` names backend ``name`` or a variant of it (flashinfer's
    ``"cutlass_sm10x"`` runner of the ``"cutlass"`` backend)."""
    return literal == name or literal.startswith(name + "_")


def decorator_arguments(node: ast.AST) -> Iterator[ast.expr]:
    """The arguments of a function's decorator calls, keywords' values included."""
    for mark in getattr(node, "decorator_list", []):
        if isinstance(mark, ast.Call):
            yield from mark.args
            yield from (k.value for k in mark.keywords)


def handed(value: ast.expr) -> Iterator[tuple[str, Key | None]]:
    """The function names a decorator argument hands over: a name, or the values of a
    dict keyed by string literals, each with its key and the dict's keys (the
    registry ``@backend_requirement({"cudnn": _cudnn_requirement, ...})`` builds)."""
    if isinstance(value, ast.Name):
        yield value.id, None
    elif isinstance(value, ast.Dict):
        names = string_keys(value)
        for k, v in zip(value.keys, value.values, strict=True):
            if isinstance(v, ast.Name):
                keyed = isinstance(k, ast.Constant) and isinstance(k.value, str)
                yield v.id, (str(k.value), names) if keyed and isinstance(k, ast.Constant) \
                    else None


def decorator_keys(node: ast.AST) -> frozenset[str]:
    """The names of the registries a function's decorators are handed: the string keys
    of dict literals among their arguments."""
    return frozenset().union(*(string_keys(v) for v in decorator_arguments(node)
                               if isinstance(v, ast.Dict)))  # fmt: skip


def parameter_key(owner: ast.ClassDef | None, func: ast.FunctionDef | ast.AsyncFunctionDef,
                  passed: Iterable[tuple[str, str]]) -> Key | None:  # fmt: skip
    """The backend a call chooses by a string it passes for a parameter of the callee:
    flashinfer's ``BatchPrefillWithRaggedKVCacheWrapper(..., backend="cutlass")``, whose
    ``__init__`` stores ``self._backend = backend`` and whose ``plan`` runs the CUTLASS
    module under ``if self._backend == "cutlass":``.  The parameter is ``func``'s own, or
    its class's ``__init__``'s when ``func`` is a method (``owner``: the class whose
    body defines it, :func:`classes_of`); its operands are the parameter and the attributes ``__init__`` stores it in;
    the registry's names are the string literals the function (or the class) compares
    them with.  A value the code replaces when it holds it (``if self._backend ==
    "auto": self._backend = determine_attention_backend(...)``) chooses nothing: what
    runs is picked later.  None when no string passed is one the code tests for."""
    scope = [f for f in owner.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
             ] if owner is not None else [func]  # fmt: skip
    init = next((f for f in scope if f.name == "__init__"), None) if owner is not None else func
    if init is None:
        return None
    arguments = init.args
    params = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    for name, value in passed:
        if name not in params or name == "self":
            continue
        operands = {name} | {ast.unparse(t) for node in walk(init)
                             if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
                             and node.value.id == name for t in node.targets
                             if isinstance(t, ast.Attribute)}  # fmt: skip
        names: set[str] = set()
        replaced: set[str] = set()
        for node in (n for f in scope for n in walk(f)):
            names |= _tested_literals(node, operands)
            if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                    and isinstance(node.test.ops[0], ast.Eq)
                    and _assigns(node.body, operands)):  # fmt: skip
                replaced |= _tested_literals(node.test, operands)
        if any(_variant(value, n) for n in names) and value not in replaced:
            return value, frozenset(names)
    return None


def configuration_key(function: ast.AST, around: ast.If) -> Key | None:
    """The backend ``around`` configures (found by :func:`configuring_if`): sglang's ``if
    self.attention_backend == "trtllm_mla" or self.decode_attention_backend ==
    "trtllm_mla": if not is_sm100_supported(): raise ...``.  What the function runs past
    that refusal runs with that backend chosen, so its tests of the same operands go
    that backend's way (the registry's names: every string ``function`` compares
    those operands with)."""
    chosen = _configured(around.test)
    if chosen is None:
        return None
    literal, operands = chosen
    names = set().union(*(_tested_literals(n, operands) for n in walk(function)))
    return literal, frozenset(names)


def configuring_if(function: ast.AST, node: ast.AST, parents: dict[int, ast.AST]) -> ast.If | None:
    """The innermost ``if`` of ``function`` holding ``node`` in its body whose test
    chooses one backend by name: one literal, compared with ``==`` or ``in``, or an
    ``or`` of such comparisons with the same literal; None when there is none."""
    child, up = node, parents.get(id(node))
    while up is not None and up is not function:
        if isinstance(up, ast.If) and child in up.body and _configured(up.test) is not None:
            return up
        child, up = up, parents.get(id(up))
    return None


def _configured(test: ast.expr) -> tuple[str, set[str]] | None:
    """``x == "lit"`` (or ``x in ("lit",)``), or an ``or`` of such with one literal:
    the literal and the operands compared with it."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
    literal: str | None = None
    operands: set[str] = set()
    for part in parts:
        if not (isinstance(part, ast.Compare) and len(part.ops) == 1
                and isinstance(part.ops[0], ast.Eq | ast.In)):  # fmt: skip
            return None
        sides = (part.left, part.comparators[0])
        found = next(((lits, other) for side, other in (sides, sides[::-1])
                      if len(lits := _literals(side)) == 1
                      and isinstance(other, ast.Name | ast.Attribute)), None)  # fmt: skip
        if found is None or (literal is not None and found[0] != {literal}):
            return None
        literal = next(iter(found[0]))
        operands.add(ast.unparse(found[1]))
    return (literal, operands) if literal is not None else None


def _tested_literals(node: ast.AST, operands: set[str]) -> set[str]:
    """The strings ``node`` compares one of ``operands`` with (``==``, ``!=``, ``in``)."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Eq | ast.NotEq | ast.In | ast.NotIn)):  # fmt: skip
        return set()
    sides = (node.left, node.comparators[0])
    for side, other in (sides, sides[::-1]):
        if ast.unparse(other) in operands and _literals(side):
            return _literals(side)
    return set()


def _assigns(body: list[ast.stmt], operands: set[str]) -> bool:
    """Whether ``body`` assigns one of ``operands`` (``self._backend = pick(...)``)."""
    return any(isinstance(a, ast.Assign) and any(ast.unparse(t) in operands for t in a.targets)
               for s in body for a in walk(s))  # fmt: skip


def classes_of(module: ast.Module) -> dict[int, ast.ClassDef]:
    """Each function defined in a class body of ``module`` (by id), with its class."""
    return {id(item): node for node in walk(module) if isinstance(node, ast.ClassDef)
            for item in node.body}  # fmt: skip


def string_keys(table: ast.Dict) -> frozenset[str]:
    """The string literals keying a dict literal."""
    return frozenset(k.value for k in table.keys
                     if isinstance(k, ast.Constant) and isinstance(k.value, str))  # fmt: skip


def keyed_entries(table: ast.Dict, chosen: str, names: frozenset[str]) -> list[ast.expr] | None:
    """The values of a dict literal keyed by the registry's names (or their variants)
    that the backend ``chosen`` uses: its own entries, and those not keyed by a
    string; None when the dict is not keyed by those names."""
    if not any(_variant(k, name) for k in string_keys(table) for name in names):
        return None
    return [v for k, v in zip(table.keys, table.values, strict=True)
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str))
            or _variant(k.value, chosen)]  # fmt: skip


def _literals(node: ast.expr) -> set[str]:
    """The strings of a string literal, or of a tuple, list or set of them."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    found = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
    return found if len(found) == len(items) else set()


def distinctive(name: str) -> bool:
    """Whether a function name is specific enough to be followed by name alone."""
    return name not in _COMMON and not name.startswith("__") and "_" in name.strip("_")


REFUSALS = frozenset({"skip", "exit", "_exit", "abort", "fail", "xfail"})  # calls that refuse


def _refuses(branch: ast.AST | list[ast.stmt]) -> bool:
    """A branch that only refuses: it ends raising, or calling ``pytest.skip``,
    ``sys.exit`` and the like, or returning nothing (None, False: "not here")."""
    if not isinstance(branch, list) or not branch:
        return False
    last = branch[-1]
    if isinstance(last, ast.Raise):
        return True
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        return callee_name(last.value) in REFUSALS
    if isinstance(last, ast.Return):
        return last.value is None or (isinstance(last.value, ast.Constant)
                                      and last.value.value in (None, False))  # fmt: skip
    return False


def callee_name(call: ast.Call) -> str | None:
    func = call.func.value if isinstance(call.func, ast.Subscript) else call.func  # kernel[grid](...)
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name if isinstance(name, str) else None


_CUTE_DECORATOR = re.compile(r"(?:cutlass\.)?cute(?:\.experimental)?\.(?:kernel|jit)\b")


def _is_cute(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``@cute.kernel`` / ``@cute.jit``, and their ``cute.experimental`` forms (CuTe DSL:
    compiled when first called)."""
    return any(_CUTE_DECORATOR.match(ast.unparse(d)) for d in node.decorator_list)


def _is_triton(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``@triton.jit`` / ``@triton.autotune(...)`` / ``@triton.heuristics(...)`` / ``@jit``
    from triton (``@triton.testing.perf_report`` marks a benchmark, not a kernel)."""
    for decorator in node.decorator_list:
        text = ast.unparse(decorator)
        if text.startswith(_TRITON_KERNEL) or text in ("jit", "triton_jit"):
            return True
    return False


_TRITON_KERNEL = ("triton.jit", "triton.autotune", "triton.heuristics")
