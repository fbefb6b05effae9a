"""Where the code behind a gate calls into the package of another upstream.

The walk starts at a gate's code and follows, breadth first and bounded
(:data:`MAX_BLOCKS`, :data:`MAX_DEPTH`):

* calls, each read to what it runs (:meth:`~contrib.audit.stack.reading.Reading.call`):
  the callee's definition, imports followed, or the tree's methods of its name;
* a backend's name handed on as a value (``args.attention_backend = "trtllm_mha"``)
  to what the tree registers under it (:class:`~contrib.analysis.reach.backends.Registry`);
* flags: code that sets ``obj.flag = True`` enables what the tree runs under a
  test of ``.flag`` (an ``if`` body); a function that reads it outside a test
  decides with it, and what its callers run after the call is followed too.
  sglang's ``ServerArgs`` sets ``enable_flashinfer_allreduce_fusion`` behind one
  gate and the layers read it elsewhere.  A dict of settings returned
  (``{"flashinfer_allreduce_fusion_backend": "auto"}``, which sglang's passes hand
  to the server's arguments) sets its keys the same way; in a feature's walk (the
  walker's :class:`~contrib.audit.stack.mode.Mode`, chosen when it is made) a string
  value only enables the tests that hold for it.

An ``if`` whose test holds a gate that excludes the target is not entered from a
flag, nor the body of an ``if`` on the arch the target does not take
(:class:`~contrib.audit.stack.skips.Skips`), nor a read of a setting in an ``and``
beside an operand false on every NVIDIA family (:data:`~contrib.arch.NVIDIA_FAMILIES`):
the target does not go there.  Each call that lands outside the tree in one of the
lower package's modules (``flashinfer.comm.trtllm_allreduce_fusion``) is kept with
the steps that led to it.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator

from contrib.analysis.archvalues import Frame, truth_of
from contrib.analysis.pywalk import callee_name, passes_on
from contrib.analysis.reach.backends import spread_literals, value_literals
from contrib.analysis.reach.names import distinctive
from contrib.analysis.reach.objects import named_functions, object_methods
from contrib.analysis.reach.tree import PyTree
from contrib.arch import NVIDIA_FAMILIES
from contrib.audit.stack.mode import GATES, Mode
from contrib.audit.stack.reading import (
    Block,
    Function,
    Handed,
    Outside,
    Reading,
    decides_with,
    env_read,
    env_set,
    is_variable,
    may_hold,
    reads,
    setting,
    settings,
)
from contrib.audit.stack.skips import Skips, Trail

MAX_BLOCKS = 240  # blocks of code walked per gate
MAX_DEPTH = 10  # steps (calls, flags, callers) below the gate

_MAX_READERS = 40  # files reading one flag
_MAX_CALLERS = 12  # files calling one deciding function

Met = list[tuple[str, int, int]]  # what a Trail keeps


class Walker:
    """The walks of one tree in one :class:`~contrib.audit.stack.mode.Mode`; ``roots``:
    the lower package's top-level names; ``excluded(path, first, last)``: whether an
    excluding gate of the tree sits on those lines; ``reading``: another walker's of
    the same tree, shared (:meth:`in_mode`)."""

    def __init__(self, ev: PyTree, texts: Callable[[], dict[str, str]], roots: set[str],
                 excluded: Callable[[str, int, int], bool], skips: Skips,
                 mode: Mode = GATES, reading: Reading | None = None) -> None:
        self.ev, self.roots, self.excluded, self.skips, self.mode = ev, roots, excluded, skips, mode
        self.reading = reading or Reading(ev, texts, roots)
        self._flags: dict[tuple[str, object, bool], list[Block]] = {}
        self._flag_met: dict[tuple[str, object, bool], Met] = {}
        self._callers: dict[str, list[Block]] = {}
        self._memo: dict[tuple[object, ...], tuple[list[Outside | Block], Met]] = {}

    def in_mode(self, mode: Mode) -> Walker:
        """A walker of the same tree in ``mode``, sharing what this one read (parsed
        modules, their indexes, the files naming a word)."""
        reading = self.reading
        return Walker(self.ev, reading.texts, self.roots, self.excluded, self.skips, mode, reading)

    def parents(self, path: str) -> dict[int, ast.AST]:
        """Each node's parent in the module at ``path`` (kept)."""
        return self.reading.parents(path)

    def holder(self, path: str, node: ast.AST) -> Function | None:
        """The innermost function around ``node``."""
        return self.reading.holder(path, node)

    def outside(self, path: str, holder: Function | None, code: Iterable[ast.AST], *,
                target: bool = False, depth: int = MAX_DEPTH,
                trail: Trail | None = None) -> list[Outside]:
        """The calls into the lower package that ``code`` (in ``holder`` of ``path``)
        reaches; ``target``: on the target's own way, which ends where it is refused;
        ``depth``: the steps followed below it; ``trail``: where given, what the
        target's way met is kept there."""
        found: dict[tuple[str, tuple[tuple[str, str], ...]], Outside] = {}
        seen: set[tuple[str, int, int]] = set()
        queue = deque([(Block(path, holder, tuple(code), ()), 0)])
        walked = 0
        while queue and walked < MAX_BLOCKS:
            block, steps = queue.popleft()
            walked += 1
            for step in self._steps_of(block, target, trail):
                if isinstance(step, Outside):
                    found.setdefault((step.dotted, step.keys), step)
                elif steps < depth and _key(step) not in seen:
                    seen.add(_key(step))
                    queue.append((step, steps + 1))
        return list(found.values())

    def _steps_of(self, block: Block, target: bool,
                  trail: Trail | None) -> Iterable[Outside | Block]:
        """:meth:`_steps`; kept per block in a feature's walk (hundreds of features walk
        the same code), with the places the target was turned away on the way."""
        if not self.mode.values:
            return self._steps(block, target, trail)
        key = (*_key(block), id(block.holder), target)
        kept = self._memo.get(key)
        if kept is None:
            own = Trail()
            steps = list(self._steps(Block(block.path, block.holder, block.code, ()), target, own))
            kept = self._memo[key] = (steps, own.met)
        steps, met = kept
        if trail is not None:
            trail.met += met
        if not block.via:
            return steps
        return [Outside(s.dotted, (*block.via, *s.via), s.keys, s.site) if isinstance(s, Outside)
                else Block(s.path, s.holder, s.code, (*block.via, *s.via)) for s in steps]

    def _steps(self, block: Block, target: bool,
               trail: Trail | None) -> Iterator[Outside | Block]:
        frame = self.reading.frame(block.path, block.holder)
        def arm(node: ast.IfExp) -> bool | None:
            return self.skips.arm(block.path, node)

        chosen = [s for node in block.code if isinstance(node, ast.expr)  # the value a gate picks
                  for s in spread_literals(node, arm)]
        bound: dict[str, str] = {}  # names and attributes the walk saw set to a string
        for node in self.skips.walk(block.path, block.code, target, trail=trail):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                bound.update((ast.unparse(t), node.value.value) for t in node.targets
                             if isinstance(t, ast.Name | ast.Attribute))
            for name in [*chosen, *value_literals(node, arm)]:  # a backend's name handed on
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
                yield from self.reading.call(block, frame, node, bound)
                yield from self._env_sets(block, node, target, trail)
            elif isinstance(node, ast.Assign) and (
                    value := setting(node.value, self.mode.values)) is not None:
                # `self.flag = True`, `self.backend = "auto"`: what reads it set so runs
                for assigned in node.targets:
                    if isinstance(assigned, ast.Attribute):
                        via = (*block.via, f"sets {assigned.attr}" if value is True
                               else f"sets {assigned.attr}={value!r}")
                        yield from (Block(b.path, b.holder, b.code, via + b.via)
                                    for b in self._readers(assigned.attr, value, target, trail))
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
                for attr, value in settings(node.value):
                    via = (*block.via, f"returns {attr}={value!r}")
                    yield from (Block(b.path, b.holder, b.code, via + b.via)
                                for b in self._readers(attr, value, target, trail))

    def enabled_by(self, attr: str, value: object = True,
                   trail: Trail | None = None) -> list[Block]:
        """What the target runs where the tree reads setting ``attr`` set to ``value``
        (True, or a string): a feature's first steps, in a walker of
        :meth:`Mode.features <contrib.audit.stack.mode.Mode.features>`, with where the
        target was turned away kept on ``trail``.  A string's own way comes first: what
        a decorator named for the setting registers under it (sglang's
        ``ATTENTION_BACKENDS[backend_str](self)`` runs
        ``@register_attention_backend("trtllm_mla")``'s function)."""
        own = [Block(f.path, f.node, tuple(f.node.body), (f'registered as "{value}"',
                                                          f.node.name))
               for f in (self.ev.registry.under(value, attr) if isinstance(value, str)
                         else ())]
        return own + self._readers(attr, value, True, trail)

    def _readers(self, attr: str, value: object, target: bool,
                 trail: Trail | None) -> list[Block]:
        """What runs where the tree reads ``.attr`` set to ``value`` (True, or a string):
        the ``if`` bodies it tests, and what the callers of a function deciding with it
        run after the call; for a string, only the reads :func:`may_hold` enables."""
        key = (attr, value, target)
        if key not in self._flags:
            self._flags[key] = []  # a flag read while its readers are found adds nothing
            own = Trail()  # where its reads are turned away, kept
            self._flag_met[key] = own.met
            self._flags[key] = self._find_readers(attr, value, target, own)
        if trail is not None:
            trail.met += self._flag_met.get(key, [])
        return self._flags[key]

    def _find_readers(self, attr: str, value: object, target: bool, trail: Trail) -> list[Block]:
        blocks: list[Block] = []
        values = self.mode.values
        # `.attr`, or `getattr(args, "attr", None)`; a variable's name read by a call
        pattern = re.compile(rf"\.{re.escape(attr)}\b" + (
            rf"|getattr\([^)]*[\"']{re.escape(attr)}[\"']" if values else "") + (
            rf"|[\"']{re.escape(attr)}[\"']" if values and is_variable(attr) else ""))
        for path, module in self.reading.modules_naming(attr, pattern, _MAX_READERS,
                                                        self.mode.folders_elsewhere(attr)):
            parents = self.parents(path)
            for named in self.reading.named(path, module).get(attr, ()):
                node = self._read_of(path, named, attr)
                if node is None:
                    continue
                parent = parents.get(id(node))
                if may_hold(node, parent, value):
                    blocks += self._read_at(path, node, f"read {attr}", target, trail,
                                            bound=True if is_variable(attr) else None)
                elif values and is_variable(attr) and isinstance(parent, ast.Assign):
                    blocks += self._bound_in_file(path, parent, f"read {attr}", value, target,
                                                  trail)
                elif values and isinstance(parent, ast.Assign) and all(
                        isinstance(t, ast.Name) for t in parent.targets):
                    blocks += self._bound_at(path, parent, f"read {attr}")
        return blocks

    def _read_of(self, path: str, node: ast.AST, attr: str) -> ast.AST | None:
        """The expression reading setting ``attr`` where ``node`` names it: ``node``, or
        for an environment variable the read :func:`~contrib.audit.stack.reading.env_read`
        finds (``envs.SGLANG_X.get()``, ``get_bool_env_var("SGLANG_X")``); None where it
        does not read it."""
        if is_variable(attr):
            return env_read(node, self.parents(path)) if self.mode.values else None
        return node if reads(node, attr, self.mode.values) else None

    def _env_sets(self, block: Block, call: ast.Call, target: bool,
                  trail: Trail | None) -> Iterator[Block]:
        """What reads a variable that ``call`` sets (``envs.SGLANG_X.set(True)``) run, in
        a feature's walk: as ``self.flag = True`` enables the tests of ``.flag``."""
        found = env_set(call) if self.mode.values else None
        if found is None:
            return
        name, value = found
        via = (*block.via, f"sets {name}" if value is True else f"sets {name}={value!r}")
        yield from (Block(b.path, b.holder, b.code, via + b.via)
                    for b in self._readers(name, value, target, trail))

    def _bound_in_file(self, path: str, statement: ast.stmt, what: str, value: object,
                       target: bool, trail: Trail) -> list[Block]:
        """A variable's read bound where its file reads it again: to a name at the
        module's top level (``_use_x = get_bool_env_var("SGLANG_X")``) or to an attribute
        of ``self`` (``self.is_fp4_experts = envs.SGLANG_DSV4_FP4_EXPERTS.get()``): what
        the file's reads of that name enabled by ``value`` run (:func:`may_hold`; one step:
        a read bound again is not followed)."""
        if not isinstance(statement, ast.Assign):
            return []
        top = isinstance(self.parents(path).get(id(statement)), ast.Module)
        if not top and all(isinstance(t, ast.Name) for t in statement.targets):
            return self._bound_at(path, statement, what)  # `use = envs.X.get()`: below
        names = {t.id for t in statement.targets if isinstance(t, ast.Name) and top}
        attrs = {t.attr for t in statement.targets if isinstance(t, ast.Attribute)
                 and isinstance(t.value, ast.Name) and t.value.id == "self"}
        module = self.ev.module(path)
        if module is None or not (names or attrs):
            return []
        blocks: list[Block] = []
        parents = self.parents(path)
        for node in ast.walk(module[0]):
            if (isinstance(node, ast.Name) and node.id in names or isinstance(
                    node, ast.Attribute) and node.attr in attrs) and isinstance(
                    getattr(node, "ctx", None), ast.Load) and may_hold(
                    node, parents.get(id(node)), value):
                blocks += self._read_at(path, node, what, target, trail)
        return blocks

    def _bound_at(self, path: str, statement: ast.Assign, what: str) -> list[Block]:
        """A setting's value bound to a local name (``backend = getattr(args, "x")``):
        what its function runs after the binding, in the block holding it (a branch's
        too: sglang's sampler binds ``backend`` in an ``else``), which decides with it
        there."""
        holder = self.holder(path, statement)
        after = _rest_of_block(self.parents(path), statement)
        if holder is None or not after:
            return []
        return [Block(path, holder, tuple(after), (f"{what} in {holder.name}()",))]

    def _read_at(self, path: str, node: ast.AST, what: str, target: bool,
                 trail: Trail, *, bound: object = None) -> list[Block]:
        """What runs where ``node`` reads a setting: the body of the ``if`` it tests, else
        what the callers of the function deciding with it run; ``bound``: where not None,
        a read bound to a name the file reads again is followed there with this value
        (:meth:`_bound_in_file`)."""
        parents = self.parents(path)
        if self._never_true(path, node):
            return []
        child, up = node, parents.get(id(node))
        while up is not None and not isinstance(up, Function):
            if isinstance(up, ast.If | ast.While) and up.test is child:
                if self.excluded(path, up.test.lineno, up.test.end_lineno or up.test.lineno):
                    trail.stopped(path, up)
                    return []
                return [Block(path, self.holder(path, up), tuple(up.body),
                               (f"{what} at {path}:{up.lineno}",))]
            if isinstance(up, ast.stmt):
                # read in a statement other than a test: a decision, below; on the
                # target's way, one that an excluding gate of the same statement decides
                # is false (`return (is_sm90() or is_sm100()) and args.flag`)
                if target and self.excluded(path, up.lineno, up.end_lineno or up.lineno):
                    trail.stopped(path, up)
                    return []
                if bound is not None and self.mode.values:
                    kept = self._bound_in_file(path, up, what, bound, target, trail)
                    if kept:
                        return kept
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
                frame = self.reading.frame(path, self.holder(path, up))
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
                led = Outside(out.dotted, (*block.via, *out.via), out.keys, out.site)
                if all(o.dotted != led.dotted or o.keys != led.keys for o in found):
                    found.append(led)
        return found

    def _callers_of(self, name: str) -> list[Block]:
        """The code that runs after each call of ``name`` in its block (and the body of
        an ``if`` that tests the call)."""
        if not distinctive(name):
            return []
        if name not in self._callers:
            self._callers[name] = []
            blocks: list[Block] = []
            pattern = re.compile(rf"\b{re.escape(name)}\(")
            for path, module in self.reading.modules_naming(name, pattern, _MAX_CALLERS):
                for node in self.reading.named(path, module).get(name, ()):
                    if isinstance(node, ast.Call) and callee_name(node) == name:
                        blocks += self._after(path, node, name)
            self._callers[name] = blocks
        return self._callers[name]

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
        if self.mode.values and not decides_with(statement, call):
            return []  # a feature's way: only code run because of what the call decided
        after = _rest_of_block(parents, statement)
        if after is None:
            return []
        if self.mode.values and isinstance(statement, ast.If):
            after = []  # the body the decision enables, not what runs anyway
        code = (*statement.body, *after) if isinstance(statement, ast.If) else tuple(after)
        via = (f"its caller at {path}:{statement.lineno}",)
        return [Block(path, self.holder(path, statement), tuple(code), via)]


def _rest_of_block(parents: dict[int, ast.AST], statement: ast.stmt) -> list[ast.stmt] | None:
    """The statements after ``statement`` in the block holding it (a body, an else, a
    finally); None where it stands in none."""
    block = parents.get(id(statement))
    for field in ("body", "orelse", "finalbody"):
        seq = getattr(block, field, None)
        if isinstance(seq, list) and statement in seq:
            return seq[seq.index(statement) + 1:]
    return None


def _key(block: Block) -> tuple[str, int, int]:
    """A block by its first statement (the syntax trees are kept, so ids are stable)."""
    return (block.path, id(block.code[0]) if block.code else 0, len(block.code))
