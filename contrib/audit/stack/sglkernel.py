"""The C++ ops a server's own kernel package registers, as links of a feature's chain.

sglang's Python reaches ``torch.ops.sgl_kernel.<op>.default(...)`` (through the
``sgl_kernel`` package's wrappers, which the walk follows as the tree's own code);
the op is sgl-kernel's C++ in the same tree, read by
:class:`~contrib.analysis.torchops.TorchOps` down to the host checks of its function.
:meth:`Kernels.links` makes of each such call a link: a refusal of the target (a
crash, below every gate of the way: ``TORCH_CHECK(sm_version == 100, ...)`` of
``cutlass_mla_decode``), or a call whose host code admits it, followed (with a
:class:`~contrib.audit.stack.kernelwheel.Shelf`) to the object of the pinned kernel
wheel that declares the op: no image for the target there is a crash too.

The walk hands such calls out only where it is told the ``torch`` root
(:func:`with_ops`): a walker of the same tree, its reading shared, that also yields
the calls of ``torch.*``; :func:`kernel_ops` picks the ops among them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field

from contrib.analysis.hostarch import HOST_REFUSAL
from contrib.analysis.torchops import HostOp, TorchOps, op_name
from contrib.analysis.tree import SourceTree
from contrib.arch import Arch
from contrib.audit.chains import Link, Role
from contrib.audit.model import NEEDS_KERNEL_WORK, Evidence
from contrib.audit.stack.kernelwheel import Shelf
from contrib.audit.stack.reading import Handed, Outside
from contrib.audit.stack.walk import Walker

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
