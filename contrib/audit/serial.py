"""The audit's written forms, and the only place any is read back.

* The JSON document (``contrib audit --json``) says what people and scripts read:
  ``admits`` as ``"majors 9, 10"``, ``effect`` as the sentence, ``reached`` as
  ``kind|path|name|majors|chain``, ``calls`` and ``via`` as ``a>b`` and ``a > b``,
  evidence as its line.  It is written here and never parsed again.
* The result cache keeps the same gate as data (the effect's kind, what it admits as
  numbers: a whole major ``12``, a single capability ``[12, 0]``; each endpoint's, call's, piece of evidence's and lower gate's fields) and
  is read back by :func:`gate_from_cache`, which refuses anything not of the right
  type: a damaged or hand-edited entry is audited again, never trusted.
* The link cache keeps what linking to the stack below gave each gate
  (:func:`linked_cache`, :func:`linked_from_cache`) and the mismatches; the features
  cache each feature's chain (:func:`chain_cache`, :func:`chain_from_cache`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from contrib.analysis.archvalues import Capabilities
from contrib.analysis.gates import Form
from contrib.analysis.jittarget import BuildVerdict, Built, JitTarget
from contrib.analysis.opening import Opens
from contrib.analysis.reach.endpoints import Endpoint, EndpointKind
from contrib.audit.chains import Chain, Feature, Fix, Link, Role, Verdict
from contrib.audit.model import (
    AuditGate,
    Basis,
    Below,
    Blame,
    Decision,
    EffectKind,
    Evidence,
    GateClass,
    GateKind,
    Mismatch,
    Place,
    Scope,
    admits_text,
)

# -- the JSON document ------------------------------------------------------------------


def endpoint_text(endpoint: Endpoint) -> str:
    """An endpoint as the JSON shows it: ``kind|path|qualified name|majors|chain``."""
    return "|".join([endpoint.kind, endpoint.path, endpoint.name,
                     ",".join(map(str, endpoint.majors)), ">".join(endpoint.chain)])


def gate_json(gate: AuditGate) -> dict[str, Any]:
    """A gate's entry in the JSON document."""
    return {
        "file": gate.file, "line": gate.line, "function": gate.function,
        "kind": str(gate.kind), "admits": admits_text(gate.admits),
        "excludes_target": gate.excludes_target, "text": gate.text,
        "effect": gate.effect.why, "class": _str(gate.class_), "basis": _str(gate.basis),
        "scope": str(gate.scope),
        "evidence": [str(e) for e in gate.evidence], "reason": gate.reason,
        "comment": gate.comment, "message": gate.message, "units": list(gate.units),
        "builders": list(gate.builders), "calls": [">".join(c) for c in gate.calls],
        "reached": [endpoint_text(e) for e in gate.reached],
        "index": gate.index, "end_line": gate.end_line, "parser_kind": str(gate.parser_kind),
        "covered_by": gate.covered_by, "opened_by": blame_json(gate.opened_by),
        "closed_by": blame_json(gate.closed_by), "below": [below_json(b) for b in gate.below],
        "opens": _str(gate.opens),
    }


def below_json(below: Below) -> dict[str, Any]:
    """A lower gate an upper gate's code reaches, as the JSON shows it."""
    return {"upstream": below.upstream, "tag": below.tag, "commit": below.commit,
            "file": below.file, "line": below.line, "function": below.function,
            "admits": admits_text(below.admits), "excludes_target": below.excludes_target,
            "class": _str(below.class_), "effect": below.effect, "calls": below.calls,
            "via": " > ".join(below.via)}


def mismatch_json(mismatch: Mismatch) -> dict[str, Any]:
    """A mismatch with the upstream below, as the JSON shows it."""
    return {"gate": {"file": mismatch.file, "line": mismatch.line,
                     "function": mismatch.function},
            "below": below_json(mismatch.below), "message": mismatch.message}


def blame_json(blame: Blame | None) -> dict[str, Any] | None:
    """The commit that flipped a gate, as the JSON shows it."""
    return None if blame is None else {"sha": blame.sha, "subject": blame.subject,
                                       "pr": blame.pr}


def _str(value: str | None) -> str | None:
    return None if value is None else str(value)


# -- the result cache -------------------------------------------------------------------


