"""The `contrib why` corpora (works_history, fixes_history) on a mini server and library:
their corpus files read (one line per mistake), each case asked and reported, the
figures and the exit codes; and the defaults the invariants check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixes_history import main as fixes_main
from why_defaults import defaults
from works_history import load
from works_history import main as works_main

from contrib.git.repo import Git
from testing.featureupstreams import SERVER_ARGS, feature_lower, feature_upstream
from testing.gitutil import Repo


@pytest.fixture
def mini(tmp_path: Path) -> tuple[Repo, Repo, list[str]]:
    """A server ``sglang`` (pinning lower 2.0) over a library ``flashinfer``, and the
    options that name them and a cache."""
    top = feature_upstream(tmp_path / "top", "lower_lib==2.0")
    lower = feature_lower(tmp_path / "lower")
    options = ["--sglang-git", str(top.path), "--flashinfer-git", str(lower.path),
               "--cache", str(tmp_path / "cache"), "--quiet"]
    return top, lower, options


def case(upstream: str, rev: str, feature: str, expected: str = "on", tuned: bool = True,
         kind: str = "default", arch: str = "sm_120a") -> str:
    return (f'\n[[case]]\nupstream = "{upstream}"\nrev = "{rev}"\nfeature = "{feature}"\n'
            f'arch = "{arch}"\nexpected = "{expected}"\nkind = "{kind}"\n'
            f'source = "a test"\ntuned = {"true" if tuned else "false"}\n')


def test_works_prints_a_line_per_case_the_share_and_the_misses_by_kind(
        mini: tuple[Repo, Repo, list[str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    top, _, options = mini
    corpus = tmp_path / "works.toml"
    corpus.write_text(case("sglang", top.head(), "--attention-backend=plain")
                      + case("sglang", top.head(), "--attention-backend=decode", tuned=False,
                             kind="backend")
                      + case("sglang", top.head(), "--no-such-flag", kind="backend")
                      + case("flashinfer", "v2.0", "lowerlib.rmsnorm", kind="norm"))
    out = tmp_path / "works.json"
    assert works_main(["--corpus", str(corpus), "--json", str(out), *options]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[:4]] == [
        ["OK", "1"], ["MISS", "2"], ["MISS", "3"], ["OK", "4"]]
    assert "--attention-backend=decode: gate-only (expected on) [backend, kept out]" in lines[1]
    assert "--no-such-flag: absent (expected on)" in lines[2]
    assert "read as expected: 2/4 50% (goal >= 95%); tuned 2/3 67%, kept out 0/1 0%" in lines
    assert lines[-2:] == ["  backend        absent             1",
                          "  backend        gate-only          1"]
    data = json.loads(out.read_text())
    assert data["summary"]["kept_out"] == [1, 0] and data["summary"]["share"] == 50.0
    assert [r["answer"]["verdict"] for r in data["rows"]] == ["on", "gate-only", "absent", "on"]
    # only the cases asked for; all read as expected: exit 0
    assert works_main(["--corpus", str(corpus), "--case", "1", "--case", "4", *options]) == 0
    assert works_main(["--corpus", str(corpus), "--kept-out", *options]) == 1


def test_a_works_corpus_that_cannot_be_read_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "works.toml"
    corpus.write_text(case("flashinfer", "v1", "x.y") + case("flashinfer", "v1", "x.y",
                                                              expected="fine"))
    assert works_main(["--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"works_history: {corpus}: [[case]] number 2: expected must be one of "
                   "on, gate-only, needs-kernel-work, crash, unknown, not 'fine'")
    corpus.write_text(case("flashinfer", "v1", "x.y", arch="sm_12z"))
    assert works_main(["--corpus", str(corpus)]) == 2
    assert capsys.readouterr().err.startswith(f"works_history: {corpus}: [[case]] number 1: arch")
    corpus.write_text(case("flashinfer", "v1", "x.y").replace("tuned = true", "tuned = 1"))
    with pytest.raises(ValueError, match="number 1: tuned must be a bool, not 1"):
        load(corpus)


def test_the_shipped_works_corpus_reads_and_keeps_a_third_out() -> None:
    cases = load(Path(__file__).resolve().parents[2] / "benchmarks" / "works_corpus.toml")
    assert len(cases) >= 40
    assert len([c for c in cases if not c.tuned]) == len(cases) // 3


def test_invariants_name_each_default_off_per_arch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A setting defaulting to a choice is that choice's feature; a bool defaulting to
    True the flag; a default of None names none.  The fused path of ``--enable-fusion``
    is turned away on sm_120a only: one violation there, none on sm_100a; ``decode``,
    kept off its SM100 path, is served by the server's own code as a default."""
    top = feature_upstream(tmp_path / "top", "lower_lib==2.0")
    lower = feature_lower(tmp_path / "lower")
    sha = top.commit("defaults", {"python/top/server_args.py": SERVER_ARGS.replace(
        "attention_backend: Optional[str] = None", 'attention_backend: Optional[str] = "decode"')
        .replace("enable_quick_reduce: bool = False", "enable_quick_reduce: bool = True")
        .replace("enable_fusion: bool = False", "enable_fusion: bool = True")})
    found = defaults(Git(top.path), sha, "ServerArgs")
    assert found.features == ["--enable-fusion", "--enable-quick-reduce",
                              "--attention-backend=decode"]
    options = ["--sglang-git", str(top.path), "--flashinfer-git", str(lower.path),
               "--cache", str(tmp_path / "cache"), "--quiet"]
    out = tmp_path / "inv.json"
    assert works_main(["--invariants", sha, "--upstream", "sglang", "--arch", "sm_100a",
                       "--arch", "sm_120a", "--json", str(out), *options]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == ["sm_100a: 0 of 3 defaults not on", "sm_120a: 1 of 3 defaults not on"]
    assert lines[3].startswith("  --enable-fusion: ") and ": on" not in lines[3]
    data = json.loads(out.read_text())
    assert [v["feature"] for v in data["archs"]["sm_120a"]["violations"]] == [
        "--enable-fusion"]
    assert works_main(["--invariants", sha]) == 2  # no --upstream
    assert capsys.readouterr().err.strip() == (
        "works_history: --invariants needs --upstream (flashinfer or sglang)")


def test_a_librarys_defaults_are_its_functions_default_backends(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "lib")
    sha = repo.commit("lib", {
        "pyproject.toml": '[project]\nname = "lib"\nversion = "0"\n',
        "lib/__init__.py": "from .mm import mm, plain, guessed\n",
        "lib/mm.py": ("from typing import Literal\n\n\n"
                      'def mm(x, backend: Literal["a", "b"] = "b"):\n    return x\n\n\n'
                      'def guessed(x, *, backend: Literal["a", "c"] = pick()):\n    return x\n\n\n'
                      "def plain(x):\n    return x\n")})
    found = defaults(Git(repo.path), sha, "ServerArgs")
    assert (found.features, found.unnamed) == (["lib.mm:backend=b"], ["lib.guessed"])


def test_fixes_ask_before_and_at_each_fix_and_count_within_the_vocabulary(
        mini: tuple[Repo, Repo, list[str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    _, _, options = mini
    opening = "v2.0"  # the commit "comm: admit SM12x (#7)"
    corpus = tmp_path / "fixes.toml"
    fix = ('\n[[fix]]\nupstream = "flashinfer"\ncommit = "{c}"\npr = 7\nfeature = "{f}"\n'
           'arch = "sm_120a"\nbefore = "{b}"\nat = "on"\nscope = "{s}"\nreason = "a test"\n')
    corpus.write_text(fix.format(c=opening, f="lowerlib.fused_allreduce", b="gate-only", s="gates")
                      + fix.format(c=opening, f="lowerlib.rmsnorm", b="crash", s="below"))
    out = tmp_path / "fixes.json"
    assert fixes_main(["--corpus", str(corpus), "--json", str(out), *options]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("OK     1 flashinfer #7 ")
    assert lines[1].split()[:3] == ["before", f"{opening}^", "gate-only"]
    assert lines[3].startswith("MISS   2 flashinfer #7 ") and lines[3].endswith("[below]")
    assert "agreement within the vocabulary (scope gates): 1/1 100%" in lines
    assert "agreement overall: 1/2 50%" in lines
    assert json.loads(out.read_text())["summary"] == {"fixes": 2, "ok": 1, "within": 1,
                                                      "within_ok": 1}
    corpus.write_text(fix.format(c=opening, f="x", b="gate-only", s="nearby"))
    assert fixes_main(["--corpus", str(corpus), *options]) == 2
    assert "[[fix]] number 1: scope must be one of gates, below, not 'nearby'" in (
        capsys.readouterr().err)
