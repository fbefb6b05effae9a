"""The command line's spelled-out lists of the audit's enumerations stay the enums'."""

from __future__ import annotations

import subprocess
import sys

from contrib import cligates
from contrib.audit.feature.chain import Verdict
from contrib.audit.model import GateClass, Scope


def test_the_audit_choices_are_the_enums_values() -> None:
    assert sorted(cligates.AUDIT_CLASSES) == sorted(c.value for c in GateClass)
    assert sorted(cligates.AUDIT_SCOPES) == sorted(s.value for s in Scope)
    # The verdicts in the order the table sorts them: the worst first.
    assert [v.value for v in Verdict] == cligates.FEATURE_VERDICTS


def test_help_does_not_load_the_audit() -> None:
    probe = ("import sys; from click.testing import CliRunner; from contrib.cli import cli; "
             "r = CliRunner().invoke(cli, ['--help']); assert r.exit_code == 0, r.output; "
             "print(sorted(m for m in sys.modules if m.startswith('contrib.audit')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
