"""Version references on the command line: `--tag NAME`, `--version N`, `--at TIME` (one of them), and the bare
positional reference of `restore` (docs/guide/cli.md, "Version references").

A bare reference is resolved in a fixed order: a name that is a tag of the table wins; else an integer is a
version number; else an ISO 8601 time is the version current then. Every command says which one it resolved
("restored tag 2099-01-01 (version 4) as version 9").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click

import mvcc_core as mvcc
from mvcc_core.cli.options import storage_options_for
from mvcc_core.times import parse_time

__all__ = [
    "Ref",
    "TimeType",
    "checkout_ref",
    "open_ref",
    "positional_ref",
    "ref_options",
    "resolved",
    "version_words",
]

#: How a user passes a time, for errors.
TIME_EXAMPLE = "an ISO 8601 time, e.g. 2026-11-01, 2026-11-01T12:00:00 (UTC) or 2026-11-01T12:00:00+01:00"


@dataclass(frozen=True)
class Ref:
    """A version reference as the user gave it.

    Attributes:
        flag: How it was given: "--tag", "--version", "--at" or "REF" (the positional, resolved by rule).
        text: The value as typed.
        value: The tag name, the version number or the time (UTC); for "REF", the text.
    """

    flag: str
    text: str
    value: int | str | datetime


class TimeType(click.ParamType):
    """`--at TIME`: an ISO 8601 time (`mvcc_core.times.parse_time`, UTC without a zone); a usage error otherwise."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        """The time `value` spells; a usage error naming the flag otherwise.

        Args:
            value: the option's value as typed (or already converted)
            param: the option being converted, for the error
            ctx: the command's context, for the error
        """
        if isinstance(value, datetime):
            return value
        try:
            return parse_time(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a time: give {TIME_EXAMPLE}", param, ctx)


class VersionNumberType(click.ParamType):
    """`--version N`: a version number (from 1); a tag or a time is a usage error that names their flags."""

    name = "N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """The version number `value` spells; a usage error naming the flag otherwise.

        Args:
            value: the option's value as typed (or already converted)
            param: the option being converted, for the error
            ctx: the command's context, for the error
        """
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        text = str(value).strip()
        if text.isdigit() and int(text) >= 1:
            return int(text)
        if text.startswith("-") and text[1:].isdigit() or text.isdigit():
            self.fail(f"{text} is not a version: versions are numbered from 1", param, ctx)
        self.fail(
            f"{value!r} is not a version number; for a tag give --tag {text or 'NAME'}, for a time --at TIME "
            f"({TIME_EXAMPLE})",
            param,
            ctx,
        )


def _tag_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise click.BadParameter("is empty: give a tag name (mvcc tags list URI shows them)", ctx, param)
    return value


def ref_options(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--tag NAME`, `--version N` and `--at TIME`, at most one of them, handed to the command as `ref`
    (a `Ref`, or None when none is given).

    Args:
        what: what the reference picks, for the help ("the version to show")
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(
            *args: Any, ref_tag: str | None, ref_version: int | None, ref_at: datetime | None, **kwargs: Any
        ) -> Any:
            flags = (("--tag", ref_tag), ("--version", ref_version), ("--at", ref_at))
            given = [(flag, v) for flag, v in flags if v is not None]
            if len(given) > 1:
                raise click.UsageError(
                    f"give one of --tag, --version and --at, not {' and '.join(f for f, _ in given)}"
                )
            ref = None
            if given:
                flag, value = given[0]
                text = value.isoformat() if isinstance(value, datetime) else str(value)
                ref = Ref(flag, text, value)
            return fn(*args, ref=ref, **kwargs)

        wrapper = click.option(
            "--at",
            "ref_at",
            type=TimeType(),
            metavar="TIME",
            help=f"{what}: the one current at this ISO 8601 time (UTC without a zone).",
        )(wrapper)
        wrapper = click.option(
            "--version", "ref_version", type=VersionNumberType(), metavar="N", help=f"{what}: this version number."
        )(wrapper)
        return click.option("--tag", "ref_tag", metavar="NAME", callback=_tag_name, help=f"{what}: this tag's.")(
            wrapper
        )

    return decorate


def positional_ref(ctx: click.Context, param: click.Parameter, value: str | None) -> Ref | None:
    """The click callback of a bare REF argument: refuses what can be no reference (empty, a negative number);
    the rest is resolved against the table (`open_ref`).

    Args:
        ctx: the command's context
        param: the argument
        value: the reference as typed
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        raise click.BadParameter(f"is empty: give a tag name, a version number or {TIME_EXAMPLE}", ctx, param)
    if text.startswith("-") and text[1:].isdigit():
        raise click.BadParameter(f"{text} is not a version: versions are numbered from 1", ctx, param)
    return Ref("REF", text, text)


