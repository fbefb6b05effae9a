"""Where the code behind a gate calls into the package of another upstream.

The walk starts at a gate's code and follows, breadth first and bounded:

* calls resolved by the tree's arch evaluator (:class:`~contrib.analysis.archeval.
  TreeEval`, as :class:`~contrib.analysis.reach.tree.PyTree`): the callee's definition, imports followed;
* a method call the evaluator cannot resolve (``layernorm.forward_with_fusion(x)``)
  to the tree's methods of that name, when the name is defined at most twice;
* a backend's name handed on as a value (``args.attention_backend = "trtllm_mha"``)
  to what the tree registers under it (:class:`~contrib.analysis.reach.backends.Registry`);
* flags: code that sets ``obj.flag = True`` enables what the tree runs under a
  test of ``.flag`` (an ``if`` body); a function that reads it outside a test
  decides with it, and what its callers run after the call is followed too.
  sglang's ``ServerArgs`` sets ``enable_flashinfer_allreduce_fusion`` behind one
  gate and the layers read it elsewhere.  A dict of settings returned
  (``{"flashinfer_allreduce_fusion_backend": "auto"}``, which sglang's passes hand
  to the server's arguments) sets its keys the same way: a string value only enables
  the tests that hold for it.

An ``if`` whose test holds a gate that excludes the target is not entered from a
flag, nor the body of an ``if`` on the arch the target does not take (the tree's
audit says which: :class:`Skips`): the target does not go there.  Each call that lands outside the tree in
one of the lower package's modules (``flashinfer.comm.trtllm_allreduce_fusion``)
is kept with the steps that led to it.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from contrib.analysis.archvalues import Ext, Frame, Func, ordered, truth_of
from contrib.analysis.gates import DECORATOR, KEYWORD
from contrib.analysis.pywalk import callee_name, parents, passes_on, walk
from contrib.analysis.reach.backends import (
    Key,
    backend_test,
    keyed_entries,
    spread_literals,
    value_literals,
)
from contrib.analysis.reach.names import distinctive
from contrib.analysis.reach.objects import (
    Methods,
    constructed,
    instance_methods,
    named_functions,
    object_methods,
)
from contrib.analysis.reach.tree import PyTree
from contrib.arch import NVIDIA_FAMILIES
from contrib.audit.model import AuditGate, EffectKind

MAX_BLOCKS = 240  # blocks of code walked per gate
MAX_DEPTH = 10  # steps (calls, flags, callers) below the gate

_MAX_READERS = 40  # files reading one flag
_MAX_CALLERS = 12  # files calling one deciding function
_WORD = re.compile(r"[A-Za-z_]\w{3,}")

Function = ast.FunctionDef | ast.AsyncFunctionDef




class Handed(str):
    """A step of a way that is a backend's name handed on as a value (``"trtllm_mha"``):
    the code picks it there, under conditions the walk does not weigh (sglang's choice
    when none is given).  A string, shown as the other steps are."""

    __slots__ = ()


class Trail:
    """What a walk of the target's way met: the statements of the tree where it was
    turned away (an ``if`` on the arch it does not take, a refusal, a read of a flag
    under an excluding gate), each as (file, first line, last line).  A feature's chain
    (:mod:`contrib.audit.feature.chain`) names the gates on those lines."""

    def __init__(self) -> None:
        self.met: list[tuple[str, int, int]] = []

    def stopped(self, path: str, node: ast.AST) -> None:
        test = getattr(node, "test", node)
        first = getattr(test, "lineno", 0)
        self.met.append((path, first, getattr(test, "end_lineno", None) or first))


class Skips:
    """The ``if`` tests of a tree whose body the target does not run, read from the
    tree's audited gates: a walk for the target does not enter those bodies
    (flashinfer's ``if is_sm12x(): sm120() elif is_sm100(): sm100()``), and a walk of
    the target's own way does not enter the else of an ``if`` it takes.  And the
    statements that refuse the target (``if not is_sm90(): raise``, an assert it
    fails): a walk of what the target runs ends at them."""

    def __init__(self, gates: Iterable[AuditGate]) -> None:
        self._lines: dict[str, list[int]] = {}
        self._taken: dict[str, list[int]] = {}
        self._flags: dict[str, dict[str, bool]] = {}  # `self.flag` set from the GPU, per file
        self._refusals: dict[str, list[int]] = {}
        for gate in gates:
            if gate.parser_kind in (KEYWORD, DECORATOR):
                continue
            kind = gate.effect.kind
            if kind.not_taken:
                self._lines.setdefault(gate.file, []).append(gate.line)
            if kind == EffectKind.TAKES_BRANCH:
                self._taken.setdefault(gate.file, []).append(gate.line)
            flag = gate.effect.self_flag()
            if flag is not None and kind in (EffectKind.VALUE_TRUE, EffectKind.VALUE_FALLS_BACK):
                self._flags.setdefault(gate.file, {})[flag] = kind == EffectKind.VALUE_TRUE
            if kind.stops:
                self._refusals.setdefault(gate.file, []).append(gate.line)

    def __call__(self, path: str, node: ast.If | ast.While) -> bool:
        last = node.test.end_lineno or node.test.lineno
        return any(node.test.lineno <= line <= last for line in self._lines.get(path, ()))

    def taken(self, path: str, node: ast.If) -> bool | None:
        """Whether the target takes ``node``'s body (True: its else is other archs' way;
        False: its body is), by the tree's gates: a test the target passes, or a test
        of a flag its class sets from the GPU (``if self._use_mxfp8_act_scaling:``)."""
        last = node.test.end_lineno or node.test.lineno
        if any(node.test.lineno <= line <= last for line in self._taken.get(path, ())):
            return True
        test, negated = node.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        if (isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name)
                and test.value.id == "self"):
            value = self._flags.get(path, {}).get(test.attr)
            return None if value is None else value != negated
        return None

    def refuses(self, path: str, node: ast.stmt) -> bool:
        """Whether the target is refused at ``node``: its test, or the assert, is a
        refusing gate's."""
        if isinstance(node, ast.If | ast.While):
            first, last = node.test.lineno, node.test.end_lineno or node.test.lineno
        elif isinstance(node, ast.Assert):
            first, last = node.lineno, node.end_lineno or node.lineno
        else:
            return False
        return any(first <= line <= last for line in self._refusals.get(path, ()))

    def walk(self, path: str, code: Iterable[ast.AST], target: bool = False,
             key: Key | None = None, trail: Trail | None = None,
             aside: list[tuple[int, int]] | None = None) -> Iterator[ast.AST]:
        """Every node of ``code`` the target may run (depth first).  ``target``: the
        walk is of what the target itself runs (an admitting gate's code), so a
        statement that refuses it ends its block, and a function or class defined there
        is not entered (it runs where it is called, on that caller's way); a walk of
        what admitted archs run goes on past both.  ``key``: the backend the caller chose by name (``bmm_fp8(...,
        backend="cublas")``): tests of the registry's names, and tables keyed by them,
        go its way; ``aside``: where given, the lines of each branch the chosen backend
        does not take are added to it (first, last)."""

        def runs(nodes: Iterable[ast.AST]) -> list[ast.AST]:
            kept: list[ast.AST] = []
            for node in nodes:
                kept.append(node)
                if target and isinstance(node, ast.stmt) and self.refuses(path, node):
                    if trail is not None:
                        trail.stopped(path, node)
                    break
                if (target and isinstance(node, ast.If) and node.body
                        and isinstance(node.body[-1], ast.Return | ast.Raise)
                        and self.taken(path, node)):
                    break  # the target returns in the branch it takes: the rest is not its
            return kept

        todo = runs(code)[::-1]
        while todo:
            node = todo.pop()
            yield node
            if target and isinstance(node, Function | ast.ClassDef):
                continue  # defined, not run: whoever calls it runs it, on its own way
            chosen = backend_test(node.test, *key) if key and isinstance(node, ast.If) else None
            entries = keyed_entries(node, *key) if key and isinstance(node, ast.Dict) else None
            taken = self.taken(path, node) if target and isinstance(node, ast.If) else None
            if chosen is not None and isinstance(node, ast.If):
                children: list[ast.AST] = [node.test, *runs(node.body if chosen else node.orelse)]
                if aside is not None:
                    aside += [(n.lineno, n.end_lineno or n.lineno)
                              for n in (node.orelse if chosen else node.body)]
            elif entries is not None:
                children = list(entries)
            elif isinstance(node, ast.If | ast.While) and self(path, node):
                if trail is not None and target:
                    trail.stopped(path, node)
                children = [node.test, *runs(node.orelse)]
            elif taken is not None and isinstance(node, ast.If):  # the target's own branch
                children = [node.test, *runs(node.body if taken else node.orelse)]
            else:
                children = []
                for name in node._fields:
                    value = getattr(node, name, None)
                    if isinstance(value, list):
                        children += runs(v for v in value if isinstance(v, ast.AST))
                    elif isinstance(value, ast.AST):
                        children.append(value)
            todo += children[::-1]


