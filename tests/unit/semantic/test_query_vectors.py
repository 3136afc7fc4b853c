"""The prompt-vector LRU and the embedder's background load, with the real model."""

from __future__ import annotations

import threading

import pytest

from lcm.semantic import embedder as embedder_module
from lcm.semantic.embedder import embedder_if_loaded, load_embedder
from lcm.semantic.query_vectors import QueryVectors


def test_a_kept_vector_is_the_embedding_and_the_oldest_goes_first() -> None:
    model = load_embedder()
    vectors = QueryVectors(2)
    first = vectors.vector(model, "which port does the relay use", 5.0)
    assert first is not None
    assert (first == model.embed(["which port does the relay use"])[0]).all()
    vectors.vector(model, "second prompt", 5.0)
    vectors.vector(model, "which port does the relay use", 5.0)  # used again: newest
    vectors.vector(model, "third prompt", 5.0)
    kept = {text for _model, text in vectors._vectors}
    assert kept == {"which port does the relay use", "third prompt"}


def test_a_busy_model_is_not_waited_for_past_the_wait() -> None:
    model = load_embedder()
    vectors = QueryVectors(8)
    with embedder_module._run_lock:  # an embed job's batch holds the model
        assert vectors.vector(model, "a prompt while the model is busy", 0.01) is None
    assert vectors.vector(model, "a prompt while the model is busy", 5.0) is not None


def test_threads_asking_at_once_all_get_the_vector() -> None:
    """The LRU's lock: eight request threads reading and inserting together."""
    model = load_embedder()
    vectors = QueryVectors(4)
    texts = [f"prompt number {i % 6}" for i in range(48)]
    expected = {t: model.embed([t])[0] for t in set(texts)}
    failures: list[str] = []
    start = threading.Barrier(8)

    def ask(part: list[str]) -> None:
        start.wait()
        for text in part:
            got = vectors.vector(model, text, 5.0)
            if got is None or abs(got - expected[text]).max() > 1e-5:
                failures.append(text)

    threads = [threading.Thread(target=ask, args=(texts[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(vectors._vectors) <= 4


def test_the_hot_path_never_loads_the_model_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = load_embedder()
    monkeypatch.setattr(embedder_module, "_loaded", None)
    monkeypatch.setattr(embedder_module, "_warming", None)
    assert embedder_if_loaded() is None  # not loaded: no wait, the load started
    warming = embedder_module._warming
    assert warming is not None
    assert embedder_if_loaded() is None or embedder_module._warming is warming  # one load
    warming.join(timeout=60)
    ready = embedder_if_loaded()
    assert ready is not None
    assert ready.model_name == loaded.model_name
