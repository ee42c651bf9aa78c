"""The machine settings (ingest workers, OCR languages) come from the edge's Settings, not the environment."""

from __future__ import annotations

import shutil

import pytest

from ragspine_core.settings import Settings
from ragspine_index import machine
from ragspine_index.converters import ocr


@pytest.fixture
def restore():
    before = machine.machine_settings()
    yield
    machine.adopt_machine(before)


def test_configure_machine_takes_the_settings_fields(restore, monkeypatch):
    monkeypatch.setenv("RAGSPINE_OCR_LANGS", "deu")  # read by an edge only
    assert machine.configure_machine(Settings(ingest_workers=3, ocr_langs=" eng ")) == machine.MachineSettings(3, "eng")
    assert machine.machine_settings().ocr_langs == "eng"


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract is not installed")
def test_ocr_reads_with_the_configured_languages(restore):
    machine.configure_machine(Settings(ocr_langs="eng"))
    assert ocr.engine()[2] == "eng"
    machine.configure_machine(Settings(ocr_langs="eng+osd"))
    assert ocr.engine()[2] == "eng+osd"  # a new value is found again, not the cached one
