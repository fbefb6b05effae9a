"""The C++ ops a server's own kernel package registers, as links of a feature's chain.

sglang's Python reaches ``torch.ops.sgl_kernel.<op>.default(...)`` (through the
``sgl_kernel`` package's wrappers, which the walk follows as the tree's own code);
the op is sgl-kernel's C++ in the same tree, read by
:class:`~contrib.analysis.torchops.TorchOps` down to the host checks of its function.
:meth:`Kernels.links` makes of each such call a link: a refusal of the target (a
crash, below every gate of the way: ``TORCH_CHECK(sm_version == 100, ...)`` of
``cutlass_mla_decode``), or a call whose host code admits it, followed (with a
:class:`Shelf`) to the object of the pinned kernel
wheel that declares the op: no image for the target there is a crash too.

The walk hands such calls out only where it is told the ``torch`` root
(:func:`with_ops`): a walker of the same tree, its reading shared, that also yields
the calls of ``torch.*``; :func:`kernel_ops` picks the ops among them.

A chain reaching such an op ends in the object of the kernel wheel it
pins that declares the op, and whether the target gets an image of it.

sglang pins its kernels in ``python/pyproject.toml`` (``"sglang-kernel==0.4.10"``, once
``sgl-kernel``).  That wheel, built for the platform the target ships in
(:func:`~contrib.analysis.wheels.platform_for`: aarch64 for GB10), is resolved offline
only: the folders of ``CONTRIB_FIND_LINKS`` (``:``-separated), the wheels ``contrib
coverage --download`` fetched before, and pip's cache; nothing is fetched here.  Its
objects are read as ``contrib coverage`` reads them (cached by content); the objects
declaring the op (its schema string, :func:`~contrib.analysis.binaries.declared_ops`)
are judged by CUDA's rules (:func:`~contrib.analysis.cudacompat.judge`).

Where every object declaring the op has no image the target runs, the op fails on it
("no kernel image is available for execution on the device"): a crash below every gate
that admitted it.  The next step: where the object carries SASS of another member of
the target's major (``sm_120a`` for 12.1), its source compiles for the family and the
build's arch list omits the target (the ``-gencode`` line of the CMake file building
that object is named, and the one to add beside it); else the kernel needs work.
Where several objects declare the op (sgl-kernel's ``sm90/`` and ``sm100/``
``common_ops``, one loaded per GPU) and only some lack an image, which one loads is not
read: the link names them and refuses nothing.

Real case: sglang-kernel 0.4.10's aarch64 ``infllm_ops`` carries ``sm_90`` and
``sm_120a``: no image on 12.1.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from packaging.requirements import Requirement

from contrib.analysis.binaries import INSTALL_HINT, find_cuobjdump
from contrib.analysis.cudacompat import ImageKind, ImageVerdict, judge
from contrib.analysis.hostarch import HOST_REFUSAL
from contrib.analysis.shipped import Shipped, read_source, resolved
from contrib.analysis.torchops import HostOp, TorchOps, op_name
from contrib.analysis.tree import SourceTree
from contrib.analysis.wheels import Platform, platform_for, resolve
from contrib.arch import Arch
from contrib.audit.chains import Link, Role
from contrib.audit.model import NEEDS_KERNEL_WORK, Evidence
from contrib.audit.stack.pins import Pin, find_pin
from contrib.audit.stack.reading import Handed, Outside
from contrib.audit.stack.walk import Walker
from contrib.environ import find_links
from contrib.errors import ContribError

NAMESPACE = "sgl_kernel"


def with_ops(walker: Walker) -> Walker:
    """A walker of ``walker``'s tree and mode, sharing what it read, that also hands out
    the calls of ``torch`` (``torch.ops.sgl_kernel.x.default``) as calls leaving the
    tree's Python."""
    if "torch" in walker.roots:
        return walker
    roots = set(walker.roots) | {"torch"}
    reading = copy.copy(walker.reading)
    reading.roots = roots
    return Walker(walker.ev, reading.texts, roots, walker.excluded, walker.skips,
                  walker.mode, reading)


def kernel_ops(outs: Iterable[Outside]) -> list[Outside]:
    """The calls of ``outs`` that name an op of the kernel package."""
    return [out for out in outs if op_name(out.dotted, NAMESPACE) is not None]


