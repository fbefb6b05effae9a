"""Reading a PR template's sections and checklist, and CODEOWNERS by GitHub's rules."""

from __future__ import annotations

import pytest

from contrib.git.repo import Git
from contrib.pr.owners import CodeOwners, parse, read_codeowners
from contrib.pr.template import Check, Role, check_of, fill, read_template, role_of
from contrib.pr.template import parse as parse_template
from testing.gitutil import Repo


@pytest.mark.parametrize(("title", "role"), [
    ("📌 Description", Role.DESCRIPTION), ("Motivation", Role.DESCRIPTION),
    ("Modifications", Role.CHANGES), ("🔍 Related Issues", Role.ISSUES),
    ("🧪 Tests", Role.TESTS), ("Accuracy Tests", Role.TESTS),
    ("Speed Tests and Profiling", Role.PERFORMANCE), ("🚀 Pull Request Checklist", Role.CHECKLIST),
    ("✅ Pre-commit Checks", Role.CHECKLIST), ("Reviewer Notes", Role.NOTES),
    ("Review and Merge Process", Role.NOTES), ("Screenshots", Role.OTHER)])
def test_a_heading_says_what_its_section_asks_for(title: str, role: Role) -> None:
    assert role_of(title) == role


@pytest.mark.parametrize(("item", "check"), [
    ("I have installed the hooks with `pre-commit install`.", Check.OTHER),
    ("I have installed `pre-commit` by running `pip install pre-commit`.", Check.OTHER),
    ("I have run the hooks manually with `pre-commit run --all-files`.", Check.HOOKS),
    ("Format your code according to the [guide](https://example.org/format).", Check.HOOKS),
    ("All tests are passing (`unittest`, etc.).", Check.TESTS_PASS),
    ("Tests have been added or updated as needed.", Check.OTHER),
    ("Provide accuracy and speed benchmark results.", Check.OTHER)])
def test_an_item_is_ticked_only_for_a_run(item: str, check: Check) -> None:
    assert check_of(item) == check


def test_headings_in_notes_and_fences_are_text() -> None:
    text = ("<!--\n## Not a heading\n-->\n## Tests\n\n```\n# not one either\n```\n"
            "- [ ] All tests pass.\n- [ ] Docs updated.\n")
    template = parse_template("t.md", text)
    [tests] = template.sections
    assert (tests.title, tests.role, tests.checks) == ("Tests", Role.TESTS,
                                                       frozenset({Check.TESTS_PASS, Check.OTHER}))
    filled = fill(template, {tests: ["the record"]}, {Check.TESTS_PASS: "ran `pytest`"})
    assert filled.endswith("- [x] All tests pass. — ran `pytest`\n- [ ] Docs updated.\n\n"
                           "the record")


@pytest.mark.parametrize(("path", "where"), [
    (".github/PULL_REQUEST_TEMPLATE.md", ".github/PULL_REQUEST_TEMPLATE.md"),
    ("docs/pull_request_template.md", "docs/pull_request_template.md"),
    ("pull_request_template.md", "pull_request_template.md"),
    (".github/PULL_REQUEST_TEMPLATE/b.md", ".github/PULL_REQUEST_TEMPLATE/a.md")])
def test_the_template_is_found_where_github_looks(upstream: Repo, path: str, where: str) -> None:
    files = {path: "## Description\n"}
    if path.endswith("/b.md"):
        files[path.replace("/b.md", "/a.md")] = "## Summary\n"
    upstream.commit("Template", files)
    template = read_template(Git(upstream.path), "HEAD")
    assert template is not None and template.path == where
    assert read_template(Git(upstream.path), "HEAD~1") is None


OWNERS = """\
# comment
*                  @everyone
apps/              @apps-anywhere
/docs/             @docs-root
docs/*.md          @docs-md   # a comment after the owners
**/logs            @logs
/build/logs/       @build-logs
/scripts           @scripts
/apps/github
csrc/ssu*          @ssu
"""


@pytest.mark.parametrize(("path", "owners"), [
    ("README.md", ("@everyone",)),
    ("x/apps/y.py", ("@apps-anywhere",)),  # a folder pattern with no inner slash: anywhere
    ("apps/github/z.py", ()),  # a later line with no owner leaves it unowned
    ("docs/a.md", ("@docs-md",)),  # the last matching line wins
    ("docs/sub/a.md", ("@docs-root",)),  # `*` stays in its folder
    ("deep/nested/logs/x", ("@logs",)),
    ("build/logs/x", ("@build-logs",)),
    ("scripts/run.sh", ("@scripts",)),  # no trailing slash: the folder and what is in it
    ("src/scripts/run.sh", ("@everyone",)),  # a leading slash anchors at the root
    ("csrc/ssu_kernel.cu", ("@ssu",)),
    ("csrc/other.cu", ("@everyone",))])
def test_codeowners_last_match_wins(path: str, owners: tuple[str, ...]) -> None:
    assert CodeOwners("CODEOWNERS", parse(OWNERS)).owner_of(path).owners == owners


def test_the_first_codeowners_github_reads(upstream: Repo) -> None:
    upstream.commit("Owners", {"CODEOWNERS": "* @root\n", "docs/CODEOWNERS": "* @docs\n"})
    found = read_codeowners(Git(upstream.path), "HEAD")
    assert found is not None and found.path == "CODEOWNERS"
    upstream.commit("Owners in .github", {".github/CODEOWNERS": "* @gh\n"})
    found = read_codeowners(Git(upstream.path), "HEAD")
    assert found is not None and (found.path, found.owner_of("a").owners) == (
        ".github/CODEOWNERS", ("@gh",))