def gate_cache(gate: AuditGate) -> dict[str, Any]:
    """A gate as the result cache keeps it: the JSON entry with its decisions as data."""
    data = gate_json(gate)
    data["admits"] = _majors(gate.admits)
    data["effect"] = {"kind": str(gate.effect.kind), "why": gate.effect.why,
                      "flag": gate.effect.flag, "returned": gate.effect.returned}
    data["reached"] = [[str(e.kind), e.path, e.name, list(e.majors), list(e.chain)]
                       for e in gate.reached]
    data["calls"] = [list(c) for c in gate.calls]
    data["evidence"] = [evidence_cache(e) for e in gate.evidence]
    data["below"] = [_below_cache(b) for b in gate.below]
    return data


def _majors(admits: Capabilities | None) -> list[int | list[int]] | None:
    return None if admits is None else admits.cache()


def evidence_cache(evidence: Evidence) -> list[Any]:
    """A piece of evidence as data: where, path, kind, says, guard, upstream, line."""
    guard = None if evidence.guard is None else [evidence.guard.path, evidence.guard.line]
    return [evidence.where, evidence.path, evidence.kind, evidence.says, guard,
            evidence.upstream, evidence.line]


def _below_cache(below: Below) -> dict[str, Any]:
    data = below_json(below)
    data["admits"] = _majors(below.admits)
    data["via"] = list(below.via)
    return data


def gate_from_cache(data: object) -> AuditGate | None:
    """Back from :func:`gate_cache`; None for anything not of that shape."""
    if not isinstance(data, dict) or set(data) != _CACHE_KEYS:
        return None
    if not all(check(data[key]) for key, check in _PLAIN.items()) or not all(
            isinstance(data[key], str) for key in ("kind", "scope", "parser_kind")):
        return None
    if data["class"] is not None and not isinstance(data["class"], str):
        return None
    opens = _OPENS.get(data["opens"]) if isinstance(data["opens"], str) else None
    if (opens is None) != (data["opens"] is None):
        return None
    basis = _basis(data["basis"])
    if isinstance(basis, _Malformed):
        return None
    plain = {key: data[key] for key in _PLAIN}
    plain.update({key: tuple(data[key]) for key in _TUPLES})
    kind, scope = _GATE_KINDS.get(data["kind"]), _SCOPES.get(data["scope"])
    klass = _CLASSES.get(data["class"]) if data["class"] is not None else None
    form: Form | str | None = _FORMS.get(data["parser_kind"]) if data["parser_kind"] else ""
    if kind is None or scope is None or form is None or (klass is None) != (data["class"] is None):
        return None
    admits = _admits(data["admits"])
    effect = _decision(data["effect"])
    reached = _endpoints(data["reached"])
    calls = _calls(data["calls"])
    evidence = _evidences(data["evidence"])
    below = _belows(data["below"])
    opened, closed = _blame_of(data["opened_by"]), _blame_of(data["closed_by"])
    if (isinstance(admits, _Malformed) or effect is None or reached is None or calls is None
            or evidence is None or below is None or isinstance(opened, _Malformed)
            or isinstance(closed, _Malformed)):
        return None
    return AuditGate(kind=kind, scope=scope, class_=klass, parser_kind=form, admits=admits,
                     effect=effect, reached=reached, calls=calls, evidence=evidence,
                     below=below, opened_by=opened, closed_by=closed, basis=basis, opens=opens,
                     **plain)


class _Malformed:
    """What a reader returns for a value of the wrong shape."""


def _admits(value: object) -> Capabilities | None | _Malformed:
    """What the gate admits as kept (:meth:`Capabilities.cache`), None when unread."""
    if value is None:
        return None
    found = Capabilities.from_cache(value)
    return _Malformed() if found is None else found


def _basis(value: object) -> Basis | None | _Malformed:
    if value is None:
        return None
    found = _BASES.get(value) if isinstance(value, str) else None
    return _Malformed() if found is None else found


def _decision(value: object) -> Decision | None:
    if not (isinstance(value, dict) and set(value) == {"kind", "why", "flag", "returned"}
            and all(isinstance(v, str) for v in value.values())):
        return None
    kind = _EFFECT_KINDS.get(value["kind"])
    return None if kind is None else Decision(kind, value["why"], value["flag"], value["returned"])