@dataclass
class Kernels:
    """The kernel package of the tree ``name`` at ``commit``."""

    name: str
    commit: str
    tree: SourceTree
    shelf: Shelf | None = None  # the kernel wheel the tree pins, where the op ends
    _ops: TorchOps | None = field(default=None, init=False)
    _read: dict[tuple[str, str], HostOp | None] = field(default_factory=dict, init=False)

    def host(self, dotted: str, arch: Arch) -> HostOp | None:
        """The op a call names, read for ``arch`` (None: not an op of the package, or
        registered or defined nowhere the reading finds)."""
        op = op_name(dotted, NAMESPACE)
        if op is None:
            return None
        if (op, arch.name) not in self._read:
            if self._ops is None:
                self._ops = TorchOps(self.tree, NAMESPACE)
            self._read[(op, arch.name)] = self._ops.host(op, arch)
        return self._read[(op, arch.name)]

    def links(self, outs: Iterable[Outside], arch: Arch | None) -> list[Link]:
        """A link per op called in ``outs`` (each once): the first refusal of ``arch``
        in its host code (a crash), or the call, admitted.  Without ``arch`` (a gate
        of the way refused the target above), nothing is read."""
        if arch is None:
            return []
        found: list[Link] = []
        for out in outs:
            if any(isinstance(step, Handed) for step in out.via):
                continue  # past a backend's name handed on, the way is not surely the feature's
            host = self.host(out.dotted, arch)
            if host is None or any(link.function == out.dotted for link in found):
                continue
            found.append(self._link(out, host, arch))
            shipped = self.shelf.link(out, arch) if host.admits and self.shelf else None
            if shipped is not None:
                found.append(shipped)
        return found

    def _link(self, out: Outside, host: HostOp, arch: Arch) -> Link:
        commit = self.commit[:10]
        way = " > ".join((*out.via, out.dotted))
        registered = f"{host.registered}:{host.registered_line}"
        if host.admits:
            return Link(Role.CALL, self.name, commit, host.file, host.line, out.dotted,
                        why=(f"{way}: the op registered at {registered} runs {host.function}, "
                             f"whose host code raises on no way {arch.name} takes"))
        first = host.refusals[0]
        admits = ", ".join(first.admits)
        evidence = tuple(Evidence(f"{r.file}:{r.line}", r.file, HOST_REFUSAL,
                                  f"`{r.what}` in {r.function}: raises on {arch.name}; "
                                  f"{', '.join(r.admits)} pass it", line=r.line)
                         for r in host.refusals[:3])
        return Link(Role.BELOW, self.name, commit, first.file, first.line, out.dotted,
                    admits, excludes=True, refuses=True, class_=NEEDS_KERNEL_WORK,
                    why=(f"the op {out.dotted} (registered at {registered}, {host.function} "
                         f"at {host.file}:{host.line}) raises on {arch.name} in its C++ "
                         f"host code: `{first.what}` in {first.function}; compute "
                         f"capability {admits} {'passes' if len(first.admits) == 1 else 'pass'} it"),
                    evidence=evidence)


# -- where the op ends: the object of the kernel wheel the tree pins -----------------

# The names sglang's kernel wheel has had, newest first.
PACKAGES = ("sglang-kernel", "sgl-kernel")
NO_IMAGE = "no-kernel-image"  # an Evidence kind: the object has no image the target runs
ARCH_LIST = "build-arch-list"  # an Evidence kind: the -gencode line building a sibling
_GENCODE = re.compile(r"-gencode[= ]arch=compute_(?P<arch>\d+[af]?),code=sm_(?P<code>\d+[af]?)")


def kernel_pin(tree: SourceTree) -> Pin | None:
    """How ``tree`` pins its kernel wheel; None when it names none."""
    for package in PACKAGES:
        pin = find_pin(tree, package)
        if pin is not None:
            return pin
    return None


