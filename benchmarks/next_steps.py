"""Whether every next step ``contrib audit`` prints runs, on real history.

    python benchmarks/next_steps.py --flashinfer FLASHINFER_GIT --sglang SGLANG_GIT \\
        [--case flashinfer@v0.6.16 --case sglang@00e57d74f] [--arch sm_120a]
        [--workspace DIR] [--json OUT]

For each case, the audit's feature table (``--markdown``, as a PR or an issue shows
it) is read for its gate-only rows' ``contrib enable`` commands, and each row's
commands are run in turn (the upstream below first, as printed) in a workspace
emptied of patchsets before each row, so that one row's draft does not cover the
next's.  A command is

* drafted: it wrote its patchset (one per command), with its gates and validate's
  verdict over the stages that run here;
* refused: it drafted nothing (exit 1) or failed on its input (exit 2), with the
  line saying why.

Printed: a line per command, then per case the rows, the commands, drafted and
refused, and the refusals by their first words.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing.workspace import run_contrib  # noqa: E402

CASES = ("flashinfer@v0.6.16", "sglang@00e57d74f")
_COMMAND = re.compile(r"`(contrib enable [^`]+)`")


def rows(ws: Path, upstream: str, at: str, arch: str) -> list[list[str]]:
    """The gate-only rows' commands of the audit's feature table, a list per row."""
    result = run_contrib("audit", upstream, "--at", at, "--arch", arch, "--no-fetch",
                         "--markdown", cwd=ws)
    if result.code not in (0, 1):
        raise SystemExit(f"audit {upstream} --at {at}: {result.err.strip()}")
    found = []
    for line in result.out.splitlines():
        if line.startswith("| off, gate-only |"):
            found.append(_COMMAND.findall(line))
    return found


def run(ws: Path, command: str) -> dict[str, Any]:
    """One printed command, run as printed (with --no-fetch --json)."""
    args = shlex.split(command)[1:]
    started = time.monotonic()
    result = run_contrib(*args, "--no-fetch", "--json", cwd=ws)
    seconds = round(time.monotonic() - started, 1)
    out: dict[str, Any] = {"command": command, "code": result.code, "seconds": seconds}
    doc = result.json if result.code in (0, 1) and result.out.strip() else None
    if not isinstance(doc, dict):
        return out | {"drafted": False, "why": result.err.strip().removeprefix(
            "contrib: error: ").splitlines()[-1] if result.err.strip() else "no output"}
    made = doc.get("drafted", [])
    if made:
        return out | {"drafted": True, "patchsets": len(made),
                      "gates": [len(d["gates"]) for d in made],
                      "verdict": [d["verdict"] for d in made]}
    why = "; ".join(f"{s['gate']}: {s['why']}" for s in doc.get("skipped", []))
    return out | {"drafted": False, "why": why or "nothing drafted, no reason given"}


def case(ws: Path, spec: str, arch: str) -> dict[str, Any]:
    """Every gate-only row's commands of one case, run."""
    upstream, _, at = spec.partition("@")
    started = time.monotonic()
    found = rows(ws, upstream, at, arch)
    results = []
    for n, commands in enumerate(found, 1):
        shutil.rmtree(ws / "patchsets", ignore_errors=True)
        for command in commands:
            one = run(ws, command)
            said = (f"drafted {one['patchsets']} patchset(s), gates {one['gates']}, "
                    f"validation {one['verdict']}" if one["drafted"] else
                    f"REFUSED (exit {one['code']}): {one['why'][:300]}")
            print(f"[{spec} row {n}] {command}\n    {said} [{one['seconds']} s]", flush=True)
            results.append(one)
    refused = [r for r in results if not r["drafted"]]
    kinds = Counter(" ".join(r["why"].split(": ", 1)[-1].split()[:3]) for r in refused)
    summary = {"case": spec, "rows": len(found), "commands": len(results),
               "drafted": len(results) - len(refused), "refused": len(refused),
               "one_patchset_each": sum(1 for r in results if r.get("patchsets") == 1),
               "refusals": dict(kinds), "seconds": round(time.monotonic() - started, 1)}
    print(f"{spec}: {summary['rows']} gate-only rows, {summary['commands']} commands: "
          f"{summary['drafted']} drafted ({summary['one_patchset_each']} one patchset each), "
          f"{summary['refused']} refused {dict(kinds) or ''} [{summary['seconds']} s]",
          flush=True)
    return {"summary": summary, "commands": results}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--flashinfer", required=True, help="flashinfer's git (bare) mirror")
    parser.add_argument("--sglang", required=True, help="sglang's git (bare) mirror")
    parser.add_argument("--case", action="append", help="UPSTREAM@REF (default: "
                        + ", ".join(CASES) + ")")
    parser.add_argument("--arch", default="sm_120a")
    parser.add_argument("--workspace", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    ws = args.workspace or Path(tempfile.mkdtemp(prefix="next-steps-"))
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "contrib.toml").write_text(
        f'[upstreams.sglang]\nurl = "{args.sglang}"\nbranch = "main"\n\n'
        f'[upstreams.flashinfer]\nurl = "{args.flashinfer}"\nbranch = "main"\n',
        encoding="utf-8")
    os.environ.setdefault("CONTRIB_CACHE", str(ws / ".cache"))
    done = [case(ws, spec, args.arch) for spec in args.case or CASES]
    for one in done:
        s = one["summary"]
        print(f"FIGURES {s['case']}: rows {s['rows']}, commands {s['commands']}, drafted "
              f"{s['drafted']}/{s['commands']}, refused {s['refused']}: {s['refusals']}")
    if args.json:
        args.json.write_text(json.dumps(done, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
