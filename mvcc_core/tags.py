"""Tags: names for versions, stored as `_refs/tags/{name}.json`.

A tagged version is kept by retention. Tag names are validated so that a name can never escape the
tags directory or collide with a temporary file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .errors import ObjectNotFoundError, TagError, VersionNotFoundError
from .naming import TAGS_DIR, tag_path
from .storage import ObjectStore

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
            raise VersionNotFoundError(f"cannot tag {name!r}: table {self._store.uri} has no version {version!r}")

    @staticmethod
    def _encode(version: int) -> bytes:
        return json.dumps({"version": version}).encode()

    def create(self, name: str, version: int) -> None:
        validate_tag_name(name)
        self._check_version(name, version)
        if not self._store.put_if_not_exists(tag_path(name), self._encode(version)):
            raise TagError(f"tag {name!r} already exists on {self._store.uri}; use tags.update to move it")

    def update(self, name: str, version: int) -> None:
        validate_tag_name(name)
        self.get_version(name)
        self._check_version(name, version)
        self._store.put(tag_path(name), self._encode(version))

    def delete(self, name: str) -> None:
        validate_tag_name(name)
        self.get_version(name)
        self._store.delete_many([tag_path(name)])

    def get_version(self, name: str) -> int:
        validate_tag_name(name)
        try:
            data = self._store.get(tag_path(name))
        except ObjectNotFoundError:
            raise TagError(f"table {self._store.uri} has no tag {name!r}") from None
        return int(json.loads(data)["version"])

    def list(self) -> dict[str, dict[str, Any]]:
        """{name: {"version": n}} for every tag."""
        out = {}
        for meta in self._store.list(TAGS_DIR):
            file_name = meta.path.rsplit("/", 1)[-1]
            if not file_name.endswith(".json"):
                continue
            name = file_name[: -len(".json")]
            out[name] = {"version": int(json.loads(self._store.get(tag_path(name)))["version"])}
        return dict(sorted(out.items()))
