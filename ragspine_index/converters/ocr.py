"""OCR with Tesseract (Apache-2.0; Debian's ``tesseract-ocr`` with its ``eng`` and
``chi-sim`` data), run as a subprocess: a thin wrapper, as ``pytesseract`` is.

Used for the pages of a PDF that have no text layer but images (scanned pages) and for
image files (``.png``, ``.jpg``, ``.jpeg``). Each call gets the time left of the file's
budget as its timeout and a CPU-time limit, inherits the converter process's address-space
limit (:mod:`.isolation`), and runs single-threaded (``OMP_THREAD_LIMIT=1``) so a build
shares the machine. The languages are English plus Simplified Chinese when that data is
installed (``RAGSPINE_OCR_LANGS`` overrides, e.g. ``eng+fra``). Without the ``tesseract``
program a scanned PDF is an error that says OCR is not available and image files are
listed as skipped with the command that installs it. With the ``osd`` data installed (a
dependency of Debian's tesseract-ocr) a page is read with orientation detection, so a page
scanned sideways or upside down is turned before it is read (:func:`orientation_detection`).
Other scripts: ``RAGSPINE_OCR_LANGS=eng+ara`` with ``tesseract-ocr-ara`` installed, for example.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache

from ragspine_index.converters.converted import ConversionError, Deadline

from ragspine_index.machine import machine_settings

#: What to run to install the engine (docs/formats.md).
INSTALL_HINT = "apt-get install tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim"
#: Images above this many pixels are refused (a decompression bomb, or a poster).
MAX_PIXELS = 80_000_000
_PREFERRED = ("eng", "chi_sim")


def engine() -> tuple[str, str, str] | None:
    """``(program, version, languages)`` of the installed Tesseract, ``None`` when absent;
    the languages are this machine's ``ocr_langs`` (:mod:`ragspine_index.machine`) when set."""
    return _engine(machine_settings().ocr_langs)


