"""The nvcc flags read from an upstream's build code: Python JIT files and CMakeLists.txt."""

from __future__ import annotations

from contrib.analysis import buildflags
from contrib.analysis.buildflags import ESSENTIALS, python_flags, read_python
from contrib.analysis.cmakeflags import cmake_flags, read_cmake
from contrib.analysis.profiles import FLASHINFER, GENERIC
from contrib.analysis.ptxrun import unit_flags
from contrib.analysis.tree import DictTree

# flashinfer v0.5.3's shape: the CUDA flags inside the function that writes the ninja file.
CPP_EXT_053 = '''
def generate_ninja_build_for_op(name, sources, extra_cuda_cflags):
    common_cflags = ["-DPy_LIMITED_API=0x03090000"]
    cflags = ["$common_cflags", "-fPIC", "-DHOST_ONLY"]
    cuda_cflags: List[str] = []
    cuda_cflags += [
        "$common_cflags",
        "--compiler-options=-fPIC",
        "--expt-relaxed-constexpr",
    ]
    if cuda_version >= Version("12.8"):
        cuda_cflags += ["-static-global-template-stub=false"]
    return cuda_cflags
'''
# the tip's shape: the same flag in a function of its own.
CPP_EXT_TIP = '''
def build_cuda_cflags(common_cflags, extra_cuda_cflags=None):
    cuda_cflags = []
    cuda_cflags += ["$common_cflags", "--expt-relaxed-constexpr"]
    return cuda_cflags
'''
CORE = '''
common_nvcc_flags = ["-DFLASHINFER_ENABLE_FP8_E8M0"]
sm90a_nvcc_flags = ["-gencode=arch=compute_90a,code=sm_90a", "-DCUTE_SM90_ONLY"]

def gen_jit_spec(name, sources, extra_cuda_cflags=None):
    cuda_cflags = ["-std=c++17", "--threads=1", "-use_fast_math", "-DFLASHINFER_ENABLE_F16"]
    if debug:
        cuda_cflags += ["-g", "-O0", "-G", "-DCUTLASS_DEBUG_TRACE_LEVEL=2"]
    else:
        cuda_cflags += ["-DNDEBUG", "-O3"]
    cuda_cflags.append("-DAPPENDED")
'''


def test_the_flags_are_read_wherever_the_file_binds_them():
    assert [f for f, _ in python_flags(CPP_EXT_053)] == ["--expt-relaxed-constexpr"]
    assert [f for f, _ in python_flags(CPP_EXT_TIP)] == ["--expt-relaxed-constexpr"]
    # a debug branch's flags and a list for one arch are not every build's; host flags neither
    assert [f for f, _ in python_flags(CORE)] == [
        "-DFLASHINFER_ENABLE_FP8_E8M0", "-std=c++17", "-use_fast_math",
        "-DFLASHINFER_ENABLE_F16", "-DNDEBUG", "-DAPPENDED"]
    assert dict(python_flags(CPP_EXT_053))["--expt-relaxed-constexpr"] == 9


