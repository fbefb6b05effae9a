"""The commands that read an upstream's architecture gates: ``audit`` (every gate that
turns an arch away), ``why`` (one feature's chain of gates) and ``enable`` (the patch
that opens gate-only ones).  :mod:`contrib.cli` adds them to its group.

Their ``--class``, ``--scope`` and ``--verdict`` choices are the audit's enumerations
spelled by value, so that ``contrib --help`` does not load the audit.
"""

from __future__ import annotations

import click

from contrib.clicontext import Context, example, json_option, pass_ctx
from contrib.completion import complete_arch, complete_targets, complete_upstreams
from contrib.errors import UsageError

# The audit's enumerations by value (tests/commands/test_why.py holds them equal to
# GateClass, Scope, Verdict).
AUDIT_CLASSES = ["needs-kernel-work", "not-buildable", "gate-only", "intentional", "unknown"]
AUDIT_SCOPES = ["runtime", "test", "benchmark", "example"]
FEATURE_VERDICTS = ["crash", "needs-kernel-work", "unknown", "gate-only", "on"]


@click.command(epilog=example("contrib enable flashinfer --arch 120 flashinfer/jit/comm.py:175"))
@click.argument("upstream", shell_complete=complete_upstreams)
@click.argument("gates", nargs=-1, metavar="[GATE]...")
@click.option("--arch", shell_complete=complete_arch,
              help="Target GPU architecture: sm_120a, sm120, 120 or 12.0 (default: "
                   "contrib.toml's [defaults] arch).")
@click.option("--at", "at", metavar="REF", help="Draft on this commit, tag or branch "
              "(default: the tip).")
@click.option("--name", metavar="NAME", help="The draft patchset's name (default: "
              "enable-FUNCTION).")
@click.option("--feature", "features", multiple=True, metavar="FEATURE",
              help="Open the gates this feature's chain opens here, as `contrib why` reads "
                   "it, in one patchset (repeat for several choices of one setting).")
@click.option("--only", is_flag=True, help="Open the named GATEs alone, not the gates their "
              "chain adds (a feature's gates in the upstream below, as `contrib why` prints "
              "them).")
@click.option("--force", is_flag=True, help="Also draft a gate the audit refuses for kernel "
              "work: the gate's half of the fix, which validate fails until the kernels build.")
@click.option("--requires", "requires", multiple=True, metavar="UPSTREAM/NAME",
              shell_complete=complete_targets,
              help="The draft needs this patchset of the upstream it pins (its [[requires]]; "
                   "repeat).")
@click.option("--no-fetch", is_flag=True, help="Use the cached upstream as it is.")
@json_option
@pass_ctx
def enable(ctx: Context, upstream: str, gates: tuple[str, ...], arch: str | None,
           at: str | None, name: str | None, features: tuple[str, ...], only: bool,
           force: bool, requires: tuple[str, ...], no_fetch: bool, json_mode: bool) -> int:
    """Draft the patch that opens gate-only GATEs (FILE:FUNCTION or FILE:LINE, in one
    patchset; default: every uncovered one, a patchset each) or a FEATURE to ARCH, as a
    Draft patchset, and validate it."""
    from contrib.commands.enable import enable as run

    return ctx.locked(json_mode, lambda ws, ui: run(
        ws, ui, upstream, list(gates), arch=arch, at=at, name=name, fetch=not no_fetch,
        force=force, requires=list(requires), features=list(features), only=only))


@click.command(epilog=example("contrib audit flashinfer --arch sm_120a --since v0.6.16"))
@click.argument("upstreams", nargs=-1, shell_complete=complete_upstreams)
@click.option("--arch", shell_complete=complete_arch,
              help="Target GPU architecture: sm_120a, sm120, 120 or 12.0, or several side "
                   "by side (sm_120a,sm_121a); default: contrib.toml's [defaults] arch.")
@click.option("--at", "at", metavar="REF", help="Audit this commit, tag or branch (default: the tip).")
@click.option("--since", metavar="REF",
              help="Also say which gates upstream opened or closed since REF.")
