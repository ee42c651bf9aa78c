"""Reclassification by similarity, not equality (issue 37): when the edit that marks a
document RESTRICTED also touches every sentence (a bullet added to a list note, a CSV
header cell renamed, a comma per sentence in a JSONL record whose doc_id changed), the old
open text is still recognised, by every consumer: rollback and retained snapshots, the
purge of derived caches (restricted_lineage) and the ANN rebuild rule."""

from __future__ import annotations

import json

import pytest

from ragspine_index.fingerprints import derived_from_restricted
from ragspine_index.purge import restricted_lineage
from ragspine_index.reclassification import unservable_count
from tests.leak.test_reclassification_history import Lib, _refused

LIST_NOTE = ("# Quillfeather deal points\n\n- Price twelve million euros payable at close\n"
             "- Board approval in the March meeting\n- Earn-out over three years for the founders\n"
             "- Talks kept quiet until the close\n")
CSV_OLD = ("supplier,price_eur,close,owner\nQuillfeather,12000000,March,board\nHeronsgate,4500000,June,cfo\n"
           "Osprey Metals,800000,July,procurement\n")
RECORD = ("Quillfeather will be acquired for twelve million euros in March. The founders receive an earn-out "
          "over three years. The board keeps the talks quiet until the close.")


def _commas(text: str) -> str:
    return " ".join(s.replace(" ", ", ", 1) for s in text.split(". "))


@pytest.mark.parametrize(("old", "new"), [
    (LIST_NOTE, LIST_NOTE + "- Integration team named in April\n"),
    (CSV_OLD, CSV_OLD.replace("price_eur", "price")),
    (RECORD, _commas(RECORD)),
])
def test_an_edited_copy_is_derived_and_an_unrelated_text_is_not(old, new):
    unrelated = "The office garden gets new benches in spring, and the canteen opens at eight on weekdays."
    assert derived_from_restricted([old, unrelated], [new], lambda: []) == [True, False]


def test_text_that_is_open_now_is_not_restricted():
    boiler = ("This document is distributed under the group's standard notice for staff and partners "
              "of the company in every region where it operates.")
    old = boiler + " The canteen opens at eight."
    restricted = boiler + " Quillfeather will be acquired for twelve million euros."
    assert derived_from_restricted([old], [restricted], lambda: [boiler + " The canteen opens at nine."]) == [False]


def _mark(lib: Lib, rel: str, old: str, new: str, *, sens_old: str = "PUBLIC") -> str:
    lib.write(rel, old.format(sens=sens_old))
    first = lib.build()
    assert "Quillfeather" in lib.served("Quillfeather")
    (lib.raw / rel).unlink()
    return first


def test_a_bullet_added_while_marking_blocks_the_rollback(tmp_path):
    lib = Lib(tmp_path)
    first = _mark(lib, "deal.md", "---\nsensitivity: {sens}\n---\n" + LIST_NOTE, "")
    lib.write("moved/deal-points.md", "---\nsensitivity: RESTRICTED\n---\n" + LIST_NOTE
              + "- Integration team named in April\n")
    lib.build()
    _refused(lib, first)


def test_a_renamed_csv_header_while_marking_blocks_the_rollback(tmp_path):
    lib = Lib(tmp_path)
    lib.write("deals.csv", CSV_OLD)
    first = lib.build()
    assert "Quillfeather" in lib.served("Quillfeather")
    (lib.raw / "deals.csv").unlink()  # moved (a new doc_id) while marked
    lib.write("closed/deals-2026.csv", CSV_OLD.replace("price_eur", "price"))
    lib.write("closed/deals-2026.csv.meta.toml", 'sensitivity = "RESTRICTED"\n')
    lib.build()
    _refused(lib, first)


def test_a_comma_per_sentence_and_a_new_doc_id_block_the_rollback_and_join_the_lineage(tmp_path):
    lib = Lib(tmp_path)
    lib.write("rows.jsonl", json.dumps({"doc_id": "deal-1", "sensitivity": "PUBLIC", "text": RECORD}) + "\n")
    first = lib.build()
    assert "Quillfeather" in lib.served("Quillfeather")
    lib.write("rows.jsonl", json.dumps({"doc_id": "deal-2", "sensitivity": "RESTRICTED", "text": _commas(RECORD)})
              + "\n")
    lib.build()
    folder = lib.paths.snapshots / first  # quarantined at publication, or unservable
    assert not folder.exists() or unservable_count(folder, lib.paths.chunk_store) >= 1
    lineage = restricted_lineage(lib.paths.chunk_store)
    assert any("twelve million euros in March." in t for t in lineage.texts), "the old open version is purged too"
    _refused(lib, first)
