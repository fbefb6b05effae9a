"""Command line: parse arguments, call one function per command.

What every command receives (the context, the shared options) is
:mod:`contrib.clicontext`; the commands on an upstream's arch gates are
:mod:`contrib.cligates`, added to the group here.

Exceptions become messages and exit codes in :mod:`contrib.runner` (click's
own, usage errors among them, here).

Startup matters (an autopilot runs contrib many times an hour): this module
and what it imports stay light, and each command imports its machinery
(PyGithub, tomlkit, the validate stages) inside its function.
tests/test_startup.py fails when ``import contrib.cli`` pulls in a heavy library.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from contrib import __version__, cligates
from contrib.clicontext import (
    DIR_HELP,
    DIR_TYPE,
    Context,
    example,
    json_option,
    output_options,
    pass_ctx,
)
from contrib.completion import complete_arch, complete_targets, complete_upstreams
from contrib.errors import UsageError

# contrib.analysis.wheels.Platform by value, so that --help does not load it
# (tests/commands/test_coverage.py holds them equal).
PLATFORMS = ["x86_64", "aarch64"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]},
             epilog=example("contrib status --no-fetch"))
@click.option("-C", "directory", type=DIR_TYPE, help=DIR_HELP)
@output_options
@click.version_option(__version__, prog_name="contrib")
@click.pass_context
def cli(click_ctx: click.Context, directory: Path | None) -> None:
    """Carry patchsets against fast-moving upstreams: sync, validate, open PRs."""
    click_ctx.ensure_object(Context).directory = directory


for _command in (cligates.audit, cligates.why, cligates.enable):
    cli.add_command(_command)


@cli.command("init", epilog=example("contrib init ~/carry --upstream flashinfer"))
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--upstream", "upstreams", multiple=True, metavar="NAME[=URL]",
              help="An upstream: flashinfer or sglang by name, any other as NAME=URL "
                   "(repeat; default: flashinfer and sglang).")
@click.option("--arch", default="sm_120a", show_default=True, shell_complete=complete_arch,
              help="The GPU written as [defaults] arch: what why, audit, enable and new "
                   "take without --arch.")
@json_option
@pass_ctx
def init(ctx: Context, directory: Path | None, upstreams: tuple[str, ...], arch: str,
         json_mode: bool) -> int:
    """Make DIR (default: here) a workspace: contrib.toml, .contrib/ ignored, git initialised."""
    from contrib.commands.init import init as run
    from contrib.runner import guarded_ui

    where = (ctx.directory or Path.cwd()) / (directory or ".")
    return guarded_ui(ctx.make_ui(json_mode), lambda ui: run(where.resolve(), ui,
                                                              list(upstreams), arch))


@cli.command(epilog=example(
    "contrib new flashinfer/sm120-comm --base v0.6.16 --patch /tmp/p/*.patch"))
@click.argument("upstream", metavar="UPSTREAM/NAME", shell_complete=complete_upstreams)
@click.argument("name", required=False, metavar="")
@click.argument("more_patches", nargs=-1, type=click.Path(path_type=Path), metavar="[PATCH]...")
@click.option("--base", help="Upstream commit, tag or branch the patches apply to.")
@click.option("--patch", "patches", multiple=True, type=click.Path(path_type=Path),
              help="A git format-patch file (repeat, in order).")
@click.option("--commits", help="A commit range A..B in --repo to take the patches from.")
@click.option("--repo", type=click.Path(path_type=Path), help="Local clone holding --commits.")
@click.option("--from-pr", "from_pr", metavar="N|URL",
              help="Take the commits of upstream PR N (refs/pull/N/head) on its merge base.")
@click.option("--from-branch", "from_branch", nargs=2, metavar="URL BRANCH",
              help="Take the commits of BRANCH of the repository at URL on its merge base.")
@click.option("--squash", is_flag=True,
              help="With --from-pr/--from-branch: take the whole change as one patch "
                   "(for a PR holding merge commits).")
@click.option("--title", help="Patchset title (default: the first patch's subject).")
@click.option("--arch", shell_complete=complete_arch,
              help="Target GPU architecture: sm_120a, sm120, 120 or 12.0 (default: "
                   "contrib.toml's [defaults] arch, else sm_120a).")
@json_option
@pass_ctx
def new(ctx: Context, upstream: str, name: str, more_patches: tuple[Path, ...],
        base: str | None, patches: tuple[Path, ...], commits: str | None, repo: Path | None,
        from_pr: str | None, from_branch: tuple[str, str] | None, squash: bool,
        title: str | None, arch: str | None, json_mode: bool) -> int:
    """Create a patchset from patch files, commits in a local clone, a PR or a fork branch.

    Patch files may follow --patch (`--patch 0001.patch 0002.patch`) or be
    repeated (`--patch A --patch B`); they are applied in the order given.
    `UPSTREAM NAME` (two words) is read as `UPSTREAM/NAME`.
    """
    from contrib.commands.new import new as run

    if "/" in upstream:  # UPSTREAM/NAME, as every other command names a patchset
        if name is not None:
            more_patches = (Path(name), *more_patches)
        upstream, _, name = upstream.partition("/")
    if not name:
        raise UsageError("name the patchset: contrib new UPSTREAM/NAME ...")

    return ctx.locked(json_mode, lambda ws, ui: run(
        ws, ui, upstream, name, base, patches=[*patches, *more_patches], commits=commits,
        repo=repo, title=title, arch=arch, from_pr=from_pr, from_branch=from_branch or None,
        squash=squash))


@cli.command(epilog=example("contrib status --no-fetch flashinfer --json"))
@click.argument("targets", nargs=-1, shell_complete=complete_targets)
@click.option("--no-fetch", is_flag=True,
              help="Offline: use the cached upstreams as they are, and do not ask GitHub.")
@json_option
@pass_ctx
def status(ctx: Context, targets: tuple[str, ...], no_fetch: bool, json_mode: bool) -> int:
    """Per patchset: base, upstream tip, commits behind, sync, validation, PR, CI, review."""
    from contrib.commands.status import status as run

    # Read-only (the cache has its own lock): it never waits on a sync or an autopilot.
    return ctx.reading(json_mode, lambda ws, ui: run(ws, ui, list(targets),
                                                     fetch=not no_fetch))


@cli.command(epilog=example("contrib sync flashinfer --to v0.6.17 --commit"))
@click.argument("targets", nargs=-1, shell_complete=complete_targets)
@click.option("--to", "to", help="Pin the upstream commit to carry onto (default: branch tip).")
@click.option("--commit", "commit", is_flag=True,
              help="Commit the changed patchset files in the workspace repository.")
@click.option("--continue", "continue_", is_flag=True,
              help="Record the resolved conflict worktree of TARGET and carry on.")
@click.option("--abort", is_flag=True, help="Drop the conflict worktree of TARGET.")
@click.option("--no-fetch", is_flag=True, help="Use the cached upstreams as they are.")
@json_option
@pass_ctx
def sync(ctx: Context, targets: tuple[str, ...], to: str | None, commit: bool,
         continue_: bool, abort: bool, no_fetch: bool, json_mode: bool) -> int:
    """Carry every patchset onto the new upstream commit."""
    from contrib.commands.sync import sync as run

    return ctx.locked(json_mode, lambda ws, ui: run(
        ws, ui, list(targets), to=to, commit=commit, continue_=continue_, abort=abort,
        fetch=not no_fetch))


@cli.command(epilog=example(
    "contrib validate flashinfer/sm120-trtllm-comm --arch 120 --junit out.xml"))
@click.argument("targets", nargs=-1, shell_complete=complete_targets)
@click.option("--arch", shell_complete=complete_arch,
              help="Target architecture: sm_120a, sm120, 120 or 12.0 (default: patchset.toml's "
                   "arch).")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a JUnit XML report here.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the run to FILE (outside the workspace) instead of validation.json.")
@click.option("--merge", is_flag=True,
              help="Merge run files (the arguments) written by --out into the workspace.")
@click.option("--drop", "drop", multiple=True, metavar="RUN",
              help="Remove run RUN (its id) from the targets' records, and validate nothing.")
@json_option
@pass_ctx
def validate(ctx: Context, targets: tuple[str, ...], arch: str | None, junit: Path | None,
             out: Path | None, merge: bool, drop: tuple[str, ...], json_mode: bool) -> int:
    """Prove each patchset is whole for the target GPU architecture."""
    from contrib.commands import validate as command

    if drop:
        if arch or junit or out or merge:
            raise UsageError("--drop takes targets only (no --arch, --junit, --out or --merge)")
        return ctx.locked(json_mode, lambda ws, ui: command.drop(ws, ui, list(targets), list(drop)))
    if merge:
        if arch or junit or out:
            raise UsageError("--merge takes run files only (no --arch, --junit or --out)")
        if not targets:
            raise UsageError("--merge needs the run files to merge: contrib validate --merge FILE...")
        return ctx.locked(json_mode, lambda ws, ui: command.merge(ws, ui, list(map(Path, targets))))
    if out is not None:  # touches nothing in the workspace, so takes no lock there
        return ctx.unlocked(json_mode, lambda ws, ui: command.validate(
            ws, ui, list(targets), arch=arch, junit=junit, out=out))
    return ctx.locked(json_mode, lambda ws, ui: command.validate(ws, ui, list(targets),
                                                                 arch=arch, junit=junit))


@cli.command("open-pr", epilog=example("contrib open-pr flashinfer/sm120-trtllm-comm --dry-run"))
@click.argument("targets", nargs=-1, shell_complete=complete_targets)
@click.option("--dry-run", is_flag=True, help="Print what would be pushed and posted; do neither.")
@click.option("--force", is_flag=True, help="Open the PR even without a passed validation.")
@click.option("--reopen", is_flag=True, help="Reopen a PR that a human closed.")
@click.option("--allow-hook-failures", is_flag=True,
              help="Open the PR even when the upstream's pre-commit hooks or PR checks "
                   "fail on it.")
@json_option
@pass_ctx
def open_pr(ctx: Context, targets: tuple[str, ...], dry_run: bool, force: bool, reopen: bool,
            allow_hook_failures: bool, json_mode: bool) -> int:
    """Open or update a draft PR per patchset, pushed from the fork."""
    from contrib.commands.open_pr import open_pr_command as run

    return ctx.locked(json_mode, lambda ws, ui: run(
        ws, ui, list(targets), dry_run=dry_run, force=force, reopen=reopen,
        allow_hook_failures=allow_hook_failures))


@cli.command(epilog=example("contrib edit flashinfer/sm120-trtllm-comm"))
@click.argument("target", shell_complete=complete_targets)
@click.option("--path", type=click.Path(file_okay=False, path_type=Path),
              help="Make the worktree here (default: .contrib/edit/UPSTREAM--NAME/).")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path),
              help="Make branch contrib/NAME in this existing clone instead.")
@click.option("--force", is_flag=True, help="Replace a branch of that name contrib did not make.")
@json_option
@pass_ctx
def edit(ctx: Context, target: str, path: Path | None, repo: Path | None, force: bool,
         json_mode: bool) -> int:
    """Open UPSTREAM/NAME as commits on a branch, to change with git.

    The branch is contrib/WSID/NAME in a worktree of the upstream cache (WSID
    names this workspace: the cache is shared, so two workspaces never share a
    branch), or contrib/NAME in the clone given by --repo.
    """
    from contrib.commands.edit import edit as run

    return ctx.locked(json_mode, lambda ws, ui: run(ws, ui, target, path=path, repo=repo,
                                                    force=force))


@cli.command(epilog=example("contrib refresh flashinfer/sm120-trtllm-comm"))
@click.argument("target", shell_complete=complete_targets)
@click.option("--path", type=click.Path(file_okay=False, path_type=Path),
              help="The worktree `contrib edit --path` made (default: the recorded one).")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path),
              help="Read branch contrib/NAME from this clone.")
@click.option("--no-fetch", is_flag=True,
              help="Use the cached upstream as it is to find a rebased branch's base.")
@json_option
@pass_ctx
def refresh(ctx: Context, target: str, path: Path | None, repo: Path | None, no_fetch: bool,
            json_mode: bool) -> int:
    """Take the branch `contrib edit` made back as the patchset's current version."""
    from contrib.commands.refresh import refresh as run

    return ctx.locked(json_mode, lambda ws, ui: run(ws, ui, target, path=path, repo=repo,
                                                    fetch=not no_fetch))


