"""CUDA's compatibility rules, one test per row of the table, on the table's values
(tests/analysis/test_binaries.py holds each row again on fatbins nvcc builds)."""

from __future__ import annotations

import pytest

from contrib.analysis.cudacompat import (
    RULES,
    Image,
    ImageKind,
    ImageVerdict,
    Reach,
    Variant,
    judge,
)
from contrib.arch import parse_arch

NATIVE, JIT, NONE = ImageVerdict.NATIVE, ImageVerdict.PTX_JIT, ImageVerdict.NO_IMAGE

# Each row of RULES: an image of it, the GPUs it serves and the GPUs it does not.
ROWS = {
    (ImageKind.SASS, Variant.PLAIN): ("sm_86", ["sm_86", "sm_89"], ["sm_80", "sm_90a"]),
    (ImageKind.SASS, Variant.SPECIFIC): ("sm_120a", ["sm_120a"], ["sm_121a", "sm_100a"]),
    (ImageKind.SASS, Variant.FAMILY): ("sm_100f", ["sm_100a", "sm_103a"],
                                       ["sm_110a", "sm_120a"]),
    (ImageKind.PTX, Variant.PLAIN): ("compute_90", ["sm_90a", "sm_100a", "sm_120a", "sm_121a"],
                                     ["sm_89", "sm_80"]),
    (ImageKind.PTX, Variant.SPECIFIC): ("compute_120a", ["sm_120a"], ["sm_121a", "sm_110a"]),
    (ImageKind.PTX, Variant.FAMILY): ("compute_120f", ["sm_120a", "sm_121a"],
                                      ["sm_110a", "sm_100a"]),
}


def test_every_row_of_the_table_is_tested() -> None:
    assert set(ROWS) == set(RULES) and len(RULES) == 6
    assert RULES[(ImageKind.PTX, Variant.PLAIN)] is Reach.UPWARD


@pytest.mark.parametrize("row", list(ROWS), ids=lambda r: f"{r[0].value}{r[1].value or '-plain'}")
def test_a_row_of_the_table(row: tuple[ImageKind, Variant]) -> None:
    target, serves, not_served = ROWS[row]
    image = Image.parse(row[0], target)
    assert image is not None and (image.kind, image.variant) == row and image.target == target
    verdict = NATIVE if row[0] is ImageKind.SASS else JIT
    for arch in serves:
        assert judge([image], parse_arch(arch)).verdict is verdict, arch
    for arch in not_served:
        assert judge([image], parse_arch(arch)).verdict is NONE, arch


def test_sass_wins_over_ptx_and_the_highest_image_is_named() -> None:
    images = [Image.parse(ImageKind.SASS, "sm_90"), Image.parse(ImageKind.SASS, "sm_120"),
              Image.parse(ImageKind.PTX, "compute_120")]
    picked = judge([i for i in images if i], parse_arch("sm_121a"))
    assert picked.verdict is NATIVE and picked.image is not None
    assert picked.image.target == "sm_120" and picked.to_dict()["rule"] == Reach.FAMILY.value