def _endpoints(value: object) -> tuple[Endpoint, ...] | None:
    if not isinstance(value, list):
        return None
    found = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 5 and all(
                isinstance(item[n], str) for n in (0, 1, 2))
                and isinstance(item[3], list) and all(_int(m) for m in item[3])
                and _strings(item[4])):
            return None
        kind = _ENDPOINT_KINDS.get(item[0])
        if kind is None:
            return None
        found.append(Endpoint(kind, item[1], item[2], tuple(item[3]), tuple(item[4])))
    return tuple(found)


def _calls(value: object) -> tuple[tuple[str, ...], ...] | None:
    if not (isinstance(value, list) and all(_strings(c) for c in value)):
        return None
    return tuple(tuple(c) for c in value)


def _evidences(value: object) -> tuple[Evidence, ...] | None:
    if not isinstance(value, list):
        return None
    found = [_evidence(item) for item in value]
    return None if any(e is None for e in found) else tuple(e for e in found if e is not None)


def _evidence(item: object) -> Evidence | None:
    if not (isinstance(item, list) and len(item) == 7
            and all(isinstance(item[n], str) for n in (0, 1, 2, 3, 5)) and _int(item[6])):
        return None
    guard = item[4]
    if guard is not None and not (isinstance(guard, list) and len(guard) == 2
                                  and isinstance(guard[0], str) and _int(guard[1])):
        return None
    return Evidence(item[0], item[1], item[2], item[3],
                    None if guard is None else Place(guard[0], guard[1]), item[5], item[6])


def _belows(value: object) -> tuple[Below, ...] | None:
    if not isinstance(value, list):
        return None
    found = [_below(item) for item in value]
    return None if any(b is None for b in found) else tuple(b for b in found if b is not None)


_BELOW_TEXT = ("upstream", "tag", "commit", "file", "function", "effect", "calls")


def _below(item: object) -> Below | None:
    if not (isinstance(item, dict) and set(item) == {*_BELOW_TEXT, "line", "admits",
                                                      "excludes_target", "class", "via"}
            and all(isinstance(item[k], str) for k in _BELOW_TEXT) and _int(item["line"])
            and isinstance(item["excludes_target"], bool) and _strings(item["via"])
            and (item["class"] is None or _known(_CLASSES, item["class"]))):
        return None
    admits = _admits(item["admits"])
    if isinstance(admits, _Malformed):
        return None
    return Below(**{k: item[k] for k in _BELOW_TEXT}, line=item["line"], admits=admits,
                 excludes_target=item["excludes_target"], via=tuple(item["via"]),
                 class_=None if item["class"] is None else _CLASSES[item["class"]])


def _blame_of(value: object) -> Blame | None | _Malformed:
    if value is None:
        return None
    if not (isinstance(value, dict) and set(value) == {"sha", "subject", "pr"}
            and isinstance(value["sha"], str) and isinstance(value["subject"], str)
            and (value["pr"] is None or _int(value["pr"]))):
        return _Malformed()
    return Blame(value["sha"], value["subject"], value["pr"])


def _known(table: dict[str, Any], value: object) -> bool:
    """Whether ``value`` is one of ``table``'s written values (a list or a dict is not:
    it is no key at all)."""
    return isinstance(value, str) and value in table


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


_PLAIN: dict[str, Callable[[object], bool]] = {
    **dict.fromkeys(("file", "function", "text", "reason", "comment", "message"),
                    lambda v: isinstance(v, str)),
    **dict.fromkeys(("line", "index", "end_line"), _int),
    "excludes_target": lambda v: isinstance(v, bool),
    **dict.fromkeys(("units", "builders"), _strings),
    "covered_by": lambda v: v is None or isinstance(v, str),
}
_TUPLES = ("units", "builders")
_CACHE_KEYS = {*_PLAIN, "kind", "scope", "class", "parser_kind", "admits", "effect", "reached",
               "calls", "evidence", "below", "opened_by", "closed_by", "basis", "opens"}
