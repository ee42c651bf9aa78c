"""Outlook messages (``.msg``: an OLE compound file of MAPI properties) with olefile (BSD,
pure Python), shaped like an e-mail (:mod:`.eml`): the message (``Subject``, ``From``,
``To``, ``Cc``, ``Date``, the plain-text body, else the HTML one, the attachment list) is
one document citing ``part=1``; each attachment a converter reads is a document of its
own citing ``mail.msg#part=2&…`` (``part=N+1`` for the N-th attachment storage).

Outlook's ``Sensitivity`` (``Personal``, ``Private``, ``Company-Confidential``) is a
property, checked like a document's. extract-msg would do this too but is GPL-3.0;
embedded messages are listed, not read.
"""

from __future__ import annotations

import datetime as _dt
import struct
from io import BytesIO

from ragspine_index.converters.converted import OLE_MAGIC, ConversionError, ConversionLimits, Converted, TextBuilder, clean_line
from ragspine_index.converters.eml import MAX_ATTACHMENTS, AttachmentReader

VERSION = "1"
EXTRA_MODULE = "olefile"
_SENSITIVITY = {1: "Personal", 2: "Private", 3: "Company-Confidential"}


def _string(ole, storage: list[str], prop: str) -> str:
    """A string property (``0037`` → subject) of ``storage``: UTF-16 (``001F``) or 8-bit (``001E``)."""
    for suffix, codec in (("001F", "utf-16-le"), ("001E", "cp1252")):
        path = [*storage, f"__substg1.0_{prop}{suffix}"]
        if ole.exists("/".join(path)):
            return ole.openstream(path).read().decode(codec, "replace").rstrip("\x00")
    return ""


def _binary(ole, storage: list[str], prop: str) -> bytes:
    path = [*storage, f"__substg1.0_{prop}0102"]
    return ole.openstream(path).read() if ole.exists("/".join(path)) else b""


def _fixed(ole, header: int) -> dict[int, bytes]:
    """The fixed-size properties of the top-level ``__properties_version1.0`` stream: id → 8 bytes."""
    if not ole.exists("__properties_version1.0"):
        return {}
    raw = ole.openstream("__properties_version1.0").read()
    out = {}
    for i in range(header, len(raw) - 15, 16):
        tag = struct.unpack_from("<I", raw, i)[0]
        out[tag >> 16] = raw[i + 8:i + 16]
    return out


def convert_msg(data: bytes, limits: ConversionLimits, *,
                read_attachment: AttachmentReader) -> Converted:
    import olefile

    if not data.startswith(OLE_MAGIC):
        raise ConversionError("is not an Outlook message (not an OLE compound file)",
                              "save it again from Outlook as .msg, or give the file its own suffix")
    try:
        ole = olefile.OleFileIO(BytesIO(data))
        subject = _string(ole, [], "0037")
        if not (subject or ole.exists("__substg1.0_1000001F") or ole.exists("__substg1.0_1000001E")
                or ole.exists("__substg1.0_10130102")):
            raise ConversionError("is not an Outlook message (no subject or body)",
                                  "save it again from Outlook as .msg")
        sender = _string(ole, [], "0C1A")
        address = _string(ole, [], "5D01") or _string(ole, [], "0C1F")
        to, cc = _string(ole, [], "0E04"), _string(ole, [], "0E03")
        body = _string(ole, [], "1000")
        html = _binary(ole, [], "1013") if not body.strip() else b""
        fixed = _fixed(ole, 32)
        storages = sorted({entry[0] for entry in ole.listdir() if entry[0].startswith("__attach_version1.0_#")})
        if len(storages) > MAX_ATTACHMENTS:
            raise ConversionError(f"has {len(storages):,} attachments (limit {MAX_ATTACHMENTS})", "split it",
                                  field="limits")
        attachments = [(_string(ole, [s], "3707") or _string(ole, [s], "3704"), _binary(ole, [s], "3701"))
                       for s in storages]
    except ConversionError:
        raise
    except Exception as exc:  # noqa: BLE001 - olefile raises many types for a damaged file
        raise ConversionError(f"cannot be read as an Outlook message ({type(exc).__name__}; damaged?)",
                              "save it again from Outlook as .msg") from exc
    if html:
        from ragspine_index.converters.html import convert_html

        try:
            body = convert_html(html, limits).text
        except ConversionError:
            body = ""
    lines = [f"Subject: {clean_line(subject)}"] if subject else []
    if sender or address:
        lines.append(f"From: {clean_line(sender)}" + (f" <{clean_line(address)}>" if address and address != sender else ""))
    lines += [f"{k}: {clean_line(v)}" for k, v in (("To", to), ("Cc", cc)) if clean_line(v)]
    sent = fixed.get(0x0039)
    if sent and any(sent):
        moment = _dt.datetime(1601, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(
            microseconds=struct.unpack("<Q", sent)[0] // 10)
        lines.append(f"Date: {moment.strftime('%a, %d %b %Y %H:%M:%S +0000')}")
    parts: list[tuple[str, str, Converted]] = []
    listed: list[str] = []
    for number, (name, payload) in enumerate(attachments, start=2):
        name = clean_line(name) or f"part-{number}"
        converted = read_attachment(name, payload, number, limits)
        if converted is None:
            listed.append(f"- {name} (part {number}, not read)")
            continue
        parts.append((f"part={number}", name, converted))
        listed.append(f"- {name} (part {number})")
    text = "\n".join(lines) + ("\n\n" + "\n".join(line.rstrip() for line in body.replace("\r\n", "\n").split("\n")).strip()
                               if body.strip() else "")
    if listed:
        text += "\n\nAttachments:\n" + "\n".join(listed)
    out = TextBuilder(limits)
    out.add(text, "part=1")
    properties: list[tuple[str, str]] = [("Subject", clean_line(subject))] if subject else []
    level = fixed.get(0x0036)
    if level and struct.unpack("<I", level[:4])[0] in _SENSITIVITY:
        properties.append(("Sensitivity", _SENSITIVITY[struct.unpack("<I", level[:4])[0]]))
    return Converted(text=out.text(), regions=tuple(out.regions), properties=tuple(properties),
                     title=clean_line(subject), parts=tuple(parts))
