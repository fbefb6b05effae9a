"""The GitHub Actions workflow that runs autopilot: rendered here, written by ``init-ci``.

The workflow (``.github/workflows/contrib.yml``):

- runs on a schedule, on demand (``workflow_dispatch``) and on pushes that
  touch ``patchsets/**``, one run at a time per branch (a run in progress is
  never cancelled: it may be half-way through pushing);
- holds ``contents: write`` and ``issues: write`` and nothing else;
- caches the upstream clones (``CONTRIB_CACHE``) with ``actions/cache``,
  keyed on ``contrib.toml``;
- hands tokens to contrib only through ``env:`` from secrets: the run's own
  token (``CONTRIB_WORKSPACE_TOKEN``: the dashboard issue and pushes to this
  repository; pushes made with it start no new workflow run) and a token of
  the fork's owner (``GH_TOKEN`` from the ``CONTRIB_FORK_TOKEN`` secret: PR
  branches on the fork, PRs on the upstream);
- job ``autopilot`` runs ``contrib autopilot --push``; when it committed
  something, job ``gpu`` validates on self-hosted runners labelled per
  architecture and uploads each run as an artifact, and job ``merge`` merges
  them (``contrib validate --merge``), then runs autopilot again, which
  commits, pushes, refreshes the PR bodies and names on the dashboard every
  GPU leg that produced no artifact (``--gpu-missing``).

The first line carries a digest of the rest, so ``init-ci`` can tell its own
file from one a person edited.
"""

from __future__ import annotations

import hashlib
import json
import re
import textwrap
from dataclasses import dataclass, field

from contrib.errors import UsageError

WORKFLOW_PATH = ".github/workflows/contrib.yml"
MARKER = "# contrib:init-ci"
DEFAULT_CRON = "17 */6 * * *"
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
ARCH_RE = re.compile(r"^sm_[0-9]+[af]?$")


@dataclass(frozen=True)
class GpuRunner:
    """One leg of the GPU matrix: runners labelled ``label`` validate for ``arch``."""

    label: str
    arch: str

    @classmethod
    def parse(cls, text: str) -> GpuRunner:
        """``LABEL=ARCH`` (e.g. ``sm_120=sm_120a``); UsageError naming what is wrong."""
        label, sep, arch = text.partition("=")
        if not sep or not LABEL_RE.match(label) or not ARCH_RE.match(arch):
            raise UsageError(f"--gpu-runner {text!r}: give LABEL=ARCH, e.g. sm_120=sm_120a "
                             "(LABEL: the runner label; ARCH: sm_XY with an optional a/f)")
        return cls(label, arch)

    @property
    def runs_on(self) -> list[str]:
        return ["self-hosted", "linux", "gpu", self.label]


@dataclass(frozen=True)
class Options:
    """What differs between workspaces' workflows."""

    branch: str = "main"
    install: str = "."  # what pip installs: "." where the workspace is contrib's own repository
    cron: str = DEFAULT_CRON
    gpu: list[GpuRunner] = field(default_factory=list)
    install_note: str = ""  # a comment above the install step: why it may not install


def render(options: Options) -> str:
    """The whole workflow file, first line a marker with the digest of the rest."""
    _check(options)
    # json.dumps: a YAML double-quoted scalar whatever the cron holds (quotes, backslashes)
    body = _HEAD.format(cron=json.dumps(options.cron), branch=options.branch) + _autopilot_job(options)
    if options.gpu:
        body += _gpu_job(options) + _merge_job(options)
    return f"{MARKER} sha256={digest(body)}\n{body}"


