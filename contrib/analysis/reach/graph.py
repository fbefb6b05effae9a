"""The call graph of one tree as one GPU runs it: what each call of a function resolves to.

A walk reads a function once per GPU: its calls resolved through the evaluator's
bindings (``fused_moe.cutlass_fused_moe`` to its definition, ``modules[backend]()``
to the table's entries, ``self._cached_module.run`` to what the object was made
by), the branches the GPU does not take left out (``if is_sm120a_supported(dev):``
on SM100), or what a function is when it ends a walk (a JIT builder, a kernel).
The graph is kept with the tree (:class:`~contrib.analysis.reach.tree.PyTree`), for
every gate of it; the walk over it is :func:`contrib.analysis.reach.walk.reach`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import UNK, Cap, Ext, Frame, Func, ordered, truth_of
from contrib.analysis.pywalk import callee_name, walk
from contrib.analysis.reach.backends import (
    Key,
    Registry,
    backend_test,
    keyed_entries,
    keyed_operands,
    named_choice,
    of_registry,
    spread_literals,
    value_literals,
)
from contrib.analysis.reach.endpoints import (
    ARCH_LIBRARIES,
    VENDOR_LIBRARIES,
    Endpoint,
    EndpointKind,
    Facts,
    admissible_majors,
)
from contrib.analysis.reach.objects import (
    Methods,
    classes_named,
    instance_methods,
    lineage,
    lookup,
    modules_of,
    named_functions,
    object_methods,
    on_making,
)
from contrib.analysis.reach.ops import PyOps
from contrib.analysis.refusal import ends_refusing


@dataclass
class _Known:
    """Per tree function: its qualified name, its resolved calls, what it is."""

    qualname: str
    calls: list[tuple[str, list[Func | Endpoint]]]
    kind: EndpointKind | None  # None: a plain function, whose calls are followed
    flags: tuple[int, ...]


class Graph:
    """The call graph of one tree as one GPU runs it, read lazily and kept for every
    gate of it: an ``if`` the GPU decides (``if is_sm120a_supported(dev): ... else:
    ...``) is followed into the branch ``cap`` takes only (None: every branch)."""

    def __init__(self, ev: TreeEval, facts: Facts, registry: Registry, ops: PyOps,
                 methods: Methods, cap: Cap | None = None, key: Key | None = None) -> None:
        """``ev``: the tree's evaluator; ``facts``, ``registry``, ``ops``, ``methods``: the
        indexes kept for the tree (:class:`~contrib.analysis.reach.tree.PyTree`)."""
        self.ev, self.cap, self.key = ev, cap, key
        self.registry, self.ops, self.methods = registry, ops, methods
        self.known: dict[int, _Known] = {}
        self._operands: dict[int, frozenset[str]] = {}  # per frame: see backend_test
        self._loading: set[tuple[int, str]] = set()  # the held objects being read (_loaded)
        self._loaded_by: dict[tuple[int, str], list[Func | Endpoint]] = {}  # and once read
        self.facts = facts

    def qualname(self, path: str, node: ast.AST) -> str:
        return self.facts.qualname(path, node)

    def function(self, func: Func) -> _Known:
        key = id(func.node)
        if key not in self.known:
            node = func.node
            frame = Frame(func.path, self.ev.function_scope(node), None, key)
            kind, flags = self.facts.kind(func, frame)
            calls = [] if kind else self.resolve(frame, node.body)
            if kind == EndpointKind.CUBIN and not flags:
                flags = self._runner_majors(frame, node)
            self.known[key] = _Known(self.qualname(func.path, node), calls, kind, flags)
        return self.known[key]

    def _runner_majors(self, frame: Frame, node: ast.AST) -> tuple[int, ...]:
        """A cubin loader that names no arch takes the majors of the runner it builds
        and loads them through: flashinfer's ``_get_trtllm_gemm_module_impl`` calls
        ``gen_trtllm_gen_gemm_module()`` (built with ``sm100a_nvcc_flags``), then
        ``setup_cubin_loader(mod.get_library_path())``.  One call down, no further."""
        found: set[int] = set()
        for _, callees in self.resolve(frame, getattr(node, "body", [])):
            for callee in callees:
                if isinstance(callee, Func):
                    inner = Frame(callee.path, self.ev.function_scope(callee.node), None,
                                  id(callee.node))
                    kind, flags = self.facts.kind(callee, inner)
                    if kind in (EndpointKind.JIT, EndpointKind.CUBIN):
                        found.update(flags)
        return tuple(sorted(found))

    def resolve(self, frame: Frame, nodes: Iterable[ast.AST]) -> list[tuple[str, list[Func | Endpoint]]]:
        out: list[tuple[str, list[Func | Endpoint]]] = []
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
                entries = self.registry.of(call)
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

    def _handed_functions(self, frame: Frame, call: ast.Call) -> list[tuple[str, list[Func | Endpoint]]]:
        """The tree's functions a call is handed by name (``Runner(forward_impl=_impl)``,
        ``choose_one(..., _run)``): whoever takes one runs it.  Only module-level names
        are read (a local is a value, not a function of the tree)."""
        out: list[tuple[str, list[Func | Endpoint]]] = []
        for arg in (*call.args, *(k.value for k in call.keywords)):
            found: list[Func | Endpoint] = list(named_functions(self.ev, arg, frame))
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
                                                      | ast.AsyncFunctionDef):
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
                    if taken is not None and not ends_refusing(current.body if taken else current.orelse):
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
                        and not ends_refusing(branch):
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

    def _callees(self, frame: Frame, call: ast.Call) -> list[Func | Endpoint]:
        func = call.func.value if isinstance(call.func, ast.Subscript) else call.func
        self.ev.cap = (0, 0)
        found: list[Func | Endpoint] = []
        for value in ordered(self.ev.eval(func, frame)):
            if isinstance(value, Func):
                found.append(value)
            elif isinstance(value, Ext) and value.dotted.startswith("torch.ops."):
                op = value.dotted.removesuffix(".default")
                found += self.ops.of(op) or [Endpoint(EndpointKind.AOT, "", op)]
            elif isinstance(value, Ext) and value.dotted.split(".")[0] in VENDOR_LIBRARIES:
                found.append(Endpoint(EndpointKind.LIB, "", value.dotted))
            elif isinstance(value, Ext) and value.dotted.split(".")[0] in ARCH_LIBRARIES \
                    and "." in value.dotted:
                majors = ARCH_LIBRARIES[value.dotted.split(".")[0]][1]
                found.append(Endpoint(EndpointKind.LIB, "", value.dotted, majors))
            elif value is UNK or isinstance(value, Ext):
                found += self._unbound(func, frame) or self._wrapped(func, frame)
        return found

    def _wrapped(self, func: ast.expr, frame: Frame) -> list[Func | Endpoint]:
        """A method of a decorated tree function called (``benchmark.run(...)`` on a
        ``@triton.testing.perf_report(...)`` function): the wrapper runs the function."""
        if not isinstance(func, ast.Attribute):
            return []
        return [v for v in ordered(self.ev.eval(func.value, frame))
                if isinstance(v, Func) and getattr(v.node, "decorator_list", None)]

    def _table(self, func: ast.Subscript, frame: Frame) -> list[Func | Endpoint]:
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
        found: list[Func | Endpoint] = []
        for table in tables:
            kept = keyed_entries(table, *self.key) if self.key is not None else None
            entries = [(k, v) for k, v in zip(table.keys, table.values, strict=True)
                       if k is not None and (kept is None or v in kept)]
            chosen = [v for k, v in entries if isinstance(k, ast.Constant) and k.value in keys]
            for value in chosen or [v for _, v in entries]:
                found += [v for v in ordered(self.ev.eval(value, frame)) if isinstance(v, Func)]
                found += self._class(value, frame)
        return found

    def _unbound(self, func: ast.expr, frame: Frame) -> list[Func | Endpoint]:
        """What the evaluator leaves unknown: a function of a submodule named as an
        attribute (``flashinfer.decode.run`` with ``decode`` not bound in the
        package), a class of the tree, a method of an instance made from one."""
        found = self._class(func, frame)
        if isinstance(func, ast.Attribute):
            for path in modules_of(self.ev, func.value, frame):
                found += [v for v in ordered(self.ev.global_(func.attr, path)) if isinstance(v, Func)]
            found += instance_methods(self.ev, func, frame)
            if not found:  # the object's class unknown, or a subclass's override
                found += self.methods.named(func.attr)
            found += [f for f in self._own(func, frame) if f not in found]
            if not found:
                found += self._loaded(func, frame)
        return found

    def _loaded(self, func: ast.Attribute, frame: Frame) -> list[Func | Endpoint]:
        """``self._cached_module.run(...)`` in a method, where the class's methods set
        ``self._cached_module = get_batch_decode_mla_module(...)``: an object a call
        made and kept, whose method is called here (flashinfer's wrappers call the JIT
        module their ``plan()`` loaded; its MoE runners the one their base's ``_build()``
        kept).  What those calls reach stands behind the call:
        the module they load is what runs."""
        held = func.value
        if not (isinstance(held, ast.Attribute) and isinstance(held.value, ast.Name)
                and held.value.id == "self" and frame.key):
            return []
        owner = self.facts.owner(frame.path, frame.key)
        key = (id(owner), held.attr)
        if owner is None or key in self._loading:
            return []  # ``self._m = self._m.to(device)``: the object's own making is read once
        if key in self._loaded_by:
            return self._loaded_by[key]
        self._loading.add(key)
        found: list[Func | Endpoint] = []
        for path, cls in lineage(self.ev, frame.path, owner):
            for method in cls.body:
                if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                inner: Frame | None = None
                for node in walk(method):
                    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and any(
                            isinstance(t, ast.Attribute) and t.attr == held.attr
                            and isinstance(t.value, ast.Name) and t.value.id == "self"
                            for t in node.targets):
                        inner = inner or Frame(path, self.ev.function_scope(method), None,
                                               id(method))
                        found += [f for f in self._callees(inner, node.value) if f not in found]
        self._loading.discard(key)
        self._loaded_by[key] = found
        return found

    def _own(self, func: ast.Attribute, frame: Frame) -> list[Func | Endpoint]:
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
        return list(lookup(self.ev, frame.path, owner, func.attr))

    def _class(self, func: ast.expr, frame: Frame) -> list[Func | Endpoint]:
        """A class of the tree called: its CuTe ``admissible_archs``, else its
        ``__init__`` and ``__call__`` (what constructing and calling it run)."""
        found: list[Func | Endpoint] = []
        for path, node in classes_named(self.ev, func, frame):
            archs = admissible_majors(node)
            if archs is not None:
                found.append(Endpoint(EndpointKind.CUTE, path, self.qualname(path, node), archs))
                continue
            found += on_making(path, node)
        return found
