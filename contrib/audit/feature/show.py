"""How a feature's chain reads: its links as lines, its verdict, the commands to run;
and the feature table the audit leads with."""

from __future__ import annotations

import re
import shlex

from contrib.audit.chains import VERDICTS, Chain, Feature, FeatureKind, Link, Role, Verdict
from contrib.audit.feature.chain import to_open
from contrib.audit.report import UpstreamAudit

_NAME_MAX = 48  # as `contrib enable` cuts its default names

VERDICT_TEXT = {
    Verdict.ON: "on",
    Verdict.GATE_ONLY: "off, gate-only",
    Verdict.NEEDS_KERNEL_WORK: "off, needs kernel work",
    Verdict.CRASH: "crash",
    Verdict.UNKNOWN: "unknown",
}


def find(features: list[Feature], wanted: str) -> list[Feature]:
    """The features named ``wanted``: its exact name (``--x=v``, ``pkg.fn:backend=v``),
    the name without dashes, or a setting's every choice (``--attention-backend``
    names each ``--attention-backend=...``)."""
    spelled = {wanted, f"--{wanted.lstrip('-')}"}
    exact = [f for f in features if f.name in spelled
             or f.kind == FeatureKind.ENV and not f.value and f.name == f"{wanted}=1"]
    if exact:
        return exact
    return [f for f in features if f.value and any(
        f.name.startswith(f"{s}=") or f.name.startswith(f"{s}:") for s in spelled)]


def read_at(audit: UpstreamAudit) -> dict[str, str]:
    """What each upstream of an audit was read at: its own commit, the tags below."""
    return {audit.name: audit.commit[:10]} | {s["upstream"]: s["tag"] for s in audit.stack}


def enable_commands(chains: list[Chain], arch: str, at: dict[str, str]) -> list[str]:
    """One ``contrib enable`` per upstream whose gates the gate-only ``chains`` (one
    feature, or choices of one setting that open the same gates) open, the lower
    upstream first; ``at``: the commit or tag each upstream was read at.  The
    feature's own upstream names the features (``--feature``: enable reads the same
    chains); an upstream below names its gates (``--only``: those alone).  Each drafts
    one patchset; over two upstreams both are named for the feature and the upper one
    requires the lower (``--requires``: its ``[[requires]]``)."""
    opened: dict[str, list[str]] = {}
    for chain in chains:
        for upstream, spots in to_open(chain).items():
            found = opened.setdefault(upstream, [])
            found += [spot for spot in spots if spot not in found]
    order = list(reversed(opened.items()))
    home = home_of(chains[0]) if chains else ""
    # the drafts are named for the feature where enable cannot read it (the upstream
    # below), and alike where two must be tied
    named = len(order) > 1 or any(upstream != home for upstream, _ in order)
    name = drafts_name([c.feature for c in chains]) if named else ""
    commands = []
    for n, (upstream, spots) in enumerate(order):
        what = (" ".join(f"--feature={shlex.quote(c.feature.name)}" for c in chains)
                if upstream == home else " ".join([*spots, "--only"]))
        where = f" --at {at[upstream]}" if at.get(upstream) else ""
        tie = f" --name {name}" if name else ""
        if n:
            tie += "".join(f" --requires {below}/{name}" for below, _ in order[:n])
        commands.append(f"contrib enable {upstream} {what} --arch {arch}{where}{tie}")
    return commands


def home_of(chain: Chain) -> str:
    """The upstream declaring a chain's feature: where its setting is read (a server's),
    else where its first call goes (a library's own API)."""
    return next((link.upstream for link in chain.links if link.role == Role.READ),
                chain.links[0].upstream if chain.links else "")


def patchset_name(feature: Feature) -> str:
    """The drafts' name for a feature: ``enable-`` and the feature's words
    (``--enable-flashinfer-allreduce-fusion``: ``enable-flashinfer-allreduce-fusion``)."""
    return _named(feature.name)


def drafts_name(features: list[Feature]) -> str:
    """The drafts' name for one feature (:func:`patchset_name`), or for several choices
    of one setting, the setting's (``enable-moe-runner-backend``)."""
    if len(features) == 1:
        return patchset_name(features[0])
    first = features[0]
    return _named(first.name.split("=")[0] if first.kind == FeatureKind.FLAG else first.attr)


