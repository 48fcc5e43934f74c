"""Binary payloads: telling bytes from text, and naming a format by its magic bytes.

Tested through ``explore`` in tests/brain/payloads/test_explore.py
(binary inputs, and the never-raises properties).
"""

from __future__ import annotations

import re
from typing import Final

from brain.payloads.explore.summary import human_size

_BINARY_SAMPLE: Final = 8192
_CONTROL_BYTES: Final = bytes(b for b in range(32) if b not in b"\t\n\r\x0b\x0c\x1b") + b"\x7f"
_ESCAPED: Final = re.compile("[\udc80-\udcff]")  # undecodable bytes under surrogateescape
_MAGIC: Final = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF8", "GIF image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"\x1f\x8b", "gzip data"),
    (b"BZh", "bzip2 data"),
    (b"\xfd7zXZ\x00", "xz data"),
    (b"\x28\xb5\x2f\xfd", "zstd data"),
    (b"\x7fELF", "ELF executable"),
    (b"\x00asm", "WebAssembly module"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"OggS", "Ogg media"),
    (b"MZ", "Windows executable"),
)


def is_binary(data: bytes) -> bool:
    """True when ``data`` is not text, what ``explore`` reports as binary: a NUL byte,
    or over a tenth invalid UTF-8 or control bytes, in the first 8 KiB."""
    sample = data[:_BINARY_SAMPLE]
    if b"\x00" in sample:
        return True
    if len(data) > _BINARY_SAMPLE:
        # Drop a character the sample edge cut in two: back over continuation bytes to its lead.
        lead = len(sample) - 1
        while lead > len(sample) - 4 and sample[lead] & 0xC0 == 0x80:
            lead -= 1
        if sample[lead] >= 0xC0:
            sample = sample[:lead]
    invalid = len(_ESCAPED.findall(sample.decode("utf-8", "surrogateescape")))
    control = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    return (invalid + control) * 10 > len(sample)


def binary_lines(data: bytes) -> list[str]:
    """A binary payload's lines: format (by magic bytes) and size, hex and ASCII of its head."""
    what = next((name for magic, name in _MAGIC if data.startswith(magic)), "Binary data")
    head = data[:32]
    ascii_view = "".join(chr(b) if 32 <= b < 127 else "." for b in head)
    return [f"{what}, {human_size(len(data))}", f"hex: {head.hex(' ')}", f"ascii: {ascii_view}"]
