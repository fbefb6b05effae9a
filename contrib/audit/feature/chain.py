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

A gate that keeps the target on another implementation (a faster SM100 path, FA3 on
SM90: it *falls back*, it does not refuse) is a refusal only of a feature that asks
for that path: a boolean flag (``--enable-flashinfer-allreduce-fusion``) whose fused
path the target never takes does nothing for it.  A feature that asks for a
computation (an API, a backend or value named by a setting) still gets it on the
path the target takes, where that path goes on to kernels (an API's own code, or
calls into the upstream below on the target's way): it is **on**, and the chain says
which path it misses (:func:`asks_for_path`).  The calls below are followed on the target's own way: a
value the GPU decides (a module chosen by major) is followed to the one the target
gets, not to every one (:meth:`~contrib.audit.stack.lower.Lower.below`).

A feature read nowhere the walk can see is ``unknown``, with that reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from contrib.arch import Arch
from contrib.audit.chains import GATE_ROLES, Chain, Feature, FeatureKind, Fix, Link, Role, Verdict
from contrib.audit.feature.questions import passed_by_caller
from contrib.audit.feature.upper import (
    Upper,
    off_the_way,
    on_another_value,
    value_for_target,
)
from contrib.audit.model import (
    GATE_ONLY,
    INTENTIONAL,
    JIT,
    NEEDS_KERNEL_WORK,
    NOT_BUILDABLE,
    AuditGate,
    admits_text,
)
from contrib.audit.stack.fixed import first_admitting
from contrib.audit.stack.jitlink import jit_link
from contrib.audit.stack.lower import Lower
from contrib.audit.stack.reading import Handed, Outside
from contrib.audit.stack.settinggates import setting_links
from contrib.audit.stack.sglkernel import kernel_ops
from contrib.audit.stack.skips import Trail
from contrib.git.repo import Git

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


def chain_of(feature: Feature, upper: Upper | None, lower: Lower | None,
             arch: Arch | None = None, values: frozenset[str] = frozenset(),
             follow: bool = True) -> Chain:
    """The chain of one feature: a server argument read in ``upper`` and followed into
    ``lower``, or (``upper`` None) a public API of ``lower`` itself.  With ``arch``, a
    call into ``lower`` with no Python gate refusing it on the way is read down to
    the C/C++ host checks of what it runs (:func:`_host_refusal`).  ``values``: every
    value the feature's setting may take (its choices): a gate under a test of
    another one is not on this value's way (:func:`~contrib.audit.feature.upper.on_another_value`), and a gate
    choosing another of them for the target hands the feature on to it
    (:func:`_picked`; ``follow``: whether to, once)."""
    links: list[Link] = []
    if feature.kind == FeatureKind.API or upper is None:
        if lower is not None:
            _below(links, lower, [Outside(feature.attr, (), feature.keys)], api=True, arch=arch,
                   host=True)
    else:
        _walk_flag(links, feature, upper, lower, arch, values)
        if arch is not None:  # the gates a value meets that no `if` on the GPU spells out
            links += setting_links(upper.walker.ev, upper.name, upper.commit, upper.on,
                                   feature.attr, feature.value, arch)
    chain = decide(feature, tuple(links))
    if follow and upper is not None and arch is not None and chain.verdict != Verdict.ON:
        chain = _picked(chain, upper, lower, arch, values) or chain
    if chain.verdict != Verdict.CRASH or lower is None or arch is None:
        return chain
    fix = _fixed_below(lower, chain, arch)
    if fix is None:
        return chain
    return replace(chain, fix=fix, reason=f"{chain.reason}; next: {fix.step}")


def _picked(chain: Chain, upper: Upper, lower: Lower | None, arch: Arch,
            values: frozenset[str]) -> Chain | None:
    """The chain of the value a gate of ``upper`` picks for the target where the
    feature's own value leaves the choice to the code (sglang's ``if backend ==
    "auto": if is_sm100_supported(): backend = "flashinfer_cutedsl" ... else: backend =
    "flashinfer_cutlass"``): the target runs that value's way, so the feature's answer
    is that value's (its links after the pick), with the gate as the place it was
    picked.  None where no gate falling back on the way picks one other choice."""
    feature = chain.feature
    if not feature.value:
        return None
    for link in chain.links:
        if link.role != Role.GATE or not link.excludes or link.refuses \
                or link.upstream != upper.name:
            continue
        value = value_for_target(upper, link, arch, values - {feature.value})
        if value is None:
            continue
        other = replace(feature, name=f"{feature.name.rsplit('=', 1)[0]}={value}", value=value)
        then = chain_of(other, upper, lower, arch, values, follow=False)
        chosen = replace(link, excludes=False,
                         why=f"picks {value!r} for the target ({other.name}): {link.why}")
        links = tuple(chosen if kept == link else kept for kept in chain.links)
        links += tuple(kept for kept in then.links if kept not in links)
        answer = decide(feature, links)
        return replace(answer, reason=f"the target gets {other.name} (picked at {upper.name} "
                                      f"{_at(link)}): {answer.reason}",
                       where=answer.where or f"as {other.name}")
    return None


def _fixed_below(lower: Lower, chain: Chain, arch: Arch) -> Fix | None:
    """The first release of ``lower`` that admits the target where ``chain`` crashes
    (:func:`~contrib.audit.stack.fixed.first_admitting`), once per place."""
    first = next((link for link in chain.links if link.role == Role.BELOW and link.refuses),
                 None)
    if first is None or first.upstream != lower.name:  # refused in the tree's own ops,
        return None  # or no image in a wheel it pins
    key = (first.file, first.function, arch.name)
    git = lower.tree.git
    if not isinstance(git, Git):  # a tree read otherwise has no releases to look through
        return None
    if key not in lower.fixes:
        lower.fixes[key] = first_admitting(git, lower.name, lower.tag, first.file,
                                           first.function, arch)
    return lower.fixes[key]


def _walk_flag(links: list[Link], feature: Feature, upper: Upper, lower: Lower | None,
               arch: Arch | None, values: frozenset[str] = frozenset()) -> None:
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
            led = Outside(out.dotted, (*block.via, *out.via), out.keys, out.site)
            if off_the_way(upper, led.sites(), feature, values):
                continue  # called under another value's test on the way (`if
                # get_moe_runner_backend().is_cutlass():` for --quantization=fp8)
            if all(o.dotted != led.dotted or o.keys != led.keys for o in outs):
                outs.append(led)
    met = list(dict.fromkeys(trail.met))
    seen: set[tuple[str, int]] = set()
    behind: list[Link] = []  # what lies below the gates met, once they are opened
    # what lies behind a gate keeping the target off a path it does not need (decide())
    # is not on its way either
    below = [o for o in outs if lower is not None and o.dotted.split(".")[0] in lower.roots]
    path_asked = asks_for_path(feature, bool(below or kernel_ops(outs)))
    for path, first, last in met:
        for gate in upper.on(path, first, last):
            if gate.excludes_target and (gate.file, gate.line) not in seen and not (
                    on_another_value(upper, gate, feature, values)):
                seen.add((gate.file, gate.line))
                link = gate_link(Role.GATE, upper.name, upper.commit, gate)
                given = passed_by_caller(upper.walker.ev, gate, around=True) \
                    if link.refuses else None
                if given is not None:  # a mode its caller picks, not the feature's way
                    link = replace(link, excludes=False, refuses=False, class_=None, why=(
                        f"refuses only where the caller passes {given}: {link.why}"))
                links.append(link)
                if given is None and (path_asked or gate.effect.kind.refuses):  # else: a
                    # path it does not take
                    behind += _behind(gate, lower)
    links += [link for link in dict.fromkeys(behind) if link.excludes]
    # refused by a gate of this tree on the way, the target never meets what is below
    # it: no host check there is read (decide() would not name it a crash)
    refused = any(link.role == Role.GATE and link.refuses for link in links)
    if lower is not None:
        _below(links, lower, below, api=False, arch=arch, host=not refused)
    if upper.kernels is not None:  # the tree's own C++ ops, to the host checks refusing it
        links += upper.kernels.links(kernel_ops(outs), None if refused else arch)


def asks_for_path(feature: Feature, goes_on: bool = True) -> bool:
    """Whether ``feature`` asks for one path of the code rather than for a computation:
    a boolean setting (``--enable-x``) turns a path on, so a gate keeping the target on
    the other path leaves the feature off; a setting's named value (a backend, a
    dtype) and an API ask for what the code computes, which the target still gets on
    the path it takes, where that path goes on to kernels (``goes_on``: calls below
    on the target's way; an API's own code always does): one that runs nothing does
    nothing, unless it is the setting's default, which the server's own code serves
    (sglang's ``--bf16-gemm-backend=auto`` keeps "auto" off SM100, and torch's GEMM
    runs)."""
    return feature.kind != FeatureKind.API and (
        not feature.value or not (goes_on or feature.default))


def _below(links: list[Link], lower: Lower, outs: Iterable[Outside], *, api: bool,
           arch: Arch | None = None, host: bool = True) -> None:
    """The calls into ``lower`` and the gates they reach there (each once), on the way
    ``arch`` takes; ``host``: also read the C/C++ host checks below a call no Python
    gate refuses (:func:`_host_refusal`)."""
    seen: set[tuple[str, int]] = set()
    for out in outs:
        links.append(Link(Role.CALL, lower.name, lower.tag, "", 0, out.dotted,
                          why=" > ".join((*out.via, out.dotted))))
        start = len(links)
        loads = False  # it loads a JIT module admitting the target: the module's target
        # an API's own class is followed into its methods (what `Wrapper:backend=x`
        # runs); a server's call of one passes values the walk binds on every branch
        # (`fmha_backend = "cutlass"` under an SM100 test), not surely the target's
        for gate, _calls in lower.below(out.dotted, out.keys, methods=api):
            if (gate.file, gate.line) in seen:
                continue
            seen.add((gate.file, gate.line))
            link = gate_link(Role.BELOW, lower.name, f"{lower.tag}", gate)
            loads |= gate.kind == JIT and not link.excludes
            given = passed_by_caller(lower.ev, gate) if link.refuses else None
            if given is not None:
                link = replace(link, excludes=False, refuses=False, class_=None,
                               why=f"refuses only when the caller passes {given}: {link.why}")
            links.append(link if not api else _own(link))
        if host and arch is not None and not any(link.refuses for link in links[start:]) \
                and not any(isinstance(step, Handed) for step in out.via):
            refused = _host_refusal(lower, out, arch)
            if refused is not None:
                links.append(refused if not api else _own(refused))
        if loads and arch is not None and all(link.role != Role.BUILDS for link in links):
            links += [b for b in [jit_link(lower, arch)] if b is not None]  # once


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
    below = [link for link in links if link.role in (Role.BELOW, Role.SHIPS, Role.BUILDS)]
    crash = [link for link in below if link.refuses]
    refused_above = any(link.role == Role.GATE and link.refuses for link in links)
    if crash and not refused_above:  # refused above, the user meets this tree's own error
        first = crash[0]
        admits = f" (admits {first.admits})" if first.admits else ""
        index = links.index(first)
        call = next((link for link in reversed(links[:index]) if link.role == Role.CALL), None)
        way = (f" (its call of {call.function}, with no arch check on the way)"
               if call is not None else "")
        verb = "its JIT build fails at" if first.role == Role.BUILDS else "refused by"
        return replace(chain, verdict=Verdict.CRASH,
                       reason=(f"admitted on the way down{way}, then {verb} {first.upstream} "
                               f"{first.commit} {first.file}:{first.line} {first.function}"
                               f"{admits}: {first.why}"),
                       where=f"{verb} {first.upstream} {first.commit} {_at(first)}")
    excluding, elsewhere = _on_the_way(feature, links)
    hollow = [link for link in below if not link.excludes and link.class_ == NEEDS_KERNEL_WORK]
    if not links and feature.default:  # what the server runs when nothing is asked
        return replace(chain, verdict=Verdict.ON, reason=(
            "the default, read nowhere the walk can follow: no code of its own on the way, "
            "it runs what the server runs when nothing is asked"))
    if not links:
        return replace(chain, verdict=Verdict.UNKNOWN, reason="read nowhere the walk can follow")
    if not excluding and not hollow:
        if elsewhere:
            first = elsewhere[0]
            return replace(chain, verdict=Verdict.ON, reason=(
                f"every gate on the way admits the target; at {first.upstream} "
                f"{first.file}:{first.line} {first.function} it takes another path than "
                f"{first.admits or 'the archs admitted'} take"
                f"{_missed(elsewhere)}"),
                where=f"on, by another path at {first.upstream} {_at(first)}")
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


def _missed(elsewhere: list[Link]) -> str:
    """What the paths the target is kept off would take to open, in a few words."""
    classes = [str(link.class_) for link in elsewhere if link.class_ is not None]
    if not classes:
        return ""
    counted = ", ".join(f"{classes.count(c)} {c}" for c in dict.fromkeys(classes))
    return f" (the paths it misses: {len(elsewhere)} gate{'s' * (len(elsewhere) > 1)}, {counted})"


def _at(link: Link) -> str:
    """``FILE:LINE FUNCTION`` of a link."""
    return f"{link.file}:{link.line} {link.function}"


def _on_the_way(feature: Feature, links: Iterable[Link]) -> tuple[list[Link], list[Link]]:
    """The gates turning the target away on the feature's way, and apart from them those
    keeping it off a path where it asks for a computation it still gets on the path it
    takes (:func:`asks_for_path`): falling back there is no refusal of the feature."""
    links = list(links)
    excluding = [link for link in links if link.role in GATE_ROLES and link.excludes]
    goes_on = any(link.role == Role.CALL for link in links)
    elsewhere = [] if asks_for_path(feature, goes_on) else [
        link for link in excluding if not link.refuses]
    return [link for link in excluding if link not in elsewhere], elsewhere


def to_open(chain: Chain) -> dict[str, list[str]]:
    """The gates a gate-only chain opens, as ``FILE:FUNCTION`` per upstream, in the
    order met: those its verdict names (:func:`decide`), not a path the target is kept
    off that the feature does not ask for."""
    spots: dict[str, list[str]] = {}
    for link in _on_the_way(chain.feature, chain.links)[0]:
        if link.class_ != INTENTIONAL:
            found = spots.setdefault(link.upstream, [])
            if link.spot not in found:
                found.append(link.spot)
    return spots