@dataclass(frozen=True)
class Outside:
    """A call into the lower package, and the steps from the gate to it."""

    dotted: str
    via: tuple[str, ...]
    # the strings it is passed by keyword, with their keywords (``backend="cublas"``; a
    # name the walk saw bound to a string: ``fmha_backend = "cutlass"`` then
    # ``Wrapper(backend=fmha_backend)``)
    keys: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Block:
    """Code a walk runs: ``code`` of ``holder`` in ``path``, and the steps that led there."""

    path: str
    holder: Function | None
    code: tuple[ast.AST, ...]
    via: tuple[str, ...]


class Walker:
    """The walks of one tree; ``roots``: the lower package's top-level names;
    ``excluded(path, first, last)``: whether an excluding gate of the tree sits on
    those lines."""

    def __init__(self, ev: PyTree, texts: Callable[[], dict[str, str]], roots: set[str],
                 excluded: Callable[[str, int, int], bool], skips: Skips) -> None:
        self.ev, self._texts, self.roots, self.excluded = ev, texts, roots, excluded
        self.skips = skips
        self._target = False  # the walk under way is of the target's own way
        self.trail: Trail | None = None  # set: what the target's way met is kept there
        # A feature's walk follows its setting's value too: where a function binds it
        # (`backend = getattr(args, "x")`) and a string it is set to (`args.x = "auto"`);
        # a gate's walk follows only the flags its code sets.
        self.values = False
        self._parents: dict[str, dict[int, ast.AST]] = {}
        self._flags: dict[tuple[str, object, bool, bool, tuple[str, ...]], list[Block]] = {}
        self._flag_met: dict[tuple[str, object, bool, bool, tuple[str, ...]],
                             list[tuple[str, int, int]]] = {}
        self._callers: dict[tuple[str, bool], list[Block]] = {}
        self._index: dict[str, dict[str, list[ast.AST]]] = {}  # per file: _named
        self._memo: dict[tuple[object, ...], tuple[list[Outside | Block],
                                                   list[tuple[str, int, int]]]] = {}
        self._words: dict[str, list[str]] | None = None  # identifier -> files naming it
        self._naming: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}  # _modules_naming
        self._methods = Methods(ev, texts)  # methods by name, of the files walked
        # A setting other programs of the tree declare too, by attribute: the folders
        # whose reads of it are theirs (:meth:`read_elsewhere`).
        self._elsewhere: dict[str, tuple[str, ...]] = {}

    def read_elsewhere(self, folders: dict[str, tuple[str, ...]]) -> None:
        """Say which folders read a setting of another program under the same name
        (sglang's ``multimodal_gen/`` has a ``ServerArgs`` of its own with an
        ``attention_backend``): a read of ``.attention_backend`` there is not the
        server's.  What was walked before with other folders is walked again."""
        if folders != self._elsewhere:
            self._elsewhere = dict(folders)
            self._memo.clear()

    def outside(self, path: str, holder: Function | None, code: Iterable[ast.AST], *,
                target: bool = False, depth: int = MAX_DEPTH) -> list[Outside]:
        """The calls into the lower package that ``code`` (in ``holder`` of ``path``)
        reaches; ``target``: on the target's own way, which ends where it is refused;
        ``depth``: the steps followed below it."""
        self._target = target
        found: dict[tuple[str, tuple[tuple[str, str], ...]], Outside] = {}
        seen: set[tuple[str, int, int]] = set()
        queue = deque([(Block(path, holder, tuple(code), ()), 0)])
        walked = 0
        while queue and walked < MAX_BLOCKS:
            block, steps = queue.popleft()
            walked += 1
            for step in self._steps_of(block):
                if isinstance(step, Outside):
                    found.setdefault((step.dotted, step.keys), step)
                elif steps < depth and _key(step) not in seen:
                    seen.add(_key(step))
                    queue.append((step, steps + 1))
        return list(found.values())

    def _steps_of(self, block: Block) -> Iterable[Outside | Block]:
        """:meth:`_steps`; kept per block in a feature's walk (hundreds of features walk
        the same code), with the places the target was turned away on the way."""
        if not self.values:
            return self._steps(block)
        key = (*_key(block), id(block.holder), self._target)
        kept = self._memo.get(key)
        if kept is None:
            outer, self.trail = self.trail, Trail()
            try:
                steps = list(self._steps(Block(block.path, block.holder, block.code, ())))
                kept = self._memo[key] = (steps, self.trail.met)
            finally:
                self.trail = outer
        steps, met = kept
        if self.trail is not None:
            self.trail.met += met
        if not block.via:
            return steps
        return [Outside(s.dotted, (*block.via, *s.via), s.keys) if isinstance(s, Outside)
                else Block(s.path, s.holder, s.code, (*block.via, *s.via)) for s in steps]

    def _steps(self, block: Block) -> Iterator[Outside | Block]:
        frame = self.frame(block.path, block.holder)
        chosen = [s for node in block.code if isinstance(node, ast.expr)  # the value a gate picks
                  for s in spread_literals(node)]
        bound: dict[str, str] = {}  # names and attributes the walk saw set to a string
        for node in self.skips.walk(block.path, block.code, self._target, trail=self.trail):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                bound.update((ast.unparse(t), node.value.value) for t in node.targets
                             if isinstance(t, ast.Name | ast.Attribute))
            for name in [*chosen, *value_literals(node)]:  # a backend's name handed on
                for entry in self.ev.registry.of(name):
                    yield Block(entry.path, entry.node, tuple(entry.node.body),
                                 (*block.via, Handed(f'"{name}"'), entry.node.name))
            chosen = []
            if isinstance(node, ast.Return) and node.value is not None:
                # handed back, run by the caller: an object's methods (`return Method()`),
                # a function (`return flashinfer_gemm_linear`)
                handed = (object_methods(self.ev, node.value.func, frame)
                          if isinstance(node.value, ast.Call)
                          else named_functions(self.ev, node.value, frame))
                for func in handed:
                    yield Block(func.path, func.node, tuple(func.node.body),
                                 (*block.via, func.node.name))
            if isinstance(node, ast.Call):
                yield from self._call(block, frame, node, bound)
            elif isinstance(node, ast.Assign) and _setting(node.value, self.values) is not None:
                # `self.flag = True`, `self.backend = "auto"`: what reads it set so runs
                value = _setting(node.value, self.values)
                for target in node.targets:
                    if isinstance(target, ast.Attribute):
                        via = (*block.via, f"sets {target.attr}" if value is True
                               else f"sets {target.attr}={value!r}")
                        yield from (Block(b.path, b.holder, b.code, via + b.via)
                                    for b in self._readers(target.attr, value))
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
                for attr, value in _settings(node.value):
                    via = (*block.via, f"returns {attr}={value!r}")
                    yield from (Block(b.path, b.holder, b.code, via + b.via)
                                for b in self._readers(attr, value))

    def _call(self, block: Block, frame: Frame, call: ast.Call,
              bound: dict[str, str]) -> Iterator[Outside | Block]:
        func = call.func.value if isinstance(call.func, ast.Subscript) else call.func
        self.ev.cap = (0, 0)
        values = ordered(self.ev.eval(func, frame))
        resolved = False
        for value in values:
            if isinstance(value, Func):
                resolved = True
                yield Block(value.path, value.node, tuple(value.node.body),
                             (*block.via, value.node.name))
            elif isinstance(value, Ext) and value.dotted.split(".")[0] in self.roots:
                resolved = True
                yield Outside(value.dotted, block.via, _passed(call, bound))
        if not resolved:  # a class of the tree made: what constructing it runs
            for method in constructed(self.ev, func, frame):
                resolved = True
                yield Block(method.path, method.node, tuple(method.node.body),
                             (*block.via, method.node.name))
        if not resolved and isinstance(func, ast.Attribute):  # a method of an object made here
            for method in instance_methods(self.ev, func, frame):
                resolved = True
                yield Block(method.path, method.node, tuple(method.node.body),
                             (*block.via, method.node.name))
        if not resolved and isinstance(func, ast.Attribute):
            for method in self._methods.named(func.attr):
                yield Block(method.path, method.node, tuple(method.node.body),
                             (*block.via, method.node.name))

    def frame(self, path: str, holder: Function | None) -> Frame:
        """The evaluator's frame for code of ``holder`` (module level when None)."""
        if holder is None:
            return Frame(path)
        return Frame(path, self.ev.function_scope(holder), None, id(holder))

    def parents(self, path: str) -> dict[int, ast.AST]:
        """Each node's parent in the module at ``path`` (kept)."""
        if path not in self._parents:
            module = self.ev.module(path)
            self._parents[path] = {} if module is None else parents(module[0])
        return self._parents[path]

    def holder(self, path: str, node: ast.AST) -> Function | None:
        """The innermost function around ``node``."""
        parents = self.parents(path)
        up = parents.get(id(node))
        while up is not None and not isinstance(up, Function):
            up = parents.get(id(up))
        return up if isinstance(up, Function) else None

    # -- flags, methods and callers, found by name in the tree's texts -------------

    def _modules_naming(self, word: str, pattern: re.Pattern[str], most: int,
                        skip: tuple[str, ...] = ()) -> list[tuple[str, ast.Module]]:
        """The parsed modules whose text matches ``pattern`` (around identifier ``word``),
        but those under the folders ``skip``; none when more than ``most`` files name it:
        a name that common is no lead."""
        if self._words is None:
            self._words = {}
            for path, text in self._texts().items():
                for name in set(_WORD.findall(text)):
                    self._words.setdefault(name, []).append(path)
        key = (word, pattern.pattern, skip)
        paths = self._naming.get(key)
        if paths is None:  # one search per word and pattern: each choice of a setting asks
            texts = self._texts()
            paths = self._naming[key] = [p for p in self._words.get(word, ())
                                         if not p.startswith(skip) and pattern.search(texts[p])]
        if len(paths) > most:
            return []
        modules = [(p, self.ev.module(p)) for p in paths]
        return [(p, m[0]) for p, m in modules if m is not None]

    def enabled_by(self, attr: str, value: object = True) -> list[Block]:
        """What the target runs where the tree reads setting ``attr`` set to ``value``
        (True, or a string), following the setting's value too (:attr:`values`): a
        feature's first steps, with where the target was turned away kept on
        :attr:`trail`.  A string's own way comes first: what a decorator named for the
        setting registers under it (sglang's ``ATTENTION_BACKENDS[backend_str](self)``
        runs ``@register_attention_backend("trtllm_mla")``'s function)."""
        self._target, values, self.values = True, self.values, True
        try:
            own = [Block(f.path, f.node, tuple(f.node.body), (f'registered as "{value}"',
                                                              f.node.name))
                   for f in (self.ev.registry.under(value, attr) if isinstance(value, str)
                             else ())]
            return own + self._readers(attr, value)
        finally:
            self.values = values

    def _readers(self, attr: str, value: object = True) -> list[Block]:
        """What runs where the tree reads ``.attr`` set to ``value`` (True, or a string):
        the ``if`` bodies it tests, and what the callers of a function deciding with it
        run after the call; for a string, only the reads :func:`_may_hold` enables."""
        key = (attr, value, self._target, self.values, self._elsewhere.get(attr, ()))
        if key not in self._flags:
            self._flags[key] = []  # a flag read while its readers are found adds nothing
            outer, self.trail = self.trail, Trail()  # where its reads are turned away, kept
            self._flag_met[key] = self.trail.met
            try:
                self._flags[key] = self._find_readers(attr, value)
            finally:
                self.trail = outer
        if self.trail is not None:
            self.trail.met += self._flag_met.get(key, [])
        return self._flags[key]

    def _find_readers(self, attr: str, value: object) -> list[Block]:
        blocks: list[Block] = []
        # `.attr`, or `getattr(args, "attr", None)`
        pattern = re.compile(rf"\.{re.escape(attr)}\b" + (
            rf"|getattr\([^)]*[\"']{re.escape(attr)}[\"']" if self.values else ""))
        for path, module in self._modules_naming(attr, pattern, _MAX_READERS,
                                                 self._elsewhere.get(attr, ())):
            parents = self.parents(path)
            for node in self._named(path, module).get(attr, ()):
                if not _reads(node, attr, self.values):
                    continue
                parent = parents.get(id(node))
                if _may_hold(node, parent, value):
                    blocks += self._read_at(path, node, f"read {attr}")
                elif self.values and isinstance(parent, ast.Assign) and all(
                        isinstance(t, ast.Name) for t in parent.targets):
                    blocks += self._bound_at(path, parent, f"read {attr}")
        return blocks

    def _bound_at(self, path: str, statement: ast.Assign, what: str) -> list[Block]:
        """A setting's value bound to a local name (``backend = getattr(args, "x")``):
        what its function runs after the binding, which decides with it there."""
        parents = self.parents(path)
        holder = parents.get(id(statement))
        body = getattr(holder, "body", None)
        if not isinstance(holder, Function) or not isinstance(body, list) or (
                statement not in body):
            return []
        after = tuple(body[body.index(statement) + 1:])
        return [Block(path, holder, after, (f"{what} in {holder.name}()",))] if after else []

    def _read_at(self, path: str, node: ast.AST, what: str) -> list[Block]:
        parents = self.parents(path)
        if self._never_true(path, node):
            return []
        child, up = node, parents.get(id(node))
        while up is not None and not isinstance(up, Function):
            if isinstance(up, ast.If | ast.While) and up.test is child:
                if self.excluded(path, up.test.lineno, up.test.end_lineno or up.test.lineno):
                    if self.trail is not None:
                        self.trail.stopped(path, up)
                    return []
                return [Block(path, self.holder(path, up), tuple(up.body),
                               (f"{what} at {path}:{up.lineno}",))]
            if isinstance(up, ast.stmt):
                # read in a statement other than a test: a decision, below; on the
                # target's way, one that an excluding gate of the same statement decides
                # is false (`return (is_sm90() or is_sm100()) and args.flag`)
                if self._target and self.excluded(path, up.lineno, up.end_lineno or up.lineno):
                    if self.trail is not None:
                        self.trail.stopped(path, up)
                    return []
                break
            child, up = up, parents.get(id(up))
        decider = self.holder(path, node)
        if decider is None:
            return []
        return [Block(b.path, b.holder, b.code, (f"{what} in {decider.name}()", *b.via))
                for b in self._callers_of(decider.name)]

    def _never_true(self, path: str, node: ast.AST) -> bool:
        """Whether the read ``node`` stands in an ``and`` beside an operand that is false
        on every NVIDIA GPU (``_use_aiter and ... and args.enable_aiter_allreduce_fusion``:
        ``is_hip()`` is false there), so the setting decides nothing on the target.  The
        operand is evaluated for the GPUs of several families: one that tests the arch is
        the audit's gate, not this."""
        parents = self.parents(path)
        child, up = node, parents.get(id(node))
        while isinstance(up, ast.BoolOp | ast.UnaryOp | ast.Compare | ast.Call | ast.Attribute):
            if isinstance(up, ast.BoolOp) and isinstance(up.op, ast.And):
                frame = self.frame(path, self.holder(path, up))
                for operand in up.values:
                    if operand is not child and self._false_on_nvidia(operand, frame):
                        return True
            child, up = up, parents.get(id(up))
        return False

    def _false_on_nvidia(self, operand: ast.expr, frame: Frame) -> bool:
        cap = self.ev.cap
        try:
            for family in NVIDIA_FAMILIES:
                self.ev.cap = family
                if truth_of(self.ev.eval(operand, frame)) != {False}:
                    return False
            return True
        finally:
            self.ev.cap = cap

    def through_callers(self, holder: Function, *, target: bool = False) -> list[Outside]:
        """The calls into the lower package that the callers of the decision function
        ``holder`` run with what it decides (the code after each call, the branch an
        ``if`` on it takes; a caller handing the result back is passed through)."""
        found: list[Outside] = []
        for block in self._callers_of(holder.name):
            for out in self.outside(block.path, block.holder, block.code, target=target):
                led = Outside(out.dotted, (*block.via, *out.via), out.keys)
                if all(o.dotted != led.dotted or o.keys != led.keys for o in found):
                    found.append(led)
        return found

    def _named(self, path: str, module: ast.Module) -> dict[str, list[ast.AST]]:
        """The module's attribute reads (``x.attr``), ``getattr(x, "attr")`` calls and
        calls by callee name, each under its name, in the order of one walk (kept: a
        tree's walks ask one module for many names)."""
        index = self._index.get(path)
        if index is None:
            index = self._index[path] = {}
            for node in walk(module):
                if isinstance(node, ast.Attribute):
                    index.setdefault(node.attr, []).append(node)
                elif isinstance(node, ast.Call):
                    name = callee_name(node)
                    if name:
                        index.setdefault(name, []).append(node)
                    if (isinstance(node.func, ast.Name) and node.func.id == "getattr"
                            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                            and isinstance(node.args[1].value, str)
                            and node.args[1].value != name):
                        index.setdefault(node.args[1].value, []).append(node)
        return index

    def _callers_of(self, name: str) -> list[Block]:
        """The code that runs after each call of ``name`` in its block (and the body of
        an ``if`` that tests the call)."""
        if not distinctive(name):
            return []
        key = (name, self.values)
        if key not in self._callers:
            self._callers[key] = []
            blocks: list[Block] = []
            pattern = re.compile(rf"\b{re.escape(name)}\(")
            for path, module in self._modules_naming(name, pattern, _MAX_CALLERS):
                for node in self._named(path, module).get(name, ()):
                    if isinstance(node, ast.Call) and callee_name(node) == name:
                        blocks += self._after(path, node, name)
            self._callers[key] = blocks
        return self._callers[key]

    def _after(self, path: str, call: ast.Call, name: str) -> list[Block]:
        parents = self.parents(path)
        up: ast.AST = call
        while not isinstance(up, ast.stmt) and id(up) in parents:
            up = parents[id(up)]
        if not isinstance(up, ast.stmt):
            return []
        statement = up
        holder = self.holder(path, statement)
        if holder is not None and passes_on(call, parents):
            # `return _resolve_backend(...)`: what its own callers run with the result
            return [Block(b.path, b.holder, b.code, (f"returned by {holder.name}()", *b.via))
                    for b in self._callers_of(holder.name)]
        block = parents.get(id(statement))
        if self.values and not _decides_with(statement, call):
            return []  # a feature's way: only code run because of what the call decided
        for field in ("body", "orelse", "finalbody"):
            seq = getattr(block, field, None)
            if isinstance(seq, list) and statement in seq:
                after = seq[seq.index(statement) + 1:]
                if self.values and isinstance(statement, ast.If):
                    after = []  # the body the decision enables, not what runs anyway
                code = (*getattr(statement, "body", ()), *after) if isinstance(
                    statement, ast.If) else tuple(after)
                via = (f"its caller at {path}:{statement.lineno}",)
                return [Block(path, self.holder(path, statement), tuple(code), via)]
        return []


