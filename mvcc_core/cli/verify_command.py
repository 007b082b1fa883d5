"""`mvcc verify`: a table checked against its store: versions, every branch and tag, every file under `_refs/`
(docs/guide/cli.md, "verify")."""

from __future__ import annotations

import dataclasses

import click

import mvcc_core as mvcc
from mvcc_core.cli.options import EXIT_ERROR, json_option, storage_options_for, uri_and_storage
from mvcc_core.cli.output import emit_json
from mvcc_core.cli.refs import Ref, open_ref, ref_options


def _line(p: dict[str, object]) -> str:
    """One problem or warning as printed: `[branch B ]version N: KIND PATH: PROBLEM`."""
    where = "?" if p["version"] is None else p["version"]
    branch = f"branch {p['branch']} " if p.get("branch") else ""
    return f"{branch}version {where}: {p['kind']} {p['path']}: {p['problem']}"


@click.command()
@uri_and_storage
@ref_options("The version to check (default: the latest)")
@click.option("--all", "all_versions", is_flag=True, help="Check every version kept (of main and of each branch).")
@click.option("--branch", metavar="NAME", help="Check only this branch: its ref, its parents, its tags, its versions.")
@click.option("--deep", is_flag=True, help="Also read every data and index file.")
@json_option
@click.pass_context
def verify(
    ctx: click.Context,
    uri: str,
    storage_option: tuple[str, ...],
    ref: Ref | None,
    all_versions: bool,
    branch: str | None,
    deep: bool,
    as_json: bool,
) -> None:
    """Check a table against its store; print the problems and exit 1 if there are any.

    Every manifest parses, every file a checked version references exists with the recorded size, deletion
    vectors decode, indices point at existing fields and fragments; every branch ref decodes, its parent exists
    (no cycle) with the version it forked at, and each branch's latest version (--all: every one) is checked
    the same way; every tag file decodes and names an existing version; nothing else is under _refs/
    (a temporary file of a killed write is a warning). --deep reads every data and index file. Base paths
    outside the table's root (a shallow clone's source) are listed as notes. Default: the latest version.

    \b
    Example:
        mvcc verify ./events --all --deep
        mvcc verify ./events --branch audit-42
    """
    if ref is not None and all_versions:
        raise click.UsageError(f"give {ref.flag} or --all, not both")
    if branch is not None and ref is not None:
        raise click.UsageError(f"give --branch or {ref.flag}, not both (--branch checks that branch's latest version)")
    if branch is not None and not branch.strip():
        raise click.BadParameter(
            "is empty: give a branch name (mvcc branches list URI shows them)", ctx, None, "--branch"
        )
    from mvcc_core.table import manifest_violations  # the table code, imported when the command runs
    from mvcc_core.verify import VerifyReport
    from mvcc_core.verify import verify as verify_table

    options = storage_options_for(uri, storage_option)
    try:
        t, ref = open_ref(uri, storage_option, ref)
    except mvcc.errors.CorruptManifestError as exc:  # the latest manifest: its message names the version to restore
        report = VerifyReport()
        version = ref.value if ref is not None and isinstance(ref.value, int) else None
        try:
            found = manifest_violations(uri, version, storage_options=options)
        except mvcc.MvccError:
            found = []
        if not found or version is None:
            report.add(version, "manifest", uri, str(exc))
        for text in found:
            report.add(version, "manifest", uri, text)
    else:
        try:
            report = verify_table(t, deep=deep, all_versions=all_versions, branch=branch)
        except mvcc.errors.BranchNotFoundError:
            raise mvcc.errors.BranchNotFoundError(
                f"--branch {branch}: {uri} has no branch {branch!r} (mvcc branches list {uri})"
            ) from None
    problems = [dataclasses.asdict(p) for p in report.problems]
    warnings = [dataclasses.asdict(p) for p in report.warnings]
    if as_json:
        emit_json(
            {
                "ok": report.ok,
                "versions": report.versions,
                "branches": report.branches,
                "scratch_branches": report.scratch_branches,
                "files_checked": report.files_checked,
                "problems": problems,
                "warnings": warnings,
                "foreign_bases": [dataclasses.asdict(b) for b in report.foreign_bases],
            }
        )
    else:
        for p in problems:
            click.echo(_line(p))
        for p in warnings:
            click.echo(f"warning: {p['kind']} {p['path']}: {p['problem']}")
        for name in report.scratch_branches:
            click.echo(f"note: scratch branch {name} of a publish (its working space, removed when the publish ends)")
        for base in report.foreign_bases:
            click.echo(
                f"note: base path {base.path} (id {base.id}) lies outside the table's root; up to "
                f"{base.files} file(s) of version(s) {base.versions} are read from there (a shallow clone's "
                "source); nothing writes, deletes or cleans up there"
            )
        checked = len(report.versions) + sum(len(v) for v in report.branches.values())
        what = f"{checked} version(s) of {len(report.branches) + (1 if report.versions else 0)} branch(es)"
        what += f", {report.files_checked} files"
        click.echo(f"{len(problems)} problem(s) in {what}" if problems else f"ok: {what}", err=bool(problems))
    if problems:
        ctx.exit(EXIT_ERROR)