@dataclass
class Shelf:
    """The kernel wheel the tree ``tree`` pins, read once per platform."""

    namespace: str
    tree: SourceTree
    _read: dict[Platform, list[Shipped] | str] = field(default_factory=dict, init=False)

    @cached_property
    def pin(self) -> Pin | None:
        return kernel_pin(self.tree)

    def objects(self, platform: Platform) -> list[Shipped] | str:
        """The objects of the pinned wheel for ``platform``, or why they were not read."""
        pin = self.pin
        if pin is None:
            return "no kernel wheel pinned"
        if platform not in self._read:
            self._read[platform] = _read(pin, platform)
        return self._read[platform]

    def link(self, out: Outside, arch: Arch) -> Link | None:
        """The link of the object declaring ``out``'s op, judged for ``arch``; None where
        the tree pins no kernel wheel."""
        op = op_name(out.dotted, self.namespace)
        pin = self.pin
        if op is None or pin is None:
            return None
        platform = platform_for(arch)
        objects = self.objects(platform)
        if isinstance(objects, str):
            return _noted(pin, out, f"not read: {objects}; the chain carries on from the "
                                    "source")
        declaring = [s for s in objects if op in s.reading.ops]
        if not declaring:
            return _noted(pin, out, f"not read: no object of {pin.package}=={pin.version} "
                                    f"({platform.value}) declares the op {op} by its schema")
        judged = [(s, judge(s.reading.of(ImageKind.SASS) + s.reading.of(ImageKind.PTX), arch))
                  for s in declaring]
        lacking = [s for s, j in judged if j.verdict is ImageVerdict.NO_IMAGE]
        if not lacking:
            said = "; ".join(f"{s.path}: {j.verdict.value} ({j.image})" for s, j in judged)
            return _noted(pin, out, f"{pin.package}=={pin.version} ({platform.value}) "
                                    f"declares {op} in {said} on {arch.name}",
                          declaring[0].path)
        if len(lacking) < len(declaring):
            names = ", ".join(s.path for s in lacking)
            return _noted(pin, out, f"{pin.package}=={pin.version} ({platform.value}): "
                                    f"{names} (one of {len(declaring)} objects declaring "
                                    f"{op}, which one loads is not read) has no image for "
                                    f"{arch.name}", lacking[0].path)
        return self._crash(pin, platform, out, arch, lacking)

    def _crash(self, pin: Pin, platform: Platform, out: Outside, arch: Arch,
               lacking: list[Shipped]) -> Link:
        first = lacking[0]
        targets = _targets(first)
        release = f"{pin.package}=={pin.version} ({platform.value})"
        evidence = [Evidence(s.path, "", NO_IMAGE, f"{_targets(s)}: none runs on {arch.name}",
                             upstream=pin.package) for s in lacking[:3]]
        sibling = _sibling(first, arch)
        spot = _gencode_line(self.tree, first.path, sibling) if sibling else None
        if sibling and spot:
            path, line = spot
            own = f"{arch.major}{arch.minor}{sibling[-1] if sibling[-1] in 'af' else ''}"
            add = f"-gencode=arch=compute_{own},code=sm_{own}"
            evidence.append(Evidence(f"{path}:{line}", path, ARCH_LIST,
                                     f"builds {sibling}; add {add}", line=line))
            step = (f"the source compiles for major {arch.major} ({first.path} carries "
                    f"{sibling}): the build's arch list omits {arch.name}; add {add} "
                    f"beside {path}:{line}")
        elif sibling:
            step = (f"the source compiles for major {arch.major} ({first.path} carries "
                    f"{sibling}): the build's arch list omits {arch.name} (no CMake line "
                    "building it found in the tree)")
        else:
            step = (f"the kernel needs work: {first.path} is built for no target of major "
                    f"{arch.major}")
        return Link(Role.SHIPS, pin.package, pin.version, first.path, 0, out.dotted,
                    targets, excludes=True, refuses=True, class_=NEEDS_KERNEL_WORK,
                    why=(f"no kernel image for {arch.name}: {release} {first.path} carries "
                         f"{targets} (pinned at {pin.where}); next: {step}"),
                    evidence=tuple(evidence))


def _noted(pin: Pin, out: Outside, why: str, path: str = "") -> Link:
    """A link that refuses nothing: the object ``path`` runs, or why none was read."""
    return Link(Role.SHIPS, pin.package, pin.version or pin.requirement, path, 0, out.dotted,
                why=why)


def _read(pin: Pin, platform: Platform) -> list[Shipped] | str:
    folders = find_links()
    if not pin.version:
        return f"{pin.requirement} ({pin.where}) pins no one version"
    try:
        wheel = resolve(Requirement(f"{pin.package}=={pin.version}"), platform, folders,
                        download=False)
    except ContribError:
        places = "pip's cache or the find-links folders (CONTRIB_FIND_LINKS)"
        return f"{pin.package}=={pin.version} ({platform.value}) not in {places}"
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        return f"{wheel.label}: no cuobjdump here ({INSTALL_HINT})"
    try:
        return read_source(resolved(wheel), cuobjdump)
    except ContribError as exc:
        return f"{wheel.label}: {exc}"


def _targets(shipped: Shipped) -> str:
    return ", ".join(i.target for i, _ in shipped.reading.images) or "no images"


def _sibling(shipped: Shipped, arch: Arch) -> str | None:
    """The SASS target of the object of another member of ``arch``'s major, or None."""
    same = [i for i, _ in shipped.reading.images
            if i.kind is ImageKind.SASS and i.major == arch.major]
    return same[-1].target if same else None


def _gencode_line(tree: SourceTree, member: str, target: str) -> tuple[str, int] | None:
    """The first ``-gencode ...,code=<target>`` line of a CMake file naming the object's
    target (``common_ops`` for ``sgl_kernel/sm100/common_ops.abi3.so``)."""
    stem = Path(member).name.split(".", 1)[0]
    named = re.compile(rf"(?:\(\s*|OUTPUT_NAME\s+\"?){re.escape(stem)}\b")
    cmakes = sorted(p for p in tree.paths() if p.endswith(("CMakeLists.txt", ".cmake")))
    for path in cmakes:
        text = tree.read_text(path) or ""
        if not named.search(text):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            code = line.split("#", 1)[0]
            found = _GENCODE.search(code)
            if found and f"sm_{found['code']}" == target:
                return path, number
    return None