def _decides_with(statement: ast.stmt, call: ast.Call) -> bool:
    """Whether ``statement`` decides with what ``call`` returns: an ``if`` testing it,
    or an assignment binding it to a name the code after reads."""
    if isinstance(statement, ast.If | ast.While):
        return any(node is call for node in ast.walk(statement.test))
    return isinstance(statement, ast.Assign) and all(
        isinstance(t, ast.Name) for t in statement.targets)


def _key(block: Block) -> tuple[str, int, int]:
    """A block by its first statement (the syntax trees are kept, so ids are stable)."""
    return (block.path, id(block.code[0]) if block.code else 0, len(block.code))


def _passed(call: ast.Call, bound: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The strings ``call`` passes by keyword: literals, and names ``bound`` to one."""
    passed = []
    for k in call.keywords:
        value = (k.value.value if isinstance(k.value, ast.Constant)
                 else bound.get(ast.unparse(k.value)))
        if k.arg is not None and isinstance(value, str):
            passed.append((k.arg, value))
    return tuple(passed)


def _setting(value: ast.expr, strings: bool) -> object | None:
    """What an assignment sets that enables code reading it: True, or (``strings``) a
    non-empty string (a backend's name); None for anything else."""
    if isinstance(value, ast.Constant) and (value.value is True or (
            strings and isinstance(value.value, str) and value.value)):
        return value.value
    return None


def _settings(table: ast.Dict) -> Iterator[tuple[str, object]]:
    """The attributes a returned dict of settings sets, with their values (True or a
    string): sglang's ``@register_post_process`` passes return ``{"flashinfer_allreduce_
    fusion_backend": "auto"}``, which the server's arguments take as attributes."""
    for key, value in zip(table.keys, table.values, strict=True):
        if (isinstance(key, ast.Constant) and isinstance(key.value, str)
                and key.value.isidentifier() and isinstance(value, ast.Constant)
                and (value.value is True or (isinstance(value.value, str) and value.value))):
            yield key.value, value.value


def _reads(node: ast.AST, attr: str, getattr_too: bool) -> bool:
    """Whether ``node`` reads attribute ``attr``: ``x.attr``, or ``getattr(x, "attr"...)``."""
    if isinstance(node, ast.Attribute):
        return node.attr == attr and isinstance(node.ctx, ast.Load)
    return (getattr_too and isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "getattr" and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant) and node.args[1].value == attr)


def _may_hold(read: ast.AST, parent: ast.AST | None, value: object) -> bool:
    """Whether a test reading ``read`` is enabled by its being set to ``value``: a flag
    (True) is read by any test; a string only by a test that it is set (``is not
    None``, an ``if`` on it alone) or that it is this one (``==``/``in`` of strings
    holding it); not by ``!= "other"`` (what is done for any other setting) nor by
    code using its value (``backends = args.attention_backend or ...``: the string's
    own way, read where it is chosen)."""
    if value is True:
        return True
    if isinstance(parent, ast.If | ast.While | ast.IfExp) and parent.test is read:
        return True
    if not isinstance(parent, ast.Compare) or len(parent.ops) != 1:
        return False
    op, other = parent.ops[0], parent.comparators[0] if parent.left is read else parent.left
    if isinstance(other, ast.Constant) and other.value is None:
        return isinstance(op, ast.IsNot | ast.NotEq)
    literals = {v.value for v in ([other] if isinstance(other, ast.Constant) else getattr(
        other, "elts", [])) if isinstance(v, ast.Constant)}
    if not literals:
        return True
    return isinstance(op, ast.Eq | ast.In) and value in literals
