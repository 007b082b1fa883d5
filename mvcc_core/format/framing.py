"""A checksummed envelope around serialized protobuf messages (manifests, transaction files).

A truncated protobuf can still parse as a valid but shorter message, so a reader cannot rely on the
decoder to notice a torn or corrupt file. Every file ends with a 16-byte footer: CRC32 of the
payload, payload length, and a magic number. See docs/reference/format.md.
"""

from __future__ import annotations

import struct
import zlib

MAGIC = b"MVC1"
_FOOTER = struct.Struct("<IQ4s")


class FramingError(ValueError):
    """The bytes are not a complete, intact envelope."""


def frame(payload: bytes) -> bytes:
    """The payload followed by a footer with its CRC-32, its length and the magic bytes.

    Args:
        payload: the encoded bytes to store (a manifest, a transaction, a tag)
    """
    return payload + _FOOTER.pack(zlib.crc32(payload), len(payload), MAGIC)


def unframe(data: bytes) -> bytes:
    """The payload of a framed file, after checking its footer.

    Args:
        data: the whole file as read from the store

    Raises:
        FramingError: the file is too short, has no magic, a wrong length or a wrong checksum (truncated or not an mvcc
            file)
    """
    if len(data) < _FOOTER.size:
        raise FramingError(f"file is {len(data)} bytes, shorter than its {_FOOTER.size}-byte footer")
    crc, length, magic = _FOOTER.unpack_from(data, len(data) - _FOOTER.size)
    if magic != MAGIC:
        raise FramingError(f"bad magic {magic!r} (expected {MAGIC!r}): truncated or not an mvcc file")
    payload = data[: -_FOOTER.size]
    if length != len(payload):
        raise FramingError(f"payload is {len(payload)} bytes, footer says {length}")
    if zlib.crc32(payload) != crc:
        raise FramingError("checksum mismatch")
    return payload