def _named(words: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")
    words = re.sub(r"^enable-", "", words)
    return f"enable-{words}"[:_NAME_MAX].strip("-")


def link_line(n: int, link: Link, arch: str) -> str:
    """One link of a chain, for ``contrib why``."""
    at = f"{link.upstream}@{link.commit[:10]}"
    if link.role == Role.READ:
        return f"{n:>2}. reads  {at} {link.file}:{link.line} {link.function}: {link.why}"
    if link.role == Role.CALL:
        return f"{n:>2}. calls  {link.upstream} {link.commit} {link.function}"
    what = (f"turns {arch} away ({link.class_ or 'unknown'})" if link.excludes
            else f"admits {arch}")
    if link.role == Role.BUILDS:
        return f"{n:>2}. builds {at} {link.file}:{link.line} {link.function}: {link.why}"
    if link.role == Role.SHIPS:
        where = f"{link.upstream}=={link.commit} {link.file or '-'}"
        return f"{n:>2}. ships  {where} {link.function}: {link.why}"
    if link.role == Role.BEHIND:
        return (f"{n:>2}. below  {at} {link.file}:{link.line} {link.function}: admits "
                f"{link.admits}; behind the gate above: {what}; {link.why}")
    effect = "refuses" if link.refuses else ("falls back" if link.excludes else "passes")
    return (f"{n:>2}. gate   {at} {link.file}:{link.line} {link.function}: admits "
            f"{link.admits}; {effect}: {what}; {link.why}")


def chain_lines(chain: Chain, arch: str, at: dict[str, str], *, reads: int = 3) -> list[str]:
    """The chain of ``contrib why``: its links in the order the code meets them (the
    first ``reads`` places reading the setting, then the count of the rest), then the
    verdict and what to do."""
    lines = [f"{chain.feature.name} on {arch}: {VERDICT_TEXT[chain.verdict]}"]
    n = 0
    read = [link for link in chain.links if link.role == Role.READ]
    for link in read[:reads]:
        n += 1
        lines.append(link_line(n, link, arch))
    if len(read) > reads:
        lines.append(f"    ... and {len(read) - reads} more places reading it (--json lists all)")
    for link in chain.links:
        if link.role != Role.READ:
            n += 1
            lines.append(link_line(n, link, arch))
    lines.append(f"verdict: {VERDICT_TEXT[chain.verdict]}: {chain.reason}")
    if chain.verdict == Verdict.NEEDS_KERNEL_WORK:  # the guards, kernels or ops to write
        shown_ = next((link.evidence for link in chain.links if link.evidence), ())
        lines += [f"  needs: {e}" for e in shown_]
    for command in enable_commands([chain], arch, at) if chain.verdict == Verdict.GATE_ONLY else ():
        lines.append(f"  {command}")
    return lines


FEATURE_COLUMNS = ["verdict", "feature", "next"]


def shown(chains: list[Chain], verdicts: set[Verdict] | None = None) -> list[Chain]:
    """The chains worth a row: every one with a gate on its way, or off for a reason
    read (crashes first); with ``verdicts``, every one of those.  A setting read
    nowhere the walk can follow says nothing worth a row; a chain with no gate on its
    way is on."""
    kept = [c for c in chains if (c.verdict in verdicts if verdicts else
                                  (c.gated or (c.verdict != Verdict.ON and c.links)))]
    return sorted(kept, key=lambda c: (VERDICTS.index(c.verdict), c.feature.name))


def feature_rows(chains: list[Chain], arch: str, at: dict[str, str]) -> list[list[str]]:
    """Rows of the feature table: verdict, feature, what to do next.  The choices of one
    setting that come to the same verdict for the same reason share a row
    (``--moe-runner-backend=auto|triton|...``)."""
    groups: dict[tuple[str, Verdict, str, str], list[Chain]] = {}
    for chain in chains:
        if chain.verdict == Verdict.GATE_ONLY:  # the same gates to open: one patchset
            step = repr(sorted(to_open(chain).items()))
        elif chain.verdict == Verdict.ON:
            step = ""
        else:  # where it stops; `contrib why` says the whole of it
            step = chain.where or chain.reason
        groups.setdefault((_setting(chain), chain.verdict, step, chain.feature.kind), []
                          ).append(chain)
    return [[VERDICT_TEXT[verdict], _grouped(setting, members),
             "; ".join(enable_commands(members, arch, at)) if verdict == Verdict.GATE_ONLY
             else step]
            for (setting, verdict, step, _), members in groups.items()]


def _grouped(setting: str, members: list[Chain]) -> str:
    """The name of a row's features: the one's, or the setting's with every choice
    (``--moe-runner-backend=auto|triton``, ``flashinfer.mm_bf16:backend=a|b``)."""
    if len(members) == 1:
        return members[0].feature.name
    sep = ":backend=" if members[0].feature.kind == FeatureKind.API else "="
    return f"{setting}{sep}" + "|".join(c.feature.value for c in members)


def family_rows(results: list[tuple[str, UpstreamAudit]],
                verdicts: set[Verdict] | None = None) -> tuple[list[list[str]], list[str]]:
    """The feature table of a family side by side (``--arch sm_120a,sm_121a``): a row
    per feature shown for any of the archs (:func:`shown`), its verdict on each; the
    features whose verdicts differ first, then the worst; the choices of one setting
    with the same verdicts share a row.  Also the names of the features that differ."""
    by_arch = [{c.feature.name: c for c in audit.features} for _, audit in results]
    names = dict.fromkeys(c.feature.name for _, audit in results
                          for c in shown(audit.features, verdicts))
    lines: list[tuple[Chain, tuple[Verdict | None, ...]]] = []
    for name in names:
        chains = [chains.get(name) for chains in by_arch]
        first = next(c for c in chains if c is not None)
        lines.append((first, tuple(c.verdict if c is not None else None for c in chains)))

    def order(line: tuple[Chain, tuple[Verdict | None, ...]]) -> tuple[bool, int, str]:
        chain, says = line
        worst = min(VERDICTS.index(v) if v is not None else len(VERDICTS) for v in says)
        return len(set(says)) == 1, worst, chain.feature.name

    lines.sort(key=order)
    differ = [c.feature.name for c, says in lines if len(set(says)) > 1]
    groups: dict[tuple[str, tuple[Verdict | None, ...], str], list[Chain]] = {}
    for chain, says in lines:
        groups.setdefault((_setting(chain), says, chain.feature.kind), []).append(chain)
    # one word a cell (the verdict's own), so that the archs fit side by side
    rows = [[_grouped(setting, members), *(v.value if v is not None else "-" for v in says)]
            for (setting, says, _), members in groups.items()]
    return rows, differ


def _setting(chain: Chain) -> str:
    """The setting a feature is a choice of (``--attention-backend``,
    ``flashinfer.mm_bf16``); its own name when it is no choice."""
    feature = chain.feature
    if not feature.value:
        return feature.name
    return feature.name.split("=")[0] if feature.kind == FeatureKind.FLAG else feature.attr


def feature_summary(name: str, chains: list[Chain], rows: int) -> str:
    """``sglang: 611 features: 7 crash, 31 needs-kernel-work, ..., 319 on; 42 rows``."""
    counts = {v: sum(1 for c in chains if c.verdict == v) for v in VERDICTS}
    said = ", ".join(f"{n} {v.value}" for v, n in counts.items() if n)
    lost = sum(1 for c in chains if not c.links)
    return (f"{name}: {len(chains)} features ({said or 'none'}); "
            f"{lost} not followed (read nowhere the walk can see); "
            f"{len(chains) - rows} without a row")


def feature_markdown(name: str, ref: str, chains: list[Chain], arch: str,
                     at: dict[str, str]) -> list[str]:
    """The feature table as Markdown, for a PR description or an issue: one row per
    feature with a gate on its way, the worst first, as the terminal prints it."""
    kept = shown(chains)
    out = [f"### Features of {name} at `{ref}`", "",
           feature_summary(name, chains, len(kept)) + ".", ""]
    if not kept:
        return out
    out += ["| verdict | feature | next |", "|---|---|---|"]
    for verdict, feature, step in feature_rows(kept, arch, at):
        cells = [verdict, f"`{feature}`", markdown_step(step)]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return out + [""]


def markdown_step(step: str) -> str:
    """A feature row's next step for Markdown: each command its own code span."""
    if step.startswith("contrib "):
        return "; ".join(f"`{command}`" for command in step.split("; "))
    return step
