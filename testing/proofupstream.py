"""A mini upstream with several gate-only gates, for what the autopilot may propose.

Each ``gen_X_module`` (``pkg/jit.py``) asks ``supported_major_versions=[9, 10]`` and
a runtime function ``X`` (``pkg/X.py``) loads it under ``is_sm90_supported() or is_sm100_supported()``:
``contrib enable`` drafts one patchset per pair.  What lies below differs:

* ``norm``, ``act``, ``topk``: a kernel compiled here (``ptx`` can prove them);
  ``act``'s gate is the oldest (committed first), ``topk`` the newest;
* ``mla``: its unit includes ``cutlass/cutlass.h``, which the tree lacks (the
  ``ptx`` stage is skipped: flashinfer's SM100 MLA module without CUTLASS);
* ``gemm``: its unit is a runner that launches prebuilt cubins and has no
  kernel of its own (flashinfer's trtllm-gen GEMM runner);
* ``rope``: a JIT gate with no runtime predicate above it (one gate to open,
  no runtime feature).

Each gate's line is spelled its own way (``act_flags = ...``): sync tells a landed
patch by its changed lines, and two drafts with the same line would look landed
together.
"""

from __future__ import annotations

from pathlib import Path

from testing.enableupstream import BASE, KERNEL
from testing.gitutil import Repo

JIT_GATE = '''

def gen_{name}_module():
    {name}_flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])
    return build("{name}", ["{name}.cu"], {name}_flags)
'''

RUNTIME_GATE = '''

def {name}(x):
    out = x
    if is_sm90_supported() or is_sm100_supported():
        out = gen_{name}_module()
    return out
'''

RUNNER = '''\
#include <cuda_runtime.h>
// Launches the prebuilt trtllm-gen cubins (downloaded at run time): no kernel here.
int run_{name}(void* module, const char* name) {{
  return module != nullptr && name != nullptr;
}}
'''

NEEDS_CUTLASS = '#include "cutlass/cutlass.h"\n' + KERNEL.format(name="mla")

FEATURES = ("act", "norm", "mla", "gemm", "topk")  # oldest first
UNITS = {"act": KERNEL.format(name="act"), "norm": KERNEL.format(name="norm"),
         "topk": KERNEL.format(name="topk"), "mla": NEEDS_CUTLASS,
         "gemm": RUNNER.format(name="gemm"), "rope": KERNEL.format(name="rope")}


def _jit(names: list[str]) -> str:
    return "from pkg.core import build, ctx\n" + "".join(JIT_GATE.format(name=n) for n in names)


def _runtime(name: str) -> str:
    """``pkg/NAME.py``: one file per feature, so that one landing upstream leaves the
    other drafts' lines alone."""
    return (f"from pkg.jit import gen_{name}_module\n"
            "from pkg.utils import is_sm90_supported, is_sm100_supported\n"
            + RUNTIME_GATE.format(name=name))


def proof_upstream(path: Path) -> Repo:
    """The upstream: one commit per feature (oldest first), then ``rope``'s JIT gate."""
    repo = Repo(path)
    base = {k: v for k, v in BASE.items() if k.startswith(("pkg/__init__", "pkg/core",
                                                             "pkg/utils"))}
    repo.commit("feat(core): initial import (#1)", base)
    for number, name in enumerate(FEATURES, 2):
        done = list(FEATURES[:number - 1])
        repo.commit(f"feat({name}): add {name} (#{number})",
                    {"pkg/jit.py": _jit(done), f"pkg/{name}.py": _runtime(name),
                     f"csrc/{name}.cu": UNITS[name]})
    repo.commit("feat(rope): add rope (#9)",
                {"pkg/jit.py": _jit([*FEATURES, "rope"]), "csrc/rope.cu": UNITS["rope"]})
    return repo
