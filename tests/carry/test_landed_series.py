"""A branch upstream landed, reverted and relanded in its own form, then changed: its
series is judged by its net change, and a place upstream once held and rewrote since is
landed, then changed.  A line that only ever stood in the function next door is not."""

from __future__ import annotations

from pathlib import Path

from contrib.carry.landed import Look, measure
from contrib.git.repo import Git
from testing.gitutil import Repo, git
from testing.histories import Change, fast_import, filler
from testing.synchelp import TWIN_GATES, add_patchset, sync_json, version_dir
from testing.workspace import Workspace


def jit(gemm: str = '        "-DEXPORT",\n', fmha: str = "", majors: str = "[10]",
        norm: str = "    return spec(\"norm\", flags)\n", head: str = "") -> str:
    """A JIT module of five specs, flashinfer's jit/gemm/core.py in small."""
    return (f'{head}def gen_gemm_module():\n    flags = [\n{gemm}'
            '        "-DENABLE_CUDA",\n    ]\n    return spec("gemm", flags)\n\n\n'
            f'def gen_fmha_module():\n    flags = [\n        "-DEXPORT",\n{fmha}'
            '        "-DENABLE_CUDA",\n    ]\n    return spec("fmha", flags)\n\n\n'
            + "".join(f"def gen_{name}_module():\n{doc(name)}    flags = nvcc_flags(\n"
                      f"        supported_major_versions={majors}\n    )\n"
                      f"    return spec(\"{name}\", flags)\n\n\n" for name in ("comm", "moe"))
            + f"def gen_norm_module():\n{doc('norm')}    flags = nvcc_flags(\n"
              f"        supported_major_versions={majors}\n    )\n{norm}")


def doc(name: str) -> str:
    return f'    """The {name} spec.\n\n    Built when first used.\n    """\n'


WIDE = "[10], map_sm107_to_100f=True"
RUBIN = '        "-DEXPORT",\n        "-DTLLM_RUBIN_FEATURES",\n'
# The reland writes the gemm flag in its own form.
RELANDED_GEMM = ('    rubin_flags = ["-DTLLM_RUBIN_FEATURES"] if enable_rubin else []\n'
                 '    flags = [\n        "-DEXPORT",\n        *rubin_flags,\n')
WRAP = ("class Decode:\n    def plan(self, indptr):\n        self.size = len(indptr)\n"
        "        return self.size\n")
UTILS = ("def is_sm107(major, minor):\n    return (major, minor) == (10, 7)\n\n\n"
         "def family(major, minor):\n    return 100 if is_sm107(major, minor) else major * 10\n")
ARTS = ('class Paths:\n    GEMM: str = (\n        "old/gemm-1"\n    )\n'
        '    BMM: str = (\n        "old/bmm-1"\n    )\n')
NEW_ARTS = ARTS.replace("old/gemm-1", "new/gemm-2").replace("old/bmm-1", "new/bmm-2")
# Upstream keeps the old paths (marked) and adds the new ones beside them.
KEPT_ARTS = ARTS.replace('"old/gemm-1"', '"old/gemm-1"  # before Rubin') + ('    GEMM_RUBIN: str = (\n        "new/gemm-2"\n    )\n'
                    '    BMM_RUBIN: str = (\n        "new/bmm-2"\n    )\n')


def wrap(check: str) -> str:
    return WRAP.replace("        self.size", f"        require_arch({check})\n        self.size")