@cli.command(epilog=example("contrib diff flashinfer/sm120-trtllm-comm"))
@click.argument("target", shell_complete=complete_targets)
@click.argument("old", required=False)
@click.argument("new", required=False)
@json_option
@pass_ctx
def diff(ctx: Context, target: str, old: str | None, new: str | None, json_mode: bool) -> int:
    """Range-diff between two versions (default: the previous and the current)."""
    from contrib.commands.diff import diff as run

    return ctx.reading(json_mode, lambda ws, ui: run(ws, ui, target, old, new))


@cli.command(epilog=example("contrib show flashinfer/sm120-trtllm-comm"))
@click.argument("target", shell_complete=complete_targets)
@json_option
@pass_ctx
def show(ctx: Context, target: str, json_mode: bool) -> int:
    """A patchset's targets, versions and patches (subject, files, lines)."""
    from contrib.commands.show import show as run

    return ctx.reading(json_mode, lambda ws, ui: run(ws, ui, target))


@cli.command(epilog=example("contrib log flashinfer/sm120-trtllm-comm --json"))
@click.argument("target", shell_complete=complete_targets)
@json_option
@pass_ctx
def log(ctx: Context, target: str, json_mode: bool) -> int:
    """The versions, oldest first: how each was made, validation, PR pushes."""
    from contrib.commands.log import log as run

    return ctx.reading(json_mode, lambda ws, ui: run(ws, ui, target))


