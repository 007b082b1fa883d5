"""`mvcc cleanup`: retention from a shell, a dry run unless `--apply`. With no `--older-than` / `--retain-versions`
it follows the table's `mvcc.retention.*` policy (docs/operations/maintenance.md, "Policy in the table's
configuration"), then the defaults, and says which applied."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import click

import mvcc_core as mvcc
from mvcc_core.cli.options import DurationType, json_option, open_table, uri_and_storage
from mvcc_core.cli.output import emit_json, format_duration, human_bytes, plural, progress_bar, version_ranges
from mvcc_core.maintenance import policy

__all__ = ["Retention", "cleanup", "retention_for"]


@dataclass(frozen=True)
class Retention:
    """What a cleanup keeps, and where each setting came from.

    Attributes:
        older_than: Versions committed longer ago than this go.
        retain_versions: The newest this many versions stay whatever their age (None: no floor).
        older_than_from: "flag" (--older-than), "table" (mvcc.retention.older_than) or "default".
        retain_versions_from: "flag" (--retain-versions), "table" (mvcc.retention.retain_versions) or "default".
    """

    older_than: timedelta
    retain_versions: int | None
    older_than_from: str
    retain_versions_from: str

    def describe(self) -> str:
        """The settings in words, each with where it came from."""
        age = {
            "flag": "--older-than",
            "table": f"the table's {policy.RETENTION_OLDER_THAN}",
            "default": "the default",
        }[self.older_than_from]
        floor = {
            "flag": "--retain-versions",
            "table": f"the table's {policy.RETAIN_VERSIONS}",
            "default": "the default: no floor",
        }[self.retain_versions_from]
        kept = "none" if self.retain_versions is None else f"the newest {self.retain_versions}"
        age_text = format_duration(self.older_than)
        return f"older than {age_text} ({age}); versions kept whatever their age: {kept} ({floor})"

    def age_words(self) -> str:
        """How the age was given, for an error: the flag, the key or the default, with the value."""
        value = format_duration(self.older_than)
        if self.older_than_from == "flag":
            return f"--older-than {value}"
        if self.older_than_from == "table":
            return f"{policy.RETENTION_OLDER_THAN}={value} (the table's policy)"
        return f"the default age {value}"


def retention_for(config: Mapping[str, str], older_than: timedelta | None, retain_versions: int | None) -> Retention:
    """The flags given, else the table's policy, else the defaults (`policy.retention_settings`), with sources.

    Args:
        config: the configuration of the table's latest version
        older_than: `--older-than` (None: not given)
        retain_versions: `--retain-versions` (None: not given)

    Raises:
        click.ClickException: a retention key the table sets does not parse (named, with the way out)
    """
    try:
        age, floor = policy.retention_settings(config, older_than, retain_versions)
    except policy.PolicyValueError as exc:
        flag = "--older-than" if exc.key == policy.RETENTION_OLDER_THAN else "--retain-versions"
        raise click.ClickException(
            f"the table's {exc.key}={exc.value} is not valid: {exc.reason}; fix it (mvcc policy set URI "
            f"{exc.key}=VALUE, or mvcc policy unset URI {exc.key}) or give {flag}"
        ) from None

    def source(given: object, key: str) -> str:
        return "flag" if given is not None else "table" if key in config else "default"

    return Retention(
        age, floor, source(older_than, policy.RETENTION_OLDER_THAN), source(retain_versions, policy.RETAIN_VERSIONS)
    )


@click.command()
@uri_and_storage
@click.option(
    "--older-than",
    type=DurationType(),
    default=None,
    help="Remove versions older than this, e.g. 7d, 12h, 0s (default: the table's mvcc.retention.older_than, "
    "else 14d).",
)
@click.option(
    "--retain-versions",
    type=click.IntRange(min=1),
    help="Keep at least the newest N versions (default: the table's mvcc.retention.retain_versions, else none).",
)
@click.option("--apply", is_flag=True, help="Delete. Without it, only report what would go (a dry run).")
@click.option("--dry-run", is_flag=True, help="Only report what would go and why (what happens without --apply).")
@click.option("--delete-unverified", is_flag=True, help="Also delete unreferenced files younger than 7 days.")
@click.option("--keep-tagged", is_flag=True, help="Keep tagged old versions and go on (default: refuse).")
@json_option
def cleanup(
    uri: str,
    storage_option: tuple[str, ...],
    older_than: timedelta | None,
    retain_versions: int | None,
    apply: bool,
    dry_run: bool,
    delete_unverified: bool,
    keep_tagged: bool,
    as_json: bool,
) -> None:
    """Remove old versions and the files only they use. A DRY RUN unless --apply.

    The latest and tagged versions are always kept; while a tag file cannot be read, every version is. Without
    --older-than / --retain-versions the table's policy applies (mvcc policy show URI), then 14 days and no floor.

    \b
    Example:
        mvcc cleanup ./events                            # what the table's policy would remove
        mvcc cleanup ./events --older-than 7d            # what would go past 7 days
        mvcc cleanup ./events --older-than 7d --apply    # delete it
    """
    if apply and dry_run:
        raise click.UsageError("give --apply (delete) or --dry-run (report only), not both")
    t = open_table(uri, storage_option)
    chosen = retention_for(t.config, older_than, retain_versions)
    with progress_bar("removing files", apply and not as_json) as progress:
        try:
            stats = t.cleanup_old_versions(
                chosen.older_than,
                chosen.retain_versions,
                delete_unverified=delete_unverified,
                error_if_tagged_old_versions=not keep_tagged,
                dry_run=not apply,
                progress=progress,
            )
        except mvcc.errors.TagError as exc:
            if not exc.tags:
                raise
            tagged = ", ".join(f"{name} (version {v})" for name, v in sorted(exc.tags.items(), key=lambda kv: kv[1]))
            raise mvcc.errors.TagError(
                f"cleanup with {chosen.age_words()} would remove tagged versions of {uri}: "
                f"{tagged}; give --keep-tagged to keep them (and remove the rest), or delete those tags first "
                f"(mvcc tags delete {uri} NAME)",
                tags=exc.tags,
            ) from exc
    files = {
        "data": stats.data_files_removed,
        "deletion": stats.deletion_files_removed,
        "index": stats.index_files_removed,
        "transaction": stats.transaction_files_removed,
        "unverified": stats.unverified_files_removed,
    }
    if as_json:
        emit_json(
            {
                "dry_run": not apply,
                "older_than": format_duration(chosen.older_than),
                "older_than_from": chosen.older_than_from,
                "retain_versions": chosen.retain_versions,
                "retain_versions_from": chosen.retain_versions_from,
                "removed_versions": list(stats.removed_versions),
                "corrupt_versions": list(stats.corrupt_versions),
                "bad_tags": dict(stats.bad_tags),
                "bytes": stats.bytes_removed,
                "files": files,
            }
        )
        return
    verb = "removed" if apply else "would remove"
    versions_text = version_ranges(stats.removed_versions) or "none"
    click.echo(f"retention: {chosen.describe()}")
    removed = plural(len(stats.removed_versions), "version")
    click.echo(f"{verb} {removed} ({versions_text}), {human_bytes(stats.bytes_removed)}")
    click.echo("files: " + ", ".join(f"{n:,} {k}" for k, n in files.items()))
    if stats.corrupt_versions:
        click.echo(f"corrupt versions: {version_ranges(stats.corrupt_versions)}")
    for path, problem in stats.bad_tags:
        click.echo(f"bad tag {path}: {problem}")
    if stats.bad_tags:
        click.echo("every version was kept: a tag that cannot be read may name any of them; fix or delete those files")
    if not apply:
        click.echo("dry run: nothing was deleted; run again with --apply to delete", err=True)
