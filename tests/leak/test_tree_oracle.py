"""Item 4 of issue 28: the summary-tree check is not an oracle.

``no_restricted_text_in_nodes`` used to fail when a node merely *contained* a RESTRICTED
sentence: an open note quoting a guessed sentence inside a longer one blocked
publication when the guess was right and published when it was wrong. The fingerprints
are now RESTRICTED sentences (normalised) that occur nowhere in open text, so open
wording never decides whether a library publishes; a node that repeats RESTRICTED text
it was never given (a model that "knows" it) still blocks
(``tests/index/test_summary_tree.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.pipeline import build_library
from ragspine_index.steps.summary_tree import restricted_fingerprints
from ragspine_core.llm import OpenAICompatibleProvider

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "query" / "rerank"))
from llm_server import LocalChatServer  # noqa: E402

SECRET_SENTENCE = "The board will sell the Quillfeather plant to Heronsgate for twelve million"
WRONG_GUESS = "The board will sell the Quillfeather plant to Osprey Holdings for ten million"
BOILER = "Distribution of this document is governed by the group policy"


def _echo(request: dict | None) -> str:
    """A deterministic 'LLM' that repeats every passage it is given, in full."""
    user = [m for m in (request or {}).get("messages", []) if m.get("role") == "user"][-1]["content"]
    return " ".join(user.split("\n\n")[1:-1]) or "empty"


def _library(root: Path, guess: str) -> LibraryPaths:
    raw = root / "raw" / "lib"
    raw.mkdir(parents=True)
    topics = ["canteen menu", "parking spaces", "garden benches", "printer toner", "bicycle racks", "coffee beans",
              "meeting rooms", "window cleaning"]
    for i, topic in enumerate(topics):
        (raw / f"open{i}.md").write_text(
            f"---\nsensitivity: PUBLIC\n---\n# Note {i}\n\nThe {topic} were reviewed this week by facilities. "
            f"Staff asked about the {topic} again. {BOILER} and its annexes.\n", encoding="utf-8")
    (raw / "rumour.md").write_text(
        f"---\nsensitivity: PUBLIC\n---\n# Rumours\n\nAn analyst wrote that {guess.lower()}, citing nobody.\n",
        encoding="utf-8")
    (raw / "secret.md").write_text(
        f"---\nsensitivity: RESTRICTED\n---\n# Deal\n\n{SECRET_SENTENCE}. {BOILER}. Keep the talks quiet.\n",
        encoding="utf-8")
    (raw / "_library.toml").write_text('summarizer = "llm"\n', encoding="utf-8")
    return LibraryPaths("lib", raw, root / "art" / "lib")


def _publishes(root: Path, guess: str) -> bool:
    paths = _library(root, guess)
    with LocalChatServer(reply=_echo) as server:
        make_llm = lambda: OpenAICompatibleProvider(server.base_url, "local-test", timeout_s=10, max_retries=0)  # noqa: E731
        try:
            res = build_library(paths, embedding="none", cache_path=root / "cache" / "e.sqlite", make_llm=make_llm)
        except Exception as exc:  # noqa: BLE001 - the outcome itself is what is compared
            assert "no_restricted_text_in_nodes" in str(exc), exc
            return False
    nodes = pq.read_table(Path(res.snapshot_dir) / "summary_tree" / "nodes.parquet").column("text").to_pylist()
    assert nodes, "a tree was built"
    return True


def test_a_right_and_a_wrong_guess_publish_alike(tmp_path):
    right = _publishes(tmp_path / "right", SECRET_SENTENCE)
    wrong = _publishes(tmp_path / "wrong", WRONG_GUESS)
    assert right == wrong == True  # noqa: E712 - both publish: no signal either way


def test_fingerprints_are_whole_restricted_sentences_open_text_does_not_contain():
    restricted = [f"{SECRET_SENTENCE}. {BOILER}. Keep the talks quiet until the close."]
    quoted = [f"An analyst wrote that {SECRET_SENTENCE.upper()}, citing nobody.", f"{BOILER} and its annexes."]
    prints = restricted_fingerprints(restricted, quoted)
    assert prints == ["keep the talks quiet until the close"], prints
    prints = restricted_fingerprints(restricted, [f"{BOILER} and its annexes."])
    assert SECRET_SENTENCE.casefold() in prints and BOILER.casefold() not in prints