@cli.command(epilog=example("contrib coverage sglang-kernel==0.4.10 --arch sm_120a,sm_121a"))
@click.argument("source", metavar="WHEEL|DIR|DIST|REQ")
@click.option("--arch", shell_complete=complete_arch,
              help="The GPUs to judge for: sm_120a, or several side by side (sm_120a,sm_121a); "
                   "default: contrib.toml's [defaults] arch.")
@click.option("--platform", type=click.Choice(PLATFORMS),
              help="The wheel's platform for a requirement (default: the one each arch ships "
                   "in: aarch64 for GB10's sm_121a, x86_64 for sm_120a).")
@click.option("--find-links", "find_links", multiple=True, metavar="DIR",
              type=click.Path(file_okay=False, path_type=Path),
              help="A folder of wheels to resolve a requirement from (repeat); pip's cache "
                   "is searched too.")
@click.option("--download", is_flag=True,
              help="Fetch the requirement's wheel from the index (pip download) when none "
                   "is here; without it nothing is fetched.")
@click.option("--only", metavar="GLOB",
              help="Only the objects whose path in the source matches GLOB ('*' crosses "
                   "'/'): --only '*fmha/trtllm-gen/*'.")
@json_option
@pass_ctx
def coverage(ctx: Context, source: str, arch: str | None, platform: str | None,
             find_links: tuple[Path, ...], download: bool, only: str | None,
             json_mode: bool) -> int:
    """The SASS and PTX each object of a wheel, folder, installed distribution or
    requirement carries, and per arch: native, ptx-jit or no-image."""
    from contrib.commands.coverage import coverage as run
    from contrib.runner import guarded_ui

    return guarded_ui(ctx.make_ui(json_mode), lambda ui: run(
        ui, source, arch=arch, directory=ctx.directory, platform=platform,
        find_links=find_links, download=download, only=only))


