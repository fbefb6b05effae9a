"""The leads an excluding gate's class is looked for along, in their order."""

from __future__ import annotations

from contrib.arch import parse_arch
from contrib.audit.finding import leads
from contrib.audit.finding.gates import gates_of_file

SM120 = parse_arch("sm_120a")


def test_the_leads_are_named_in_the_order_the_docstring_numbers_them() -> None:
    names = [name for name, _ in leads.LEADS]
    assert names == ["its callers", "its callers in other files", "registrations",
                     "the object's methods", "the configuration", "the backends its test names",
                     "the backends of its branch", "the strings its function returns",
                     "checks only"]
    doc = leads.__doc__ or ""
    positions = [doc.index(f"{n}. **") for n in range(1, len(names) + 1)]
    assert positions == sorted(positions)


def test_the_first_lead_that_finds_something_speaks() -> None:
    """A decision function whose callers run a Triton kernel: the callers lead finds it,
    and the checks-only lead (its own body only raises) is never asked."""
    text = ('import torch\nimport triton\n\n@triton.jit\ndef kern(x):\n    pass\n\n'
            'def _check():\n    if torch.cuda.get_device_capability()[0] != 10:\n'
            '        raise RuntimeError("SM100 only")\n\n'
            'def api(x):\n    _check()\n    kern[(1,)](x)\n')
    gate = next(g for g in gates_of_file("pkg/ops.py", text, SM120) if g.excludes_target)
    assert [e.kind for e in gate.reached] == ["triton"] and gate.reached[0].name == "kern"
    assert gate.calls and gate.calls[0][0] == "api"


def test_code_that_only_checks_is_the_last_lead() -> None:
    text = ('import torch\n\ndef check(x):\n    if torch.cuda.get_device_capability()[0] != 10:\n'
            '        raise RuntimeError("SM100 only")\n    assert x > 0, "positive"\n')
    gate = next(g for g in gates_of_file("pkg/checks.py", text, SM120) if g.excludes_target)
    assert [(e.kind, e.name) for e in gate.reached] == [("checks", "check")]
