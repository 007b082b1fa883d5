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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mvcc_core import names
from mvcc_core.errors import CorruptTagError, ObjectNotFoundError, TagError, TagVersionNotFoundError
from mvcc_core.format.invariants import path_problem
from mvcc_core.format.naming import MAX_VERSION, TAGS_DIR, tag_path
from mvcc_core.io import ObjectStore

log = logging.getLogger("mvcc.tags")


def validate_tag_name(name: str) -> None:
    """Refuse a tag name that is not a safe file name (the rule: `mvcc_core.names.TAG`).

    Args:
        name: the tag name the user gave

    Raises:
        TagError: the name is empty, too long, starts with '_' or '.' (mvcc's own names) or has characters or
            segments a tag name cannot have
    """
    reason = names.problem(names.TAG, name)
    if reason is not None:
        raise TagError(reason)


def decode_tag(data: bytes, where: str) -> int:
    """The version a tag file's bytes name; `CorruptTagError` naming `where` and the value otherwise.

    Args:
        data: the tag file's bytes
        where: the tag file's location, for the error
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


def decode_tag_branch(data: bytes) -> str | None:
    """The branch a readable tag file's version belongs to (None: main; see `decode_tag` for its version).

    Args:
        data: The tag file's bytes.

    Returns:
        Its "branch", or None when it names none.
    """
    branch = json.loads(data).get("branch")
    return branch if isinstance(branch, str) and branch != "main" else None


@dataclass(frozen=True)
class TagListing:
    """Every tag of a table: `tags` the readable ones (name to version), `problems` each bad tag file
    (its path under the table to what is wrong with it), `branches` the branch of each tag on a branch's
    version (a tag of a main version is not in it)."""

    tags: dict[str, int]
    problems: dict[str, str]
    branches: dict[str, str] = field(default_factory=dict)

    def on_branch(self, branch: str | None) -> dict[str, int]:
        """The tags naming versions of `branch` (None: main).

        Args:
            branch: The branch.

        Returns:
            Tag name to version.
        """
        return {name: v for name, v in self.tags.items() if self.branches.get(name) == branch}


class Tags:
    """`t.tags`: create, update, delete and list tags of one table (pylance's shape).

    Tags are one namespace for the whole table; a tag of a branch's version records the branch (pylance's
    "branch" key). `branch` is the branch of the handle (its plain version numbers are that branch's);
    `branch_version_exists(branch, version)` checks a `(branch, version)` reference.

    Args:
        store: the table's store (its root)
        version_exists: tells whether the handle's branch has a version (a tag may only name an existing one)
        branch: the handle's branch (None: main); plain version numbers are that branch's
        branch_version_exists: tells whether `(branch, version)` exists, for tags naming another branch
    """

    def __init__(
        self,
        store: ObjectStore,
        version_exists: Callable[[int], bool],
        *,
        branch: str | None = None,
        branch_version_exists: Callable[[str | None, int], bool] | None = None,
    ) -> None:
        """The tags of one table, seen from one branch."""
        self._store = store
        self._version_exists = version_exists
        self._branch = branch
        self._branch_version_exists = branch_version_exists

    def _check_version(self, name: str, version: int | tuple[str | None, int]) -> tuple[str | None, int]:
        branch = self._branch
        exists = self._version_exists
        if isinstance(version, tuple) and len(version) == 2 and self._branch_version_exists is not None:
            branch, version = version[0] if version[0] != "main" else None, version[1]
            check = self._branch_version_exists
            exists = lambda v: check(branch, v)  # noqa: E731
        if not isinstance(version, int) or isinstance(version, bool) or version < 1 or not exists(version):
            where = f" branch {branch!r} of" if branch else ""
            raise TagVersionNotFoundError(
                f"cannot tag {name!r}:{where} table {self._store.uri} has no version {version!r}"
            )
        return branch, version

    @staticmethod
    def _on_branch(
        name: str, version: int | tuple[str | None, int], branch: str | None
    ) -> int | tuple[str | None, int]:
        """`version`, or `(branch, version)` when pylance's third argument names a branch."""
        if branch is None:
            return version
        if isinstance(version, tuple):
            raise TypeError(f"tag {name!r}: name the branch in the (branch, version) tuple or as branch=, not both")
        return (branch, version)

    @staticmethod
    def _encode(reference: tuple[str | None, int]) -> bytes:
        branch, version = reference
        return json.dumps({"version": version} if branch is None else {"branch": branch, "version": version}).encode()

    def create(self, name: str, version: int | tuple[str | None, int], branch: str | None = None) -> None:
        """Create tag `name` on `version` of the handle's branch, of `branch`, or on `(branch, version)`.

        pylance's `tags.create(tag, version, branch)` order.

        Args:
            name: The tag name.
            version: A version number, or (branch, version) (branch None: main).
            branch: The branch `version` is on (None: the handle's branch); not with a (branch, version) tuple.

        Raises:
            TagError: the tag exists already or the name is bad.
            VersionNotFoundError: no such version.
        """
        validate_tag_name(name)
        version = self._on_branch(name, version, branch)
        reference = self._check_version(name, version)
        if not self._store.put_if_not_exists(tag_path(name), self._encode(reference)):
            raise TagError(f"tag {name!r} already exists on {self._store.uri}; use tags.update to move it")

    def _check_exists(self, name: str) -> None:
        """`TagError` unless the tag's file exists (whether or not it reads: a bad tag may be moved or deleted)."""
        validate_tag_name(name)
        if not self._store.exists(tag_path(name)):
            raise TagError(f"table {self._store.uri} has no tag {name!r}")

    def update(self, name: str, version: int | tuple[str | None, int], branch: str | None = None) -> None:
        """Move the tag `name` to `version` or `(branch, version)` (a tag whose file does not read is rewritten).

        Args:
            name: The tag name.
            version: A version number of the handle's branch, or (branch, version).
            branch: The branch `version` is on (None: the handle's branch); not with a (branch, version) tuple.
        """
        self._check_exists(name)
        version = self._on_branch(name, version, branch)
        reference = self._check_version(name, version)
        self._store.put(tag_path(name), self._encode(reference))

    def delete(self, name: str) -> None:
        """Delete the tag `name` (a tag whose file does not read too).

        A bad tag file that no valid name reaches, one in a subfolder (`_refs/tags/sub/n.json`, listed by
        `read_all` as a problem), is deleted by its name under `_refs/tags/` without `.json` (`"sub/n"`): a
        plain relative path, never one that leaves the tags folder.

        Args:
            name: the tag's name

        Raises:
            TagError: there is no such tag
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
        """The version the tag `name` names.

        Args:
            name: the tag's name

        Raises:
            TagError: the name is invalid or there is no such tag
        """
        validate_tag_name(name)
        try:
            data = self._store.get(tag_path(name))
        except ObjectNotFoundError:
            raise TagError(f"table {self._store.uri} has no tag {name!r}") from None
        return decode_tag(data, f"{self._store.uri}/{tag_path(name)}")

    def get_reference(self, name: str) -> tuple[str | None, int]:
        """The (branch, version) tag `name` names (branch None: main).

        Args:
            name: The tag name.

        Returns:
            Its branch and version.

        Raises:
            TagError: no such tag (CorruptTagError: its file does not read).
        """
        version = self.get_version(name)
        return decode_tag_branch(self._store.get(tag_path(name))), version

    def read_all(self) -> TagListing:
        """Every readable tag, and every bad tag file with its problem (none of them raises)."""
        found: dict[str, int] = {}
        problems: dict[str, str] = {}
        branches: dict[str, str] = {}
        for meta in self._store.list(TAGS_DIR):
            if not meta.path.endswith(".json"):
                log.debug("%s/%s: skipped: not a tag file (a temporary file of a write)", self._store.uri, meta.path)
                continue
            name = meta.path[len(TAGS_DIR) + 1 : -len(".json")]
            if "/" not in name and names.problem(names.TAG, name) is not None:
                log.debug("%s/%s: skipped: %s", self._store.uri, meta.path, names.problem(names.TAG, name))
                continue  # not a tag name (e.g. a temporary file a killed write left): never a tag
            try:
                validate_tag_name(name)  # refuses a file in a subfolder: its name holds a "/"
                data = self._store.get(meta.path)
                found[name] = decode_tag(data, f"{self._store.uri}/{meta.path}")
                branch = decode_tag_branch(data)
                if branch is not None:
                    branches[name] = branch
            except ObjectNotFoundError:
                continue  # deleted while we listed
            except TagError as exc:
                problems[meta.path] = str(exc)
        return TagListing(dict(sorted(found.items())), problems, branches)

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
        return {
            name: {"version": version} | ({"branch": listing.branches[name]} if name in listing.branches else {})
            for name, version in listing.tags.items()
        }
