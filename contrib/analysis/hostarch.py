"""What C/C++ says about an architecture beyond its ``#if`` guards.

The guard analysis (:mod:`contrib.analysis.cuda_arch`) sees code compiled out.
Two other ways a unit can have nothing for the target, read here in one linear
pass over each file (comments stripped):

* **ISA only other archs have.**  Device code compiled for the target that uses
  instructions of arch-specific families the target lacks, and nothing for the
  target or generic: inline PTX ``wgmma.*`` (PTX ISA 8.0+, ``sm_90a`` only) or
  ``tcgen05.*`` (PTX ISA 8.6+, ``sm_100a``/``sm_101a``/``sm_103a``/``sm_110a`` and
  the ``sm_100f``/``sm_110f`` families; not ``sm_120a``/``sm_121a``), per the PTX
  ISA's "Target ISA notes" of each instruction
  (https://docs.nvidia.com/cuda/parallel-thread-execution/); and CUTLASS/CuTe
  names that carry their SM in the name (``cutlass::arch::Sm100``,
  ``SM90_64x128x16_F16F16F16_SS``, ``SM100_MMA_F16BF16_SS``).  A name of SM 9.0
  or newer is arch-specific (the ``a`` features); an older one (``Sm80``, ``SM80_``)
  runs on every newer GPU, so it counts as generic.
* **A host check refusing the target.**  A capability read from the runtime
  (``cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ...)``,
  ``sm = getSMVersion()``, a member initialised so: ``mSM(getSMVersion())``) and
  ``cudaGetDeviceProperties(&props, ...)`` read as ``props.major``/``props.minor``)
  and then checked: ``TVM_FFI_ICHECK_EQ(major, 10)``, ``TORCH_CHECK(sm == 90 || sm ==
  100)``, ``if (sm < 90) { throw ... }``, ``FLASHINFER_CHECK(mSM == kSM_100 || mSM ==
  kSM_103, ...)``, ``TVM_FFI_ICHECK(props.major == 12 && props.minor == 0)`` (12.0
  alone: flashinfer's NVFP4 attention before #3897 opened 12.1).  The check's
  expression is evaluated on the target and on every capability of the admitted
  majors (only when it names nothing but the capability and integer constants the
  files define: ``constexpr int32_t kSM_100 = 100;``); false on the target and true
  on one of them, the target's own major's other minors included, is a refusal in
  the kernel's own C++.

Only ISA facts are tabled here (which PTX families which arch has), never an
upstream's predicates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from contrib.analysis.archvalues import Cap, Capabilities
from contrib.analysis.cexpr import ExprError, Macro, evaluate
from contrib.analysis.cscan import strip_comments
from contrib.analysis.cuda_arch import Pass
from contrib.arch import KNOWN, Arch
from contrib.record.finding import ERROR, Finding

# PTX instruction families and the majors whose arch-specific targets have them.
PTX_FAMILIES: dict[str, frozenset[int]] = {
    "wgmma": frozenset({9}),  # sm_90a
    "tcgen05": frozenset({10, 11}),  # sm_100a, sm_101a (now sm_110a), sm_103a; 100f/110f
}
# CuTe DSL's namespaces for those families (``cutlass.cute.nvgpu.tcgen05``, ``.warpgroup``
# for wgmma): a kernel written with them has the family's archs only.
CUTE_FAMILIES: dict[str, frozenset[int]] = {
    "tcgen05": PTX_FAMILIES["tcgen05"], "warpgroup": PTX_FAMILIES["wgmma"],
}
_PTX = re.compile(r'"[^"\n]*\b(' + "|".join(PTX_FAMILIES) + r')\.')
_SM_NAME = re.compile(r"\barch::Sm(\d{2,3})\b|\bSM(\d{2,3})_\w")  # ArchTags, CuTe atoms
_CAP_ATTR = re.compile(r"cudaDeviceGetAttribute\s*\(\s*&\s*(\w+)\s*,\s*"
                       r"cudaDevAttrComputeCapability(Major|Minor)")
# `cudaGetDeviceProperties(&props, device)`: then `props.major`, `props.minor`
_PROPS = re.compile(r"\bcudaGetDeviceProperties\s*\(\s*&\s*(\w+)\s*,")
_PROP_FIELD = "__prop_{}"  # the name `props.major` is read as (no C++ identifier starts so)
_SM_CALL = re.compile(r"\b(\w+)\s*=\s*(?:[\w:]+::)?(?:getSMVersion|get_sm_version|getSmVersion|"
                      r"GetSMVersion)\s*\(")
# a member initialised from it: `TllmGenFmhaRunner(...) : mSM(getSMVersion()), ...`
_SM_INIT = re.compile(r"[:,]\s*(\w+)\s*\(\s*(?:[\w:]+::)?(?:getSMVersion|get_sm_version|"
                      r"getSmVersion|GetSMVersion)\s*\(")
# an integer constant a check compares with: `constexpr int32_t kSM_100 = 100;`
_CONSTEXPR = re.compile(r"\b(?:static\s+)?constexpr\s+(?:static\s+)?(?:unsigned\s+)?"
                        r"(?:int|int32_t|int64_t|uint32_t|long|short|size_t|auto)\s+(\w+)\s*"
                        r"=\s*(\d+)\s*;")
_SM_SUM = re.compile(r"\b(\w+)\s*=\s*(\w+)\s*\*\s*10\s*\+\s*(\w+)\b")
_CHECK = re.compile(r"\b(?:TVM_FFI_ICHECK|ICHECK|TORCH_CHECK|TLLM_CHECK(?:_WITH_INFO)?|"
                    r"FLASHINFER_CHECK|CHECK)(_EQ|_NE|_GE|_GT|_LE|_LT)?\s*\(")
_IF_THROW = re.compile(r"\bif\s*\(")
_THROWS = re.compile(r"^\s*\{?\s*(?:throw\b|\w*THROW\w*\s*\(|(?:TORCH|TLLM)_CHECK\w*\s*\(\s*false)")
_OPS = {"_EQ": "==", "_NE": "!=", "_GE": ">=", "_GT": ">", "_LE": "<=", "_LT": "<"}
_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class _Use:
    line: int
    majors: frozenset[int]
    what: str


_ARCH_NAMED = re.compile(r"(?<![A-Za-z0-9])sm_?(\d{1,2}x|\d{2,3})[af]?(?![0-9])")


HOST_REFUSAL = "host-refusal"  # a Finding kind: a host check raising on the target


def named_so(written: dict[int, list[str]]) -> tuple[str, list[str]]:
    """The architectures of a :func:`written_for` reading (``sm_9x, sm_10x``) and the
    names that say so, sorted."""
    return (", ".join(f"sm_{m}x" for m in sorted(written)),
            sorted({n for names in written.values() for n in names}))


def written_for(names: Iterable[str]) -> dict[int, list[str]]:
    """The majors ``names`` (functions, unit paths) are named for: ``sm100`` and
    ``sm_100a`` -> 10, ``sm90`` -> 9, ``sm10x`` -> 10, ``sm120`` -> 12."""
    found: dict[int, list[str]] = {}
    for name in names:
        base = name.rsplit("/", 1)[-1]
        for tag in _ARCH_NAMED.findall(base):
            found.setdefault(int(tag[:-1]), []).append(base)  # the minor digit, or x, dropped
    return found


def arch_findings(files: Mapping[str, str], target_pass: Pass | None, arch: Arch,
                  admitted: Iterable[int]) -> list[Finding]:
    """Errors for a closure whose device code has only ISA other archs have, and for
    each host check that refuses ``arch`` while it passes an admitted major."""
    codes = {path: strip_comments(text) for path, text in sorted(files.items())}
    uses = [(path, u) for path, code in codes.items() for u in _isa_uses(code)
            if target_pass is None or target_pass.compiled(path, u.line)]
    return _host_findings(codes, arch, admitted) + _isa_finding(uses, arch)


def _isa_uses(code: str) -> list[_Use]:
    uses: list[_Use] = []
    for number, line in enumerate(code.splitlines(), 1):
        for match in _PTX.finditer(line):
            uses.append(_Use(number, PTX_FAMILIES[match[1]], f"{match[1]} PTX"))
        for match in _SM_NAME.finditer(line):
            sm = int(match[1] or match[2])
            uses.append(_Use(number, frozenset({sm // 10}), match[0][:-2] if match[2] else match[0]))
    return uses


def _isa_finding(uses: list[tuple[str, _Use]], arch: Arch) -> list[Finding]:
    """One error when the target's device code uses only arch-specific ISA of others."""
    foreign = [(p, u) for p, u in uses if arch.major not in u.majors and min(u.majors) >= 9]
    serves = [u for _, u in uses if arch.major in u.majors or max(u.majors) < 9]
    if not foreign or serves:
        return []
    path, first = foreign[0]
    majors = sorted({m for _, u in foreign for m in u.majors})
    names = sorted({u.what for _, u in foreign})[:4]
    return [Finding("foreign-isa", ERROR, path, first.line,
                    f"device code compiled for {arch.name} uses only ISA of majors "
                    f"{', '.join(map(str, majors))} ({', '.join(names)}; {len(foreign)} uses), "
                    f"which {arch.name} lacks, and nothing for it")]


