"""What each function of a PTX module compiles to, as a fingerprint two builds can compare.

A patch that drops ``__CUDA_ARCH__ < 1200`` from flashinfer's
``trtllm_allreduce.cuh`` guards must leave what ``compute_90a`` and
``compute_100a`` compile untouched; a wrong edit there changes it.  Two PTX
modules of one unit (base and patched, for one arch) are compared function by
function: each ``.entry`` (by its mangled name), each ``.func``, and the
module-scope data.  What does not change the code is left out before comparing:
comments (nvcc's banner, ``// begin inline asm``), ``.loc`` and ``.file`` line
information, the folder a unit was compiled from where a string holds it
(``assert``'s ``__FILE__``), and the module id nvcc writes into every
internal-linkage name (``_INTERNAL_bee7826f_19_trtllm_allreduce_cu_b7060e6a``:
it changes with the unit's path and text while the code stays the same, as
flashinfer's ``neg_zero_v`` constants showed between v0.6.16 and the series).  A function's :class:`Shape` is the digest of what
is left, its instruction count and each opcode's count, so a difference can be
told as "14 -> 9 instructions: -1 st.global.f32".
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MODULE = "(module-scope data)"  # globals, constants, strings: no function's own
_HEAD = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(entry|func)\b")
_NAME = re.compile(r"[A-Za-z_$][\w$]*")
_DROP = re.compile(r"^(?:\.loc|\.file|\.version|\.target|\.address_size|//)")
_STRING = re.compile(r"^(\.global\s+\.align\s+1\s+\.b8\s+[\w$]+)\[\d+\]\s*=\s*\{([\d,\s]+)\};$")
_LABEL = re.compile(r"^[\w$]+:$")
_PREDICATE = re.compile(r"^@!?%\w+\s+")
# nvcc's module id in an internal-linkage name: _INTERNAL_<hash>_<n>_<file, n chars>_<hash>
_INTERNAL = re.compile(r"_INTERNAL_[0-9a-f]{8}_(\d+)_")
_HASH = re.compile(r"_[0-9a-f]{8}")


@dataclass(frozen=True)
class Shape:
    """One function's PTX with line info and paths left out: its digest, its
    instruction count and each opcode's count (``st.global.f32``: 2), kept packed
    (``"bra:1 st.global.f32:2"``) and read only where two builds differ."""

    digest: str
    instructions: int
    packed: str = ""

    @property
    def ops(self) -> dict[str, int]:
        """Each opcode's count."""
        pairs = (item.rpartition(":") for item in self.packed.split())
        return {op: int(count) for op, _, count in pairs if count.isdigit()}

    def to_data(self) -> list[object]:
        return [self.digest, self.instructions, self.packed]

    @classmethod
    def from_data(cls, data: object) -> Shape:
        """Back from :meth:`to_data`; ValueError for anything else."""
        if not (isinstance(data, list) and len(data) == 3 and isinstance(data[1], int)):
            raise ValueError("not a shape")
        return cls(str(data[0]), data[1], str(data[2]))


def shapes(ptx: str, roots: Iterable[str] = ()) -> dict[str, Shape]:
    """Each function of ``ptx`` (an entry by its mangled name, a device function as
    ``.func NAME``) and :data:`MODULE`, with ``roots`` (the folders the unit was
    compiled from) cut out of the strings."""
    cut = [r.rstrip("/") + "/" for r in roots if r]
    found: dict[str, list[str]] = {}
    module: list[str] = []
    lines = iter(ptx.splitlines())
    for raw in lines:
        line = _clean(raw, cut)
        if line is None:
            continue
        head = _HEAD.match(line)
        if head is None:
            module.append(line)
            continue
        body = [line] + _rest(line, lines, cut)
        if not any("{" in part for part in body):
            module.extend(body)  # a declaration (`.extern .func vprintf(...);`)
            continue
        name = _function_name(" ".join(body), head.end())
        key = name if head.group(1) == "entry" else f".func {name}"
        found[key] = body
    out = {name: _shape(body) for name, body in found.items()}
    if module:
        out[MODULE] = _shape(module)
    return out


def _clean(raw: str, cut: list[str]) -> str | None:
    """A line without its comment and surrounding space; None when nothing is left or
    it is line information."""
    line = raw.split("//", 1)[0].strip() if "//" in raw else raw.strip()
    if not line or _DROP.match(line):
        return None
    if "_INTERNAL_" in line:
        line = _module_id_out(line)
    strings = _STRING.match(line)
    if strings and cut:
        data = bytes(int(b) for b in strings.group(2).split(",") if b.strip().isdigit())
        text = data.decode("utf-8", "replace")
        for root in cut:
            text = text.replace(root, "")
        return f"{strings.group(1)} = {text!r};"
    return line


def _module_id_out(line: str) -> str:
    """``line`` with the hashes of every internal-linkage name zeroed (lengths kept, so
    the names still demangle)."""
    parts, at = [], 0
    for match in _INTERNAL.finditer(line):
        if match.start() < at:
            continue
        parts.append(line[at:match.start()] + f"_INTERNAL_00000000_{match.group(1)}_")
        at = match.end() + int(match.group(1))
        parts.append(line[match.end():at])
        if _HASH.match(line, at):
            parts.append("_00000000")
            at += 9
    return "".join(parts) + line[at:]


def _rest(first: str, lines: Iterable[str], cut: list[str]) -> list[str]:
    """The lines of a function after its first: to the ``;`` of a declaration or the
    brace that closes its body."""
    depth = first.count("{") - first.count("}")
    opened = depth > 0
    if first.endswith(";") and not opened:
        return []
    body: list[str] = []
    for raw in lines:
        line = _clean(raw, cut)
        if line is None:
            continue
        body.append(line)
        depth += line.count("{") - line.count("}")
        opened = opened or "{" in line
        if (opened and depth <= 0) or (not opened and line.endswith(";")):
            break
    return body


def _function_name(text: str, start: int) -> str:
    """The name after ``.entry``/``.func`` (past a ``.func``'s return parameters)."""
    rest = text[start:].lstrip()
    if rest.startswith("("):
        rest = rest[rest.find(")") + 1:].lstrip()
    match = _NAME.match(rest)
    return match.group() if match else rest[:40]


def _shape(body: list[str]) -> Shape:
    ops: Counter[str] = Counter()
    for line in body:
        op = opcode(line)
        if op:
            ops[op] += 1
    digest = hashlib.sha256("\n".join(body).encode("utf-8", "replace")).hexdigest()[:32]
    return Shape(digest, sum(ops.values()), " ".join(f"{op}:{n}" for op, n in sorted(ops.items())))


def opcode(line: str) -> str:
    """The instruction of a PTX line (``st.global.f32``), "" for a directive, label or brace."""
    if line.startswith((".", "{", "}", "(", ")")) or _LABEL.match(line):
        return ""
    word = _PREDICATE.sub("", line).split(None, 1)
    return word[0].rstrip(";,") if word and word[0][0].isalpha() else ""


@dataclass(frozen=True)
class Change:
    """How one function differs between two builds: its instruction counts and the
    opcodes it gained and lost (``{"st.global.f32": 1}``)."""

    before: int
    after: int
    added: Mapping[str, int]
    removed: Mapping[str, int]


def change(before: Shape, after: Shape) -> Change:
    """What ``after`` gained and lost against ``before`` (the same digest: nothing)."""
    old, new = Counter(before.ops), Counter(after.ops)
    return Change(before.instructions, after.instructions,
                  dict(sorted((new - old).items())), dict(sorted((old - new).items())))
