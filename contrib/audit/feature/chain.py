"""A feature's chain across the stack, and the one verdict it comes to.

The chain of a server argument starts where the server reads it: the walk of the
stack below (:class:`~contrib.audit.stack.walk.Walker`) follows the code that runs
when the flag is set (the ``if`` bodies testing it, what the callers of a function
deciding with it run, settings it sets in turn: ``--enable-flashinfer-allreduce-fusion``
sets the fusion backend to ``auto``), on the target's own way: it stops where a gate
of the tree turns the target away (:class:`~contrib.audit.stack.skips.Trail` keeps
where).  The calls it makes into the upstream below, at the version this tree pins,
are followed there (:meth:`~contrib.audit.stack.lower.Lower.below`) to the gates and
kernels they reach.  A public API of a library is its own chain's first call.

The verdict, from the links' decisions (never from their sentences):

* **crash**: the target passes every gate of this tree on the way to a call the
  upstream below refuses it (an error, not a generic path);
* **needs-kernel-work**: a gate on the way turns the target away from kernels it does
  not have (its class, or upstream's own intent to leave it out);
* **unknown**: a gate on the way whose class cannot be decided;
* **gate-only**: every gate that turns the target away on the way is gate-only: open
  them, in order (:attr:`Chain.enable` says how);
* **on**: the target passes every gate on the way, to kernels it has.

A feature read nowhere the walk can see is ``unknown``, with that reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, replace

from contrib.arch import Arch
from contrib.audit.model import (
    GATE_ONLY,
    GATE_ROLES,
    INTENTIONAL,
    NEEDS_KERNEL_WORK,
    NOT_BUILDABLE,
    AuditGate,
    Chain,
    Feature,
    FeatureKind,
    Link,
    Role,
    Verdict,
    admits_text,
)
from contrib.audit.stack.lower import Lower
from contrib.audit.stack.reading import Function, Handed, Outside
from contrib.audit.stack.settinggates import setting_links
from contrib.audit.stack.skips import Trail
from contrib.audit.stack.walk import Walker

# Calls followed below a place reading the feature.  What a setting enables runs close
# to where it is read; ten steps down (the gate walk's bound) every feature reaches the
# model's whole forward pass, and with it every gate of the tree.
FEATURE_DEPTH = 4


def gate_link(role: Role, upstream: str, commit: str, gate: AuditGate) -> Link:
    """A gate as a link of a chain."""
    excludes = gate.excludes_target
    return Link(role, upstream, commit, gate.file, gate.line, gate.function,
                admits_text(gate.admits), excludes,
                excludes and gate.effect.kind.refuses, gate.class_,
                gate.reason or gate.effect.why, tuple(gate.evidence[:_EVIDENCE]))


# -- the walk -----------------------------------------------------------------------------


@dataclass
class Upper:
    """The tree a server's features are read in: its name, commit, audited gates (by
    file) and the walker of its code."""

    name: str
    commit: str
    gates: list[AuditGate]
    walker: Walker

    def __post_init__(self) -> None:
        self._by_file: dict[str, list[AuditGate]] = {}
        for gate in self.gates:
            self._by_file.setdefault(gate.file, []).append(gate)

    def on(self, path: str, first: int, last: int) -> list[AuditGate]:
        """The gates on lines ``first``..``last`` of ``path``."""
        return [g for g in self._by_file.get(path, ()) if first <= g.line <= last]


def chain_of(feature: Feature, upper: Upper | None, lower: Lower | None,
             arch: Arch | None = None) -> Chain:
    """The chain of one feature: a server argument read in ``upper`` and followed into
    ``lower``, or (``upper`` None) a public API of ``lower`` itself.  With ``arch``, a
    call into ``lower`` with no Python gate refusing it on the way is read down to
    the C/C++ host checks of what it runs (:func:`_host_refusal`)."""
    links: list[Link] = []
    if feature.kind == FeatureKind.API or upper is None:
        if lower is not None:
            _below(links, lower, [Outside(feature.attr, (), feature.keys)], api=True, arch=arch)
    else:
        _walk_flag(links, feature, upper, lower, arch)
        if arch is not None:  # the gates a value meets that no `if` on the GPU spells out
            links += setting_links(upper.walker.ev, upper.name, upper.commit, upper.on,
                                   feature.attr, feature.value, arch)
    return decide(feature, tuple(links))


def _walk_flag(links: list[Link], feature: Feature, upper: Upper, lower: Lower | None,
               arch: Arch | None) -> None:
    walker, trail = upper.walker, Trail()
    blocks = walker.enabled_by(feature.attr, feature.value or True, trail)
    outs: list[Outside] = []
    for block in blocks:
        links.append(Link(Role.READ, upper.name, upper.commit, block.path,
                          getattr(block.code[0], "lineno", 0) if block.code else 0,
                          block.holder.name if block.holder else "<module>",
                          why=" > ".join(block.via)))
        for out in walker.outside(block.path, block.holder, block.code, target=True,
                                  depth=FEATURE_DEPTH, trail=trail):
            led = Outside(out.dotted, (*block.via, *out.via), out.keys)
            if all(o.dotted != led.dotted or o.keys != led.keys for o in outs):
                outs.append(led)
    met = list(dict.fromkeys(trail.met))
    seen: set[tuple[str, int]] = set()
    behind: list[Link] = []  # what lies below the gates met, once they are opened
    for path, first, last in met:
        for gate in upper.on(path, first, last):
            if gate.excludes_target and (gate.file, gate.line) not in seen:
                seen.add((gate.file, gate.line))
                links.append(gate_link(Role.GATE, upper.name, upper.commit, gate))
                behind += _behind(gate, lower)
    links += [link for link in dict.fromkeys(behind) if link.excludes]
    if lower is not None:
        # refused by a gate of this tree on the way, the target never meets what is below
        # it: no host check there is read (decide() would not name it a crash)
        refused = any(link.role == Role.GATE and link.refuses for link in links)
        _below(links, lower, outs, api=False, arch=None if refused else arch)


def _below(links: list[Link], lower: Lower, outs: Iterable[Outside], *, api: bool,
           arch: Arch | None = None) -> None:
    """The calls into ``lower`` and the gates they reach there (each once)."""
    seen: set[tuple[str, int]] = set()
    for out in outs:
        links.append(Link(Role.CALL, lower.name, lower.tag, "", 0, out.dotted,
                          why=" > ".join((*out.via, out.dotted))))
        start = len(links)
        for gate, _calls in lower.below(out.dotted, out.keys):
            if (gate.file, gate.line) in seen:
                continue
            seen.add((gate.file, gate.line))
            link = gate_link(Role.BELOW, lower.name, f"{lower.tag}", gate)
            given = passed_by_caller(lower, gate) if link.refuses else None
            if given is not None:
                link = replace(link, excludes=False, refuses=False,
                               why=f"refuses only when the caller passes {given}: {link.why}")
            links.append(link if not api else _own(link))
        if arch is not None and not any(link.refuses for link in links[start:]) \
                and not any(isinstance(step, Handed) for step in out.via):
            refused = _host_refusal(lower, out, arch)
            if refused is not None:
                links.append(refused if not api else _own(refused))


def _host_refusal(lower: Lower, out: Outside, arch: Arch) -> Link | None:
    """A C/C++ host check that raises on the target in what a call into ``lower`` runs,
    where no Python gate refuses it on the way (flashinfer's trtllm-gen launchers:
    ``FLASHINFER_CHECK(mSM == kSM_100 || mSM == kSM_103, "Unsupported architecture")``
    behind ``trtllm_ragged_attention_deepseek``, sgl-project/sglang#24633): the call is
    admitted in Python and refused below it, a crash.  Only where every way the call
    can take is refused so (:meth:`~contrib.audit.stack.lower.Lower.refused_every_way`),
    and the way to the call hands no backend's name on (a
    :class:`~contrib.audit.stack.reading.Handed` step: what lies past it is not surely
    the feature's way)."""
    verdict = lower.refused_every_way(out.dotted, arch, out.keys)
    if verdict is None or verdict.refused is None:
        return None
    found = verdict.refused
    return Link(Role.BELOW, lower.name, lower.tag, found.file, found.line, out.dotted,
                excludes=True, refuses=True, class_=NEEDS_KERNEL_WORK,
                why=verdict.reason,
                evidence=tuple(verdict.evidence[:3]))


def _behind(gate: AuditGate, lower: Lower | None) -> list[Link]:
    """The lower gates behind an upper one (its link's ``below``): the target meets
    them once the gate above is opened."""
    if lower is None:
        return []
    found = (lower.gate_at(b.file, b.line) for b in gate.below)
    return [gate_link(Role.BEHIND, lower.name, lower.tag, g) for g in found if g]


def passed_by_caller(lower: Lower, gate: AuditGate) -> str | None:
    """The parameter a refusal below also needs the caller to pass, or None: a test
    holding the gate, or one around it in its function, reads a parameter the function
    never sets itself (``if backend != "trtllm-gen" and bmm1_scale_log2 is not None:
    raise``; ``backend`` the function sets from the GPU, ``bmm1_scale_log2`` only the
    caller does).  Such a refusal is a misuse of the API, not the GPU turned away."""
    module = lower.ev.module(gate.file)
    if module is None:
        return None
    function = next((n for n in ast.walk(module[0]) if isinstance(n, Function)
                     and n.name == gate.name and n.lineno <= gate.line <= (n.end_lineno or 0)),
                    None)
    if function is None:
        return None
    params = {a.arg for a in [*function.args.args, *function.args.kwonlyargs]} - {"self"}
    params -= {t.id for n in ast.walk(function) if isinstance(n, ast.Assign | ast.AugAssign)
               for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
               if isinstance(t, ast.Name)}
    for node in ast.walk(function):
        if (isinstance(node, ast.If) and node.lineno <= gate.line <= (node.end_lineno or 0)):
            read = sorted({n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)} & params)
            if read:
                return read[0]
    return None


