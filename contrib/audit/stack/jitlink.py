"""The link of a chain saying which target the upstream's JIT builds for the GPU, with
which CUDA, and whether the GPU runs it.

A call that loads a JIT module of the upstream below (a JIT gate admitting the target
on its way) gets the module built on the user's machine, for the target nvcc is given
there (:mod:`~contrib.analysis.jittarget`).  Where the GPU runs nothing built, the
link refuses, and the chain is a crash: flashinfer at ad893cfab builds
``compute_120a`` for a GB10 with CUDA 12.9, and ``sm_120a`` runs on 12.0 only
(flashinfer#2839).
"""

from __future__ import annotations

from contrib.analysis.archtoolkit import Cuda
from contrib.analysis.cudacompat import Image, ImageKind, Reach
from contrib.analysis.jittarget import BuildVerdict, Built, JitTarget
from contrib.arch import Arch
from contrib.audit.chains import Link, Role
from contrib.audit.stack.lower import Lower


def jit_link(lower: Lower, arch: Arch) -> Link | None:
    """The BUILDS link of ``lower``'s JIT for ``arch`` with its toolkit; None where the
    tree's JIT target is not chosen by the GPU (or cannot be read)."""
    target = lower.jit_target(arch)
    if target is None:
        return None
    return Link(Role.BUILDS, lower.name, lower.tag, target.path, target.line, target.function,
                excludes=target.crashes, refuses=target.crashes,
                why=builds_text(target, lower.cuda), builds=target)


def builds_text(target: JitTarget, cuda: Cuda) -> str:
    """``JIT builds compute_120a (sm_120a) for sm_121a with CUDA 12.9 (--cuda):
    sm_120a runs on 12.0 only; CUDA 13.0 builds sm_120f, which runs``."""
    built = target.built
    what = _what(built)
    head = f"JIT builds {what} for {target.arch} with {cuda.text()}"
    if built.verdict is BuildVerdict.REFUSES:
        head = f"JIT refuses to build for {target.arch} with {cuda.text()}"
    text = f"{head}: {_because(built, target.arch)}"
    if built.crashes:
        fix = next((o for o in target.others if not o.crashes), None)
        return text + (f"; CUDA {fix.cuda} builds {', '.join(fix.targets)}, which runs"
                       if fix else "; no CUDA release PyTorch ships wheels for builds one it runs")
    failing = [o.cuda for o in target.others if o.crashes]
    return text + (f"; it fails with CUDA {', '.join(failing)}" if failing else "")


def _what(built: Built) -> str:
    compute = ", ".join(built.compute)
    return f"{compute} ({', '.join(built.targets)})" if built.targets else compute


def _because(built: Built, arch: str) -> str:
    if built.verdict is BuildVerdict.RUNS:
        kind = "PTX the driver compiles" if built.runs.startswith("compute_") else "native"
        return f"it runs {built.runs} ({kind})"
    if built.verdict is BuildVerdict.REFUSES:
        return f"it raises “{built.says}”" if built.says else "the choice raises"
    if built.verdict is BuildVerdict.NVCC_REFUSES:
        return f"that nvcc does not build {', '.join(built.targets)} (no module, an error)"
    reaches = [_reach(t) for t in built.targets]
    return "; ".join(r for r in reaches if r) or f"none runs on {arch}"


def _reach(target: str) -> str:
    """``sm_120a runs on 12.0 only``, by CUDA's rules for its kind and suffix."""
    kind = ImageKind.PTX if target.startswith("compute_") else ImageKind.SASS
    image = Image.parse(kind, target)
    if image is None:
        return ""
    cap = f"{image.major}.{image.minor}"
    return {Reach.EXACT: f"{target} runs on {cap} only",
            Reach.FAMILY: f"{target} runs on {image.major}.x from {cap}",
            Reach.UPWARD: f"{target} runs from {cap} up"}[image.reach]
