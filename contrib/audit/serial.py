"""The audit's two written forms, and the only place either is read back.

* The JSON document (``contrib audit --json``) says what people and scripts read:
  ``admits`` as ``"majors 9, 10"``, ``effect`` as the sentence, ``reached`` as
  ``kind|path|name|majors|chain``.  It is written here and never parsed again.
* The result cache keeps the same gate as data (the effect's kind, the majors as
  numbers, each endpoint's fields) and is read back by :func:`gate_from_cache`,
  which refuses anything not of the right type: a damaged or hand-edited entry is
  audited again, never trusted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contrib.analysis.gates import Form
from contrib.analysis.reach.endpoints import Endpoint, EndpointKind
from contrib.audit.model import (
    AuditGate,
    Decision,
    EffectKind,
    GateClass,
    GateKind,
    Scope,
    admits_text,
)

# -- the JSON document ------------------------------------------------------------------


def endpoint_text(endpoint: Endpoint) -> str:
    """An endpoint as the JSON shows it: ``kind|path|qualified name|majors|chain``."""
    return "|".join([endpoint.kind, endpoint.path, endpoint.name,
                     ",".join(map(str, endpoint.majors)), endpoint.chain])


def gate_json(gate: AuditGate) -> dict[str, Any]:
    """A gate's entry in the JSON document."""
    return {
        "file": gate.file, "line": gate.line, "function": gate.function,
        "kind": str(gate.kind), "admits": admits_text(gate.admits),
        "excludes_target": gate.excludes_target, "text": gate.text,
        "effect": gate.effect.why, "class": _str(gate.class_), "scope": str(gate.scope),
        "evidence": list(gate.evidence), "reason": gate.reason, "comment": gate.comment,
        "message": gate.message, "units": list(gate.units), "builders": list(gate.builders),
        "calls": list(gate.calls), "reached": [endpoint_text(e) for e in gate.reached],
        "index": gate.index, "end_line": gate.end_line, "parser_kind": str(gate.parser_kind),
        "covered_by": gate.covered_by, "opened_by": gate.opened_by,
        "closed_by": gate.closed_by, "below": list(gate.below),
    }


def _str(value: str | None) -> str | None:
    return None if value is None else str(value)


# -- the result cache -------------------------------------------------------------------


def gate_cache(gate: AuditGate) -> dict[str, Any]:
    """A gate as the result cache keeps it: the JSON entry with its decisions as data."""
    data = gate_json(gate)
    data["admits"] = None if gate.admits is None else sorted(gate.admits)
    data["effect"] = {"kind": str(gate.effect.kind), "why": gate.effect.why,
                      "flag": gate.effect.flag, "returned": gate.effect.returned}
    data["reached"] = [[str(e.kind), e.path, e.name, list(e.majors), e.chain]
                       for e in gate.reached]
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
    plain = {key: data[key] for key in _PLAIN}
    kind, scope = _GATE_KINDS.get(data["kind"]), _SCOPES.get(data["scope"])
    klass = _CLASSES.get(data["class"]) if data["class"] is not None else None
    form: Form | str | None = _FORMS.get(data["parser_kind"]) if data["parser_kind"] else ""
    if kind is None or scope is None or form is None or (klass is None) != (data["class"] is None):
        return None
    admits = _admits(data["admits"])
    effect = _decision(data["effect"])
    reached = _endpoints(data["reached"])
    if isinstance(admits, _Malformed) or effect is None or reached is None:
        return None
    return AuditGate(kind=kind, scope=scope, class_=klass, parser_kind=form, admits=admits,
                     effect=effect, reached=reached, **plain)


class _Malformed:
    """What a reader returns for a value of the wrong shape."""


def _admits(value: object) -> frozenset[int] | None | _Malformed:
    """The majors kept, None when unread."""
    if value is None:
        return None
    if isinstance(value, list) and all(_int(m) for m in value):
        return frozenset(value)
    return _Malformed()


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
                isinstance(item[n], str) for n in (0, 1, 2, 4))
                and isinstance(item[3], list) and all(_int(m) for m in item[3])):
            return None
        kind = _ENDPOINT_KINDS.get(item[0])
        if kind is None:
            return None
        found.append(Endpoint(kind, item[1], item[2], tuple(item[3]), item[4]))
    return tuple(found)


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: v is None or check(v)


_PLAIN: dict[str, Callable[[object], bool]] = {
    **dict.fromkeys(("file", "function", "text", "reason", "comment", "message"),
                    lambda v: isinstance(v, str)),
    **dict.fromkeys(("line", "index", "end_line"), _int),
    "excludes_target": lambda v: isinstance(v, bool),
    **dict.fromkeys(("evidence", "units", "builders", "calls"), _strings),
    "covered_by": _optional(lambda v: isinstance(v, str)),
    **dict.fromkeys(("opened_by", "closed_by"), _optional(lambda v: isinstance(v, dict))),
    "below": lambda v: isinstance(v, list) and all(isinstance(e, dict) for e in v),
}
_CACHE_KEYS = {*_PLAIN, "kind", "scope", "class", "parser_kind", "admits", "effect", "reached"}
# Each enumeration by its written value (a dict read is a tenth of an Enum call, and the
# cache is read on every repeat audit).
_GATE_KINDS = {k.value: k for k in GateKind}
_SCOPES = {s.value: s for s in Scope}
_CLASSES = {c.value: c for c in GateClass}
_FORMS = {f.value: f for f in Form}
_EFFECT_KINDS = {k.value: k for k in EffectKind}
_ENDPOINT_KINDS = {k.value: k for k in EndpointKind}

# -- what linking to the stack below changes on a gate ------------------------------------

LINKED = ("below", "class", "reason", "evidence")


def linked_of(gate: AuditGate) -> dict[str, Any]:
    """What linking set on a gate, as the link cache keeps it."""
    return {"below": list(gate.below), "class": _str(gate.class_), "reason": gate.reason,
            "evidence": list(gate.evidence)}


def apply_linked(gate: AuditGate, data: object) -> bool:
    """Set what :func:`linked_of` kept on ``gate``; False (nothing set) when malformed."""
    if not (isinstance(data, dict) and set(data) == set(LINKED)
            and _PLAIN["below"](data["below"]) and isinstance(data["reason"], str)
            and _strings(data["evidence"])
            and (data["class"] is None or isinstance(data["class"], str) and data["class"] in _CLASSES)):
        return False
    gate.below, gate.reason, gate.evidence = data["below"], data["reason"], data["evidence"]
    gate.class_ = None if data["class"] is None else _CLASSES[data["class"]]
    return True
