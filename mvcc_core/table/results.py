"""What pylance's row-level changes return: `delete`'s and `update`'s result dicts with their counts as properties."""

from __future__ import annotations


class DeleteResult(dict):
    """pylance's result of `delete`: `{"num_deleted_rows": n}`."""

    @property
    def num_deleted_rows(self) -> int:
        """How many rows the delete removed."""
        return int(self["num_deleted_rows"])


class UpdateResult(dict):
    """pylance's result of `update`: `{"num_rows_updated": n}`."""

    @property
    def num_rows_updated(self) -> int:
        """How many rows the update changed."""
        return int(self["num_rows_updated"])
