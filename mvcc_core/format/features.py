"""Reader and writer feature flags carried by every manifest.

A reader refuses a manifest with a reader flag it does not know; a writer refuses to commit on top of
a manifest with a writer flag it does not know. New flags are added here, never renumbered.
"""

from __future__ import annotations

from mvcc_core.errors import UnsupportedFeatureError

# The table has deletion files (readers must apply them).
FLAG_DELETION_FILES = 1 << 0
# Rows carry stable row ids (issue: stable row ids).
FLAG_STABLE_ROW_IDS = 1 << 1
# Data files may live under named base paths.
FLAG_BASE_PATHS = 1 << 2
# Deletion vectors of several fragments may share one file (`DeletionFile.content_offset/content_size`).
FLAG_PACKED_DELETION_FILES = 1 << 3

FLAG_NAMES = {
    FLAG_DELETION_FILES: "deletion_files",
    FLAG_STABLE_ROW_IDS: "stable_row_ids",
    FLAG_BASE_PATHS: "base_paths",
    FLAG_PACKED_DELETION_FILES: "packed_deletion_files",
}

KNOWN_READER_FLAGS = FLAG_DELETION_FILES | FLAG_STABLE_ROW_IDS | FLAG_BASE_PATHS | FLAG_PACKED_DELETION_FILES
KNOWN_WRITER_FLAGS = FLAG_DELETION_FILES | FLAG_STABLE_ROW_IDS | FLAG_BASE_PATHS | FLAG_PACKED_DELETION_FILES


def describe(flags: int) -> list[str]:
    """The names of the feature flags set in `flags`, unknown bits named by their position.

    Args:
        flags: a manifest's reader or writer feature flags
    """
    names = []
    bit = 0
    while flags >> bit:
        if flags >> bit & 1:
            names.append(FLAG_NAMES.get(1 << bit, f"unknown flag bit {bit} (0x{1 << bit:x})"))
        bit += 1
    return names


def check_reader_flags(flags: int, where: str) -> None:
    """Refuse to read a table that needs reader features this mvcc lacks.

    Args:
        flags: the manifest's reader feature flags
        where: what is being read, for the error message (e.g. the manifest's path)

    Raises:
        UnsupportedFeatureError: a flag is set that this mvcc does not know
    """
    _refuse_unknown(flags & ~KNOWN_READER_FLAGS, where, "reader", "read it")


def check_writer_flags(flags: int, where: str) -> None:
    """Refuse to write to a table that needs writer features this mvcc lacks (UnsupportedFeatureError, as
    `check_reader_flags` for readers).

    Args:
        flags: the manifest's writer feature flags (a bit set)
        where: what is being written, for the message
    """
    _refuse_unknown(flags & ~KNOWN_WRITER_FLAGS, where, "writer", "write to it")


def _refuse_unknown(unknown: int, where: str, kind: str, action: str) -> None:
    if unknown:
        raise UnsupportedFeatureError(
            f"{where} needs {kind} features this mvcc does not support: {', '.join(describe(unknown))}; "
            f"upgrade mvcc to {action}"
        )