@lru_cache(maxsize=4)
def _engine(wanted: str) -> tuple[str, str, str] | None:
    program = shutil.which("tesseract")
    if program is None:
        return None
    try:
        version = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30)
        listed = subprocess.run([program, "--list-langs"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    words = (version.stdout + version.stderr).split()
    number = words[1] if len(words) > 1 and words[0] == "tesseract" else "?"
    have = {line.strip() for line in listed.stdout.splitlines()[1:] if line.strip()}
    langs = wanted or "+".join(lang for lang in _PREFERRED if lang in have)
    if not langs:
        return None
    return program, number, langs


@lru_cache(maxsize=1)
def orientation_detection() -> bool:
    """Whether Tesseract's orientation and script detection data (``osd``, which Debian's
    tesseract-ocr depends on) is installed: pages are then read with ``--psm 1`` (layout
    analysis with OSD), which turns a page scanned sideways or upside down before reading it
    (``--psm 3`` reads such a page as garbage); else ``--psm 3``."""
    program = shutil.which("tesseract")
    if program is None:
        return False
    try:
        listed = subprocess.run([program, "--list-langs"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return "osd" in {line.strip() for line in listed.stdout.splitlines()[1:]}


engine.cache_clear = _engine.cache_clear  # type: ignore[attr-defined]  # what was found: found again


def available() -> bool:
    return engine() is not None


def lineage() -> str:
    found = engine()
    return f"tesseract {found[1]} ({found[2]})" if found else "tesseract"


#: A space Tesseract puts between two CJK characters (chi_sim writes 起 重 机 for 起重机):
#: Chinese and Japanese have no spaces between words, so it is removed.
_CJK = "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_CJK_SPACE = re.compile(f"(?<=[{_CJK}]) +(?=[{_CJK}])")


def join_cjk(text: str) -> str:
    """``text`` without the spaces OCR put between two CJK characters."""
    return _CJK_SPACE.sub("", text)


def ocr_image(image: bytes, deadline: Deadline, what: str) -> str:
    """The text Tesseract reads in ``image`` (PNG/JPEG/TIFF bytes)."""
    return join_cjk(_run(image, deadline, what, ()).decode("utf-8", "replace"))


@dataclass(frozen=True, slots=True)
class Reading:
    """What Tesseract found on an image: its text, and what its page layout analysis found
    (text regions, i.e. blocks; text lines; words holding a character) — the evidence that
    tells a picture without text (no region, or regions without a character) from a page
    whose words OCR read."""

    text: str
    regions: int
    lines: int
    words: int


def read_layout(image: bytes, deadline: Deadline, what: str) -> Reading:
    """``image`` read by Tesseract with its TSV output (one row per page, block, paragraph,
    line and word found by its layout analysis, each word with its confidence)."""
    rows = _run(image, deadline, what, ("tsv",)).decode("utf-8", "replace").splitlines()[1:]
    regions: set[tuple[str, ...]] = set()
    lines: dict[tuple[str, ...], list[str]] = {}
    words = 0
    for row in rows:
        cells = row.split("\t")
        if len(cells) < 12:
            continue
        level, block, paragraph, line = cells[0], cells[2], cells[3], cells[4]
        if level == "2":
            regions.add((block,))
        elif level == "4":
            lines.setdefault((block, paragraph, line), [])
        elif level == "5" and cells[11].strip():
            words += 1
            lines.setdefault((block, paragraph, line), []).append(cells[11].strip())
    text, last = [], None
    for key, found in lines.items():  # Tesseract writes them in reading order
        if found:
            if last is not None and key[:2] != last:
                text.append("")
            text.append(join_cjk(" ".join(found)))
            last = key[:2]
    return Reading("\n".join(text), len(regions), len(lines), words)


def _run(image: bytes, deadline: Deadline, what: str, config: tuple[str, ...]) -> bytes:
    found = engine()
    if found is None:
        raise ConversionError(f"{what} needs OCR, and OCR is not available (no tesseract program)",
                              f"install it ({INSTALL_HINT}), or index a copy with a text layer", field="ocr")
    program, _, langs = found
    psm = "1" if orientation_detection() else "3"
    seconds = max(1.0, deadline.left())

    def limit_cpu() -> None:  # pragma: no cover - runs in the child between fork and exec
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (int(seconds) + 1, int(seconds) + 2))

    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        proc = subprocess.run([program, "stdin", "stdout", "-l", langs, "--psm", psm, *config], input=image,
                              capture_output=True, timeout=seconds, env=env, preexec_fn=limit_cpu)
    except subprocess.TimeoutExpired as exc:
        raise ConversionError(f"OCR of {what} took longer than the time left ({seconds:.0f} s)",
                              "split the file, or raise the limit (RAGSPINE_CONVERT_SECONDS)", field="limits") from exc
    except OSError as exc:
        raise ConversionError(f"OCR of {what} could not run ({type(exc).__name__})",
                              f"check the tesseract installation ({INSTALL_HINT})", field="ocr") from exc
    if proc.returncode != 0:
        raise ConversionError(f"OCR of {what} failed (tesseract exit {proc.returncode}; an unreadable image?)",
                              "re-scan or re-export the image as PNG", field="ocr")
    return proc.stdout


def png_of(image) -> bytes:
    """A PIL image as PNG bytes (refused past :data:`MAX_PIXELS`)."""
    from io import BytesIO

    width, height = image.size
    if width * height > MAX_PIXELS:
        raise ConversionError(f"holds an image of {width}x{height} pixels (limit {MAX_PIXELS:,} pixels)",
                              "scale the scan down (300 dpi is plenty)", field="limits")
    out = BytesIO()
    if image.mode not in ("1", "L", "RGB", "RGBA", "LA", "P"):
        image = image.convert("RGB")
    image.save(out, "PNG")
    return out.getvalue()