def _explicit_tag(tags: Any, name: str) -> None:
    """Raise the core's TagError when the table has no tag `name` (a CorruptTagError when its file is bad)."""
    tags.get_reference(name)


def _by_rule(uri: str, tags: Any, ref: Ref) -> Ref:
    """The positional `ref` as what it names: a tag if the table has one of that name, else a version number,
    else a time; a usage error naming REF when it is none."""
    try:
        tags.get_reference(ref.text)
        return Ref("--tag", ref.text, ref.text)
    except mvcc.errors.CorruptTagError:
        return Ref("--tag", ref.text, ref.text)  # a tag, damaged: opening it says so
    except mvcc.errors.TagError:
        pass
    if ref.text.isdigit():
        return Ref("--version", ref.text, int(ref.text))
    try:
        return Ref("--at", ref.text, parse_time(ref.text))
    except ValueError:
        raise click.BadParameter(
            f"{ref.text!r} is no tag of {uri}, no version number and no time; give a tag name (mvcc tags list "
            f"{uri}), a version number or {TIME_EXAMPLE}; or say which with --tag, --version or --at",
            param_hint="REF",
        ) from None


def open_ref(
    uri: str, storage_option: Sequence[str], ref: Ref | None, branch: str | None = None
) -> tuple[mvcc.Table, Ref | None]:
    """The table at `uri` (on `branch`), at `ref` or at its latest version, and `ref` as resolved (a positional
    reference becomes the flag it was taken for). Only the referenced version's manifest is read.

    Args:
        uri: the table's uri
        storage_option: the `--storage-option k=v` values
        ref: the reference (None: the latest version)
        branch: the branch to open (None: main)
    """
    options = storage_options_for(uri, storage_option)
    if ref is None:
        return mvcc.open_table(uri, storage_options=options, branch=branch), None
    if ref.flag in ("--tag", "REF"):
        from mvcc_core.table import open_tags  # the table code, imported when a command needs it

        tags = open_tags(uri, storage_options=options)
        if ref.flag == "REF":
            ref = _by_rule(uri, tags, ref)
        else:
            _explicit_tag(tags, ref.text)
    if ref.flag == "--at":
        return mvcc.open_table(uri, asof=ref.value, storage_options=options, branch=branch), ref  # type: ignore[arg-type]
    return mvcc.open_table(uri, version=ref.value, storage_options=options, branch=branch), ref


def checkout_ref(t: mvcc.Table, uri: str, ref: Ref | None) -> tuple[mvcc.Table, Ref | None]:
    """`t` checked out at `ref` (None: `t` itself), and `ref` as resolved (see `open_ref`).

    Args:
        t: a handle on the table (its branch is the one whose versions numbers and times name)
        uri: the table's uri, for messages
        ref: the reference
    """
    if ref is None:
        return t, None
    if ref.flag == "REF":
        ref = _by_rule(uri, t.tags, ref)
    elif ref.flag == "--tag":
        _explicit_tag(t.tags, ref.text)
    return t.checkout(ref.value), ref


def resolved(ref: Ref | None, version: int) -> str:
    """What a reference named, in words: "tag nightly (version 4)", "version 4", "version 4 (current at ...)".

    Args:
        ref: the reference as resolved (None: the latest version)
        version: the version it names
    """
    if ref is None:
        return f"version {version}"
    if ref.flag == "--tag":
        return f"tag {ref.text} (version {version})"
    if ref.flag == "--at":
        when = ref.value.isoformat() if isinstance(ref.value, datetime) else ref.text
        return f"version {version} (current at {when})"
    return f"version {version}"


def version_words(ref: Ref | None, version: int, latest: int) -> str:
    """The value of a `version` line: "6 (the latest)", "3 (tag nightly; the latest is 6)", "6 (current at ...;
    the latest)".

    Args:
        ref: the reference as resolved (None: the latest version)
        version: the version it names
        latest: the table's latest version
    """
    details = []
    if ref is not None and ref.flag == "--tag":
        details.append(f"tag {ref.text}")
    elif ref is not None and ref.flag == "--at":
        details.append(f"current at {ref.value.isoformat() if isinstance(ref.value, datetime) else ref.text}")
    details.append("the latest" if version == latest else f"the latest is {latest}")
    return f"{version} ({'; '.join(details)})"
