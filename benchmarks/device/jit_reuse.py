"""Cold vs warm JIT build of flashinfer's trtllm_comm through contrib's build slots.

Each step is what one `contrib validate` does before its tests: bring the slot's
checkout to a tree (contrib.validate.buildcache), make it importable
(profiles.prepare_worktree), and let flashinfer's JIT build (or find) the module
in the slot's JIT folder.  Each build runs in a fresh interpreter, as a new
validation would.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from contrib.analysis.profiles import FLASHINFER, prepare_worktree
from contrib.arch import parse_arch
from contrib.git.repo import Git
from contrib.validate import buildcache

git = Git(Path(sys.argv[1]))
out = Path(os.environ.get("OUT", "/tmp/out"))
arch = parse_arch("sm_90a")
arch_env = FLASHINFER.arch_env(arch)
slot = buildcache.slot_of(git.path, "patched")
BUILD = ("import time, flashinfer.comm.trtllm_ar as t; s=time.time(); "
         "m=t.get_trtllm_comm_module(); print('module', type(m).__name__, round(time.time()-s,1))")
results = []
for label, ref in [("cold: first validation of the patched tree", "patched"),
                   ("warm: the same content again", "patched"),
                   ("a header no unit of trtllm_comm includes changed", "other"),
                   ("a header the units include changed", "hdr")]:
    commit = git.rev_parse(ref)
    started = time.time()
    with buildcache.locked(slot):
        path = buildcache.checkout(git, commit, slot)
        prepare_worktree(FLASHINFER, path, "python3")
        env = {**os.environ, **arch_env,
               "FLASHINFER_WORKSPACE_BASE": str(buildcache.jit_folder(path, arch_env, "python3", path)),
               "PYTHONPATH": f"{path}:{os.environ.get('PYTHONPATH', '')}"}
        done = subprocess.run([sys.executable, "-c", BUILD], cwd="/tmp", env=env,
                              capture_output=True, text=True, timeout=560)
    took = time.time() - started
    said = (done.stdout + done.stderr).strip().splitlines()
    row = {"step": label, "ref": ref, "seconds": round(took, 1), "rc": done.returncode,
           "tail": said[-3:]}
    results.append(row)
    print(json.dumps(row), flush=True)
    (out / "jit_reuse.json").write_text(json.dumps(results, indent=1))
    if done.returncode != 0:
        break
