"""The cosyvoice2 backend's default voice when the model has none: a zero-shot prompt spoken once by the bundled Piper
voice.

The stock CosyVoice2-0.5B download has no `spk2info.pt`, so it has no voice to speak in until a user
registers one. The default is made from a fixed sentence synthesized by Piper's `en_US-joe-medium` (a
dependency of the project, so nothing is downloaded and the result is the same on every machine): the
clip and its transcript go through CosyVoice's zero-shot frontend once, like a registered voice, and the
feature blob is kept in the user's cache folder keyed by everything it depends on, so later starts skip
both Piper and the frontend.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from engine.base import EngineError

log = logging.getLogger(__name__)

VOICE_ID = "default"
# About 6 s of speech: CosyVoice copies a prompt's timbre and pace best from 3-10 s of clean speech.
SENTENCE = "Hello there. I read your messages aloud in this voice channel, one sentence at a time, as they come in."

Prompt = tuple[np.ndarray, int, str]  # mono float32 samples, their sample rate, the transcript


def piper_prompt() -> Prompt:
    """SENTENCE spoken by the bundled Piper voice."""
    from engine.backends.piper.backend import PiperBackend
    from engine.base import Voice

    piper = PiperBackend()
    samples = np.concatenate([np.asarray(c, dtype=np.float32).reshape(-1) for c in piper.synthesize(SENTENCE, Voice())])
    return samples, piper.info.sample_rate, SENTENCE


def piper_identity() -> str:
    """What the Piper prompt depends on: the piper-tts release and the bundled voice's file."""
    from engine.backends.piper.backend import _piper_version, bundled_model_path, load_model

    model = load_model(str(bundled_model_path().resolve()))
    return f"piper-tts {_piper_version()}; {model.path.name}; {model.sha256[:16]}"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "voicebot" / "cosyvoice-default"


def default_features(
    extract: Callable[..., bytes | None],
    backend_version: str,
    is_valid: Callable[[bytes], bool],
    make_prompt: Callable[[], Prompt] = piper_prompt,
    identity: Callable[[], str] = piper_identity,
) -> bytes:
    """The default voice's feature blob: from the cache when a valid one is there, else made now and cached.

    `extract(clip, rate, transcript)` is the backend's own extract_features; `backend_version` (upstream
    commit, model folder, blob format) and the Piper identity key the cache, so a new model or Piper voice
    makes it again. A cache that cannot be written only costs the next start the same work.
    """
    key = hashlib.sha256(json.dumps([backend_version, identity(), SENTENCE]).encode()).hexdigest()[:32]
    path = cache_dir() / f"{key}.npz"
    try:
        cached = path.read_bytes()
        if is_valid(cached):
            return cached
        log.warning("ignoring the unreadable cached default voice %s", path)
    except OSError:
        pass
    clip, rate, transcript = make_prompt()
    blob = extract(clip, rate, transcript)
    if blob is None:
        raise EngineError("CosyVoice2 derived no features for its default voice's prompt.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("could not cache the default voice in %s: %s", path.parent, exc)
    return blob
