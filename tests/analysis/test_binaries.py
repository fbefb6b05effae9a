"""Device code read back: tiny fatbins, cubins and a shared object nvcc builds here, listed
by cuobjdump, judged by each row of CUDA's compatibility table; the ops a shared object
declares; an object cuobjdump cannot read."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from contrib.analysis.binaries import declared_ops, read_object
from contrib.analysis.cudacompat import Image, ImageKind, ImageVerdict, judge
from contrib.arch import parse_arch
from contrib.errors import UsageError
from testing.devicecode import CUOBJDUMP, HOST, build, gencode, needs_cuobjdump, needs_nvcc

pytestmark = [pytest.mark.slow, needs_nvcc, needs_cuobjdump]
NATIVE, JIT, NONE = ImageVerdict.NATIVE, ImageVerdict.PTX_JIT, ImageVerdict.NO_IMAGE


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fatbins")


def _read(folder: Path, name: str, codes: list[str]) -> list[Image]:
    assert CUOBJDUMP is not None
    path = build(folder, f"{name}.fatbin", codes)
    return [image for image, _ in read_object(path, CUOBJDUMP, shown=name).images]


def _verdicts(images: list[Image], archs: str) -> list[ImageVerdict]:
    return [judge(images, parse_arch(a)).verdict for a in archs.split(",")]


def test_plain_sass_runs_on_later_minors_of_its_major(built: Path) -> None:
    images = _read(built, "plain", [gencode("compute_86", "sm_86")])
    assert [i.target for i in images] == ["sm_86"]
    assert _verdicts(images, "sm_86,sm_89,sm_80,sm_90a") == [NATIVE, NATIVE, NONE, NONE]


def test_arch_specific_sass_runs_on_its_own_capability_only(built: Path) -> None:
    images = _read(built, "specific", [gencode("compute_120a", "sm_120a")])
    assert [i.target for i in images] == ["sm_120a"]
    assert _verdicts(images, "sm_120a,sm_121a") == [NATIVE, NONE]


def test_family_sass_runs_on_its_family(built: Path) -> None:
    images = _read(built, "family", [gencode("compute_100f", "sm_100f")])
    # cuobjdump lists an sm_100f cubin as sm_100: the same GPUs, so the same verdicts
    assert [i.target for i in images] == ["sm_100"]
    assert _verdicts(images, "sm_100a,sm_103a,sm_110a,sm_120a") == [NATIVE, NATIVE, NONE, NONE]


def test_plain_ptx_jits_on_every_later_capability(built: Path) -> None:
    images = _read(built, "ptx", [gencode("compute_90", "compute_90")])
    assert [(i.kind, i.target) for i in images] == [(ImageKind.PTX, "compute_90")]
    assert _verdicts(images, "sm_90a,sm_100a,sm_121a,sm_89") == [JIT, JIT, JIT, NONE]


def test_arch_specific_ptx_jits_on_its_own_capability_only(built: Path) -> None:
    images = _read(built, "ptx_a", [gencode("compute_120a", "compute_120a")])
    assert [i.target for i in images] == ["compute_120a"]
    assert _verdicts(images, "sm_120a,sm_121a") == [JIT, NONE]


def test_family_ptx_jits_on_its_family(built: Path) -> None:
    images = _read(built, "ptx_f", [gencode("compute_120f", "compute_120f")])
    assert [i.target for i in images] == ["compute_120f"]
    assert _verdicts(images, "sm_120a,sm_121a,sm_110a") == [JIT, JIT, NONE]


def test_a_fatbin_of_several_targets_reads_back_whole(built: Path) -> None:
    images = _read(built, "mixed", [gencode("compute_120a", "sm_120a"),
                                    gencode("compute_120f", "sm_120f"),
                                    gencode("compute_90", "compute_90")])
    assert sorted(i.target for i in images) == ["compute_90", "sm_120", "sm_120a"]
    assert _verdicts(images, "sm_120a,sm_121a,sm_100a,sm_89") == [NATIVE, NATIVE, JIT, NONE]
    chosen = judge(images, parse_arch("sm_120a")).image
    assert chosen is not None and chosen.target == "sm_120a"


def test_a_shared_object_lists_its_images_and_the_ops_it_declares(built: Path) -> None:
    assert CUOBJDUMP is not None
    path = build(built, "ops.so", [gencode("compute_120a", "sm_120a")], kind="so", source=HOST)
    reading = read_object(path, CUOBJDUMP, shown="ops.so")
    assert [i.target for i in reading.of(ImageKind.SASS)] == ["sm_120a"]
    assert reading.ops == ("rmsnorm", "fp8_mm")  # not the pybind signature, prose or a bare name
    assert reading.device_code


def test_a_cubin_has_no_ops_and_a_host_only_object_no_device_code(built: Path) -> None:
    assert CUOBJDUMP is not None
    cubin = build(built, "one.cubin", ["-arch=sm_120a"], kind="cubin")
    reading = read_object(cubin, CUOBJDUMP, shown="one.cubin")
    assert [i.target for i in reading.of(ImageKind.SASS)] == ["sm_120a"] and not reading.ops
    # nvcc embeds device code in whatever it links: Python's own extension modules have none
    host = importlib.util.find_spec("_ctypes")
    if host is None or not (host.origin or "").endswith(".so"):
        pytest.skip("this Python has no shared extension module to read")
    reading = read_object(Path(str(host.origin)), CUOBJDUMP, shown="_ctypes.so")
    assert not reading.device_code and not reading.images


def test_an_object_cuobjdump_cannot_read_is_one_line_naming_it(tmp_path: Path) -> None:
    assert CUOBJDUMP is not None
    junk = tmp_path / "junk.so"
    junk.write_bytes(bytes(range(256)) * 8)  # no ELF: cuobjdump finds "no device code"
    cubin = tmp_path / "junk.cubin"
    cubin.write_bytes(b"not a cubin")
    for path in (junk, cubin):
        with pytest.raises(UsageError) as caught:
            read_object(path, CUOBJDUMP, shown=f"w.whl: {path.name}")
        said = str(caught.value)
        assert said.startswith(f"w.whl: {path.name}: cuobjdump cannot read") and "\n" not in said
    assert declared_ops(tmp_path / "junk.cubin") == ()