def capability_names(code: str) -> dict[str, str]:
    """Names holding the runtime capability: ``major``, ``minor`` or ``sm`` (major*10+minor);
    a properties struct's fields under :data:`_PROP_FIELD` (see :func:`_fields_named`)."""
    names = {m[1]: m[2].lower() for m in _CAP_ATTR.finditer(code)}
    if _PROPS.search(code):
        names.update({_PROP_FIELD.format("major"): "major", _PROP_FIELD.format("minor"): "minor"})
    names.update((m[1], "sm") for m in _SM_CALL.finditer(code))
    names.update((m[1], "sm") for m in _SM_INIT.finditer(code))
    for m in _SM_SUM.finditer(code):
        if names.get(m[2]) == "major" and names.get(m[3]) == "minor":
            names[m[1]] = "sm"
    return names


def constant_values(codes: Iterable[str]) -> dict[str, int]:
    """The integer constants the files define (``constexpr int32_t kSM_100 = 100;``),
    which host checks compare the capability with; a name defined twice with two values
    is left out."""
    found: dict[str, int] = {}
    twice: set[str] = set()
    for code in codes:
        for m in _CONSTEXPR.finditer(code):
            if found.setdefault(m[1], int(m[2])) != int(m[2]):
                twice.add(m[1])
    return {name: value for name, value in found.items() if name not in twice}


