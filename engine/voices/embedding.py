"""Speaker embeddings: Resemblyzer's bundled encoder, 256-d float32, loaded once per process on first use."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator

import numpy as np

from engine.base import BackendUnavailable

EMBEDDING_RATE = 16_000
EMBEDDING_DIM = 256

_lock = threading.Lock()
_encoder = None


def _get_encoder():
    global _encoder
    if _encoder is None:
        with _lock:
            if _encoder is None:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        from resemblyzer import VoiceEncoder
                    _encoder = VoiceEncoder(device="cpu", verbose=False)
                except Exception as exc:  # missing package or weights
                    raise BackendUnavailable(f"The speaker encoder cannot start: {exc}") from exc
    return _encoder


def embed(samples16k: np.ndarray) -> np.ndarray:
    """The L2-normalized speaker embedding of float32 mono speech at 16 kHz."""
    encoder = _get_encoder()
    from resemblyzer.audio import normalize_volume, trim_long_silences
    from resemblyzer.hparams import audio_norm_target_dBFS

    wav = np.asarray(samples16k, dtype=np.float32).reshape(-1)
    wav = normalize_volume(wav, audio_norm_target_dBFS, increase_only=True)
    try:
        trimmed = trim_long_silences(wav)
    except Exception:  # noqa: BLE001 - webrtcvad rejects odd lengths of very short input
        trimmed = wav
    if len(trimmed) >= EMBEDDING_RATE // 2:
        wav = trimmed
    with _lock, _one_torch_thread():  # one inference at a time; it is short
        vec = encoder.embed_utterance(wav.astype(np.float32))
    vec = np.asarray(vec, dtype=np.float32)
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else vec


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """The small LSTM runs 2-3x faster on one thread than on several cores that other work shares."""
    import torch

    before = torch.get_num_threads()
    if before > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before > 1:
            torch.set_num_threads(before)


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two embeddings."""
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    den = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b) / den) if den > 0 else 0.0


def to_bytes(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype="<f4").reshape(-1).tobytes()


def from_bytes(blob: bytes) -> np.ndarray:
    vec = np.frombuffer(blob, dtype="<f4")
    if vec.shape != (EMBEDDING_DIM,):
        raise ValueError(f"expected {EMBEDDING_DIM} float32 values, got {vec.size}")
    return vec.astype(np.float32)
