from __future__ import annotations

import pytest

from contrib.arch import (
    admits,
    admitted_archs,
    arch_macros,
    archs_of_major,
    nearest_lower,
    parse_arch,
    representative,
)
from contrib.errors import ContribError


@pytest.mark.parametrize(
    ("text", "name", "major", "minor", "suffix", "cuda_arch", "compute"),
    [
        ("sm_90a", "sm_90a", 9, 0, "a", 900, "compute_90a"),
        ("sm_100a", "sm_100a", 10, 0, "a", 1000, "compute_100a"),
        ("sm_103a", "sm_103a", 10, 3, "a", 1030, "compute_103a"),
        ("sm_110a", "sm_110a", 11, 0, "a", 1100, "compute_110a"),
        ("sm_120", "sm_120a", 12, 0, "a", 1200, "compute_120a"),
        ("sm_120a", "sm_120a", 12, 0, "a", 1200, "compute_120a"),
        ("sm_121a", "sm_121a", 12, 1, "a", 1210, "compute_121a"),
        ("SM120A", "sm_120a", 12, 0, "a", 1200, "compute_120a"),
        ("compute_100f", "sm_100f", 10, 0, "f", 1000, "compute_100f"),
        ("sm_80", "sm_80", 8, 0, "", 800, "compute_80"),
        (" sm89 ", "sm_89", 8, 9, "", 890, "compute_89"),
    ],
)
def test_parse_arch_derives_everything(text, name, major, minor, suffix, cuda_arch, compute):
    arch = parse_arch(text)
    assert (arch.name, arch.major, arch.minor, arch.suffix) == (name, major, minor, suffix)
    assert arch.cuda_arch == cuda_arch
    assert arch.compute == compute
    assert str(arch) == name


@pytest.mark.parametrize(
    "bad",
    ["", "sm_", "sm_12", "sm_999", "sm_125a", "sm_80a", "sm_90f", "gfx90a", "120b", "sm_120aa"],
)
def test_parse_arch_rejects_nonsense_with_exit_2(bad):
    with pytest.raises(ContribError) as info:
        parse_arch(bad)
    assert info.value.exit_code == 2
    assert repr(bad) in str(info.value)
    assert "sm_120a" in str(info.value)  # lists examples


def test_major_helpers():
    assert [a.name for a in admitted_archs([10, 9])] == ["sm_90a", "sm_100a"]
    assert [a.name for a in admitted_archs([9, 10, 12, 42])] == ["sm_90a", "sm_100a", "sm_120a"]
    assert representative(8).name == "sm_80"
    assert [a.cuda_arch for a in archs_of_major(10)] == [1000, 1010, 1030]
    target = parse_arch("sm_120a")
    assert admits([9, 10, 12], target) and not admits([9, 10], target)
    with pytest.raises(ContribError):
        representative(4)


def test_nearest_lower_prefers_the_closest_below_then_above():
    target = parse_arch("sm_120a")
    assert nearest_lower(target, admitted_archs([9, 10])).name == "sm_100a"
    assert nearest_lower(parse_arch("sm_90a"), admitted_archs([10, 12])).name == "sm_100a"
    assert nearest_lower(target, [target]) is None


def test_arch_macros_for_device_and_host_passes():
    assert "__CUDA_ARCH__" not in arch_macros(None)
    macros = arch_macros(parse_arch("sm_120a"))
    assert macros["__CUDA_ARCH__"] == "1200"
    assert macros["__CUDA_ARCH_SPECIFIC__"] == "1200"
    assert macros["__CUDA_ARCH_FEAT_SM120_ALL"] == "1"
    family = arch_macros(parse_arch("sm_100f"))
    assert family["__CUDA_ARCH_FAMILY_SPECIFIC__"] == "1000"
    assert "__CUDA_ARCH_SPECIFIC__" not in arch_macros(parse_arch("sm_89"))


# Every spelling of one GPU: the digits name it, a suffix given is kept, none is 'a' from
# 9.0 on (flashinfer's _normalize_cuda_arch reads FLASHINFER_CUDA_ARCH_LIST so).
SPELLINGS = {
    "sm_121a": ["sm_121", "sm121", "sm_121a", "sm121a", "121", "121a", "12.1", "12.1a",
                "compute_121", "compute_121a", "compute121a", "SM121", "SM_121A", "Sm_121",
                " sm_121 ", "COMPUTE_121A"],
    "sm_120a": ["sm_120a", "sm_120", "sm120", "SM120", "120", "12.0", "12.0a", "sm120a",
                "compute_120"],
    "sm_120f": ["sm_120f", "sm120f", "12.0f", "compute_120f", "SM120F"],
    "sm_90a": ["sm_90", "sm90", "90", "9.0", "compute_90a"],
    "sm_100a": ["sm_100", "100", "10.0", "compute_100"],
    "sm_89": ["sm_89", "sm89", "89", "8.9", "compute_89"],
}


@pytest.mark.parametrize(("text", "name"), [(t, n) for n, ts in SPELLINGS.items() for t in ts])
def test_every_spelling_of_an_arch_is_one_name(text: str, name: str) -> None:
    assert parse_arch(text).name == name


@pytest.mark.parametrize("text", ["sm_\u0661\u0662\u0660a", "\uff11\uff12\uff10", "sm_1\u0662\u0660",
                                  "\u0661\u0662.\u0660", "sm_120a\u200b"])
def test_non_ascii_digits_are_refused(text: str) -> None:
    with pytest.raises(ContribError) as caught:
        parse_arch(text)
    assert caught.value.exit_code == 2


def test_the_audit_cache_keys_every_spelling_alike() -> None:
    """`--arch sm_121` finds the audit `--arch sm_121a` left: the cache keys the name."""
    from contrib.audit.engine import cache_file

    tree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    for name, spellings in SPELLINGS.items():
        assert {cache_file(tree, parse_arch(s)) for s in spellings} == {
            cache_file(tree, parse_arch(name))}
