"""Tiny ONNX models + tokenizers built by the tests, with numpy references of the same math.

No trained cross-encoder or SPLADE model ships in a PyPI package, so the rerankers'
mechanics (pair encoding, token types, truncation, padding, batching, pooling) are
checked on models small enough to recompute by hand.

* Tokenizer: WordLevel over ``VOCAB`` (lowercased, whitespace split), with the BERT
  template ``[CLS] A [SEP]`` / ``[CLS] A [SEP] B [SEP]`` and type ids 0/1.
* Cross-encoder: ``logit = tanh(masked_mean(E[ids] + T[types])) @ w + b``, output (batch, 1).
* SPLADE masked LM: ``logits = E[ids] @ V + c``, output (batch, seq, vocab); no token types.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
PAD, UNK, CLS, SEP = range(4)
WORDS = (
    "acme revenue fell rose profit margin quarter guidance china europe bank loan "
    "credit risk rate inflation growth sales cost supply chain outlook weak strong "
    "dividend cash debt equity market share price volume demand export"
).split()
VOCAB = SPECIALS + WORDS
DIM = 8


def word_ids(text: str) -> list[int]:
    index = {w: i for i, w in enumerate(VOCAB)}
    return [index.get(w, UNK) for w in text.lower().split()]


def build_tokenizer(path: Path) -> Path:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", CLS), ("[SEP]", SEP)],
    )
    tok.save(str(path))
    return path


def _weights(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "emb": rng.normal(size=(len(VOCAB), DIM)).astype(np.float32),
        "types": rng.normal(size=(2, DIM)).astype(np.float32),
        "w": rng.normal(size=(DIM, 1)).astype(np.float32),
        "b": np.array([0.25], dtype=np.float32),
        "vocab_proj": rng.normal(size=(DIM, len(VOCAB))).astype(np.float32),
        "vocab_bias": rng.normal(scale=0.5, size=(len(VOCAB),)).astype(np.float32),
    }


def _save(model, path: Path) -> None:
    import onnx

    model.ir_version = 9  # loadable by every onnxruntime the project supports
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def build_cross_encoder(model_dir: Path, seed: int = 7) -> dict[str, np.ndarray]:
    """Write ``model.onnx`` + ``tokenizer.json`` into ``model_dir``; return the weights."""
    from onnx import TensorProto, helper, numpy_helper

    model_dir.mkdir(parents=True, exist_ok=True)
    wts = _weights(seed)
    ints = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    inits = [
        numpy_helper.from_array(wts["emb"], "emb"),
        numpy_helper.from_array(wts["types"], "types"),
        numpy_helper.from_array(wts["w"], "w"),
        numpy_helper.from_array(wts["b"], "b"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "axis_last"),
    ]
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["tok_emb"]),
        helper.make_node("Gather", ["types", "token_type_ids"], ["type_emb"]),
        helper.make_node("Add", ["tok_emb", "type_emb"], ["hidden"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "axis_last"], ["mask3"]),
        helper.make_node("Mul", ["hidden", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask3", "axis1"], ["count"], keepdims=0),
        helper.make_node("Div", ["summed", "count"], ["mean"]),
        helper.make_node("Tanh", ["mean"], ["pooled"]),
        helper.make_node("MatMul", ["pooled", "w"], ["proj"]),
        helper.make_node("Add", ["proj", "b"], ["logits"]),
    ]
    graph = helper.make_graph(nodes, "tiny_cross_encoder", ints, [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    _save(model, model_dir / "model.onnx")
    build_tokenizer(model_dir / "tokenizer.json")
    return wts


def reference_cross_encoder(wts: dict[str, np.ndarray], query: str, passage: str, max_length: int = 512) -> float:
    """The tiny cross-encoder on one unpadded pair, passage truncated first (only_second)."""
    q, p = word_ids(query), word_ids(passage)
    p = p[: max(0, max_length - 3 - len(q))]
    ids = [CLS, *q, SEP, *p, SEP]
    types = [0] * (len(q) + 2) + [1] * (len(p) + 1)
    hidden = wts["emb"][ids].astype(np.float64) + wts["types"][types]
    pooled = np.tanh(hidden.mean(axis=0))
    return float(pooled @ wts["w"][:, 0] + wts["b"][0])


def build_splade(model_dir: Path, seed: int = 11) -> dict[str, np.ndarray]:
    """Write a tiny masked-LM ``model.onnx`` (inputs: input_ids, attention_mask) + tokenizer."""
    from onnx import TensorProto, helper, numpy_helper

    model_dir.mkdir(parents=True, exist_ok=True)
    wts = _weights(seed)
    ins = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])
        for name in ("input_ids", "attention_mask")
    ]
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", len(VOCAB)])
    inits = [
        numpy_helper.from_array(wts["emb"], "emb"),
        numpy_helper.from_array(wts["vocab_proj"], "vocab_proj"),
        numpy_helper.from_array(wts["vocab_bias"], "vocab_bias"),
    ]
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["hidden"]),
        # attention_mask is an input of real exports; the tiny graph reads it for shape only.
        helper.make_node("Shape", ["attention_mask"], ["mask_shape"]),
        helper.make_node("MatMul", ["hidden", "vocab_proj"], ["proj"]),
        helper.make_node("Add", ["proj", "vocab_bias"], ["logits"]),
    ]
    graph = helper.make_graph(nodes, "tiny_splade", ins, [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    _save(model, model_dir / "model.onnx")
    build_tokenizer(model_dir / "tokenizer.json")
    return wts


def reference_splade_vector(wts: dict[str, np.ndarray], text: str) -> np.ndarray:
    ids = [CLS, *word_ids(text), SEP]
    logits = wts["emb"][ids].astype(np.float64) @ wts["vocab_proj"] + wts["vocab_bias"]
    return np.log1p(np.maximum(logits, 0.0)).max(axis=0)


def reference_splade_score(wts: dict[str, np.ndarray], query: str, passage: str) -> float:
    return float(reference_splade_vector(wts, query) @ reference_splade_vector(wts, passage))
