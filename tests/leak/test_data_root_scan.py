"""Item 7 of issue 28: after a reclassification no store outside the data plane holds
RESTRICTED text (or a vector keyed by it).

docs/security.md lists every file of the data root that may hold RESTRICTED text; this
test reads that list, builds a library whose document is later moved, renamed and marked
RESTRICTED (with the LLM summarizer and LLM OpenIE extraction, so every cache is used),
and walks the whole data root. Before the fix the OpenIE cache kept the document's
triples, old ``work/relation_graph`` / ``work/embeddings`` folders kept its names and
vectors, and the embedding cache kept its ``entity:<name>`` and summary-node vectors.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sqlite3
import sys
from pathlib import Path

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.steps.chunk_embeddings import text_hash
from ragspine_index.pipeline import build_library
from ragspine_core.llm import OpenAICompatibleProvider
from tests.conftest import REPO_ROOT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "query" / "rerank"))
from llm_server import LocalChatServer  # noqa: E402

NAME = "Quillfeather Vantablue"
SECRET = (f"{NAME} signed the supply contract for the northern plant in Tromsdal. {NAME} will ship the first "
          f"battery lots in March under the codename Zephyrine Gambit. The {NAME} team reported strong demand.\n")
WINDOW = 24


def data_plane() -> list[str]:
    doc = (REPO_ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    block = doc.split("<!-- data-plane:", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    return [re.sub(r"<[a-z]+>", "*", line.strip()) for line in block.splitlines() if line.strip()]


def fingerprints() -> list[str]:
    flat = " ".join(SECRET.split())
    return sorted({flat[i:i + WINDOW] for i in range(0, len(flat) - WINDOW, 6)} | {"Zephyrine", "Vantablue", "Tromsdal"})


def _reply(request: dict | None) -> str:
    messages = (request or {}).get("messages", [])
    system = " ".join(m.get("content", "") for m in messages if m.get("role") == "system")
    user = [m for m in messages if m.get("role") == "user"][-1]["content"]
    if "triples" in system:
        names = re.findall(r"[A-Z][a-z]+(?: [A-Z][a-z]+)*", user)
        return json.dumps({"triples": [[names[0], "relates to", names[-1]]] if len(names) > 1 else []})
    return " ".join(" ".join(p.split()[:14]) for p in user.split("\n\n")[1:-1]) or "empty"


def _open_doc(i: int) -> str:
    topics = ["canteen menu", "parking spaces", "garden benches", "printer toner", "bicycle racks", "coffee beans",
              "meeting rooms", "window cleaning", "fire drills", "badge readers"]
    t = topics[i % len(topics)]
    return (f"---\nsensitivity: PUBLIC\n---\n# Note {i}\n\nThe {t} were reviewed by Facilities Office. "
            f"Staff asked Helga Brandt about the {t}. The {t} budget stays flat.\n")


def test_no_file_outside_the_data_plane_holds_restricted_text_after_reclassification(tmp_path):
    data = tmp_path / "data"
    raw = data / "raw" / "lib"
    raw.mkdir(parents=True)
    (raw / "_library.toml").write_text('summarizer = "llm"\ngraph_extractor = "llm"\n', encoding="utf-8")
    for i in range(10):
        (raw / f"open{i}.md").write_text(_open_doc(i), encoding="utf-8")
    (raw / "a").mkdir()
    (raw / "a" / "supplier.md").write_text(f"---\nsensitivity: PUBLIC\n---\n# Supplier\n\n{SECRET}", encoding="utf-8")
    paths = LibraryPaths("lib", raw, data / "artifacts" / "lib")
    cache = data / "cache" / "embeddings.sqlite"
    with LocalChatServer(reply=_reply) as server:
        make_llm = lambda: OpenAICompatibleProvider(server.base_url, "local-test", timeout_s=10, max_retries=0)  # noqa: E731
        build_library(paths, embedding="deterministic", cache_path=cache, make_llm=make_llm)
        openie = sqlite3.connect(data / "cache" / "openie.sqlite")
        assert any("Vantablue" in r[0] for r in openie.execute("SELECT triples FROM openie_cache")), "the name was extracted"
        openie.close()
        (raw / "a" / "supplier.md").unlink()
        (raw / "b").mkdir()
        (raw / "b" / "renamed.md").write_text(f"---\nsensitivity: RESTRICTED\n---\n# Memo\n\n{SECRET}", encoding="utf-8")
        build_library(paths, embedding="deterministic", cache_path=cache, make_llm=make_llm)

    allowed = data_plane()
    needles = [p.encode("utf-8") for p in fingerprints()]
    leaks, scanned = [], 0
    for folder, dirs, files in os.walk(data, followlinks=False):
        for name in files:
            path = Path(folder) / name
            rel = path.relative_to(data).as_posix()
            if path.is_symlink() or rel.startswith("raw/"):
                continue
            scanned += 1
            blob = path.read_bytes()
            if any(n in blob for n in needles) and not any(fnmatch.fnmatchcase(rel, pat) for pat in allowed):
                leaks.append(rel)
    assert scanned > 20
    assert not leaks, f"RESTRICTED text outside the documented data plane: {leaks}"
    # hashes: no cached vector of the document's index texts, its names or its summaries
    conn = sqlite3.connect(cache)
    cached = {r[0] for r in conn.execute("SELECT text_hash FROM embedding_cache")}
    conn.close()
    store = sqlite3.connect(paths.chunk_store)
    texts = [r[0] for r in store.execute("SELECT index_text FROM narrative_chunk WHERE text LIKE '%Vantablue%'")]
    store.close()
    assert texts and not ({text_hash(t) for t in texts} & cached)
    for name in (NAME, "Quillfeather", "Vantablue", "Zephyrine Gambit", "Tromsdal"):
        assert text_hash("entity:" + name) not in cached, f"an entity vector confirms the name {name!r}"
    assert (data / "cache" / "summaries.sqlite").is_file()