def _fields_named(code: str, expression: str) -> str:
    """``props.major == 12`` read as ``__prop_major == 12`` where ``props`` was filled by
    ``cudaGetDeviceProperties`` in ``code``."""
    for struct in {m[1] for m in _PROPS.finditer(code)}:
        expression = re.sub(rf"\b{re.escape(struct)}\s*(?:\.|->)\s*(major|minor)\b",
                            lambda m: _PROP_FIELD.format(m[1]), expression)
    return expression


def host_checks(files: Mapping[str, str], arch: Arch, admitted: Iterable[int]) -> list[Finding]:
    """Each host check of ``files`` that refuses ``arch`` while a capability of a major
    of ``admitted`` passes it (the second half of :func:`arch_findings`)."""
    return _host_findings({path: strip_comments(text) for path, text in sorted(files.items())},
                          arch, admitted)


def _host_findings(codes: Mapping[str, str], arch: Arch, admitted: Iterable[int]) -> list[Finding]:
    """The host checks of the files (``codes``: their text, comments stripped)."""
    target = (arch.major, arch.minor)
    caps = [cap for cap in KNOWN if cap[0] in set(admitted) and cap != target]
    if not caps:
        return []
    known = constant_values(codes.values())
    return [f for path, code in codes.items() for f in _host_checks(path, code, arch, caps, known)]


def _host_checks(path: str, code: str, arch: Arch, admitted: list[Cap],
                 known: Mapping[str, int]) -> list[Finding]:
    names = capability_names(code)
    if not names:
        return []
    known = {n: v for n, v in known.items() if n not in names}
    findings = []
    for line, written, shown in _checks(code):
        expression = _fields_named(code, written)
        idents = set(_IDENT.findall(expression))
        if not idents & set(names) or not idents <= set(names) | set(known):
            continue
        on_target = _value(expression, names, arch.major, arch.minor, known)
        passing = [cap for cap in admitted if _value(expression, names, *cap, known)]
        if on_target is False and passing:
            passes = Capabilities.listed(passing)
            verb = "passes" if not passes.whole and len(passes.single) == 1 else "pass"
            findings.append(Finding(
                HOST_REFUSAL, ERROR, path, line,
                f"`{shown}` refuses {arch.name} at run time; {passes.text()} {verb} it"))
    return findings


def _checks(code: str) -> list[tuple[int, str, str]]:
    """Each check on a condition: (line, the condition that must hold, its text)."""
    found = []
    for match in _CHECK.finditer(code):
        args = _arguments(code, match.end())
        if args is None:
            continue
        op = _OPS.get(match[1] or "")
        if op and len(args) >= 2:
            expression = f"({args[0]}) {op} ({args[1]})"
        elif not op and args:
            expression = args[0]
        else:
            continue
        found.append((code.count("\n", 0, match.start()) + 1, expression,
                      " ".join(code[match.start():match.end()].split()) + ", ".join(args[:2]) + ")"))
    for match in _IF_THROW.finditer(code):
        args = _arguments(code, match.end())
        if args is None or len(args) != 1:
            continue
        after = code[match.end():match.end() + 400]
        close = _close(after)
        if close is not None and _THROWS.match(after[close + 1:]):
            found.append((code.count("\n", 0, match.start()) + 1, f"!({args[0]})",
                          f"if ({' '.join(args[0].split())}) throw"))
    return found


def _close(text: str) -> int | None:
    """The index of the parenthesis closing an opened one (``text`` starts inside it)."""
    depth = 1
    for index, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return index
    return None


def _arguments(code: str, start: int) -> list[str] | None:
    """The top-level comma-separated arguments of a call whose ``(`` ends at ``start``."""
    end = _close(code[start:start + 2000])
    if end is None:
        return None
    return split_arguments(code[start:start + end])


def split_arguments(text: str) -> list[str]:
    """The top-level comma-separated arguments of a call's text after its ``(``, up to
    the bracket that closes it (or the end)."""
    args: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                break
        if ch == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    args.append("".join(current).strip())
    return args


def _value(expression: str, names: dict[str, str], major: int, minor: int,
           known: Mapping[str, int]) -> bool | None:
    values = {"major": major, "minor": minor, "sm": major * 10 + minor}
    macros = {name: Macro(name, str(value)) for name, value in known.items()}
    macros |= {name: Macro(name, str(values[kind])) for name, kind in names.items()}
    try:
        return evaluate(expression, macros).true
    except ExprError:
        return None