def _own(link: Link) -> Link:
    """A library's own gate, reached from its own API: a refusal there is the API's
    answer (an error the caller asked for), not a crash between layers."""
    return Link(Role.GATE, link.upstream, link.commit, link.file, link.line, link.function,
                link.admits, link.excludes, link.refuses, link.class_, link.why, link.evidence)


# -- the verdict ---------------------------------------------------------------------------


_KERNEL_WORK = (NEEDS_KERNEL_WORK, NOT_BUILDABLE)
_EVIDENCE = 3


def decide(feature: Feature, links: tuple[Link, ...]) -> Chain:
    """The chain of ``feature`` through ``links``, with its verdict and why."""
    chain = Chain(feature, links)
    below = [link for link in links if link.role == Role.BELOW]
    crash = [link for link in below if link.refuses]
    refused_above = any(link.role == Role.GATE and link.refuses for link in links)
    if crash and not refused_above:  # refused above, the user meets this tree's own error
        first = crash[0]
        admits = f" (admits {first.admits})" if first.admits else ""
        return replace(chain, verdict=Verdict.CRASH,
                       reason=(f"admitted on the way down, then refused by {first.upstream} "
                               f"{first.commit} {first.file}:{first.line} {first.function}"
                               f"{admits}: {first.why}"),
                       where=f"refused by {first.upstream} {first.commit} {_at(first)}")
    excluding = [link for link in links if link.role in GATE_ROLES and link.excludes]
    hollow = [link for link in below if not link.excludes and link.class_ == NEEDS_KERNEL_WORK]
    if not links:
        return replace(chain, verdict=Verdict.UNKNOWN, reason="read nowhere the walk can follow")
    if not excluding and not hollow:
        return replace(chain, verdict=Verdict.ON,
                       reason=("every gate on the way admits the target" if chain.gated
                               else "no architecture gate on the way"))
    # A gate that leaves the target out on purpose (flashinfer's MNNVL allreduce beside
    # the single-node one) is one way the feature does not take; where it is every way,
    # upstream's intent is the answer.
    meant = [link for link in excluding if link.class_ == INTENTIONAL]
    if meant and len(meant) == len(excluding) and not hollow:
        first = meant[0]
        return replace(chain, verdict=Verdict.NEEDS_KERNEL_WORK,
                       reason=(f"{first.upstream} {first.file}:{first.line} {first.function} "
                               f"leaves the target out on purpose: {first.why}"),
                       where=f"left out on purpose at {first.upstream} {_at(first)}")
    excluding = [link for link in excluding if link.class_ != INTENTIONAL]
    kernel = [link for link in excluding + hollow if link.class_ in _KERNEL_WORK]
    if kernel:
        first = kernel[0]
        return replace(chain, verdict=Verdict.NEEDS_KERNEL_WORK,
                       reason=f"{first.upstream} {first.file}:{first.line} {first.function}: "
                              f"{first.why}",
                       where=f"kernel work at {first.upstream} {_at(first)}")
    unknown = [link for link in excluding if link.class_ != GATE_ONLY]
    if unknown:
        first = unknown[0]
        return replace(chain, verdict=Verdict.UNKNOWN,
                       reason=(f"{first.upstream} {first.file}:{first.line} {first.function} "
                               f"turns the target away, and its class is not decided: "
                               f"{first.why}"),
                       where=f"class not decided at {first.upstream} {_at(first)}")
    return replace(chain, verdict=Verdict.GATE_ONLY, reason="open " + ", then ".join(
        f"{link.upstream} {link.spot}" for link in excluding))


def _at(link: Link) -> str:
    """``FILE:LINE FUNCTION`` of a link."""
    return f"{link.file}:{link.line} {link.function}"


def to_open(chain: Chain) -> dict[str, list[str]]:
    """The gates a gate-only chain opens, as ``FILE:FUNCTION`` per upstream, in the
    order met."""
    spots: dict[str, list[str]] = {}
    for link in chain.links:
        if link.role in GATE_ROLES and link.excludes and link.class_ != INTENTIONAL:
            found = spots.setdefault(link.upstream, [])
            if link.spot not in found:
                found.append(link.spot)
    return spots
