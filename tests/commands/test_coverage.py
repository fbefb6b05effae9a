"""`contrib coverage`: wheels, folders, installed distributions and requirements read for
each arch, resolved offline (or with --download through pip), cached; bad input is one
line and exit 2."""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from testing.devicecode import HOST, build, gencode, needs_cuobjdump, needs_nvcc, wheel
from testing.terminal import on_terminal, widest
from testing.workspace import Result, run_contrib

X86 = "cp310-abi3-manylinux2014_x86_64"
ARM = "cp310-abi3-manylinux2014_aarch64"


def _one_line_exit_2(result: Result, *words: str) -> None:
    assert result.code == 2, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.err, result.err
    for word in words:
        assert word in lines[0], lines[0]


def _doc(result: Result) -> dict[str, Any]:
    doc = result.json
    assert isinstance(doc, dict)
    return doc


def _verdicts(doc: dict[str, Any]) -> list[tuple[str | None, str, str, str]]:
    """(platform, object, arch, verdict) for every object of every reading."""
    return [(r["source"]["platform"], o["path"], arch, v["verdict"])
            for r in doc["readings"] for o in r["objects"] for arch, v in o["verdicts"].items()]


# --- bad input: no nvcc or cuobjdump needed ------------------------------------------------

def test_an_empty_a_corrupt_or_a_non_wheel_file_is_one_line_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.whl"
    empty.write_bytes(b"")
    _one_line_exit_2(run_contrib("coverage", str(empty), "--arch", "sm_120a"),
                     str(empty), "empty", "download it again")
    text = tmp_path / "notes.whl"
    text.write_text("not a zip\n")
    _one_line_exit_2(run_contrib("coverage", str(text), "--arch", "sm_120a"),
                     str(text), "not a zip archive")
    plain = tmp_path / "plain.zip"
    with zipfile.ZipFile(plain, "w") as archive:
        archive.writestr("readme.txt", "hello")
    _one_line_exit_2(run_contrib("coverage", str(plain), "--arch", "sm_120a"),
                     str(plain), "no .dist-info/WHEEL")
    cut = tmp_path / "cut.whl"
    whole = wheel(tmp_path, "pkg", "1.0", X86, {"pkg/a.txt": b"x" * 5000}).read_bytes()
    cut.write_bytes(whole[: len(whole) // 2])
    _one_line_exit_2(run_contrib("coverage", str(cut), "--arch", "sm_120a"), str(cut))
    _one_line_exit_2(run_contrib("coverage", str(tmp_path / "gone.whl"), "--arch", "sm_120a"),
                     "gone.whl: no such file")
    _one_line_exit_2(run_contrib("coverage", "sglang-kernel==", "--arch", "sm_120a"),
                     "sglang-kernel==")


def test_a_requirement_with_no_wheel_here_says_where_it_looked(tmp_path: Path) -> None:
    result = run_contrib("coverage", "nopkg==1.0", "--arch", "sm_121a", "--find-links",
                         str(tmp_path))
    _one_line_exit_2(result, "no wheel of nopkg==1.0 for aarch64", str(tmp_path), "--download")
    folder = run_contrib("coverage", str(tmp_path), "--arch", "sm_121a", "--platform", "x86_64")
    _one_line_exit_2(folder, str(tmp_path), "drop them")


def test_without_cuobjdump_it_says_how_to_get_it(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from contrib.analysis import binaries

    monkeypatch.setattr(binaries, "CUOBJDUMP_DIST", "no-such-distribution")
    monkeypatch.setenv("PATH", str(tmp_path))  # no cuobjdump, no nvcc
    empty = wheel(tmp_path, "pkg", "1.0", X86, {})
    _one_line_exit_2(run_contrib("coverage", str(empty), "--arch", "sm_120a"),
                     "pip install nvidia-cuda-cuobjdump")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_an_unreadable_wheel_is_one_line_saying_so(tmp_path: Path) -> None:
    locked = wheel(tmp_path, "pkg", "1.0", X86, {"pkg/a.so": b"x"})
    locked.chmod(0)
    _one_line_exit_2(run_contrib("coverage", str(locked), "--arch", "sm_120a"),
                     str(locked), "cannot read it", "permissions")


@needs_cuobjdump
def test_a_source_without_objects_is_one_line_exit_2(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("x")
    _one_line_exit_2(run_contrib("coverage", str(folder), "--arch", "sm_120a"),
                     str(folder), "no object in it")
    pure = wheel(tmp_path, "pure", "1.0", "py3-none-any", {"pure/__init__.py": b""})
    _one_line_exit_2(run_contrib("coverage", str(pure), "--arch", "sm_120a"),
                     pure.name, "no object in it", ".cubin")


def test_the_platform_choices_are_the_enumeration() -> None:
    from contrib.analysis.wheels import Platform
    from contrib.cli import PLATFORMS

    assert [p.value for p in Platform] == PLATFORMS


# --- real device code, built by nvcc ------------------------------------------------------

@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Objects like sglang-kernel's: the x86_64 build stops at sm_120a, the aarch64 one
    adds sm_121a; infllm-like stops at sm_120a on both; a PTX-only one; plain cubins."""
    folder = tmp_path_factory.mktemp("objects")
    made = {
        "ops_x86.so": build(folder, "ops_x86.so", [gencode("compute_90", "sm_90"),
                                                   gencode("compute_120a", "sm_120a")],
                            kind="so", source=HOST),
        "ops_arm.so": build(folder, "ops_arm.so", [gencode("compute_120a", "sm_120a"),
                                                   gencode("compute_121a", "sm_121a")],
                            kind="so", source=HOST),
        "ptx.fatbin": build(folder, "ptx.fatbin", [gencode("compute_90", "compute_90")]),
        "a.cubin": build(folder, "a.cubin", ["-arch=sm_120a"], kind="cubin"),
        "b.cubin": build(folder, "b.cubin", ["-arch=sm_100a"], kind="cubin"),
    }
    return {name: path.read_bytes() for name, path in made.items()}


@pytest.fixture
def wheels(tmp_path: Path, objects: dict[str, bytes]) -> Path:
    """A folder holding mypkg 1.0 for x86_64 and for aarch64."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    wheel(folder, "mypkg", "1.0", X86, {"mypkg/ops.so": objects["ops_x86.so"],
                                        "mypkg/__init__.py": b""})
    wheel(folder, "mypkg", "1.0", ARM, {"mypkg/ops.so": objects["ops_arm.so"]})
    return folder


@pytest.mark.slow
@needs_nvcc
@needs_cuobjdump
def test_a_requirement_is_read_for_the_platform_each_arch_ships_in(wheels: Path) -> None:
    result = run_contrib("coverage", "mypkg==1.0", "--arch", "sm_120a,sm_121a",
                         "--find-links", str(wheels), "--json")
    assert result.code == 0, result.err
    doc = _doc(result)
    assert _verdicts(doc) == [("x86_64", "mypkg/ops.so", "sm_120a", "native"),
                              ("aarch64", "mypkg/ops.so", "sm_121a", "native")]
    ops = doc["readings"][0]["objects"][0]
    assert ops["ops"] == ["rmsnorm", "fp8_mm"]
    assert [i["target"] for i in ops["images"]] == ["sm_90", "sm_120a"]
    assert ops["images"][0]["count"] == ops["images"][1]["count"] >= 1  # cubins per target
    assert ops["verdicts"]["sm_120a"] == {"verdict": "native", "image": "sm_120a",
                                          "rule": "X.Y only"}
    pinned = run_contrib("coverage", "mypkg==1.0", "--arch", "sm_120a,sm_121a",
                         "--platform", "x86_64", "--find-links", str(wheels))
    assert pinned.code == 1, pinned.err
    lines = pinned.out.splitlines()
    assert lines[0] == f"mypkg-1.0-{X86}.whl (mypkg 1.0, x86_64): 1 object with device code"
    assert lines[2].split() == ["mypkg/ops.so", "sm_90", "sm_120a", "-", "2", "native",
                                "no-image"]
    assert lines[3].startswith("sm_121a: no image for 12.1 in 1 of 1 object (")
    assert "no kernel image is available" in lines[3] and lines[3].endswith(": mypkg/ops.so")


@pytest.mark.slow
@needs_nvcc
@needs_cuobjdump
def test_a_wheel_in_pips_cache_is_found_offline(wheels: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    body = tmp_path / "pip" / "http-v2" / "a" / "b" / "c" / "d" / "e" / ("0" * 56 + ".body")
    body.parent.mkdir(parents=True)
    shutil.copy(wheels / f"mypkg-1.0-{ARM}.whl", body)
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip"))
    result = run_contrib("coverage", "mypkg==1.0", "--arch", "sm_121a")
    assert result.code == 0, result.err
    assert result.out.splitlines()[:2] == [
        f"mypkg-1.0-{ARM}.whl (mypkg 1.0, aarch64): 1 object with device code",
        f"  from {body}"]


@pytest.mark.slow
@needs_nvcc
@needs_cuobjdump
def test_a_wheel_for_any_platform_is_read_once_for_every_arch(
        tmp_path: Path, objects: dict[str, bytes]) -> None:
    wheel(tmp_path, "cubins", "1.0", "py3-none-any", {"cubins/a.cubin": objects["a.cubin"]})
    result = run_contrib("coverage", "cubins==1.0", "--arch", "sm_120a,sm_121a",
                         "--find-links", str(tmp_path), "--json")
    assert result.code == 1, result.err
    assert _verdicts(_doc(result)) == [(None, "cubins/a.cubin", "sm_120a", "native"),
                                       (None, "cubins/a.cubin", "sm_121a", "no-image")]


@pytest.mark.slow
@needs_nvcc
@needs_cuobjdump
def test_download_fetches_through_pip_only_when_asked(wheels: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {"PIP_CONFIG_FILE": "/dev/null", "PIP_NO_INDEX": "1",
                       "PIP_FIND_LINKS": str(wheels)}.items():
        monkeypatch.setenv(key, value)
    offline = run_contrib("coverage", "mypkg==1.0", "--arch", "sm_121a")
    _one_line_exit_2(offline, "--download")
    fetched = run_contrib("coverage", "mypkg==1.0", "--arch", "sm_121a", "--download", "--json")
    assert fetched.code == 0, fetched.err
    source = _doc(fetched)["readings"][0]["source"]
    assert source["label"] == f"mypkg-1.0-{ARM}.whl" and "contrib-cache" in source["path"]
    again = run_contrib("coverage", "mypkg==1.0", "--arch", "sm_121a")  # now offline
    assert again.code == 0, again.err


@pytest.mark.slow
@needs_nvcc
@needs_cuobjdump
def test_a_folder_groups_cubins_and_names_what_has_no_image(tmp_path: Path,
                                                            objects: dict[str, bytes]) -> None:
    folder = tmp_path / "cubins"
    (folder / "fmha").mkdir(parents=True)
    for n in range(3):
        (folder / "fmha" / f"k{n}.cubin").write_bytes(objects["b.cubin"])
    (folder / "fmha" / "k9.cubin").write_bytes(objects["a.cubin"])
    (folder / "ptx.fatbin").write_bytes(objects["ptx.fatbin"])
    result = run_contrib("coverage", str(folder), "--arch", "sm_120a,sm_121a")
    assert result.code == 1, result.err
    rows = [line.split() for line in result.out.splitlines()[2:5]]
    assert rows == [["fmha/", "(3", "cubins)", "sm_100a", "-", "-", "no-image", "no-image"],
                    ["fmha/k9.cubin", "sm_120a", "-", "-", "native", "no-image"],
                    ["ptx.fatbin", "-", "compute_90", "-", "ptx-jit", "ptx-jit"]]
    said = result.out.splitlines()[5:]
    assert said[0] == ("sm_120a: no image for 12.0 in 3 of 5 objects (\"no kernel image is "
                       "available for execution on the device\"): fmha/ (3 cubins)")
    assert said[1].endswith("in 4 of 5 objects (\"no kernel image is available for execution "
                            "on the device\"): fmha/ (3 cubins), fmha/k9.cubin")
    assert said[2].startswith("ptx-jit: the driver compiles the PTX when the object's module")
    only = run_contrib("coverage", str(folder), "--arch", "sm_120a", "--only", "*.fatbin")
    assert only.code == 0 and "fmha" not in only.out
    _one_line_exit_2(run_contrib("coverage", str(folder), "--arch", "sm_120a", "--only", "x*"),
                     "none of its 5 objects matches --only 'x*'")


@pytest.mark.slow
@needs_nvcc
@needs_cuobjdump
def test_a_warm_run_reads_the_cache_not_the_objects(wheels: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(wheels / f"mypkg-1.0-{X86}.whl")
    cold = run_contrib("coverage", path, "--arch", "sm_120a", "--json")
    assert cold.code == 0, cold.err

    def unread(*_: object, **__: object) -> None:
        raise AssertionError("a warm run read an object")

    monkeypatch.setattr("contrib.analysis.shipped.read_object", unread)
    warm = run_contrib("coverage", path, "--arch", "sm_120a", "--json")
    assert warm.code == 0 and _doc(warm) == _doc(cold), warm.err
    unpacked = wheels / "unpacked"
    with zipfile.ZipFile(path) as archive:
        archive.extractall(unpacked)
    folder = run_contrib("coverage", str(unpacked), "--arch", "sm_120a", "--json")
    assert folder.code == 0, folder.err  # the same content: its reading is cached too
    same = _doc(folder)["readings"][0]["objects"][0]
    assert same["sha256"] == _doc(cold)["readings"][0]["objects"][0]["sha256"]


@pytest.mark.slow
@needs_nvcc
@needs_cuobjdump
def test_a_damaged_member_or_junk_object_is_one_line_naming_it(
        tmp_path: Path, objects: dict[str, bytes]) -> None:
    good = wheel(tmp_path, "pkg", "1.0", X86, {"pkg/ops.so": objects["ops_x86.so"]},
                 stored=True)
    data = bytearray(good.read_bytes())
    at = data.index(objects["ops_x86.so"][:64]) + 4096
    data[at] ^= 0xFF
    broken = tmp_path / "broken" / good.name
    broken.parent.mkdir()
    broken.write_bytes(bytes(data))
    _one_line_exit_2(run_contrib("coverage", str(broken), "--arch", "sm_120a"),
                     f"{good.name}: pkg/ops.so: the wheel is damaged", "download it again")
    junk = wheel(tmp_path, "junk", "1.0", X86, {"junk/x.so": b"not an ELF object\n" * 200})
    _one_line_exit_2(run_contrib("coverage", str(junk), "--arch", "sm_120a"),
                     f"{junk.name}: junk/x.so:")


@pytest.mark.slow
@needs_nvcc
@needs_cuobjdump
def test_an_installed_distribution_is_read_from_its_record(
        tmp_path: Path, objects: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    (site / "instpkg").mkdir(parents=True)
    (site / "instpkg" / "k.cubin").write_bytes(objects["a.cubin"])
    info = site / "instpkg-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: instpkg\nVersion: 2.0\n")
    (info / "RECORD").write_text("instpkg/k.cubin,,\ninstpkg-2.0.dist-info/METADATA,,\n")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    result = run_contrib("coverage", "instpkg", "--arch", "sm_120a", "--json")
    assert result.code == 0, result.err
    reading = _doc(result)["readings"][0]
    assert reading["source"]["kind"] == "distribution"
    assert [o["path"] for o in reading["objects"]] == ["instpkg/k.cubin"]


@pytest.mark.slow
@needs_nvcc
@needs_cuobjdump
def test_the_table_fits_80_columns_on_a_terminal(short_tmp: Path,
                                                 objects: dict[str, bytes]) -> None:
    made = wheel(short_tmp, "sglang_kernel", "0.4.10", X86, {
        f"sgl_kernel/{name}": objects["ops_x86.so"] for name in (
            "infllm_ops.cpython-310-x86_64-linux-gnu.so", "sm100/common_ops.abi3.so")})
    shown = on_terminal(short_tmp, 80, "coverage", str(made), "--arch", "sm_120a,sm_121a",
                        codes=(1,))
    assert widest(shown) <= 80, shown
    assert "infllm_ops.cpython-310-x86_64-linux-gnu.so" in shown  # a key is never cut
