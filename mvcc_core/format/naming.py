"""Where every object of a table lives, and the two manifest naming schemes of the specification.

V1 names a manifest `{version}.manifest`; V2 names it `{u64::MAX - version:020}.manifest`, so the
newest version sorts first and "latest" is one LIST request with MaxKeys=1. The scheme of an existing
table is detected from the names on disk, never configured on read.
"""

from __future__ import annotations

import enum
import uuid

U64_MAX = 2**64 - 1

VERSIONS_DIR = "_versions"
TRANSACTIONS_DIR = "_transactions"
DATA_DIR = "data"
DELETIONS_DIR = "_deletions"
INDICES_DIR = "_indices"
#: Branch refs and tags live under this folder.
REFS_DIR = "_refs"
TAGS_DIR = "_refs/tags"

MANIFEST_SUFFIX = ".manifest"
_V2_DIGITS = 20


class ManifestNaming(enum.Enum):
    V1 = "v1"
    V2 = "v2"

    @classmethod
    def parse(cls, value: str | ManifestNaming) -> ManifestNaming:
        """The naming scheme given by name ('v1'/'v2', any case) or already as a ManifestNaming.

        Args:
            value: the scheme the user asked for

        Raises:
            ValueError: it is neither v1 nor v2
        """
        if isinstance(value, ManifestNaming):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ValueError(f"manifest_naming must be 'v1' or 'v2', got {value!r}") from None


def manifest_name(version: int, scheme: ManifestNaming) -> str:
    """The file name (without directory) of `version`'s manifest under `scheme`.

    Args:
        version: the table version
        scheme: the table's manifest naming scheme

    Raises:
        ValueError: the version is negative or too large
    """
    if version < 0 or version >= U64_MAX:
        raise ValueError(f"version {version} out of range")
    if scheme is ManifestNaming.V2:
        return f"{U64_MAX - version:0{_V2_DIGITS}d}{MANIFEST_SUFFIX}"
    return f"{version}{MANIFEST_SUFFIX}"


def manifest_path(version: int, scheme: ManifestNaming) -> str:
    """The path, relative to the table root, of `version`'s manifest under `scheme`.

    Args:
        version: the table version
        scheme: the table's manifest naming scheme
    """
    return f"{VERSIONS_DIR}/{manifest_name(version, scheme)}"


#: The newest version a manifest may have: its successor must have a name too.
MAX_VERSION = U64_MAX - 2


def parse_manifest_name(name: str) -> tuple[int, ManifestNaming] | None:
    """Version and scheme of a manifest file name; None for anything else (temp or staged files, and names
    of a version outside 0..MAX_VERSION: `manifest_name_out_of_range` tells those apart).

    Args:
        name: a file name or path listed under `_versions/`
    """
    name = name.rsplit("/", 1)[-1]
    if not name.endswith(MANIFEST_SUFFIX):
        return None
    stem = name[: -len(MANIFEST_SUFFIX)]
    if not stem.isdigit() or not stem.isascii():
        return None
    if len(stem) == _V2_DIGITS:
        version, scheme = U64_MAX - int(stem), ManifestNaming.V2
    elif stem.startswith("0") and stem != "0":
        return None
    else:
        version, scheme = int(stem), ManifestNaming.V1
    if not 0 <= version <= MAX_VERSION:
        return None
    return version, scheme


def manifest_name_out_of_range(name: str) -> bool:
    """True for a name shaped like a manifest's whose version is outside 0..MAX_VERSION (never committed by
    a writer: it is skipped by every listing).

    Args:
        name: a file name or path listed under `_versions/`
    """
    name = name.rsplit("/", 1)[-1]
    stem = name[: -len(MANIFEST_SUFFIX)] if name.endswith(MANIFEST_SUFFIX) else ""
    if not (stem.isdigit() and stem.isascii()) or (len(stem) != _V2_DIGITS and stem.startswith("0") and stem != "0"):
        return False
    return parse_manifest_name(name) is None


def transaction_path(read_version: int, txn_uuid: str) -> str:
    """The path, relative to the table root, of a transaction file.

    Args:
        read_version: the version the transaction was built on
        txn_uuid: the transaction's uuid
    """
    return f"{TRANSACTIONS_DIR}/{transaction_name(read_version, txn_uuid)}"


def transaction_name(read_version: int, txn_uuid: str) -> str:
    """The file name of a transaction file (under `_transactions/`).

    Args:
        read_version: the version the transaction was built on
        txn_uuid: the transaction's uuid
    """
    return f"{read_version}-{txn_uuid}.txn"


def new_data_file_name(prefix: str | None = None) -> str:
    """A data file name relative to `data/`; uuids keep concurrent writers apart. `prefix` (a write id)
    lets a distributed writer find every file of a failed write by listing, without its tasks' reports.

    Args:
        prefix: a write id the name starts with (None: a bare uuid)

    Raises:
        ValueError: the prefix has characters other than letters, digits, '-' and '_'
    """
    if prefix is None:
        return f"{uuid.uuid4().hex}.parquet"
    if not prefix or not all(c.isalnum() or c in "-_" for c in prefix):
        raise ValueError(f"a data file prefix is letters, digits, '-' and '_', got {prefix!r}")
    return f"{prefix}-{uuid.uuid4().hex}.parquet"


def data_file_path(name: str) -> str:
    """The path, relative to the table (or base) root, of a data file.

    Args:
        name: the file's name as the manifest records it
    """
    return f"{DATA_DIR}/{name}"


def deletion_file_path(fragment_id: int, read_version: int, file_id: int) -> str:
    """The path, relative to the table root, of a deletion file.

    Args:
        fragment_id: the fragment it belongs to
        read_version: the version its writer read
        file_id: its random id
    """
    return f"{DELETIONS_DIR}/{fragment_id}-{read_version}-{file_id}.bin"


def packed_deletion_file_path(read_version: int, file_id: int) -> str:
    """The path of a packed deletion file: the vectors of several fragments, written by one commit.

    Args:
        read_version: the version its writer read
        file_id: its random id
    """
    return f"{DELETIONS_DIR}/{read_version}-{file_id}.bin"


def tag_path(name: str) -> str:
    """The path, relative to the table root, of a tag's file.

    Args:
        name: the tag's name (already validated)
    """
    return f"{TAGS_DIR}/{name}.json"


# Singleton system indices: at most one per table, merged (rebased) when two transactions write one.
FRAG_REUSE_INDEX = "__lance_frag_reuse"
MEM_WAL_INDEX = "__lance_mem_wal"
SINGLETON_INDICES = frozenset({FRAG_REUSE_INDEX, MEM_WAL_INDEX})
