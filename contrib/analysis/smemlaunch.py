"""The dynamic shared memory host code asks for a kernel, where the source fixes it.

A kernel's ``extern __shared__`` size is set at launch: ``cudaFuncSetAttribute(kernel,
cudaFuncAttributeMaxDynamicSharedMemorySize, N)``, the third argument of
``kernel<<<grid, block, N>>>``, or ``config.dynamicSmemBytes = N``.  Where ``N`` is
a constant expression in the source (literals, ``#define``s, a ``constexpr`` or an
unchanged local initialised from one) its value is compared with the target's
per-block limit (:func:`contrib.analysis.ptxneeds.shared_limit`); where it is not,
the reading says why.  flashinfer's prefill at ce52279d5^ sets
``smem_size = sizeof(SmemStorage)`` for a ``KernelTraits`` chosen at run time: a
type's size only the compiler knows, so the 132,176 bytes it needed on SM120 are
not decided here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contrib.analysis import cexpr
from contrib.analysis.cscan import match_close, strip_comments

_ATTRIBUTE = re.compile(r"\bcudaFuncSetAttribute\s*\(")
_CHEVRONS = re.compile(r"(?P<kernel>[A-Za-z_][\w:]*(?:<[^<>;]*>)?)\s*<<<")
_CONFIG = re.compile(r"\.dynamicSmemBytes\s*=\s*(?P<expr>[^;]+);")
_DEFINE = re.compile(r"^\s*#\s*define\s+(.*)$", re.M)
_DEPTH = 4
# a cast, which leaves the value as it is: `(size_t)N`, `static_cast<int>(N)`, `size_t(N)`
_INTEGER = r"(?:unsigned\s+)?(?:size_t|int|unsigned|u?int(?:32|64)_t)"
_CAST = re.compile(rf"\(\s*(?:const\s+)?{_INTEGER}\s*\)|\bstatic_cast\s*<[^>]*>|\b{_INTEGER}\b")
_SAME_REQUEST = 2000  # characters between an attribute set and the launch it is for


@dataclass(frozen=True)
class SmemSite:
    """One place host code sets a kernel's dynamic shared memory: the kernel as written,
    the expression, its value in bytes when the source fixes it, else why not."""

    path: str
    line: int
    kernel: str
    expression: str
    value: int | None
    why: str = ""  # when value is None


def sites(path: str, text: str) -> list[SmemSite]:
    """Every :class:`SmemSite` of one file."""
    code = strip_comments(text)
    macros = {m.name: m for m in (cexpr.parse_define(d) for d in _DEFINE.findall(code))
              if m is not None and m.params is None}
    found = []
    for kernel, expr, at in _requests(code):
        value, why = _value(expr, code, at, macros, _DEPTH)
        found.append(SmemSite(path, code.count("\n", 0, at) + 1, _kernel(kernel, code, at),
                              expr, value, why))
    return found


def _kernel(written: str, code: str, at: int) -> str:
    """The kernel a launch names: a local holding it (``auto kernel = Name<...>;``) read
    through, template arguments left out."""
    bound = _binding(code, written, at) if re.fullmatch(r"[A-Za-z_]\w*", written) else None
    name = bound[0] if bound else written
    return re.sub(r"<.*", "", name.lstrip("&"), flags=re.S).strip() or written


def _requests(code: str) -> list[tuple[str, str, int]]:
    """(kernel, size expression, offset) of each request for dynamic shared memory."""
    found = []
    for match in _ATTRIBUTE.finditer(code):
        close = match_close(code, match.end() - 1, "(", ")")
        args = _split(code[match.end():close]) if close > 0 else []
        if len(args) == 3 and "MaxDynamicSharedMemorySize" in args[1]:
            found.append((args[0], args[2], match.start()))
    for match in _CHEVRONS.finditer(code):
        end = code.find(">>>", match.end())
        args = _split(code[match.end():end]) if end > 0 else []
        if len(args) >= 3:
            found.append((match.group("kernel"), args[2], match.start()))
    for match in _CONFIG.finditer(code):
        expr = match.group("expr").strip()
        # the launch of a kernel whose attribute was just set to the same size: one request
        if not any(e == expr and 0 < match.start() - at < _SAME_REQUEST for _, e, at in found):
            found.append(("(cudaLaunchKernelEx)", expr, match.start()))
    return found


def _split(args: str) -> list[str]:
    """Top-level comma-separated arguments."""
    parts, depth, start = [], 0, 0
    for at, char in enumerate(args):
        depth += (char in "([{<") - (char in ")]}>")
        if char == "," and depth == 0:
            parts.append(args[start:at].strip())
            start = at + 1
    return [*parts, args[start:].strip()] if args.strip() else parts


def _value(expr: str, code: str, at: int, macros: dict[str, cexpr.Macro],
           depth: int) -> tuple[int | None, str]:
    """``expr``'s value at offset ``at`` of ``code``, else (None, why)."""
    sized = re.search(r"\bsizeof\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)", expr)
    if sized:
        return None, (f"`sizeof({sized.group(1).strip()})` is a type's size, which only the "
                      "compiler knows (for the template arguments the launch is instantiated "
                      "with)")
    expr = _CAST.sub("", expr).strip()
    for name in dict.fromkeys(re.findall(r"\b[A-Za-z_]\w*\b", expr)):
        if name in macros:
            continue
        bound = _binding(code, name, at)
        if bound is None:
            return None, (f"`{name}` is not a constant of the source (a parameter, a value "
                          "computed at run time, or a name outside this file)")
        if depth == 0:
            return None, f"`{name}` is defined through too many names to follow"
        value, why = _value(bound[0], code, bound[1], macros, depth - 1)
        if value is None:
            return None, why
        expr = re.sub(rf"\b{name}\b", f"({value})", expr)
    try:
        result = cexpr.evaluate(expr, macros)
    except cexpr.ExprError as exc:
        return None, f"`{expr}` is not an integer expression this reading evaluates ({exc})"
    if result.unknown:
        return None, f"`{', '.join(sorted(result.unknown))}` has no value in the source"
    return result.value, ""


def _binding(code: str, name: str, at: int) -> tuple[str, int] | None:
    """The initialiser of the nearest declaration of ``name`` before ``at`` (and its
    offset), when nothing assigns ``name`` between them."""
    declared = list(re.finditer(rf"\b(?:[\w:<>]+\s+)+{name}\s*(?:=\s*|\{{)(?P<init>[^;{{}}]+)[}}]?\s*;",
                                code[:at]))
    if not declared:
        return None
    last = declared[-1]
    if re.search(rf"\b{name}\s*(?:[-+*/|&]?=(?!=))", code[last.end():at]):
        return None  # reassigned on the way
    return last.group("init").strip(), last.start()
