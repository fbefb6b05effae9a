"""Which archs an upstream builds a unit for: a touched JIT gate's list before the patch,
else the tree's JIT lists, else the nearest CMakeLists.txt."""

from __future__ import annotations

from contrib.analysis.buildarchs import ArchLists
from contrib.analysis.gates import touched_gates
from contrib.analysis.tree import DictTree

JIT = '''from .core import gen_jit_spec, get_nvcc_flags_list


def gen_comm_module():
    flags = get_nvcc_flags_list(supported_major_versions=[9, 10])
    return gen_jit_spec("comm", ["csrc/comm.cu"], extra_cuda_cflags=flags)
'''


def test_a_units_arch_list_is_the_touched_gates_before_then_the_trees_then_cmake() -> None:
    tree = DictTree({"fi/jit/comm.py": JIT, "csrc/comm.cu": "", "csrc/other.cu": "",
                     "sgl-kernel/CMakeLists.txt": 'set(F "-gencode=arch=compute_90a,code=sm_90a"'
                     ' "-gencode=arch=compute_100a,code=sm_100a")\n',
                     "sgl-kernel/csrc/gemm.cu": ""})
    lists = ArchLists(tree)
    read = lists.of("csrc/comm.cu")
    assert read is not None and read.majors == (9, 10)
    assert read.origin == "`get_nvcc_flags_list(supported_major_versions=[9, 10])` in " \
                          "gen_comm_module (fi/jit/comm.py:5)"
    cmake = lists.of("sgl-kernel/csrc/gemm.cu")
    assert cmake is not None and cmake.majors == (9, 10)
    assert cmake.origin == "the compute_NN of sgl-kernel/CMakeLists.txt"
    assert lists.of("csrc/other.cu") is None
    # a touched gate: its list before the patch, whatever it admits after
    after = JIT.replace("[9, 10]", "[10, 12]")
    touched = touched_gates("fi/jit/comm.py", JIT, after, [5])
    patched = DictTree({"fi/jit/comm.py": after, "csrc/comm.cu": ""})
    gate = ArchLists(patched, touched).of("csrc/comm.cu")
    assert gate is not None and gate.majors == (9, 10)