# Each enumeration by its written value (a dict read is a tenth of an Enum call, and the
# cache is read on every repeat audit).
_GATE_KINDS = {k.value: k for k in GateKind}
_SCOPES = {s.value: s for s in Scope}
_CLASSES = {c.value: c for c in GateClass}
_BASES = {b.value: b for b in Basis}
_FORMS = {f.value: f for f in Form}
_OPENS = {o.value: o for o in Opens}
_EFFECT_KINDS = {k.value: k for k in EffectKind}
_ENDPOINT_KINDS = {k.value: k for k in EndpointKind}

# -- what linking to the stack below changes on a gate ------------------------------------


def linked_cache(gate: AuditGate) -> dict[str, Any]:
    """What linking set on a gate, as the link cache keeps it."""
    return {"below": [_below_cache(b) for b in gate.below], "class": _str(gate.class_),
            "basis": _str(gate.basis), "reason": gate.reason,
            "evidence": [evidence_cache(e) for e in gate.evidence]}


def linked_from_cache(gate: AuditGate, data: object) -> AuditGate | None:
    """``gate`` with what :func:`linked_cache` kept; None when that is malformed."""
    if not (isinstance(data, dict)
            and set(data) == {"below", "class", "basis", "reason", "evidence"}
            and isinstance(data["reason"], str)
            and (data["class"] is None or isinstance(data["class"], str)
                 and data["class"] in _CLASSES)):
        return None
    below, evidence, basis = (_belows(data["below"]), _evidences(data["evidence"]),
                              _basis(data["basis"]))
    if below is None or evidence is None or isinstance(basis, _Malformed):
        return None
    klass = None if data["class"] is None else _CLASSES[data["class"]]
    return replace(gate, below=below).classed(klass, basis, data["reason"], evidence)


def mismatch_cache(mismatch: Mismatch) -> dict[str, Any]:
    """A mismatch as the link cache keeps it."""
    data = mismatch_json(mismatch)
    data["below"] = _below_cache(mismatch.below)
    return data


def mismatch_from_cache(data: object) -> Mismatch | None:
    """Back from :func:`mismatch_cache`; None for anything not of that shape."""
    if not (isinstance(data, dict) and set(data) == {"gate", "below", "message"}
            and isinstance(data["message"], str) and isinstance(data["gate"], dict)):
        return None
    gate, below = data["gate"], _below(data["below"])
    if not (below is not None and set(gate) == {"file", "line", "function"}
            and isinstance(gate["file"], str) and _int(gate["line"])
            and isinstance(gate["function"], str)):
        return None
    return Mismatch(gate["file"], gate["line"], gate["function"], below, data["message"])


# -- a feature's chain ----------------------------------------------------------------------


def link_json(link: Link) -> dict[str, Any]:
    """A link of a feature's chain, as the JSON shows it."""
    return {"role": link.role.value, "upstream": link.upstream, "commit": link.commit,
            "file": link.file, "line": link.line, "function": link.function,
            "admits": link.admits, "excludes_target": link.excludes, "refuses": link.refuses,
            "class": _str(link.class_), "why": link.why,
            "evidence": [str(e) for e in link.evidence], "builds": _builds_json(link.builds)}


def _builds_json(target: JitTarget | None) -> dict[str, Any] | None:
    """What a JIT builds for the target (a BUILDS link's reading), as data."""
    return None if target is None else {
        "arch": target.arch, "path": target.path, "line": target.line,
        "function": target.function, "flags_path": target.flags_path,
        "flags_line": target.flags_line, "built": _built_json(target.built),
        "others": [_built_json(o) for o in target.others]}


def _built_json(b: Built) -> dict[str, Any]:
    return {"cuda": b.cuda, "verdict": b.verdict.value, "compute": list(b.compute),
            "targets": list(b.targets), "runs": b.runs, "says": b.says}


def _builds(data: object) -> JitTarget | None | _Malformed:
    """Back from :func:`_builds_json`."""
    texts = ("arch", "path", "function", "flags_path")
    if data is None:
        return None
    if not (isinstance(data, dict) and set(data) == {*texts, "line", "flags_line", "built",
                                                     "others"}
            and all(isinstance(data[k], str) for k in texts) and _int(data["line"])
            and _int(data["flags_line"]) and isinstance(data["others"], list)):
        return _Malformed()
    built = [_built(b) for b in (data["built"], *data["others"])]
    kept = [b for b in built if b is not None]
    if len(kept) != len(built):
        return _Malformed()
    return JitTarget(data["arch"], data["path"], data["line"], data["function"],
                     data["flags_path"], data["flags_line"], kept[0], tuple(kept[1:]))