@click.option("--compile", "compile_ptx", is_flag=True,
              help="Also compile the units behind each excluding gate to PTX (needs nvcc).")
@click.option("--all", "show_all", is_flag=True,
              help="List every gate found, not only those that turn the target away.")
@click.option("--markdown", "as_markdown", is_flag=True,
              help="Print Markdown for a PR description or an issue.")
@click.option("--gates", "list_gates", is_flag=True,
              help="List the gate rows instead of one row per feature.")
@click.option("--class", "classes", multiple=True, metavar="CLASS",
              type=click.Choice(AUDIT_CLASSES),
              help="With --gates: only gates of this class (repeat).")
@click.option("--scope", "scopes", multiple=True, type=click.Choice(AUDIT_SCOPES),
              help="With --gates: only gates of this scope (repeat).")
@click.option("--verdict", "verdicts", multiple=True,
              type=click.Choice(FEATURE_VERDICTS),
              help="Only features of this verdict (repeat; default: every feature with a "
                   "gate on its way).")
@click.option("--no-fetch", is_flag=True, help="Use the cached upstreams as they are.")
@json_option
@pass_ctx
def audit(ctx: Context, upstreams: tuple[str, ...], arch: str | None, at: str | None, since: str | None,
          show_all: bool, as_markdown: bool, no_fetch: bool, compile_ptx: bool,
          list_gates: bool, classes: tuple[str, ...], scopes: tuple[str, ...],
          verdicts: tuple[str, ...], json_mode: bool) -> int:
    """Every architecture gate that turns ARCH away, what stands behind it, who covers it."""
    from contrib.commands.audit import audit as run

    if json_mode and as_markdown:
        raise UsageError("--json and --markdown exclude each other; pick one")
    # It writes only the cache (whose upstreams have their own lock), so a long
    # --compile does not hold up `status` or `sync` of the same workspace.
    return ctx.unlocked(json_mode, lambda ws, ui: run(
        ws, ui, list(upstreams), arch=arch, at=at, since=since, fetch=not no_fetch,
        show_all=show_all, as_markdown=as_markdown, compile_ptx=compile_ptx,
        gates=list_gates or show_all or bool(classes or scopes),
        classes=classes, scopes=scopes, verdicts=verdicts))


# A feature is often a flag itself (`--enable-x`): unknown options are the FEATURE.
@click.command(epilog=example("contrib why sglang --enable-flashinfer-allreduce-fusion "
                            "--arch sm_120a"),
             context_settings={"ignore_unknown_options": True})
@click.argument("upstream", shell_complete=complete_upstreams)
@click.argument("feature", metavar="FEATURE")
@click.option("--arch", shell_complete=complete_arch,
              help="Target GPU architecture, or several side by side (sm_120a,sm_121a); "
                   "default: contrib.toml's [defaults] arch.")
@click.option("--at", "at", metavar="REF", help="Read this commit, tag or branch "
              "(default: the tip).")
@click.option("--cuda", metavar="X.Y", help="The CUDA release JIT modules are built with, "
              "for the target they build (default: this machine's nvcc, as `contrib doctor` "
              "names it; without one, a release new enough for every version test).")
@click.option("--no-fetch", is_flag=True, help="Use the cached upstreams as they are.")
@json_option
@pass_ctx
def why(ctx: Context, upstream: str, feature: str, arch: str | None, at: str | None,
        cuda: str | None, no_fetch: bool, json_mode: bool) -> int:
    """Why FEATURE is on, off or crashing on ARCH, and what it takes: its chain from where
    the flag is read down through every gate into the upstream below, and one verdict.
    FEATURE: a server flag (--enable-x, --x=value) or a public API (pkg.fn,
    pkg.fn:backend=value)."""
    from contrib.commands.why import why as run

    return ctx.unlocked(json_mode, lambda ws, ui: run(
        ws, ui, upstream, feature, arch=arch, at=at, fetch=not no_fetch, cuda=cuda))
