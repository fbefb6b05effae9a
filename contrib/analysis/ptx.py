"""Compile translation units to PTX with nvcc and flag kernels that do nothing.

The preprocessor analysis reads guards; this stage asks the compiler.  An
``.entry`` whose body is just ``ret;`` is a kernel that launches, does nothing
and reports success: the flashinfer#3903 trap seen from the PTX side.  So is one
that only prints an error and traps (CUTLASS's stub for an arch it compiled its
MMA out of), or that only reads and branches: all are "empty" here.
No GPU is needed, only ``nvcc`` and the headers the sources include.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from contrib.analysis import ptxneeds
from contrib.arch import Arch

_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(")
_MISSING_HEADER = re.compile(r"fatal error:\s*([^:\n]+?):\s*No such file or directory")
_ERROR_LINE = re.compile(r"^(?P<file>[^\s(:][^(:]*?)(?:\((?P<l1>\d+)\)|:(?P<l2>\d+)(?::\d+)?):?\s*(?:fatal )?error\b.*$",
                         re.M)
_NOISE = re.compile(r"^\s*(?:\.reg|\.local|\.shared|\.pragma|\.loc|\.file|//|\$L\w*:|$)")
NVCC_LOCATIONS = ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc")  # after PATH


def find_nvcc() -> str | None:
    """nvcc from PATH, else the usual CUDA locations."""
    found = shutil.which("nvcc")
    if found:
        return found
    for candidate in NVCC_LOCATIONS:
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def nvcc_version(nvcc: str | None = None) -> str | None:
    """``release 13.0, V13.0.88`` from ``nvcc --version``, or None without nvcc."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release [\d.]+, V[\d.]+", out)
    return match.group() if match else out.strip().splitlines()[-1] if out.strip() else None


def demangle(name: str) -> str:
    """The (namespace-qualified) function name inside an Itanium-mangled symbol, best effort."""
    if not name.startswith("_Z"):
        return name
    rest = name[2:].lstrip("L")
    nested = rest.startswith("N")
    rest = rest[1:] if nested else rest
    parts = []
    while match := re.match(r"\d+", rest):
        length, start = int(match.group()), len(match.group())
        parts.append(rest[start : start + length])
        rest = rest[start + length :]
        if not nested:
            break
    return "::".join(parts) or name


def empty_entries(ptx: str) -> list[str]:
    """Mangled names of ``.entry`` functions that do no work: nothing in them stores,
    reduces, copies, runs an MMA or calls a function (other than ``printf`` and
    ``assert``'s report), so a launch changes nothing another thread or the host sees.

    ``ret;`` alone is one (the flashinfer#3903 guard around a whole body).  So is
    CUTLASS's and CuTe's stub for an arch its MMA is compiled out of
    (``printf("ERROR : Arch conditional MMA instruction used without targeting
    appropriate compute capability. Aborting.")``, ``CUTE_INVALID_CONTROL_PATH``, a
    ``trap``/``brkpt``), and a body whose every effect the preprocessor removed for
    the arch, leaving reads and branches.  (A kernel that still does work but reaches
    such an error path where its MMA should be is :func:`disabled_entries`'.)
    """
    return _empty(_bodies(ptx))


def _empty(bodies: list[tuple[str, list[str]]]) -> list[str]:
    return [name for name, body in bodies if not _does_work(body)]


def _bodies(ptx: str) -> list[tuple[str, list[str]]]:
    """Each ``.entry``'s mangled name and its instruction lines (stripped, no noise)."""
    return [(name, [ln.strip() for ln in ptx[start + 1 : end].splitlines() if not _NOISE.match(ln)])
            for name, (kind, start, end) in ptxneeds.spans(ptx).items() if kind == "entry"]


def disabled_entries(ptx: str) -> dict[str, str]:
    """Entries that reach CUTLASS's or CuTe's error path for an arch whose instructions
    were compiled out, each with the error text it prints: "Attempting to use
    SM100_MMA_F16BF16_SS without CUTE_ARCH_MMA_SM100A_ENABLED", "Arch conditional MMA
    instruction used without targeting appropriate compute capability".

    Such a kernel still loads, copies and stores (flashinfer's SM100 FMHA on
    ``compute_120f``: 5,668 lines, TMA copies, stores), so it is not empty, but where
    its MMA or tensor-memory access should be it prints that and stops (``brkpt``):
    it does not do its work on this arch.
    """
    return _disabled(ptx, _bodies(ptx))


def _disabled(ptx: str, bodies: list[tuple[str, list[str]]]) -> dict[str, str]:
    messages = {}
    for match in _STRING.finditer(ptx):
        data = bytes(int(b) for b in match.group(2).split(",") if b.strip().isdigit())
        text = " ".join(data.rstrip(b"\0").decode("utf-8", "replace").split())
        text = _ASSERTED.sub("", text)  # assert(0 && "...") keeps its expression's text
        if _ARCH_ERROR.search(text):
            messages[match.group(1)] = text[:200]
    if not messages:
        return {}
    found = {}
    for name, body in bodies:
        for ref in _STR_REF.findall("\n".join(body)):
            if ref in messages:
                found[name] = messages[ref]
                break
    return found


