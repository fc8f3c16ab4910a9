"""The cosyvoice2 voice_features blob: the zero-shot frontend's tensors as an npz with a JSON header, no pickle."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.base import EngineError

NAME = "cosyvoice2"  # the backend's name, also written into each blob's header
FEATURES_FORMAT = 1  # bump when the blob layout changes
# Keys of the frontend's zero-shot dict that a voice blob must hold (each with its `_len` twin).
FEATURE_KEYS = (
    "prompt_text",
    "llm_prompt_speech_token",
    "flow_prompt_speech_token",
    "prompt_speech_feat",
    "llm_embedding",
    "flow_embedding",
)


def to_numpy(value: Any) -> np.ndarray:
    """A tensor or array-like as a contiguous numpy array on the CPU."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(value))


def pack_features(model_input: Mapping[str, Any], transcript: str, prompt_text: str) -> bytes:
    """The voice_features blob: the frontend's zero-shot tensors as an npz (no pickle), plus a JSON header."""
    arrays = {k: to_numpy(v) for k, v in model_input.items() if k not in ("text", "text_len")}
    missing = [k for k in FEATURE_KEYS if k not in arrays]
    if missing:
        raise EngineError(f"The CosyVoice frontend returned no {', '.join(missing)}; is this a CosyVoice2 model?")
    meta = {"format": FEATURES_FORMAT, "backend": NAME, "transcript": transcript, "prompt_text": prompt_text}
    buf = io.BytesIO()
    np.savez(buf, **{"__meta__": np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),  # type: ignore[arg-type]
                     **arrays})
    return buf.getvalue()


def unpack_features(blob: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Arrays and header of a blob made by pack_features; EngineError if it is not one."""
    unreadable = EngineError("This voice's saved CosyVoice features are unreadable; register the voice again.")
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        meta = json.loads(arrays.pop("__meta__").tobytes().decode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - any malformed blob is the same error to the user
        raise unreadable from exc
    if not isinstance(meta,
                      dict) or meta.get("format") != FEATURES_FORMAT or any(k not in arrays for k in FEATURE_KEYS):
        raise unreadable
    for key in ("llm_prompt_speech_token", "flow_prompt_speech_token", "prompt_text"):
        if arrays[key].ndim != 2:
            raise unreadable
    if arrays["prompt_speech_feat"].ndim != 3 or arrays["flow_embedding"].ndim != 2:
        raise unreadable
    return arrays, meta


def is_features(blob: bytes) -> bool:
    """Whether `blob` is a readable blob of the current format."""
    try:
        unpack_features(blob)
    except EngineError:
        return False
    return True