def test_a_branch_landed_reverted_relanded_and_changed_is_upstreamed_by_the_reland(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    upstream.commit("jit: specs", {"pkg/jit.py": jit(), "pkg/wrap.py": WRAP,
                                   "pkg/artifacts.py": ARTS})
    first = {"pkg/jit.py": jit(gemm=RUBIN, fmha='        "-DTLLM_RUBIN_FMHA",\n', majors=WIDE),
             "pkg/wrap.py": wrap("current_device()"), "pkg/utils.py": UTILS}
    base = add_patchset(workspace, upstream, tmp_path, "sm107", [
        ("Adds SM107 support", first),
        ("Address review comments", {"pkg/wrap.py": wrap("self.device")}),
        ("Revert rubin-specific FMHA features", {"pkg/jit.py": jit(gemm=RUBIN, majors=WIDE)}),
        ("artifacts: update paths", {"pkg/artifacts.py": NEW_ARTS})])
    relanded = {"pkg/jit.py": jit(gemm='        *rubin_flags,\n', majors=WIDE).replace(
                    "def gen_gemm_module():\n    flags = [\n        \"-DEXPORT\",\n",
                    "def gen_gemm_module(enable_rubin=False):\n" + RELANDED_GEMM),
                "pkg/wrap.py": wrap("self.device"), "pkg/utils.py": UTILS,
                "pkg/artifacts.py": KEPT_ARTS}
    later = relanded["pkg/jit.py"].replace('    return spec("norm", flags)',
                                           '    return spec("norm", flags, cache=True)')
    shas = fast_import(upstream, [
        *filler(2), Change("Adds SM107 support (#4122)", first), *filler(2, start=2),
        Change("Revert PR 4122 (#4171)", {"pkg/jit.py": jit(), "pkg/wrap.py": WRAP,
                                          "pkg/utils.py": None}),
        *filler(2, start=4), Change("SM 107 Reland (#4280)", relanded),
        Change("jit: cache the norm spec (#4300)", {"pkg/jit.py": later}), *filler(1, start=6)])
    reland, tweak = shas[8], shas[9]

    code, res = sync_json(workspace)

    assert code == 0 and res["result"] == "upstreamed", res["upstreamed"]
    landed = {u["patch"][:4]: u for u in res["upstreamed"]}
    assert [landed[n]["how"] for n in ("0001", "0002", "0004")] == ["landed"] * 3
    assert landed["0003"]["how"] in ("landed", "empty"), "undone by the series, or empty"
    assert {landed[n]["commit"]["sha"] for n in ("0001", "0002", "0004")} == {reland}
    assert 0.8 <= landed["0001"]["share"] < 1
    assert tweak in [c["sha"] for c in landed["0001"]["changed_by"]]
    # What the rule saw, patch by patch.
    patches = sorted(version_dir(workspace, "sm107", base).glob("*.patch"))
    look = Look(Git(upstream.path), [(p.name, p.read_text()) for p in patches], base, shas[-1])
    first_ev, review, revert, artifacts = (look.evidence(k) for k in range(4))
    assert first_ev.rewritten == ("pkg/jit.py (gen_gemm_module)",) and not first_ev.missing
    assert "1 place held it once and were rewritten since" in first_ev.summary()
    assert not first_ev.with_series and first_ev.landed_by == reland
    assert review.summary() == f"100% of its added lines are upstream, 100% from {reland[:10]}"
    assert revert.summary() == ("its change is undone by another patch of its series, "
                                "which upstream landed")
    assert artifacts.with_series and artifacts.gone < 0.8 * artifacts.removed
    assert artifacts.summary().endswith("; landed with its series")


def test_a_series_whose_later_patch_reverts_a_flag_is_judged_without_it(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    upstream.commit("jit: specs", {"pkg/jit.py": jit()})
    base = add_patchset(workspace, upstream, tmp_path, "wide", [
        ("jit: SM107 in every spec", {"pkg/jit.py": jit(fmha='        "-DFMHA_X",\n',
                                                        majors=WIDE)}),
        ("jit: drop the FMHA flag again", {"pkg/jit.py": jit(majors=WIDE)})])
    patches = sorted(version_dir(workspace, "wide", base).glob("*.patch"))
    shas = fast_import(upstream, [*filler(1), Change("jit: SM107 (#12)", {"pkg/jit.py": jit(
        majors=WIDE, head="# sm107\n")}), *filler(1, start=1)])
    look = Look(Git(upstream.path), [(p.name, p.read_text()) for p in patches], base, shas[-1])
    first, second = look.evidence(0), look.evidence(1)
    assert first.missing == () and first.landed_by == shas[1], first
    assert (first.lines, first.present) == (3, 3), "the FMHA flag is no change of the series"
    assert second.undone and second.landed_by == shas[1]


GATES = TWIN_GATES
HELPERS = ("def sm12x(major):\n    return major == 12\n\n\n"
           "def lamport_ok(major):\n    return sm12x(major) or major in (9, 10)\n")


def test_a_line_that_stood_only_in_the_next_function_is_no_place_landed_then_changed(
        upstream: Repo) -> None:
    upstream.commit("jit: comm specs", {"pkg/comm.py": GATES})
    base = upstream.head()
    git(upstream.path, "checkout", "-q", "-b", "side")
    ours = upstream.commit("jit: mixed for SM12x", {
        "pkg/comm.py": GATES.replace("[9, 10]", "[9, 10, 12]", 1), "pkg/helpers.py": HELPERS})
    git(upstream.path, "checkout", "-q", "main")
    patch = Git(upstream.path).run("diff", base, ours) + "\n"
    twin = GATES[::-1].replace("[9, 10]"[::-1], "[9, 10, 12]"[::-1], 1)[::-1]
    # Upstream writes the helpers and the wide line in the next function (#3903), then
    # rewrites the mixed spec another way: the patch's line never stood there.
    rewritten = twin.replace('["-rdc=true"]', '["-rdc=true", "-lineinfo"]')
    shas = fast_import(upstream, [
        Change("comm: extend trtllm to SM12x (#3903)", {"pkg/comm.py": twin,
                                                        "pkg/helpers.py": HELPERS}),
        *filler(2), Change("comm: line info for mixed (#3950)", {"pkg/comm.py": rewritten})])
    evidence = measure(Git(upstream.path), patch, "p", base, shas[-1])
    assert evidence.present == 4 and evidence.lines == 5, evidence
    assert evidence.missing == ("pkg/comm.py (gen_mixed_comm_module)",)
    assert evidence.rewritten == () and evidence.landed_by is None


TESTS = ('import pytest\n\n\ndef test_a():\n    assert True\n\n\n'
         'if __name__ == "__main__":\n    pytest.main([__file__])\n')
APPENDED = TESTS + "".join(f'\n\n@pytest.mark.parametrize("n", [{i}, {i + 1}])\n'
                           f'def test_{name}(n):\n    assert n\n'
                           for i, name in enumerate("bcdef"))


def test_a_later_patch_changing_lines_an_earlier_one_appended_at_the_end_of_a_file(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    # flashinfer's mla-api-internals-redesign: 0001 appends tests at the end of a file,
    # 0002 edits a decorator among them; placing 0002's hunk read past the base's end.
    upstream.commit("tests: a", {"tests/test_mla.py": TESTS})
    base = add_patchset(workspace, upstream, tmp_path, "mla", [
        ("tests: more cases", {"tests/test_mla.py": APPENDED}),
        ("tests: a wider case", {"tests/test_mla.py": APPENDED.replace("[3, 4]", "[3, 4, 5]")})])
    fast_import(upstream, [*filler(2), Change("tests: main guard", {
        "tests/test_mla.py": TESTS.replace("pytest.main([__file__])", 'pytest.main(["-q"])')})])

    code, res = sync_json(workspace)

    assert code == 1 and res["result"] == "conflict", res
    assert res["conflict"]["evidence"]["landed_by"] is None
    patches = sorted(version_dir(workspace, "mla", base).glob("*.patch"))
    look = Look(Git(upstream.path), [(p.name, p.read_text()) for p in patches], base,
                upstream.head())
    assert look.evidence(1).present == 0


TWO = ("def a(x):\n    y = x + 1\n    return y\n\n\n"
       "def b(x):\n    mode = 'fast'\n    limit = 4\n    return run(x, mode, limit)\n")
A_NEW = "    y = scale(x) + 1\n    y = clamp(y, 0, 99)\n    log('a', y)\n    y = round(y)\n"
OURS_A = TWO.replace("    y = x + 1\n", A_NEW)
OURS_B = OURS_A.replace("    mode = 'fast'\n    limit = 4\n", "    mode = 'exact'\n    limit = 8\n")


def test_a_patch_with_little_of_its_own_upstream_never_lands_with_its_series(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    upstream.commit("core: a, b", {"pkg/ab.py": TWO})
    add_patchset(workspace, upstream, tmp_path, "ab", [
        ("a: scaled and clamped", {"pkg/ab.py": OURS_A}),
        ("b: exact mode, a higher limit", {"pkg/ab.py": OURS_B})])
    # Upstream lands the first patch, and writes b its own way: the patch's mode, not
    # its limit.  The series has 5 of its 6 lines upstream; the second patch 1 of 2.
    theirs = OURS_A.replace("    mode = 'fast'\n    limit = 4\n", "    mode = 'exact'\n    limit = 6\n")
    fast_import(upstream, [*filler(1), Change("a: scale (#7)", {"pkg/ab.py": OURS_A}),
                           Change("b: exact (#8)", {"pkg/ab.py": theirs})])

    code, res = sync_json(workspace)

    assert code == 1 and res["result"] == "conflict", res
    assert res["conflict"]["patch"].startswith("0002"), res["conflict"]
    assert res["conflict"]["evidence"]["landed_by"] is None