def parsed(unit: str, ptx: str, command: list[str]) -> Outcome:
    """The outcome of a compile that wrote ``ptx``: its entries, the empty ones and the
    ones reaching an arch-disabled error path (which count as empty too)."""
    bodies = _bodies(ptx)
    empty, disabled = _empty(bodies), _disabled(ptx, bodies)
    empty += [name for name in disabled if name not in empty]
    reading = ptxneeds.read_module(ptx)
    return Outcome(unit, True, all_entries(ptx), empty, command=command, disabled=disabled,
                   families=reading.families, shared=reading.shared,
                   dynamic_shared=reading.dynamic)


# What a kernel can do that another thread or the host sees: stores (not to a call's
# parameters or the thread's own stack), atomics and reductions, MMAs that write
# tensor memory, bulk and async copies, surface writes, and calls.
_EFFECT = re.compile(r"^(?:@!?%\w+\s+)?(?:st\.(?!param|local)|atom|red\.|mma|wmma|wgmma|"
                     r"tcgen05|cp\.|stmatrix|multimem|sust|suatom|sured|call)")
_REPORTING = ("vprintf", "__assertfail")  # printf, and assert() without -DNDEBUG
_STRING = re.compile(r"\.global \.align 1 \.b8 (\$str[\w$]*)\[\d+\] = \{([\d, ]+)\};")
_ASSERTED = re.compile(r'^0 && "|(?:\\n)?"$')
_STR_REF = re.compile(r"\$str(?:\$\d+)?(?![\w$])")
_ARCH_ERROR = re.compile(r"without CUTE_ARCH_\w+_ENABLED|Arch conditional MMA instruction used "
                         r"without targeting|without targeting sm_?\d+\w* compute capability", re.I)
_CALLEE = re.compile(r"call(?:\.\w+)*\s*(?:\([^)]*\)\s*,)?\s*([\w$]+)?")


def _does_work(body: list[str]) -> bool:
    """Whether a body has an effect (:data:`_EFFECT`) other than printing or trapping."""
    lines = iter(body)
    for line in lines:
        if line.startswith("call"):
            # `call.uni (retval0), vprintf, (...)`, the callee on this line or the next
            callee = _CALLEE.match(line)
            name = callee.group(1) if callee and callee.group(1) else next(lines, "").rstrip(", ")
            if name not in _REPORTING:
                return True
        elif _EFFECT.match(line):
            return True
    return False


def missing_header(compiler_output: str) -> str | None:
    """The header a failed compile could not find, if that is why it failed."""
    match = _MISSING_HEADER.search(compiler_output)
    return match.group(1).strip() if match else None


def all_entries(ptx: str) -> list[str]:
    """Every ``.entry`` name in ``ptx``."""
    return _ENTRY.findall(ptx)


@dataclass
class Outcome:
    """One translation unit compiled (or not) to PTX; ``cached`` when the PTX cache had it."""

    unit: str
    ok: bool
    entries: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    missing_header: str | None = None
    error: str = ""
    first_error: str = ""
    command: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    sass_checked: bool = False
    exit_only: list[str] = field(default_factory=list)  # SASS functions that are only EXIT
    disabled: dict[str, str] = field(default_factory=dict)  # entry -> its arch error text
    missing_headers: list[str] = field(default_factory=list)  # every one, the first first
    # What the kernels need of the target (contrib.analysis.ptxneeds): entry -> the
    # instructions of its FAMILIES, entry -> static .shared bytes, entries using dynamic
    # shared memory; from ptxas: [entry, instruction, target] it refused, entry ->
    # [bytes, max] over the shared limit, entry -> [registers, smem, spill stores, loads]
    families: dict[str, list[str]] = field(default_factory=dict)
    shared: dict[str, int] = field(default_factory=dict)
    dynamic_shared: list[str] = field(default_factory=list)
    refused: list[list[str]] = field(default_factory=list)
    over_shared: dict[str, list[int]] = field(default_factory=dict)
    resources: dict[str, list[int]] = field(default_factory=dict)

    def lacks(self, target: str) -> list[ptxneeds.Lack]:
        """What ``target`` (``compute_120f``) lacks for this unit's kernels."""
        return ptxneeds.lacks(target.replace("compute_", "sm_"), self.families, self.shared,
                              self.refused, self.over_shared)

    def lacking(self) -> list[str]:
        """Every header nvcc could not find for this unit (none when it compiled)."""
        if self.ok:
            return []
        return self.missing_headers or ([self.missing_header] if self.missing_header else [])


def first_error(text: str) -> str:
    """The compiler's first ``file(line): error ...`` (or ``file:line: error``) line, else its first line."""
    match = _ERROR_LINE.search(text)
    if match:
        return match.group(0).strip()[:300]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else "")[:300]