def test_a_file_is_read_once_per_blob(monkeypatch):
    calls = []
    monkeypatch.setattr(buildflags, "_read_python", lambda text: calls.append(text) or ())
    text = CPP_EXT_TIP + "\n# a blob of its own\n"
    python_flags(text)
    python_flags(text)
    assert len(calls) == 1
    assert buildflags.blob_id("hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"  # git's


def test_a_flashinfer_tree_compiles_with_its_jit_flags_and_says_where_they_are_from():
    tree = DictTree({"flashinfer/jit/cpp_ext.py": CPP_EXT_053, "flashinfer/jit/core.py": CORE,
                     "csrc/a.cu": ""})
    flags = unit_flags(tree, FLASHINFER, ["csrc/a.cu"])["csrc/a.cu"]
    assert not flags.fallback
    assert flags.texts()[:2] == ["-DFLASHINFER_ENABLE_FP8_E8M0", "-std=c++17"]
    assert "--expt-relaxed-constexpr" in flags.texts()
    where = {f.text: f.where for f in flags.flags}
    assert where["--expt-relaxed-constexpr"] == "flashinfer/jit/cpp_ext.py:9"
    assert flags.origin() == "read from flashinfer/jit/core.py, flashinfer/jit/cpp_ext.py"


def test_nothing_read_is_the_essentials_and_says_so():
    flags = read_python(DictTree({"csrc/a.cu": ""}), ["flashinfer/jit/core.py"])
    assert flags.fallback and tuple(flags.texts()) == ESSENTIALS
    assert "contrib's nvcc essentials" in flags.origin()
    assert unit_flags(DictTree({"a.cu": ""}), GENERIC, ["a.cu"])["a.cu"].fallback


CMAKE = '''
cmake_minimum_required(VERSION 3.26)
set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} -DGLOBAL_ONE")
set(KERNEL_CUDA_FLAGS
    "-DNDEBUG"
    "-O3"
    "-gencode=arch=compute_90,code=sm_90"
    "-std=c++17"
    "--expt-relaxed-constexpr"   # constexpr host functions in device code
    # "-DCOMMENTED_OUT"
)
option(ENABLE_BF16 "Enable BF16" ON)
option(ENABLE_FP4 "Enable FP4" OFF)
if (ENABLE_BF16)
    list(APPEND KERNEL_CUDA_FLAGS "-DENABLE_BF16")
endif()
if (ENABLE_FP4)
    list(APPEND KERNEL_CUDA_FLAGS "-DENABLE_FP4")
else()
    list(APPEND KERNEL_CUDA_FLAGS "-DNO_FP4")
endif()
if ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "12.8")
    list(APPEND KERNEL_CUDA_FLAGS "-DUNKNOWN_CONDITION")
endif()
set(OTHER_CUDA_FLAGS "-DOTHER")
set(SOURCES
    "csrc/a.cu"
    "csrc/b.cu"
)
Python_add_library(fast MODULE USE_SABI 3.9 WITH_SOABI ${SOURCES})
target_compile_options(fast PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${KERNEL_CUDA_FLAGS} -use_fast_math>)
Python_add_library(precise MODULE ${SOURCES})
target_compile_options(precise PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${KERNEL_CUDA_FLAGS}>)
add_library(other SHARED "csrc/other.cu")
target_compile_options(other PRIVATE ${OTHER_CUDA_FLAGS})
'''


def test_cmake_flags_of_the_targets_that_build_a_unit():
    read = read_cmake(CMAKE)
    both = ["-DGLOBAL_ONE", "-DNDEBUG", "-std=c++17", "--expt-relaxed-constexpr",
            "-DENABLE_BF16", "-DNO_FP4"]
    # built by two targets: the flags both pass (-use_fast_math is one target's)
    assert [f for f, _ in read.for_unit("csrc/a.cu")] == both
    assert [f for f, _ in read.for_unit("csrc/other.cu")] == ["-DGLOBAL_ONE", "-DOTHER"]
    # a unit no target names: the first flags variable's
    assert [f for f, _ in read.for_unit("csrc/elsewhere.cu")] == both
    assert dict(read.for_unit("csrc/a.cu"))["--expt-relaxed-constexpr"] == 4
    assert cmake_flags(CMAKE) is cmake_flags(CMAKE)


def test_the_nearest_cmakelists_builds_a_unit_of_a_tree_without_a_profile():
    tree = DictTree({"sgl-kernel/CMakeLists.txt": CMAKE, "sgl-kernel/csrc/a.cu": "",
                     "CMakeLists.txt": 'set(TOP_CUDA_FLAGS "-DTOP")\n', "tools/t.cu": ""})
    flags = unit_flags(tree, GENERIC, ["sgl-kernel/csrc/a.cu", "tools/t.cu"])
    assert "--expt-relaxed-constexpr" in flags["sgl-kernel/csrc/a.cu"].texts()
    assert flags["sgl-kernel/csrc/a.cu"].origin() == "read from sgl-kernel/CMakeLists.txt"
    assert flags["tools/t.cu"].texts() == ["-DTOP"]