@cli.command(epilog=example("contrib doctor --json"))
@json_option
@pass_ctx
def doctor(ctx: Context, json_mode: bool) -> int:
    """Check git, CUDA, GPUs, the GitHub token, upstreams, caches and the workspace."""
    from contrib.commands.doctor import doctor as run

    ui = ctx.make_ui(json_mode)
    try:
        ws = ctx.workspace()
    except UsageError:  # outside a workspace the machine is still worth checking
        ws = None
    return run(ws, ui)


@cli.command(epilog=example("contrib autopilot --dry-run"))
@click.argument("targets", nargs=-1, shell_complete=complete_targets)
@click.option("--push", is_flag=True, help="Push the run's commit to the workspace's origin.")
@click.option("--dry-run", is_flag=True,
              help="Show everything it would do; write nothing (workspace, fork, GitHub).")
@click.option("--no-fetch", is_flag=True, help="Use the cached upstreams as they are.")
@click.option("--gpu-missing", "gpu_missing", multiple=True, metavar="LABEL",
              help="A GPU leg of the workflow that produced no validation (repeat).")
@json_option
@pass_ctx
def autopilot(ctx: Context, targets: tuple[str, ...], push: bool, dry_run: bool,
              no_fetch: bool, gpu_missing: tuple[str, ...], json_mode: bool) -> int:
    """Sync, validate, keep PRs current, commit, push and update the dashboard, once."""
    from contrib.commands.autopilot import autopilot as run

    return ctx.locked(json_mode, lambda ws, ui: run(
        ws, ui, list(targets), push=push, dry_run=dry_run, fetch=not no_fetch,
        gpu_missing=list(gpu_missing)))