def _built(data: object) -> Built | None:
    texts = ("cuda", "runs", "says")
    if not (isinstance(data, dict) and set(data) == {*texts, "verdict", "compute", "targets"}
            and all(isinstance(data[k], str) for k in texts)
            and _known(_BUILD_VERDICTS, data["verdict"]) and _strings(data["compute"])
            and _strings(data["targets"])):
        return None
    return Built(data["cuda"], _BUILD_VERDICTS[data["verdict"]], tuple(data["compute"]),
                 tuple(data["targets"]), data["runs"], data["says"])


def chain_json(chain: Chain) -> dict[str, Any]:
    """A feature's chain and verdict, as the JSON shows them."""
    return {"feature": chain.feature.name, "kind": chain.feature.kind.value,
            "declared": f"{chain.feature.file}:{chain.feature.line}",
            "verdict": chain.verdict.value, "reason": chain.reason, "where": chain.where,
            "fix": _fix_json(chain.fix), "links": [link_json(link) for link in chain.links]}


def _fix_json(fix: Fix | None) -> dict[str, str] | None:
    return None if fix is None else {"upstream": fix.upstream, "tag": fix.tag,
                                     "commit": fix.commit, "subject": fix.subject,
                                     "pr": fix.pr}


def _fix(data: object) -> Fix | None | bool:
    """Back from :func:`_fix_json`; False for anything else."""
    if data is None:
        return None
    keys = ("upstream", "tag", "commit", "subject", "pr")
    if not (isinstance(data, dict) and set(data) == set(keys)
            and all(isinstance(data[k], str) for k in keys)):
        return False
    return Fix(*(data[k] for k in keys))


def chain_cache(chain: Chain) -> dict[str, Any]:
    """A chain as the features cache keeps it (its feature by name)."""
    links = []
    for link in chain.links:
        data = link_json(link)
        data["evidence"] = [evidence_cache(e) for e in link.evidence]
        links.append(data)
    return {"feature": chain.feature.name, "verdict": chain.verdict.value,
            "reason": chain.reason, "where": chain.where, "fix": _fix_json(chain.fix),
            "links": links}


def chain_from_cache(feature: Feature, data: object) -> Chain | None:
    """Back from :func:`chain_cache` for ``feature``; None for anything else."""
    if not (isinstance(data, dict) and data.get("feature") == feature.name
            and isinstance(data.get("reason"), str) and isinstance(data.get("where"), str)
            and _known(_VERDICTS, data.get("verdict")) and isinstance(data.get("links"), list)):
        return None
    links = [_link(item) for item in data["links"]]
    fix = _fix(data.get("fix"))
    if any(link is None for link in links) or fix is False:
        return None
    return Chain(feature, tuple(link for link in links if link is not None),
                 _VERDICTS[data["verdict"]], data["reason"], data["where"],
                 fix if isinstance(fix, Fix) else None)


_LINK_TEXT = ("upstream", "commit", "file", "function", "admits", "why")


def _link(item: object) -> Link | None:
    if not (isinstance(item, dict) and set(item) == {*_LINK_TEXT, "role", "line",
                                                      "excludes_target", "refuses", "class",
                                                      "evidence", "builds"}
            and all(isinstance(item[k], str) for k in _LINK_TEXT) and _int(item["line"])
            and isinstance(item["excludes_target"], bool) and isinstance(item["refuses"], bool)
            and _known(_ROLES, item["role"])
            and (item["class"] is None or _known(_CLASSES, item["class"]))):
        return None
    evidence, builds = _evidences(item["evidence"]), _builds(item["builds"])
    if evidence is None or isinstance(builds, _Malformed):
        return None
    return Link(_ROLES[item["role"]], item["upstream"], item["commit"], item["file"],
                item["line"], item["function"], admits=item["admits"],
                excludes=item["excludes_target"], refuses=item["refuses"],
                class_=None if item["class"] is None else _CLASSES[item["class"]],
                why=item["why"], evidence=evidence, builds=builds)


_VERDICTS = {v.value: v for v in Verdict}
_BUILD_VERDICTS = {v.value: v for v in BuildVerdict}
_ROLES = {r.value: r for r in Role}
