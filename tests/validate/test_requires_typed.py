"""A wrongly typed or misplaced ``requires`` is exit 2 naming patchset.toml:LINE, never ignored.

The requires stage and :mod:`contrib.validate.requires` read the typed
``Patchset.requires`` only; what they see is what ``contrib.workspace.schema``
accepted.  ``new`` writes patchset.toml ending in ``[[history]]`` tables, so a
``requires = ...`` appended to the file belongs to the last of them (TOML gives
a key to the table header above it): that must be refused, not read as a note.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.crash import snapshot
from testing.gitutil import Repo
from testing.workspace import Workspace, make_patch


@pytest.fixture
def seed(workspace: Workspace, upstream: Repo, tmp_path: Path) -> Path:
    patches = make_patch(upstream, tmp_path, {"README.md": "changed\n"}, "readme")
    assert workspace.run("new", "proj", "seed", "--base", "main",
                         "--patch", str(patches[0])).code == 0
    return workspace.root / "patchsets" / "proj" / "seed" / "patchset.toml"


CASES = {
    "a number appended (lands in [[history]])": ("end", "requires = 5\n"),
    "a string appended (lands in [[history]])": ("end", 'requires = "flashinfer"\n'),
    "a table header then a string (lands in [decisions])": ("end",
                                                            '[decisions]\nrequires = "x"\n'),
    "a number at the top": ("top", "requires = 5\n"),
    "a list of numbers at the top": ("top", "requires = [5]\n"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("command", [("validate", "proj/seed"), ("status", "--no-fetch")])
def test_a_wrong_requires_is_one_line_exit_2_naming_the_line(
        workspace: Workspace, seed: Path, case: str, command: tuple[str, ...]) -> None:
    where, added = CASES[case]
    text = seed.read_text()
    seed.write_text(text + added if where == "end" else added + text)
    line = next(n for n, row in enumerate(seed.read_text().splitlines(), 1)
                if row.startswith("requires"))
    before = snapshot(workspace.root)
    for args in (command, (*command, "--json")):
        result = workspace.run(*args)
        assert result.code == 2, (case, args, result.out, result.err)
        assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
        assert f"{seed}:{line}: " in result.err and "requires" in result.err, result.err
    assert snapshot(workspace.root) == before  # no validation.json, nothing else


def test_an_empty_requires_list_is_no_requirement(workspace: Workspace, seed: Path) -> None:
    """``requires = []`` at the top is an empty array of tables: valid, nothing to check."""
    seed.write_text("requires = []\n" + seed.read_text())
    result = workspace.run("validate", "proj/seed", "--json")
    assert result.code in (0, 1), result.err
    [validation] = result.json["validations"]  # type: ignore[index]
    [stage] = [s for s in validation["run"]["stages"] if s["name"] == "requires"]
    assert stage["status"] == "not-applicable"
