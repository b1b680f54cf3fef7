"""A checkpoint with one flipped bit, the damage only its CRCs reveal (torch's reader loads it)."""
import struct
import zipfile
from pathlib import Path


def flipped_copy(source: Path, target: Path) -> Path:
    """``source`` (torch's zip format) with one bit flipped in the middle of its largest member's
    stored bytes (a tensor), the zip directory and every name untouched; written at ``target``."""
    data = bytearray(Path(source).read_bytes())
    with zipfile.ZipFile(source) as archive:
        member = max(archive.infolist(), key=lambda info: info.file_size)
    name_length, extra_length = struct.unpack("<HH", data[member.header_offset + 26:member.header_offset + 30])
    start = member.header_offset + 30 + name_length + extra_length  # after the local file header
    data[start + member.file_size // 2] ^= 0x10
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(bytes(data))
    return target
