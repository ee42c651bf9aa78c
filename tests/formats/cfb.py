"""A small writer of OLE compound files (MS-CFB version 3: 512-byte sectors, a mini stream
for streams under 4096 bytes), enough to write Outlook ``.msg`` files for the tests: no
library on the registries we use writes them. The reader under test (olefile) is the one
every Python tool uses."""

from __future__ import annotations

import struct

_FREE, _END, _FAT = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD
_NONE = 0xFFFFFFFF
_SECTOR, _MINI, _CUTOFF = 512, 64, 4096


def _key(name: str) -> tuple[int, str]:  # the order MS-CFB sorts siblings in
    return len(name), name.upper()


def write_cfb(streams: dict[str, bytes]) -> bytes:
    """``{"storage/stream": data}`` → the bytes of a compound file."""
    # the directory: entry 0 is the root; storages from the paths
    entries: list[dict] = [{"name": "Root Entry", "type": 5, "children": [], "data": b""}]
    index: dict[str, int] = {"": 0}
    for path in sorted(streams):
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            sub = "/".join(parts[:depth])
            if sub in index:
                continue
            is_stream = depth == len(parts)
            entries.append({"name": parts[depth - 1], "type": 2 if is_stream else 1, "children": [],
                            "data": streams[path] if is_stream else b""})
            index[sub] = len(entries) - 1
            entries[index["/".join(parts[:depth - 1])]]["children"].append(index[sub])
    # mini stream: small streams in 64-byte mini sectors
    mini = bytearray()
    minifat: list[int] = []
    for entry in entries:
        if entry["type"] == 2 and len(entry["data"]) < _CUTOFF:
            n = max(1, -(-len(entry["data"]) // _MINI))
            entry["start"] = len(minifat) if entry["data"] else _END
            if entry["data"]:
                minifat += [len(minifat) + i + 1 for i in range(n - 1)] + [_END]
                mini += entry["data"].ljust(n * _MINI, b"\0")
    # regular sectors: big streams, the mini stream, the mini FAT, the directory, then the FAT
    sectors: list[bytes] = []
    chains: list[tuple[int, int]] = []  # (first sector, count)

    def place(data: bytes) -> int:
        if not data:
            return _END
        n = -(-len(data) // _SECTOR)
        first = len(sectors)
        for i in range(n):
            sectors.append(data[i * _SECTOR:(i + 1) * _SECTOR].ljust(_SECTOR, b"\0"))
        chains.append((first, n))
        return first

    for entry in entries:
        if entry["type"] == 2 and len(entry["data"]) >= _CUTOFF:
            entry["start"] = place(entry["data"])
    entries[0]["start"] = place(bytes(mini))
    entries[0]["data"] = bytes(mini)
    minifat_bytes = b"".join(struct.pack("<I", v) for v in minifat)
    minifat_start = place(minifat_bytes.ljust(-(-len(minifat_bytes) // _SECTOR) * _SECTOR, b"\xff")) if minifat else _END
    n_minifat = -(-len(minifat_bytes) // _SECTOR)
    # sibling trees: each storage's children as a right-leaning chain in sorted order
    for entry in entries:
        entry.setdefault("left", _NONE)
        entry.setdefault("right", _NONE)
        entry.setdefault("child", _NONE)
    for entry in entries:
        kids = sorted(entry["children"], key=lambda i: _key(entries[i]["name"]))
        if kids:
            entry["child"] = kids[0]
            for a, b in zip(kids, kids[1:]):
                entries[a]["right"] = b
    directory = bytearray()
    for entry in entries:
        name = entry["name"].encode("utf-16-le") + b"\0\0"
        directory += name.ljust(64, b"\0") + struct.pack("<HBB", len(name), entry["type"], 1)
        directory += struct.pack("<III", entry["left"], entry["right"], entry["child"]) + bytes(16 + 4 + 16)
        directory += struct.pack("<IQ", entry.get("start", _END), len(entry["data"]))
    while len(directory) % _SECTOR:
        directory += (b"\0" * 64 + struct.pack("<HBB", 0, 0, 0) + struct.pack("<III", _NONE, _NONE, _NONE)
                      + bytes(36) + struct.pack("<IQ", _END, 0))
    dir_start = place(bytes(directory))
    # the FAT covers every sector, its own included
    n_fat = 1
    while (len(sectors) + n_fat) > n_fat * (_SECTOR // 4):
        n_fat += 1
    fat = [_FREE] * (n_fat * (_SECTOR // 4))
    for first, n in chains:
        for i in range(n):
            fat[first + i] = first + i + 1 if i < n - 1 else _END
    fat_start = len(sectors)
    for i in range(n_fat):
        fat[fat_start + i] = _FAT
    fat_bytes = b"".join(struct.pack("<I", v) for v in fat)
    for i in range(n_fat):
        sectors.append(fat_bytes[i * _SECTOR:(i + 1) * _SECTOR])
    assert n_fat <= 109
    header = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(16) + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)
    header += bytes(6) + struct.pack("<IIIIIIIII", 0, n_fat, dir_start, 0, _CUTOFF, minifat_start, n_minifat,
                                     _END, 0)
    header += b"".join(struct.pack("<I", fat_start + i) for i in range(n_fat)) + b"\xff\xff\xff\xff" * (109 - n_fat)
    assert len(header) == _SECTOR
    return header + b"".join(sectors)
