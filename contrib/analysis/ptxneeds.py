"""What a kernel's PTX needs of its target: instruction families and shared memory.

A kernel compiled for ``compute_120a`` that still holds ``tcgen05.*`` (inline
assembly no ``#if`` took out) does not assemble for an RTX PRO 6000: CUDA 13's
``nvcc --ptx`` checks the PTX with ``ptxas -arch=compute_120a`` and stops at
"Instruction 'tcgen05.fence' not supported on .target 'sm_120a'".  A kernel
whose shared memory passes the target's per-block limit compiles and fails at
launch: flashinfer's FP8-KV ragged prefill at head_dim 512 asked SM120 for
132,176 bytes against 101,376 (fixed at ce52279d5).  One table of per-arch
facts (:data:`FAMILIES`, :data:`SHARED_LIMITS`) and the readings of a unit's
PTX and of ``ptxas`` output (``-v``'s resources, its refusals) per kernel;
:func:`lacks` judges them against the target as typed :class:`Lack` values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

_TARGET = re.compile(r"(?:sm|compute)_(?P<digits>[0-9]{2,3})(?P<suffix>[af]?)", re.ASCII)


@dataclass(frozen=True)
class Family:
    """PTX instructions sharing a prefix and the targets that have them: from
    ``lowest`` on, only the ``a``/``f`` targets when ``specific``, only ``majors``
    when given."""

    prefix: str  # "tcgen05", "cp.async.bulk"
    lowest: tuple[int, int]
    specific: bool = False
    majors: tuple[int, ...] = ()
    source: str = ""

    def on(self, target: str) -> bool | None:
        """Whether ``target`` (``sm_120a``, ``compute_100f``) has these; None: unread."""
        parsed = _TARGET.fullmatch(target)
        if parsed is None:
            return None
        digits = parsed.group("digits")
        major, minor = int(digits[:-1]), int(digits[-1])
        return ((major, minor) >= self.lowest and (not self.specific or bool(parsed.group("suffix")))
                and (not self.majors or major in self.majors))


_ISA = "PTX ISA 9.0, Target ISA notes of"
_PTXAS = "checked with ptxas 13.0.88 on sm_80..sm_121f"
# Most specific prefix first: an instruction takes the first row it starts with.
FAMILIES: tuple[Family, ...] = (
    Family("tcgen05", (10, 0), True, (10, 11), f"{_ISA} tcgen05 (sm_100a/f, sm_101a, sm_103a/f, "
           f"sm_110a/f); {_PTXAS}"),
    Family("wgmma", (9, 0), True, (9,), f"{_ISA} wgmma.mma_async (sm_90a); {_PTXAS}"),
    Family("setmaxnreg", (9, 0), True, (), f"{_ISA} setmaxnreg (sm_90a, sm_100a/f, sm_103a/f, "
           f"sm_110a/f, sm_120a/f, sm_121a/f); {_PTXAS}"),
    Family("tensormap.replace", (9, 0), True, (), f"{_ISA} tensormap.replace; {_PTXAS}"),
    Family("cp.async.bulk", (9, 0), source=f"{_ISA} cp.async.bulk (sm_90); {_PTXAS}"),
    Family("cp.reduce.async.bulk", (9, 0), source=f"{_ISA} cp.reduce.async.bulk (sm_90)"),
    Family("mbarrier.try_wait", (9, 0), source=f"{_ISA} mbarrier.try_wait (sm_90); {_PTXAS}"),
    Family("elect.sync", (9, 0), source=f"{_ISA} elect.sync (sm_90); {_PTXAS}"),
    Family("fence.proxy.async", (9, 0), source=f"{_ISA} fence.proxy.async (sm_90); {_PTXAS}"),
    Family("multimem", (9, 0), source=f"{_ISA} multimem (sm_90); {_PTXAS}"),
    Family("stmatrix", (9, 0), source=f"{_ISA} stmatrix (sm_90)"),
    Family("cp.async", (8, 0), source=f"{_ISA} cp.async (sm_80); {_PTXAS}"),
)

# The most shared memory one block may have (the opt-in maximum,
# cudaDevAttrMaxSharedMemoryPerBlockOptin), by (major, minor).  CUDA C++ Programming
# Guide, "Technical Specifications per Compute Capability"; ptxas 13.0 refuses a
# static `.shared` above the same figure ("uses too much shared data (0x27100 bytes,
# 0x18c00 max)" on sm_120a, 0x38c00 on sm_90a).
SHARED_LIMITS: dict[tuple[int, int], int] = {
    (7, 0): 96 * 1024, (7, 2): 96 * 1024, (7, 5): 64 * 1024,
    (8, 0): 163 * 1024, (8, 6): 99 * 1024, (8, 7): 163 * 1024, (8, 9): 99 * 1024,
    (9, 0): 227 * 1024,
    (10, 0): 227 * 1024, (10, 1): 227 * 1024, (10, 3): 227 * 1024, (11, 0): 227 * 1024,
    (12, 0): 99 * 1024, (12, 1): 99 * 1024,
}


def family_of(opcode: str) -> Family | None:
    """The row of :data:`FAMILIES` an instruction (``tcgen05.alloc.cta_group::1``) is in."""
    for family in FAMILIES:
        if opcode == family.prefix or opcode.startswith(family.prefix + "."):
            return family
    return None


def shared_limit(target: str) -> int | None:
    """The per-block shared memory limit of ``target`` in bytes; None for an arch the
    table lacks."""
    parsed = _TARGET.fullmatch(target)
    if parsed is None:
        return None
    digits = parsed.group("digits")
    return SHARED_LIMITS.get((int(digits[:-1]), int(digits[-1])))


class LackKind(StrEnum):
    """What a kernel needs that its target lacks."""

    INSTRUCTION = "instruction"  # an instruction family the target does not have
    SHARED = "shared-memory"  # more shared memory than one block may have


@dataclass(frozen=True)
class Lack:
    """One kernel (mangled) and what the target lacks for it: the instruction, or the
    bytes against the limit, and where the figure was read (``ptxas``, the PTX's
    ``.shared`` declarations)."""

    kernel: str
    kind: LackKind
    target: str
    instruction: str = ""
    bytes: int = 0
    limit: int = 0
    read_from: str = ""

    def figure(self) -> str:
        """The figure in words: ``tcgen05.fence`` or ``132176 bytes of shared memory
        (limit 101376)``."""
        if self.kind is LackKind.INSTRUCTION:
            return f"`{self.instruction}`, which {self.target} lacks"
        return (f"{self.bytes} bytes of shared memory, over {self.target}'s per-block limit "
                f"of {self.limit} ({self.read_from})")


def lacks(target: str, families: dict[str, list[str]], shared: dict[str, int],
          refused: list[list[str]], over: dict[str, list[int]]) -> list[Lack]:
    """What ``target`` lacks for each kernel: ``refused`` ([kernel, instruction, target]
    from ptxas), ``over`` (kernel -> [bytes, max] from ptxas), else the PTX's own
    reading (``families``: kernel -> instructions used of :data:`FAMILIES`;
    ``shared``: kernel -> static bytes)."""
    found = [Lack(k, LackKind.INSTRUCTION, t, instruction=i, read_from="ptxas")
             for k, i, t in refused]
    named = {lack.kernel for lack in found}
    for kernel, used in sorted(families.items()):
        for instruction in used:
            family = family_of(instruction)
            if kernel not in named and family is not None and family.on(target) is False:
                found.append(Lack(kernel, LackKind.INSTRUCTION, target, instruction=instruction,
                                  read_from=family.source))
    limit = shared_limit(target)
    for kernel, (size, most) in sorted(over.items()):
        found.append(Lack(kernel, LackKind.SHARED, target, bytes=size, limit=most,
                          read_from="ptxas"))
    for kernel, size in sorted(shared.items()):
        if kernel not in over and limit is not None and size > limit:
            found.append(Lack(kernel, LackKind.SHARED, target, bytes=size, limit=limit,
                              read_from="the PTX's static .shared"))
    return found


# ---- reading a PTX module ------------------------------------------------------------

_FUNC = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(?P<kind>entry|func)\s+"
                   r"(?:\([^)]*\)\s*)?(?P<name>[A-Za-z_$][\w$]*)", re.M)
_SHARED = re.compile(r"^\s*(?P<extern>\.extern\s+)?\.shared\s+(?:\.align\s+\d+\s+)?"
                     r"(?P<vec>\.v[24]\s+)?\.(?P<type>[a-z]+)(?P<bits>\d+)(?:x2)?\s+"
                     r"(?P<name>[\w$]+)(?P<dims>(?:\[\d*\])*)", re.M)
_CALL = re.compile(r"\bcall(?:\.uni)?\s*(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)")
_OPCODE = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)", re.M)
_BRACE = re.compile(r"[{}]")


@dataclass(frozen=True)
class KernelReading:
    """Per ``.entry`` (mangled): the instructions it reaches of :data:`FAMILIES`
    (through the ``.func``s it calls too), its static ``.shared`` bytes, whether it uses
    dynamic (``.extern``) shared memory, and the PTX lines its body spans."""

    families: dict[str, list[str]]
    shared: dict[str, int]
    dynamic: list[str]
    lines: dict[str, tuple[int, int]]


def read_module(ptx: str) -> KernelReading:
    """The :class:`KernelReading` of a PTX module."""
    bodies = spans(ptx)
    module_shared = {m.group("name"): _size(m) for m in _SHARED.finditer(ptx)
                     if not _inside(bodies, m.start())}
    direct: dict[str, tuple[set[str], int, set[str], set[str]]] = {}
    for name, (_, start, end) in bodies.items():
        body = ptx[start:end]
        used = {_short(op) for op in _OPCODE.findall(body) if family_of(op) is not None}
        own = sum(_size(m) for m in _SHARED.finditer(body))
        refs = {v for v in module_shared if re.search(rf"(?<![\w$]){re.escape(v)}(?![\w$])", body)}
        direct[name] = (used, own, refs, set(_CALL.findall(body)) & set(bodies))
    families, shared, dynamic, lines = {}, {}, [], {}
    line, at = 1, 0  # the line of offset `at`, counted on from one body to the next
    for name, (kind, start, end) in bodies.items():
        if kind != "entry":
            continue
        reach = _closure(name, direct)
        used = set().union(*(direct[f][0] for f in reach))
        refs = set().union(*(direct[f][2] for f in reach))
        static = sum(direct[f][1] for f in reach) + sum(module_shared[v] for v in refs
                                                        if module_shared[v] > 0)
        if used:
            families[name] = sorted(used)
        if static:
            shared[name] = static
        if any(module_shared[v] == 0 for v in refs):
            dynamic.append(name)
        if start < at:
            line, at = 1, 0
        first = line + ptx.count("\n", at, start)
        line, at = first + ptx.count("\n", start, end), end
        lines[name] = (first, line)
    return KernelReading(families, shared, dynamic, lines)


def spans(ptx: str) -> dict[str, tuple[str, int, int]]:
    """Each function with a body (``.entry`` or ``.func``, in the module's order): its
    kind and the offsets of its body's braces."""
    found = {}
    for match in _FUNC.finditer(ptx):
        semi, brace = ptx.find(";", match.end()), ptx.find("{", match.end())
        if brace < 0 or 0 <= semi < brace:
            continue  # a declaration (`.extern .func vprintf(...);`)
        depth, end = 0, len(ptx)
        for mark in _BRACE.finditer(ptx, brace):
            depth += 1 if mark.group() == "{" else -1
            if depth == 0:
                end = mark.start()
                break
        found[match.group("name")] = (match.group("kind"), brace, end)
    return found


def _short(opcode: str) -> str:
    """An instruction as ptxas names it: its family and the next part (``tcgen05.fence``,
    ``cp.async.bulk.tensor``), modifiers left out."""
    family = family_of(opcode)
    prefix = family.prefix if family else ""
    rest = opcode[len(prefix):].split("::", 1)[0].split(".")
    return prefix + (f".{rest[1]}" if len(rest) > 1 and rest[1] else "")


def _inside(spans: dict[str, tuple[str, int, int]], offset: int) -> bool:
    return any(start <= offset <= end for _, start, end in spans.values())


def _size(match: re.Match[str]) -> int:
    """A ``.shared`` declaration's bytes; 0 for an unsized (dynamic) one."""
    if match.group("extern") or "[]" in match.group("dims"):
        return 0
    count = 1
    for dim in re.findall(r"\[(\d+)\]", match.group("dims")):
        count *= int(dim)
    lanes = int(match.group("vec")[2]) if match.group("vec") else 1
    return count * lanes * max(1, int(match.group("bits")) // 8)


def _closure(entry: str, direct: dict[str, tuple[set[str], int, set[str], set[str]]]) -> set[str]:
    seen, todo = {entry}, [entry]
    while todo:
        for callee in direct[todo.pop()][3]:
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return seen


# ---- reading ptxas's output ----------------------------------------------------------

_NOT_SUPPORTED = re.compile(r"line (?P<line>\d+); error\s*:\s*Instruction '(?P<ins>[^']+)' "
                            r"not supported on \.target '(?P<target>[^']+)'")
_TOO_MUCH = re.compile(r"Entry function '(?P<name>[^']+)' uses too much shared data "
                       r"\((?P<bytes>0x[0-9a-f]+|\d+) bytes, (?P<max>0x[0-9a-f]+|\d+) max\)")
_COMPILING = re.compile(r"(?:Compiling entry function|Function properties for) '?(?P<name>[\w$]+)'?")
_SPILLS = re.compile(r"(?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads")
_USED = re.compile(r"Used (?P<regs>\d+) registers(?:.*?(?P<smem>\d+) bytes smem)?")


def refused(output: str, lines: dict[str, tuple[int, int]]) -> list[list[str]]:
    """[kernel, instruction, target] for each "Instruction 'X' not supported on
    .target 'Y'" of ptxas, the kernel found by the PTX line (``lines``: :class:`KernelReading`'s);
    once per kernel and instruction."""
    found: dict[tuple[str, str], str] = {}
    for match in _NOT_SUPPORTED.finditer(output):
        line = int(match.group("line"))
        kernel = next((k for k, (a, b) in lines.items() if a <= line <= b), "")
        found.setdefault((kernel, match.group("ins")), match.group("target"))
    return [[k, i, t] for (k, i), t in found.items()]


def over_shared(output: str) -> dict[str, list[int]]:
    """Kernel -> [bytes, max] for each "uses too much shared data" of ptxas."""
    return {m.group("name"): [int(m.group("bytes"), 0), int(m.group("max"), 0)]
            for m in _TOO_MUCH.finditer(output)}


def resources(verbose: str) -> dict[str, list[int]]:
    """Kernel -> [registers, static shared bytes, spill stores, spill loads] from
    ``ptxas -v``."""
    found: dict[str, list[int]] = {}
    name = ""
    for line in verbose.splitlines():
        head = _COMPILING.search(line)
        if head:
            name = head.group("name")
            found.setdefault(name, [0, 0, 0, 0])
            continue
        spills, used = _SPILLS.search(line), _USED.search(line)
        if name and spills:
            found[name][2:] = [int(spills.group("stores")), int(spills.group("loads"))]
        if name and used:
            found[name][:2] = [int(used.group("regs")), int(used.group("smem") or 0)]
    return found
