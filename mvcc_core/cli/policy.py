"""`mvcc policy show|set|unset`: the maintenance policy kept in the table's configuration (`mvcc.compaction.*`,
`mvcc.retention.*`; docs/operations/maintenance.md, "Policy in the table's configuration").

`set` and `unset` make one UpdateConfig through `Table.update_config`; every pair is checked first, so a bad key or
value is a usage error naming it and the form it takes, and nothing is committed.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

import click

from mvcc_core.cli.options import json_option, open_table, uri_and_storage
from mvcc_core.cli.output import emit_json, print_table
from mvcc_core.maintenance import policy as core

__all__ = ["policy", "policy_entries"]

_PREFIXES = ("mvcc.compaction.", "mvcc.retention.")


def _problem(key: str, value: str) -> str | None:
    """Why `value` is no value of `key`, in words (None: it is one)."""
    try:
        core.parse_value(key, value)
    except core.PolicyValueError as exc:
        return exc.reason
    return None


def policy_entries(config: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Every policy key with the value that applies: the table's, else the default; then the keys under the policy
    prefixes that the table sets but are no policy key (written around `update_config`'s check).

    Args:
        config: the table's configuration

    Returns:
        key -> {"value": the value that applies (None: none), "source": "table" or "default", "expected": the
        form, "default": the default value (None: none), "unset": the default in words, "problem": why the
        table's value cannot be used (None: it can)}.
    """
    out: dict[str, dict[str, Any]] = {}
    for key, info in core.KEYS.items():
        given = config.get(key)
        out[key] = {
            "value": info.default if given is None else given,
            "source": "default" if given is None else "table",
            "expected": info.expected,
            "default": info.default,
            "unset": info.unset,
            "problem": None if given is None else _problem(key, given),
        }
    if all(key in config for key in core.CLUSTERING_KEYS):  # written around the check: compaction refuses both
        for key in core.CLUSTERING_KEYS:
            out[key]["problem"] = out[key]["problem"] or "both clustering keys are set: a compaction writes one layout"
    for key in sorted(k for k in config if k.startswith(_PREFIXES) and k not in core.KEYS):
        out[key] = {
            "value": config[key],
            "source": "table",
            "expected": None,
            "default": None,
            "unset": None,
            "problem": "not a policy key: nothing reads it (mvcc policy unset removes it)",
        }
    return out


@click.group()
def policy() -> None:
    """The maintenance policy in the table's configuration: what `compact`, `cleanup` and `advise` follow when
    no flag says otherwise.

    \b
    Example:
        mvcc policy show ./events
        mvcc policy set ./events mvcc.retention.older_than=7d mvcc.compaction.max_bytes=512MiB
        mvcc policy unset ./events mvcc.compaction.max_bytes
    """


@policy.command("show")
@uri_and_storage
@json_option
def show_policy(uri: str, storage_option: tuple[str, ...], as_json: bool) -> None:
    """Every policy key with the value that applies on the latest version: the table's, or the default.

    \b
    Example:
        mvcc policy show ./events
        mvcc policy show s3://lake/events --json
    """
    t = open_table(uri, storage_option)
    entries = policy_entries(t.config)
    if as_json:
        emit_json({"uri": t.uri, "version": t.version, "policy": entries})
        return
    rows = []
    for key, e in entries.items():
        if e["source"] == "table":
            source = "table" if e["problem"] is None else f"table, NOT USABLE: {e['problem']}"
        else:
            source = "default" if e["default"] is not None else f"default: {e['unset']}"
        rows.append((key, "-" if e["value"] is None else e["value"], source))
    print_table(f"maintenance policy of version {t.version}", ["key", "value", "from"], rows)


def _pairs(items: Sequence[str], config: Mapping[str, str]) -> dict[str, str]:
    """`KEY=VALUE` arguments -> {key: value}; a usage error naming the first bad one."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(
                f"{item!r} is not KEY=VALUE; e.g. mvcc.retention.older_than=7d", param_hint="KEY=VALUE"
            )
        _known(key, config, removing=False)
        if not value.strip():
            raise click.BadParameter(
                f"{item}: give a value ({core.KEYS[key].expected}); to remove the key: mvcc policy unset URI {key}",
                param_hint="KEY=VALUE",
            )
        if key in out:
            raise click.BadParameter(f"{key} is given twice", param_hint="KEY=VALUE")
        if (problem := _problem(key, value)) is not None:
            raise click.BadParameter(
                f"{key}={value} is not valid: {problem} (it takes {core.KEYS[key].expected})", param_hint="KEY=VALUE"
            )
        out[key] = value.strip()
    return out


def _known(key: str, config: Mapping[str, str], *, removing: bool) -> None:
    """Refuse a key that is no policy key (a removal may name one the table sets under the policy prefixes)."""
    if key in core.KEYS or (removing and key in config and key.startswith(_PREFIXES)):
        return
    starting = [k for k in core.KEYS if k.startswith(key)]
    close = starting or difflib.get_close_matches(key, list(core.KEYS), n=1, cutoff=0.8)
    hint = f"; did you mean {close[0]}?" if close else "."
    raise click.BadParameter(
        f"{key} is not a policy key{hint} The keys: {', '.join(core.KEYS)} (mvcc policy show URI lists them "
        "with their values)",
        param_hint="KEY" if removing else "KEY=VALUE",
    )


@policy.command("set")
@uri_and_storage
@click.argument("pairs", metavar="KEY=VALUE...", nargs=-1, required=True)
@click.option("--message", "-m", "commit_message", help="The commit message.")
def set_policy(uri: str, storage_option: tuple[str, ...], pairs: tuple[str, ...], commit_message: str | None) -> None:
    """Set policy keys in one commit; every value is checked first, and nothing is committed if one is wrong.

    \b
    Example:
        mvcc policy set ./events mvcc.retention.older_than=7d mvcc.retention.retain_versions=10
        mvcc policy set ./events mvcc.compaction.sort_by=user,ts -m "cluster by user"
    """
    t = open_table(uri, storage_option)
    upsert = _pairs(pairs, t.config)
    try:  # the checks that need the table: columns it has, both clustering keys at once
        core.check_config(dict(upsert), t.schema, t.config)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="KEY=VALUE") from None
    if all(t.config.get(k) == v for k, v in upsert.items()):
        click.echo(f"unchanged: the table already sets {', '.join(f'{k}={v}' for k, v in upsert.items())}")
        return
    t.update_config(dict(upsert), commit_message=commit_message)
    click.echo(f"set {', '.join(f'{k}={v}' for k, v in upsert.items())} in version {t.version}")


@policy.command("unset")
@uri_and_storage
@click.argument("keys", metavar="KEY...", nargs=-1, required=True)
@click.option("--message", "-m", "commit_message", help="The commit message.")
def unset_policy(uri: str, storage_option: tuple[str, ...], keys: tuple[str, ...], commit_message: str | None) -> None:
    """Remove policy keys in one commit: the defaults apply again.

    \b
    Example:
        mvcc policy unset ./events mvcc.compaction.max_bytes mvcc.retention.retain_versions
    """
    t = open_table(uri, storage_option)
    for key in keys:
        _known(key.strip(), t.config, removing=True)
    names = list(dict.fromkeys(k.strip() for k in keys))
    present = [k for k in names if k in t.config]
    absent = [k for k in names if k not in t.config]
    if absent:
        click.echo(f"not set on the table: {', '.join(absent)}", err=True)
    if not present:
        click.echo("nothing to remove: no version written")
        return
    t.update_config(delete=present, commit_message=commit_message)
    click.echo(f"removed {', '.join(present)} in version {t.version}; the defaults apply")
