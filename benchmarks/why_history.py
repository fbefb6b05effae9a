"""`contrib why` and the feature table on sglang's real history, with flashinfer below.

    python benchmarks/why_history.py --sglang SGLANG_GIT --flashinfer FLASHINFER_GIT \\
        [--story] [--pin-bumps N] [--at REV ...] [--json OUT] [--cache DIR]

Both mirrors may be bare (``fetch github:mmangkad-dev/sglang`` and
``github:flashinfer-ai/flashinfer``).  A scratch workspace names them; each sglang
commit is audited with the flashinfer version it pins below, and every feature is
followed to its verdict (the table ``contrib audit`` leads with).

``--story``: the three points of the story (``shared/seed``) and what each must say
of ``--enable-flashinfer-allreduce-fusion``:

* 1ab9b8e0a (pins 0.5.3): **crash**, refused by flashinfer's ``gen_trtllm_comm_module``;
* 00e57d74f^ (pins 0.6.15.post1): **needs kernel work**, the comm module's kernels
  compiled out for SM12x (``trtllm_allreduce.cuh``);
* 00e57d74f (pins 0.6.17): **gate-only**, opening the two gates the shipped patchset
  ``patchsets/sglang/sm120-allreduce-fusion`` opens (``_resolve_backend``,
  ``apply_flashinfer_allreduce_fusion``).

Then the other cases of ``CASES``: a false crash of the pin bumps (an AMD-only flag),
sglang#24633's MLA prefill crash (refused in flashinfer's C++), and sglang#14842's
trtllm_mha, which sglang itself refused on SM120 (off, not a crash).

``--pin-bumps N``: the last N commits of sglang's main that changed the flashinfer pin,
each with its crash rows (a feature admitted on SM12x over the pinned flashinfer that
refuses it): the cases to keep.  Printed per commit: the pin, the verdict counts, the
rows, the seconds (first, then warm: the chains come from the cache).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from why_cases import scratch_workspace

from contrib.arch import parse_arch
from contrib.audit.chains import Role, Verdict
from contrib.audit.feature.chain import to_open
from contrib.audit.feature.explain import every
from contrib.audit.feature.show import feature_rows, shown
from contrib.audit.run import audit_upstream
from contrib.audit.serial import link_json
from contrib.workspace.model import Workspace

FUSION = "--enable-flashinfer-allreduce-fusion"
STORY = [
    ("1ab9b8e0a", Verdict.CRASH, {"flashinfer": ["flashinfer/jit/comm.py:gen_trtllm_comm_module"]}),
    ("00e57d74f^", Verdict.NEEDS_KERNEL_WORK, {"flashinfer": ["trtllm_allreduce.cuh"]}),
    ("00e57d74f", Verdict.GATE_ONLY, {"sglang": [
        "python/sglang/srt/layers/communicator.py:apply_flashinfer_allreduce_fusion",
        "python/sglang/srt/layers/flashinfer_comm_fusion.py:_resolve_backend"]}),
]
# More cases of sglang's history, with what upstream's own record says (the verdict a
# user met), kept whether the audit reads them right or not (MISS is printed, and the
# run fails): (rev, feature, the verdict expected, why).
CASES = [
    # sglang's pin bumps 0.6.8.post1-0.6.12 read this AMD-only flag as a crash: its read
    # stands in `_use_aiter and ...`, false on every NVIDIA GPU; nothing below is its way.
    ("d5f3254ed", "--enable-aiter-allreduce-fusion", Verdict.ON,
     "an AMD-only flag: `_use_aiter` (is_hip()) is false on NVIDIA"),
    # sgl-project/sglang#24633 and flashinfer-ai/flashinfer#3263 (2026-05, sglang 0.5.10 on
    # flashinfer 0.6.7.post2): MLA prefill through the trtllm_mla backend reaches
    # trtllm_ragged_attention_deepseek, whose TllmGenFmhaRunner refuses SM120 in C++
    # ("Unsupported architecture"): the backend is what `@register_attention_backend(
    # "trtllm_mla")` registers, the runner's check host C++ behind prebuilt cubins.
    ("46bf19cda", "--attention-backend=trtllm_mla", Verdict.CRASH,
     "sglang#24633: TllmGenFmhaRunner refuses SM120"),
    # sgl-project/sglang#14842 (fe6d38d2f, on flashinfer 0.5.3): "trtllm_mha does not
    # support SM120"; the fix stops auto-selecting it there.  Set by hand the flag is
    # refused by sglang's own check (`_handle_attention_backend_compatibility` admits
    # SM100 only), over xqa kernels of wgmma only below: off, not a crash.
    ("fe6d38d2f^", "--attention-backend=trtllm_mha", Verdict.NEEDS_KERNEL_WORK,
     "sglang#14842: trtllm_mha has no SM120 kernels; sglang refuses it"),
]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sglang", required=True, type=Path)
    parser.add_argument("--flashinfer", required=True, type=Path)
    parser.add_argument("--story", action="store_true")
    parser.add_argument("--pin-bumps", type=int, default=0)
    parser.add_argument("--at", action="append", default=[], metavar="REV")
    parser.add_argument("--arch", default="sm_120a")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--cache", type=Path, help="CONTRIB_CACHE (default: a new folder)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    ws = scratch_workspace({"sglang": args.sglang, "flashinfer": args.flashinfer}, args.cache,
                           "why-history-")
    arch = parse_arch(args.arch)
    report: dict[str, Any] = {"arch": arch.name, "story": [], "commits": []}
    failed = 0
    if args.story:
        for rev, expected, opened in STORY:
            row = _story(ws, arch, rev, expected, opened)
            report["story"].append(row)
            failed += not row["ok"]
            print(f"story {rev:<11} pins {row['pin']:<14} {FUSION}: {row['verdict']:<18} "
                  f"(expected {expected.value}) {'OK' if row['ok'] else 'MISS'} "
                  f"[{row['seconds']:.1f} s]  {row['reason'][:120]}")
    if args.story:
        for rev, feature, expected, why in CASES:
            row = _case(ws, arch, rev, feature, expected)
            report["story"].append(row | {"why": why})
            failed += not row["ok"]
            print(f"case  {rev:<11} pins {row['pin']:<14} {feature}: {row['verdict']:<18} "
                  f"(expected {expected.value}) {'OK' if row['ok'] else 'MISS'} "
                  f"[{row['seconds']:.1f} s]  {why}")
    revs = list(args.at) + _pin_bumps(args.sglang, args.pin_bumps)
    for rev in revs:
        row = _commit(ws, arch, rev)
        report["commits"].append(row)
        print(f"\n{rev} pins flashinfer {row['pin']}: {row['features']} features, "
              f"{row['counts']}; {row['rows']} table rows ({row['chains']} features); "
              f"{row['seconds']:.1f} s first, {row['warm']:.1f} s warm")
        for crash in row["crashes"]:
            print(f"  crash  {crash['feature']}: {crash['reason'][:160]}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 1 if failed else 0


def _pin_bumps(mirror: Path, count: int) -> list[str]:
    if count <= 0:
        return []
    out = subprocess.run(["git", "-C", str(mirror), "log", "--format=%h", "-G",
                          "flashinfer_python", "main", "--", "python/pyproject.toml"],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[:count]


def _story(ws: Workspace, arch: Any, rev: str, expected: Verdict,
           opened: dict[str, list[str]]) -> dict[str, Any]:
    started = time.monotonic()
    audit = audit_upstream(ws, "sglang", arch, at=rev, since=None, fetch=False,
                           features=lambda fs: [f for f in fs if f.name == FUSION])
    seconds = time.monotonic() - started
    [chain] = audit.features
    ok = chain.verdict == expected
    if expected == Verdict.GATE_ONLY:
        ok = ok and {k: sorted(v) for k, v in to_open(chain).items()} == opened
    if expected == Verdict.CRASH:
        refused = [f"{link.file}:{link.function}" for link in chain.links
                   if link.role == Role.BELOW and link.refuses]
        ok = ok and refused[:1] == opened["flashinfer"]
    if expected == Verdict.NEEDS_KERNEL_WORK:  # the guards named, in the flashinfer below
        ok = ok and any(e.upstream == "flashinfer" and e.path.startswith(
            f"include/flashinfer/comm/{opened['flashinfer'][0]}")
            for link in chain.links for e in link.evidence)
    pin = audit.stack[0]["tag"] if audit.stack else "-"
    return {"rev": rev, "pin": pin, "verdict": chain.verdict.value, "expected": expected.value,
            "ok": ok, "reason": chain.reason, "opens": to_open(chain), "seconds": seconds,
            "links": [link_json(link) for link in chain.links]}


def _case(ws: Workspace, arch: Any, rev: str, feature: str,
          expected: Verdict) -> dict[str, Any]:
    started = time.monotonic()
    audit = audit_upstream(ws, "sglang", arch, at=rev, since=None, fetch=False,
                           features=lambda fs: [f for f in fs if f.name == feature])
    seconds = time.monotonic() - started
    [chain] = audit.features
    return {"rev": rev, "feature": feature,
            "pin": audit.stack[0]["tag"] if audit.stack else "-",
            "verdict": chain.verdict.value, "expected": expected.value,
            "ok": chain.verdict == expected, "reason": chain.reason, "seconds": seconds,
            "links": [link_json(link) for link in chain.links]}


def _commit(ws: Workspace, arch: Any, rev: str) -> dict[str, Any]:
    started = time.monotonic()
    audit = audit_upstream(ws, "sglang", arch, at=rev, since=None, fetch=False, features=every)
    seconds = time.monotonic() - started
    started = time.monotonic()
    audit_upstream(ws, "sglang", arch, at=rev, since=None, fetch=False, features=every)
    warm = time.monotonic() - started
    counts = Counter(c.verdict.value for c in audit.features)
    crashes = [{"feature": c.feature.name, "reason": c.reason,
                "links": [link_json(link) for link in c.links]}
               for c in audit.features if c.verdict == Verdict.CRASH]
    return {"rev": rev, "pin": audit.stack[0]["tag"] if audit.stack else "-",
            "features": len(audit.features), "counts": dict(counts),
            "chains": len(shown(audit.features)), "crashes": crashes,
            # the feature table's rows, as `contrib audit` prints them (choices grouped)
            "rows": len(feature_rows(shown(audit.features), arch.name, {"sglang": rev})),
            "seconds": seconds, "warm": warm}


if __name__ == "__main__":
    raise SystemExit(main())