def digest(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def written_by_us(text: str) -> bool:
    """True when ``text`` is a workflow init-ci wrote and nobody changed since."""
    first, _, body = text.partition("\n")
    match = re.fullmatch(re.escape(MARKER) + r" sha256=([0-9a-f]{16})", first.strip())
    return match is not None and match.group(1) == digest(body)


def _check(options: Options) -> None:
    if len(options.cron.split()) != 5:
        raise UsageError(f"--cron {options.cron!r}: give five cron fields, e.g. {DEFAULT_CRON!r}")
    if not re.match(r"^[A-Za-z0-9._/-]+$", options.branch):
        raise UsageError(f"branch {options.branch!r} cannot be used in the workflow")
    if any(c in options.install for c in "'\n\\$`"):
        raise UsageError(f"--install {options.install!r}: a pip requirement or path, without "
                         "quotes, backslashes or $")
    labels = [g.label for g in options.gpu]
    if len(set(labels)) != len(labels):
        raise UsageError(f"--gpu-runner: a label is given twice ({', '.join(labels)})")


def _setup(indent: str, install: str, note: str = "") -> str:
    """Steps every job shares after the checkout: Python, the cache, contrib."""
    comment = "".join(f"{indent}# {line}\n" for line in textwrap.wrap(note, 88)) if note else ""
    return (f"""\
{indent}- uses: actions/setup-python@v6
{indent}  with:
{indent}    python-version: "3.12"
{indent}- name: Point CONTRIB_CACHE at the runner's temp folder
{indent}  run: echo "CONTRIB_CACHE=$RUNNER_TEMP/contrib-cache" >> "$GITHUB_ENV"
{indent}- name: Upstream caches
{indent}  uses: actions/cache@v5
{indent}  with:
{indent}    path: ${{{{ env.CONTRIB_CACHE }}}}
{indent}    key: contrib-${{{{ runner.os }}}}-${{{{ hashFiles('contrib.toml') }}}}-${{{{ github.run_id }}}}
{indent}    restore-keys: contrib-${{{{ runner.os }}}}-${{{{ hashFiles('contrib.toml') }}}}-
{comment}{indent}- name: Install contrib
{indent}  run: python -m pip install '{install}'
""")


_HEAD = """\
# Keeps every patchset on its upstream's tip, its PRs current and validated,
# and one dashboard issue up to date.  Written by `contrib init-ci`; re-run it
# (with --force once you have edited this file) to regenerate.
name: contrib

on:
  schedule:
    - cron: {cron}
  workflow_dispatch:
  push:
    branches: [{branch}]
    paths:
      - "patchsets/**"

# One run at a time per branch; a run in progress may be pushing: never cancel it.
concurrency:
  group: contrib-${{{{ github.ref }}}}
  cancel-in-progress: false

permissions:
  contents: write
  issues: write

jobs:
"""


# Only the steps that run contrib autopilot see tokens, through env: never a command
# line, never the GPU legs (they run upstream test code).
_TOKENS = """\
        env:
          # The run's own token: the dashboard issue and pushes to this repository
          # (pushes made with it start no new workflow run).
          CONTRIB_WORKSPACE_TOKEN: ${{ github.token }}
          # A token of the fork's owner: PR branches on the fork, PRs on the upstream.
          GH_TOKEN: ${{ secrets.CONTRIB_FORK_TOKEN }}
"""


def _autopilot_job(options: Options) -> str:
    return f"""\
  autopilot:
    runs-on: ubuntu-latest
    timeout-minutes: 120
    outputs:
      sha: ${{{{ steps.run.outputs.sha }}}}
      changed: ${{{{ steps.run.outputs.changed }}}}
    steps:
      - uses: actions/checkout@v5
        with:
          fetch-depth: 0
          persist-credentials: false
{_setup("      ", options.install, options.install_note)}\
      - name: contrib autopilot --push
        id: run
{_TOKENS}\
        run: |
          before="$(git rev-parse HEAD)"
          status=0
          contrib autopilot --push || status=$?
          echo "sha=$(git rev-parse HEAD)" >> "$GITHUB_OUTPUT"
          if [ "$(git rev-parse HEAD)" != "$before" ]; then
            echo "changed=true" >> "$GITHUB_OUTPUT"
          fi
          exit "$status"
"""


def _gpu_job(options: Options) -> str:
    include = "".join(f"          - label: {g.label}\n            arch: {g.arch}\n"
                      for g in options.gpu)
    return f"""\

  gpu:
    needs: autopilot
    if: ${{{{ !cancelled() && needs.autopilot.outputs.changed == 'true' }}}}
    permissions:
      contents: read
    strategy:
      fail-fast: false
      matrix:
        include:
{include}\
    runs-on: [self-hosted, linux, gpu, "${{{{ matrix.label }}}}"]
    timeout-minutes: 240
    steps:
      - uses: actions/checkout@v5
        with:
          ref: ${{{{ needs.autopilot.outputs.sha }}}}
          persist-credentials: false
{_setup("      ", options.install, options.install_note)}\
      - name: contrib validate on the GPU, one run file per patchset of this arch
        env:
          ARCH: ${{{{ matrix.arch }}}}
          LABEL: ${{{{ matrix.label }}}}
        run: |
          # Run files go outside the checkout: --out never writes into the workspace.
          out="$RUNNER_TEMP/contrib-validation"
          mkdir -p "$out"
          status=0
          # Which patchsets this leg validates: their arch, as `contrib status --json` reads it.
          contrib status --json > "$RUNNER_TEMP/contrib-status.json" || true
          targets="$(python3 -c 'import json, sys
          rows = json.load(open(sys.argv[1])).get("patchsets", [])
          print(" ".join(r.get("selector", r["patchset"]) for r in rows if r.get("arch") == sys.argv[2]))' \\
            "$RUNNER_TEMP/contrib-status.json" "$ARCH")"
          for target in $targets; do
            contrib validate "$target" --arch "$ARCH" \\
              --out "$out/$LABEL--${{target%%/*}}--${{target#*/}}.json" || status=$?
          done
          # The leg ran: the merge job tells a leg without a runner by this file.
          touch "$out/$LABEL.done"
          exit "$status"
      - uses: actions/upload-artifact@v6
        if: ${{{{ !cancelled() }}}}
        with:
          name: contrib-validation-${{{{ matrix.label }}}}
          path: ${{{{ runner.temp }}}}/contrib-validation/
          if-no-files-found: warn
"""


def _merge_job(options: Options) -> str:
    legs = " ".join(g.label for g in options.gpu)
    return f"""\

  merge:
    needs: [autopilot, gpu]
    if: ${{{{ !cancelled() && needs.autopilot.outputs.changed == 'true' }}}}
    runs-on: ubuntu-latest
    timeout-minutes: 60
    steps:
      - uses: actions/checkout@v5
        with:
          ref: {options.branch}
          fetch-depth: 0
          persist-credentials: false
{_setup("      ", options.install, options.install_note)}\
      - uses: actions/download-artifact@v7
        continue-on-error: true
        with:
          pattern: contrib-validation-*
          path: ${{{{ runner.temp }}}}/gpu-results
          merge-multiple: true
      - name: Merge the GPU runs, commit, push, refresh the PRs and the dashboard
{_TOKENS}\
        run: |
          results="$RUNNER_TEMP/gpu-results"
          files=()
          missing=()
          for leg in {legs}; do
            if [ -f "$results/$leg.done" ]; then
              for file in "$results/$leg--"*.json; do
                [ -f "$file" ] && files+=("$file")
              done
            else
              missing+=(--gpu-missing "$leg")
            fi
          done
          status=0
          if [ "${{#files[@]}}" -gt 0 ]; then
            contrib validate --merge "${{files[@]}}" || status=$?
          fi
          contrib autopilot --push "${{missing[@]}}" || status=$?
          exit "$status"
"""
