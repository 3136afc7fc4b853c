"""The embedder: the shipped model and tokenizer load, pinned, and embed by meaning."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lcm.errors import SemanticUnavailable
from lcm.semantic import embedder as embedder_module
from lcm.semantic.embedder import DIMENSION, MODEL_NAME, load_embedder


def test_embed_returns_unit_float32_rows_of_the_model_dimension() -> None:
    embedder = load_embedder()
    assert embedder.model_name == MODEL_NAME
    assert embedder.dimension == DIMENSION == 384
    vectors = embedder.embed(["the deploy failed on the staging cluster", "", "x " * 2000])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


def test_the_embedder_is_loaded_once_per_process() -> None:
    assert load_embedder() is load_embedder()


def test_the_models_threads_do_not_spin_while_they_wait() -> None:
    """Spinning threads would take the cores the grep's statements run on next."""
    options = load_embedder()._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_a_paraphrase_is_nearer_than_an_unrelated_text() -> None:
    query, paraphrase, unrelated = load_embedder().embed(
        [
            "my car would not start this morning",
            "the vehicle refused to turn over when I tried to drive to work",
            "we adopted a kitten from the shelter last week",
        ]
    )
    assert float(query @ paraphrase) > float(query @ unrelated) + 0.2


def test_batching_does_not_change_a_vector() -> None:
    embedder = load_embedder()
    texts = [f"note number {i} about the quarterly budget" for i in range(40)]
    together = embedder.embed(texts)
    alone = embedder.embed([texts[35]])
    np.testing.assert_allclose(together[35], alone[0], atol=1e-4)


def test_a_model_file_that_does_not_match_its_pin_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(embedder_module, "MODEL_SHA256", "0" * 64)
    with pytest.raises(SemanticUnavailable, match="sha256"):
        embedder_module._load()


def test_a_missing_tokenizer_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(embedder_module, "TOKENIZER_PATH", tmp_path / "tokenizer.json")
    with pytest.raises(SemanticUnavailable, match=r"tokenizer\.json"):
        embedder_module._load()


def test_without_the_extra_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = embedder_module.import_module

    def missing(name: str, *args: Any) -> Any:
        if name == "onnxruntime":
            raise ModuleNotFoundError("No module named 'onnxruntime'", name="onnxruntime")
        return real(name, *args)

    monkeypatch.setattr(embedder_module, "import_module", missing)
    with pytest.raises(SemanticUnavailable, match=r"lcm-server\[semantic\]") as caught:
        embedder_module._load()
    assert caught.value.code == "semantic_unavailable"
    assert not embedder_module.semantic_installed()


def test_threads_embedding_at_once_get_the_vectors_one_thread_gets() -> None:
    embedder = load_embedder()
    texts = [[f"thread {t} text {i} about invoices" for i in range(8)] for t in range(4)]
    alone = [embedder.embed(batch) for batch in texts]
    together: dict[int, Any] = {}
    barrier = threading.Barrier(4)

    def run(t: int) -> None:
        barrier.wait(10)
        together[t] = embedder.embed(texts[t])

    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for t in range(4):
        np.testing.assert_allclose(together[t], alone[t], atol=1e-5)


def test_texts_batched_by_length_come_back_in_the_order_given() -> None:
    embedder = load_embedder()
    long = "the release notes list every change to the storage layer " * 15
    texts = [
        long,
        "my car would not start this morning",
        long[:400] + " and the backup job",
        "we adopted a kitten from the shelter",
        "the quarterly budget review moved to Thursday",
        long[:200] + " while the cache warmed",
    ] * 7
    together = embedder.embed(texts)  # 42 texts: two batches, each of like lengths
    alone = np.concatenate([embedder.embed([t]) for t in texts[:6]])
    similarity = together[:6] @ alone.T
    # int8 activations are quantised per batch, so equal means nearly equal
    assert list(similarity.argmax(axis=1)) == list(range(6))
    assert float(np.diag(similarity).min()) > 0.99
    np.testing.assert_allclose(together[6:12], together[:6], atol=1e-3)