@cli.command("init-ci", epilog=example("contrib init-ci --gpu-runner rtx6000=sm_120a"))
@click.option("--gpu-runner", "gpu_runners", multiple=True, metavar="LABEL=ARCH",
              help="A GPU leg: self-hosted runners labelled LABEL validate ARCH (repeat).")
@click.option("--install", metavar="SPEC",
              help="What the workflow pip-installs (default: contrib-toolkit at this "
                   "version; '.' in contrib's own repository).")
@click.option("--cron", help="When the workflow runs (five cron fields).")
@click.option("--branch", help="The branch autopilot keeps (default: the current one).")
@click.option("--force", is_flag=True, help="Replace a workflow contrib did not write.")
@json_option
@pass_ctx
def init_ci(ctx: Context, gpu_runners: tuple[str, ...], install: str | None, cron: str | None,
            branch: str | None, force: bool, json_mode: bool) -> int:
    """Write .github/workflows/contrib.yml: autopilot on a schedule, GPU legs, the merge."""
    from contrib.commands.init_ci import init_ci as run

    return ctx.locked(json_mode, lambda ws, ui: run(
        ws, ui, gpu_runners=list(gpu_runners), force=force, install=install, cron=cron,
        branch=branch))


@cli.command(epilog=example("contrib demo /tmp/contrib-demo"))
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@output_options
@pass_ctx
def demo(ctx: Context, directory: Path | None) -> int:
    """Run the whole loop offline on a generated mini upstream (in DIR or a temp dir)."""
    from contrib import environ
    from contrib.demo.run import demo as run

    environ.lock_timeout()
    environ.source_date_epoch()
    return run(directory, ctx.make_ui(False), main)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and turn every outcome into an exit code."""
    from contrib.runner import guarded

    args = sys.argv[1:] if argv is None else argv
    json_mode = "--json" in args
    return guarded(lambda: _click_main(args, json_mode), json_mode)


def _click_main(args: list[str], json_mode: bool) -> int:
    """click's own outcomes as exit codes; contrib's are :func:`contrib.runner.guarded`'s."""
    from contrib.runner import fail, interrupted

    try:
        result = cli.main(args=args, prog_name="contrib", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        if json_mode:
            return fail(exc.format_message(), 2, json_mode)
        exc.show()
        return 2
    except click.exceptions.Abort:
        return interrupted(json_mode)
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
