"""E-mail (``.eml``, RFC 5322/MIME) with the standard library's :mod:`email`: the message
is one document, each attachment of a readable type another.

The message's text is its headers (``Subject``, ``From``, ``To``, ``Cc``, ``Date``) and
its body (the plain-text part, else the HTML part read like an HTML file), one region
``part=1``; it ends with the list of attachments. Each attachment whose suffix a converter
reads (PDF, DOCX, … and ``.txt``/``.md`` as text) becomes its own document
(:attr:`Converted.parts`), cited as ``mail.eml#part=2&page=3&chars=…`` (the MIME part in
walk order, then the attachment's own place). Attachments of other types (archives,
programs, nested messages) are listed in the message by name and not read. Nothing in a
message is run or fetched (remote images, links).

The headers that name a sensitivity (Outlook's ``Sensitivity``, ``msip_labels``,
``X-Classification``…) and the subject are properties, checked like a document's.
"""

from __future__ import annotations

import email
import email.policy
from email.message import EmailMessage

from typing import Callable

from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted, TextBuilder, clean_line

VERSION = "1"
EXTRA_MODULE = ""  # the standard library
_SHOWN_HEADERS = ("Subject", "From", "To", "Cc", "Date")
_PROPERTY_HEADERS = ("subject", "keywords", "sensitivity", "msip_labels", "x-classification", "x-sensitivity",
                     "classification")
#: How many attachments are read at most (a mail bomb is one located error).
MAX_ATTACHMENTS = 200
#: ``(name, payload, part number, limits) -> Converted | None``: reads one attachment by its
#: suffix. The format registry hands its own (``converter_registry.read_attachment``), so a
#: container's converter needs no import of the registry that lists it.
AttachmentReader = Callable[[str, bytes, int, ConversionLimits], "Converted | None"]


def convert_eml(data: bytes, limits: ConversionLimits, *,
                read_attachment: AttachmentReader) -> Converted:
    try:
        message = email.message_from_bytes(data, policy=email.policy.default)
    except Exception as exc:  # noqa: BLE001 - the parser is lenient; anything it raises is a damaged file
        raise ConversionError(f"cannot be read as an e-mail message ({type(exc).__name__})",
                              "save the message again as .eml") from exc
    if not isinstance(message, EmailMessage) or not any(message.get(h) for h in ("From", "Subject", "Date", "To")):
        raise ConversionError("is not an e-mail message (no From, To, Subject or Date header)",
                              "save the message again as .eml, or give the file its own suffix")
    lines = [f"{name}: {clean_line(str(message.get(name)))}" for name in _SHOWN_HEADERS if message.get(name)]
    body = _body_text(message, limits)
    attachments = list(message.iter_attachments())
    if len(attachments) > MAX_ATTACHMENTS:
        raise ConversionError(f"has {len(attachments):,} attachments (limit {MAX_ATTACHMENTS})", "split it",
                              field="limits")
    parts: list[tuple[str, str, Converted]] = []
    listed: list[str] = []
    for number, part in enumerate(attachments, start=2):
        name = clean_line(part.get_filename() or "") or f"part-{number}"
        payload = part.get_payload(decode=True)
        converted = read_attachment(name, payload if isinstance(payload, bytes) else b"", number, limits)
        if converted is None:
            listed.append(f"- {name} (part {number}, not read)")
            continue
        parts.append((f"part={number}", name, converted))
        listed.append(f"- {name} (part {number})")
    out = TextBuilder(limits)
    block = "\n".join(lines) + ("\n\n" + body if body.strip() else "")
    if listed:
        block += "\n\nAttachments:\n" + "\n".join(listed)
    out.add(block, "part=1")
    properties = tuple((key, clean_line(str(value))) for key, value in message.items()
                       if key.lower() in _PROPERTY_HEADERS or "classification" in key.lower()
                       or "sensitivity" in key.lower())
    return Converted(text=out.text(), regions=tuple(out.regions), properties=properties,
                     title=clean_line(str(message.get("Subject") or "")), parts=tuple(parts))


def _body_text(message: EmailMessage, limits: ConversionLimits) -> str:
    from ragspine_index.converters.html import convert_html

    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, UnicodeError, ValueError) as exc:  # an unknown charset, a damaged transfer encoding
        raise ConversionError(f"its body cannot be decoded ({type(exc).__name__})",
                              "save the message again as .eml (UTF-8)", field="encoding") from exc
    if part.get_content_subtype() == "html":
        try:
            return convert_html(str(content).encode("utf-8"), limits).text
        except ConversionError:
            return ""
    return "\n".join(line.rstrip() for line in str(content).replace("\r\n", "\n").split("\n")).strip()


def text_part(payload: bytes, limits: ConversionLimits) -> Converted:
    from ragspine_index.source_documents.encoding import decode_text

    text = decode_text(payload, "attachment")
    if not isinstance(text, str):
        raise ConversionError("is not UTF-8 text", "attach it as UTF-8", field="encoding")
    out = TextBuilder(limits)
    out.add(text.replace("\r\n", "\n").strip())
    if not out.text().strip():
        raise ConversionError("is empty", "remove the attachment", field="body")
    return Converted(text=out.text())