def compile_ptx(
    nvcc: str, source: Path, arch: Arch | str, include_dirs: Iterable[Path], out_dir: Path,
    flags: Iterable[str] = (), timeout: float = 1200, keep: Path | None = None,
    unit: str | None = None,
) -> Outcome:
    """``nvcc -arch=compute_XY[af] --ptx`` one source; parse its entries.

    ``arch`` is an Arch (its ``compute``) or the virtual architecture itself
    (``compute_120f``, as the upstream builds it).  ``-std=c++17`` unless the
    flags name a standard.  The PTX file is removed after parsing unless ``keep``
    names where it goes.  ``unit`` names the source in the result (default: its path).
    """
    name = str(source) if unit is None else unit
    flags = list(flags)
    compute = arch if isinstance(arch, str) else arch.compute
    out_dir.mkdir(parents=True, exist_ok=True)
    out = keep or out_dir / f"{source.name}.{abs(hash(str(source))) % 10**8}.ptx"
    command = [nvcc, f"-arch={compute}", "--ptx", "-o", str(out)]
    command += [] if any(f.startswith("-std=") for f in flags) else ["-std=c++17"]
    command += [f"-I{d}" for d in include_dirs] + flags + [str(source)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return _failed(name, f"nvcc timed out after {timeout:.0f}s", command)
    except OSError as exc:
        return _failed(name, f"cannot run {nvcc}: {exc}", command)
    if done.returncode != 0:
        text = (done.stderr or done.stdout).strip()
        first = missing_header(text)
        outcome = _failed(name, text if len(text) < 4000 else text[:3000] + "\n...\n" + text[-1000:],
                          command, first)
        if first is not None:
            outcome.missing_headers = every_missing(command, first, min(timeout, 600))
        return _refusals(outcome, text, out, keep is None)
    try:
        ptx = out.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:  # e.g. a host-only source: nvcc succeeds and writes nothing
        return _failed(name, f"nvcc wrote no PTX for {source.name} ({exc.strerror})", command)
    if keep is None:
        out.unlink(missing_ok=True)  # the entries are what we keep; a unit's PTX can be 100 MB
    return parsed(name, ptx, command)


MAX_MISSING = 40  # preprocessor runs to list a unit's missing headers


def every_missing(command: list[str], first: str, timeout: float = 600) -> list[str]:
    """Every header the unit's preprocessing cannot find, ``first`` first.

    nvcc stops at the first: each one found gets an empty stand-in in a scratch
    folder searched last and the unit is preprocessed again (``-E``, the same flags
    and arch), until it preprocesses, fails otherwise (a stand-in lacking what
    the code needs) or :data:`MAX_MISSING` are found.  A header that only a
    missing one includes is found once that one is installed."""
    found = [first]
    with tempfile.TemporaryDirectory(prefix="contrib-stand-in-") as scratch:
        stand_ins = Path(scratch)
        again = _preprocess(command, stand_ins)
        while len(found) < MAX_MISSING and _stand_in(stand_ins, found[-1]):
            try:
                done = subprocess.run(again, capture_output=True, text=True, timeout=timeout)
            except (OSError, subprocess.SubprocessError):
                break
            name = missing_header(done.stderr or done.stdout) if done.returncode else None
            if name is None or name in found:
                break
            found.append(name)
    return found


def _preprocess(command: list[str], stand_ins: Path) -> list[str]:
    """``command`` (``nvcc ... --ptx -o OUT ... SOURCE``) preprocessing only, to nowhere,
    with ``stand_ins`` searched after every other folder."""
    out = []
    skip = False
    for arg in command[:-1]:
        if skip:
            out.append(os.devnull)
            skip = False
            continue
        skip = arg == "-o"
        out.append("-E" if arg == "--ptx" else arg)
    return [*out, f"-I{stand_ins}", command[-1]]


def _stand_in(folder: Path, header: str) -> bool:
    """An empty ``header`` under ``folder``; False for a name that would leave it."""
    name = posixpath.normpath(header.replace("\\", "/"))
    if name.startswith(("/", "../")) or name in (".", ".."):
        return False
    try:
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("", encoding="utf-8")
    except OSError:
        return False
    return True


def _refusals(outcome: Outcome, text: str, out: Path, remove: bool) -> Outcome:
    """A failed compile whose PTX check (CUDA 13's nvcc runs ``ptxas -arch=compute_XY``)
    refused instructions the target lacks: each refusal with its kernel, read from the
    PTX nvcc left."""
    if "not supported on .target" not in text:
        return outcome
    try:
        written = out.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return outcome
    if remove:
        out.unlink(missing_ok=True)
    outcome.refused = ptxneeds.refused(text, ptxneeds.read_module(written).lines)
    outcome.entries = all_entries(written)
    return outcome


def _failed(unit: str, error: str, command: list[str], header: str | None = None) -> Outcome:
    return Outcome(unit, False, missing_header=header, error=error,
                   first_error=first_error(error), command=command)
