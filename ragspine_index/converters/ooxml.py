"""Properties every Office Open XML package (DOCX, PPTX, XLSX) carries.

``docProps/core.xml`` (title, subject, keywords, category, status, description) and
``docProps/custom.xml`` (custom properties, where Microsoft Purview sensitivity labels
live as ``MSIP_Label_<id>_Name``), read with defusedxml when it is installed (the
stdlib parser otherwise: expat refuses external entities and, from 2.4, entity-expansion
bombs). The package was size-checked by :func:`~.base.check_zip` first.
"""

from __future__ import annotations

import zipfile
from io import BytesIO

from ragspine_index.converters.converted import clean_line

_CORE_FIELDS = ("title", "subject", "keywords", "category", "contentStatus", "description")


def _parse_xml(raw: bytes):
    try:
        from defusedxml.ElementTree import fromstring
    except ImportError:  # pragma: no cover - defusedxml ships with the formats extra
        from xml.etree.ElementTree import fromstring
    return fromstring(raw)


def package_properties(data: bytes) -> tuple[tuple[str, str], ...]:
    """``(name, value)`` of the core and custom properties that hold text, in file order."""
    out: list[tuple[str, str]] = []
    with zipfile.ZipFile(BytesIO(data)) as archive:
        names = set(archive.namelist())
        if "docProps/core.xml" in names:
            root = _safe_root(archive.read("docProps/core.xml"))
            if root is not None:
                for el in root:
                    local = el.tag.rsplit("}", 1)[-1]
                    if local in _CORE_FIELDS and (el.text or "").strip():
                        out.append((local, clean_line(el.text)))
        if "docProps/custom.xml" in names:
            root = _safe_root(archive.read("docProps/custom.xml"))
            if root is not None:
                for prop in root:
                    name = prop.get("name") or ""
                    value = " ".join(clean_line(child.text or "") for child in prop).strip()
                    if name and value:
                        out.append((name, value))
    return tuple(out)


def _safe_root(raw: bytes):
    try:
        return _parse_xml(raw)
    except Exception:  # noqa: BLE001 - damaged or hostile XML: no properties from it
        return None
