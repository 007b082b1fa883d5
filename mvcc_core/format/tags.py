"""Tags: names for versions, stored as `_refs/tags/{name}.json`.

A tagged version is kept by retention. Tag names are validated so that a name can never escape the
tags directory or collide with a temporary file. A tag file is validated on read like a manifest: a JSON
object whose "version" is an int naming a possible version; anything else (a file in a subfolder, a name
that is no tag name, garbage) is a bad tag, raised as `CorruptTagError` when that tag is read and reported
(not raised) when every tag is listed, so one bad file never hides the others.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mvcc_core.errors import CorruptTagError, ObjectNotFoundError, TagError, TagVersionNotFoundError
from mvcc_core.format.invariants import path_problem
from mvcc_core.format.naming import MAX_VERSION, TAGS_DIR, tag_path
from mvcc_core.io import ObjectStore

log = logging.getLogger("mvcc.tags")

_TAG_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")


def validate_tag_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise TagError(f"tag name must be a non-empty string, got {name!r}")
    if "/" in name or "\\" in name or ".." in name or name.endswith(".") or not _TAG_NAME.match(name):
        raise TagError(
            f"invalid tag name {name!r}: use letters, digits, '_', '-' and '.', not starting with '.' or '-', "
            "without '..' or '/'"
        )
    if len(name) > 200:
        raise TagError(f"tag name {name[:20]!r}... is longer than 200 characters")


def decode_tag(data: bytes, where: str) -> int:
    """The version a tag file's bytes name; `CorruptTagError` naming `where` and the value otherwise.

    :param data: the tag file's bytes
    :param where: the tag file's location, for the error
    """
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptTagError(f"tag file {where} is not JSON: {exc}", path=where, value=data[:80]) from None
    if not isinstance(document, dict) or "version" not in document:
        raise CorruptTagError(
            f'tag file {where} holds no "version": {str(document)[:80]!r}', path=where, value=document
        )
    version = document["version"]
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= MAX_VERSION:
        raise CorruptTagError(
            f"tag file {where} names version {str(version)[:80]!r}: not a version number "
            f"(an integer from 1 to {MAX_VERSION})",
            path=where,
            value=version,
        )
    return version


@dataclass(frozen=True)
class TagListing:
    """Every tag of a table: `tags` the readable ones (name to version), `problems` each bad tag file
    (its path under the table to what is wrong with it)."""

    tags: dict[str, int]
    problems: dict[str, str]


class Tags:
    """`t.tags`: create, update, delete and list tags of one table (pylance's shape)."""

    def __init__(self, store: ObjectStore, version_exists: Callable[[int], bool]) -> None:
        self._store = store
        self._version_exists = version_exists

    def _check_version(self, name: str, version: int) -> None:
        if (
            not isinstance(version, int)
            or isinstance(version, bool)
            or version < 1
            or not self._version_exists(version)
        ):
            raise TagVersionNotFoundError(f"cannot tag {name!r}: table {self._store.uri} has no version {version!r}")

    @staticmethod
    def _encode(version: int) -> bytes:
        return json.dumps({"version": version}).encode()

    def create(self, name: str, version: int) -> None:
        validate_tag_name(name)
        self._check_version(name, version)
        if not self._store.put_if_not_exists(tag_path(name), self._encode(version)):
            raise TagError(f"tag {name!r} already exists on {self._store.uri}; use tags.update to move it")

    def _check_exists(self, name: str) -> None:
        """`TagError` unless the tag's file exists (whether or not it reads: a bad tag may be moved or deleted)."""
        validate_tag_name(name)
        if not self._store.exists(tag_path(name)):
            raise TagError(f"table {self._store.uri} has no tag {name!r}")

    def update(self, name: str, version: int) -> None:
        """Move the tag `name` to `version` (a tag whose file does not read is rewritten)."""
        self._check_exists(name)
        self._check_version(name, version)
        self._store.put(tag_path(name), self._encode(version))

    def delete(self, name: str) -> None:
        """Delete the tag `name` (a tag whose file does not read too).

        A bad tag file that no valid name reaches, one in a subfolder (`_refs/tags/sub/n.json`, listed by
        `read_all` as a problem), is deleted by its name under `_refs/tags/` without `.json` (`"sub/n"`): a
        plain relative path, never one that leaves the tags folder.
        """
        try:
            self._check_exists(name)
        except TagError:
            if not self._nested_bad_tag(name):
                raise
        self._store.delete_many([tag_path(name)])

    def _nested_bad_tag(self, name: str) -> bool:
        """True when `name` is a plain relative path with a '/' (no '..', '.', empty segment, backslash or
        scheme) whose tag file exists: a tag in a subfolder, which only `delete` accepts."""
        if not isinstance(name, str) or "/" not in name or path_problem(f"{name}.json") is not None:
            return False
        return self._store.exists(tag_path(name))

    def get_version(self, name: str) -> int:
        validate_tag_name(name)
        try:
            data = self._store.get(tag_path(name))
        except ObjectNotFoundError:
            raise TagError(f"table {self._store.uri} has no tag {name!r}") from None
        return decode_tag(data, f"{self._store.uri}/{tag_path(name)}")

    def read_all(self) -> TagListing:
        """Every readable tag, and every bad tag file with its problem (none of them raises)."""
        found: dict[str, int] = {}
        problems: dict[str, str] = {}
        for meta in self._store.list(TAGS_DIR):
            if not meta.path.endswith(".json"):
                continue  # temporary files of a put
            name = meta.path[len(TAGS_DIR) + 1 : -len(".json")]
            try:
                validate_tag_name(name)  # refuses a file in a subfolder: its name holds a "/"
                found[name] = decode_tag(self._store.get(meta.path), f"{self._store.uri}/{meta.path}")
            except ObjectNotFoundError:
                continue  # deleted while we listed
            except TagError as exc:
                problems[meta.path] = str(exc)
        return TagListing(dict(sorted(found.items())), problems)

    def list_ordered(self, order: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """pylance's `list_ordered`: `(name, {"version": n})` pairs by version, newest first ("desc", the
        default) or oldest first ("asc"); tags on the same version by name.

        Args:
            order: "desc" (default) or "asc".

        Returns:
            The readable tags, ordered.

        Raises:
            ValueError: `order` is neither.
        """
        if order not in (None, "asc", "desc"):
            raise ValueError(f"order must be 'asc' or 'desc', got {order!r}")
        pairs = sorted(self.list().items(), key=lambda item: (item[1]["version"], item[0]))
        return pairs if order == "asc" else pairs[::-1]

    def list(self) -> dict[str, dict[str, Any]]:
        """{name: {"version": n}} for every readable tag; a bad tag file is logged as a warning and left out
        (`read_all` returns the bad ones too)."""
        listing = self.read_all()
        for path, problem in listing.problems.items():
            log.warning("%s/%s: bad tag left out: %s", self._store.uri, path, problem)
        return {name: {"version": version} for name, version in listing.tags.items()}
