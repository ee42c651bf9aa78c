"""Properties every Office Open XML package (DOCX, PPTX, XLSX) carries.

``docProps/core.xml`` (title, subject, keywords, category, status, description) and
``docProps/custom.xml`` (custom properties, where Microsoft Purview sensitivity labels
live as ``MSIP_Label_<id>_Name``), read with defusedxml when it is installed (the
stdlib parser otherwise: expat refuses external entities and, from 2.4, entity-expansion
bombs). A part the safe parser refuses is an error for the file (its label could not be
read), never silently skipped. A label that is enabled (``MSIP_Label_<id>_Enabled`` or
``docMetadata/LabelInfo.xml``) but whose name the file does not hold is reported as the
property :data:`~.converted.UNNAMED_LABEL_PROPERTY` (treated as restricted unless a
sidecar decides). The package was size-checked by :func:`~.base.check_zip` first.
"""

from __future__ import annotations

import zipfile
from io import BytesIO

from ragspine_index.converters.converted import LabelProperties, clean_line
from ragspine_index.converters.markings import label_ids, parse_part

_CORE_FIELDS = ("title", "subject", "keywords", "category", "contentStatus", "description")




def package_properties(data: bytes) -> tuple[tuple[str, str], ...]:
    """``(name, value)`` of the core and custom properties that hold text, in file order."""
    out: list[tuple[str, str]] = []
    with zipfile.ZipFile(BytesIO(data)) as archive:
        names = set(archive.namelist())
        if "docProps/core.xml" in names:
            root = parse_part(archive.read("docProps/core.xml"), "docProps/core.xml")
            for el in root:
                local = el.tag.rsplit("}", 1)[-1]
                if local in _CORE_FIELDS and (el.text or "").strip():
                    out.append((local, clean_line(el.text)))
        labels = LabelProperties()
        if "docProps/custom.xml" in names:
            root = parse_part(archive.read("docProps/custom.xml"), "docProps/custom.xml")
            for prop in root:
                name = prop.get("name") or ""
                labels.add(name, " ".join(clean_line(child.text or "") for child in prop).strip())
        labels.enabled.update(label_ids(archive))
    return (*out, *labels.pairs, *labels.unnamed())
