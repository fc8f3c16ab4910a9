"""The `cosyvoice2` backend: zero-shot cloning with CosyVoice2-0.5B on the official CosyVoice Python API.

Runs on FunAudioLLM/CosyVoice from commit 6dd68b9 (2025-05-30) up to ace7c47 (2026-03-16, the one
targeted): `token2wav(token, ..., token_offset, uuid, stream, finalize, speed)` without per-request TensorRT
contexts, and `frontend_zero_shot(..., zero_shot_spk_id)` taking `prompt_wav` (a path, since 2025-12-08) or
`prompt_speech_16k` (a 16 kHz tensor, before). Which prompt form is installed is read from the signature; an
older clone (the 2025-03 code had a flow cache in `token2wav` and no speaker id in `frontend_zero_shot`) is
refused by `check_api` (loader.py) naming the commit to check out. The adapter uses the upstream objects for text
normalization, the zero-shot frontend, the LLM job and token->wav, but runs each request's streaming loop
itself so that the hop length is per request (upstream `CosyVoice2Model.tts` grows `self.token_hop_len` on
the shared instance; PRs #1849/#1894). See docs/gpu.md.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.cosyvoice import default as cosyvoice_default
from engine.backends.cosyvoice.device import bind_thread, cuda_index
from engine.backends.cosyvoice.features import (
    FEATURES_FORMAT,
    NAME,
    is_features,
    pack_features,
    to_numpy,
    unpack_features,
)
from engine.backends.cosyvoice.loader import GIB, check_api, load_cosyvoice, suggest_concurrency
from engine.backends.cosyvoice.settings import CosyVoiceSettings
from engine.base import (
    BackendDefaults,
    BackendInfo,
    CancelToken,
    EngineError,
    Progress,
    TextRejected,
    Voice,
)

log = logging.getLogger(__name__)

SAMPLE_RATE = 24_000  # CosyVoice2 output; the loaded model's own `sample_rate` wins
PROMPT_RATE = 16_000  # the frontend's speech tokenizer and speaker embedding run at 16 kHz
LANGUAGES = ("zh", "en", "ja", "ko", "yue")  # what CosyVoice2 speaks (and clones in): Chinese, English, Japanese,
# Korean, Cantonese; other languages go to an installed voice that speaks them or eSpeak NG (engine/catalog.py)
MIN_CLIP_S, MAX_CLIP_S = 0.5, 30.0  # upstream's speech tokenizer refuses prompts over 30 s
MIN_SPEED, MAX_SPEED = 0.5, 2.0
SPEAKER_PREFIX = "voicebot:"  # our entries in the model's speaker table; built-in speakers are never evicted
OOM_MESSAGE = "The voice engine ran out of GPU memory; try again in a moment."


# -- streaming ------------------------------------------------------------------------------------


def hop_schedule(prompt_tokens: int, first: int, base: int, chunk: int, scale: float, max_hop: int) -> Iterator[int]:
    """Tokens per streamed chunk for one request: its own state, never the shared model's.

    The first hop is `first` tokens (short, for a quick first chunk, like NVIDIA's Triton CosyVoice2
    model). If `first` is at least the model's training chunk (`chunk`, 25 tokens), it is padded so the
    prompt plus the first hop ends on a chunk boundary, as upstream does. The second hop is `base` padded
    to bring the boundary back onto the chunk grid; later hops grow by `scale` up to `max_hop`.
    """
    chunk = max(1, chunk)
    pad = lambda n: (-n) % chunk  # noqa: E731 - tokens to the next chunk boundary
    first = max(1, first)
    if first >= chunk:
        first += pad(prompt_tokens + first)
    yield first
    done = prompt_tokens + first
    hop = max(1, base)
    second = hop + pad(done + hop)
    yield second
    while True:
        hop = min(max_hop, max(hop + 1, int(hop * scale))) if scale > 1 else hop
        yield max(1, hop)


# -- per-request state -------------------------------------------------------------------------------


class _Stop(Exception):
    """Raised into upstream's LLM thread to end an abandoned request early."""


class _TokenList(list):
    """The request's speech-token list that upstream's `llm_job` appends to: wakes the waiting
    streaming loop at once (upstream polls every 0.1 s) and stops the LLM once the request is abandoned."""

    def __init__(self, cond: threading.Condition) -> None:
        super().__init__()
        self.cond = cond
        self.stop = False

    def append(self, item: Any) -> None:
        if self.stop:
            raise _Stop
        with self.cond:
            super().append(item)
            self.cond.notify_all()


@dataclass
class _Request:
    rid: str
    cond: threading.Condition = field(default_factory=threading.Condition)
    llm_done: bool = False
    error: BaseException | None = None
    finished: bool = False  # the consumer is gone; whoever is last removes the model's entries
    removed: bool = False


def _is_oom(exc: BaseException) -> bool:
    import torch

    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


# -- the backend --------------------------------------------------------------------------------------


class CosyVoiceBackend(BackendDefaults):
    """Zero-shot CosyVoice2 synthesis behind the Backend protocol.

    `model` (or `model_factory(settings, workers) -> (model, version)`) replaces loading the upstream
    `CosyVoice2` object; tests pass a test double of it. Registered voices carry the frontend's zero-shot
    features (features.py); they are put into the model's speaker table (`frontend.spk2info`) on
    first use and evicted least recently used beyond `settings.speaker_cache`, so synthesis never runs
    the speech frontend for a known voice.
    """

    @classmethod
    def from_settings(cls, settings) -> CosyVoiceBackend:
        return cls(CosyVoiceSettings.of(settings), workers=settings.workers)

    def __init__(
        self,
        settings: CosyVoiceSettings | None = None,
        workers: int = 1,
        *,
        model: Any = None,
        model_factory: Callable[[CosyVoiceSettings, int], tuple[Any, str]] | None = None,
        version: str | None = None,
    ) -> None:
        self.settings = settings or CosyVoiceSettings()
        self.workers = max(1, workers)
        if model is None:
            model, version = (model_factory or load_cosyvoice)(self.settings, self.workers)
        check_api(model, version)
        self.cv = model
        self.frontend = model.frontend
        self.model = model.model
        self.sample_rate = int(getattr(model, "sample_rate", SAMPLE_RATE))
        self._lock = threading.Lock()
        self._speakers: OrderedDict[tuple[str, str], str] = OrderedDict()  # (voice_id, blob sha) -> spk id
        self._builtin = tuple(k for k in getattr(self.frontend, "spk2info",
                                                 {}) if not str(k).startswith(SPEAKER_PREFIX))
        self._cuda = cuda_index(self.settings.device)
        self._default_blob: bytes | None = None  # the Piper-made default voice (default.py), made once
        self._default_lock = threading.Lock()
        self._prompt_arg = self._prompt_param()
        self._own_loop = self._has_internals()
        if not self._own_loop:
            log.warning(
                "this cosyvoice release lacks the model internals the adapter streams with; falling back to "
                "model.tts, where concurrent requests share one hop length (upstream PRs #1849/#1894)"
            )
        m = self.model
        # upstream sets token_max_hop_len = 4 * the training chunk (25) and never changes it, while
        # token_hop_len itself drifts as requests run, so the chunk is read from the former
        self._max_hop = int(getattr(m, "token_max_hop_len", 100))
        self._chunk = max(1, self._max_hop // 4)
        self._scale = float(getattr(m, "stream_scale_factor", 2))
        self._lookahead = int(getattr(getattr(m, "flow", None), "pre_lookahead_len", 3))
        self._vllm = hasattr(getattr(m, "llm", None), "vllm")
        model_name = Path(self.settings.model_dir).name if self.settings.model_dir else "model"
        self.info = BackendInfo(
            name=NAME,
            version=f"cosyvoice {version or 'unknown'}; {model_name}; features v{FEATURES_FORMAT}",
            sample_rate=self.sample_rate,
            clones=True,
            voices=self._builtin or (cosyvoice_default.VOICE_ID,),
            languages=LANGUAGES,
        )
        self._log_capacity()

    # -- introspection ----------------------------------------------------------------------------

    def _prompt_param(self) -> str:
        """'wav' for the API that takes a path/file (2025-12-08 on), 'tensor' for `prompt_speech_16k`."""
        params = list(inspect.signature(self.frontend.frontend_zero_shot).parameters)
        name = params[2] if len(params) > 2 else "prompt_wav"
        return "tensor" if "16k" in name or "speech" in name else "wav"

    def _has_internals(self) -> bool:
        m = self.model
        needed = ("llm_job", "token2wav", "tts_speech_token_dict", "llm_end_dict", "hift_cache_dict", "lock")
        return all(hasattr(m, n) for n in needed) and hasattr(getattr(m, "flow", None), "pre_lookahead_len")

    def _log_capacity(self) -> None:
        try:
            import torch

            if torch.cuda.is_available() and self.settings.device.startswith("cuda"):
                free, total = torch.cuda.mem_get_info()
                log.info(
                    "CosyVoice2 loaded: %.1f of %.1f GiB free; engine.max_concurrency up to %d suggested",
                    free / GIB,
                    total / GIB,
                    suggest_concurrency(free),
                )
        except Exception:  # pragma: no cover - informational only
            log.debug("could not read GPU memory", exc_info=True)

    # -- registration -----------------------------------------------------------------------------

    def extract_features(self, clip: np.ndarray, sample_rate: int, transcript: str, *,
                         reference_embedding: np.ndarray | None = None,
                         progress: Progress | None = None) -> bytes | None:
        """Run the zero-shot frontend once on a reference clip and its transcript; the blob to store."""
        transcript = (transcript or "").strip()
        if not transcript:
            raise TextRejected("CosyVoice cloning needs the transcript of the reference clip.")
        clip = np.asarray(clip, dtype=np.float32).reshape(-1)
        if sample_rate != PROMPT_RATE:
            import soxr

            clip = soxr.resample(clip, sample_rate, PROMPT_RATE).astype(np.float32)
        seconds = len(clip) / PROMPT_RATE
        if not MIN_CLIP_S <= seconds <= MAX_CLIP_S:
            raise EngineError(f"The reference clip must be {MIN_CLIP_S:g} to {MAX_CLIP_S:g} s long; it is "
                              f"{seconds:.1f} s.")
        if not np.all(np.isfinite(clip)):
            raise EngineError("The reference clip holds invalid samples.")
        clip = np.clip(clip, -1.0, 1.0)
        bind_thread(self._cuda)
        prompt_text = self.frontend.text_normalize(transcript, split=False, text_frontend=True)
        try:
            with self._prompt(clip) as prompt:
                model_input = self.frontend.frontend_zero_shot("", prompt_text, prompt, self.sample_rate, "")
        except Exception as exc:
            self._raise_if_oom(exc)
            raise
        return pack_features(model_input, transcript, prompt_text)

    @contextmanager
    def _prompt(self, clip: np.ndarray) -> Iterator[Any]:
        """The prompt in the form the installed API takes: a temporary 16 kHz WAV path, or a (1, N) tensor."""
        if self._prompt_arg == "tensor":
            import torch

            yield torch.from_numpy(clip.copy()).unsqueeze(0)
            return
        import soundfile

        fd, path = tempfile.mkstemp(prefix="voicebot-prompt-", suffix=".wav")
        os.close(fd)
        try:
            soundfile.write(path, clip, PROMPT_RATE, subtype="PCM_16")
            yield path
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass

    # -- the speaker table ------------------------------------------------------------------------

    def _device(self) -> Any:
        return getattr(self.frontend, "device", None) or getattr(self.model, "device", None) or "cpu"

    def _register(self, voice_id: str, blob: bytes) -> str:
        """The speaker-table id of a registered voice, loading its features on first use (hold _lock)."""
        sha = hashlib.sha256(blob).hexdigest()
        key = (voice_id, sha)
        spk = self._speakers.get(key)
        table = self.frontend.spk2info
        if spk is not None and spk in table:
            self._speakers.move_to_end(key)
            return spk
        import torch

        arrays, _meta = unpack_features(blob)
        device = self._device()
        spk = f"{SPEAKER_PREFIX}{voice_id}:{sha[:16]}"
        table[spk] = {k: torch.from_numpy(np.array(v)).to(device) for k, v in arrays.items()}
        self._speakers[key] = spk
        self._speakers.move_to_end(key)
        while len(self._speakers) > max(1, self.settings.speaker_cache):
            _, old = self._speakers.popitem(last=False)
            table.pop(old, None)
        return spk

    def _default_features(self) -> bytes:
        """The default voice's blob when the model has no built-in speaker (engine/backends/cosyvoice/default.py)."""
        with self._default_lock:
            if self._default_blob is None:
                log.info("this CosyVoice2 model has no built-in voice; making the default voice from the Piper prompt")
                self._default_blob = cosyvoice_default.default_features(
                    self.extract_features, self.info.version, is_features,
                )
            return self._default_blob

    def _model_input(self, piece: str, voice: Voice) -> dict[str, Any]:
        """The model's input for one normalized piece of text, from the speaker table only."""
        default = None
        if voice.profile is None and not self._builtin and voice.name in ("", cosyvoice_default.VOICE_ID):
            default = self._default_features()  # outside _lock: it may run the frontend
        with self._lock:
            if default is not None:
                spk = self._register(cosyvoice_default.VOICE_ID, default)
                return self.frontend.frontend_zero_shot(piece, "", None, self.sample_rate, spk)
            profile = voice.profile
            if profile is not None:
                if profile.backend != NAME:
                    raise EngineError(
                        f"This voice was registered for the {profile.backend} engine; register it again to use it here."
                    )
                if profile.backend_version != self.info.version:
                    log.debug("voice %s has features from %s; using them with %s", profile.voice_id,
                              profile.backend_version, self.info.version)
                spk = self._register(profile.voice_id, profile.features)
                return self.frontend.frontend_zero_shot(piece, "", None, self.sample_rate, spk)
            default = self._builtin[0] if self._builtin and voice.name in ("", "default") else None
            name = voice.name if voice.name in self._builtin else default
            if name is None:
                raise EngineError(f"Unknown voice {voice.name!r}; this engine has: {', '.join(self.info.voices)}.")
            entry = self.frontend.spk2info[name]
            if "prompt_speech_feat" in entry or "llm_prompt_speech_token" in entry:
                return self.frontend.frontend_zero_shot(piece, "", None, self.sample_rate, name)
            return self.frontend.frontend_sft(piece, name)

    # -- synthesis --------------------------------------------------------------------------------

    def synthesize(self, text: str, voice: Voice, cancel: CancelToken | None = None) -> Iterator[np.ndarray]:
        """Float32 mono chunks at `info.sample_rate`, each as the model produces it."""
        text = (text or "").strip()
        if not text:
            raise TextRejected("There is nothing to say.")
        speed = self.settings.speed * voice.speed
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise EngineError(f"Speed must be between {MIN_SPEED:g} and {MAX_SPEED:g} for this voice engine.")
        # upstream changes speed by stretching the whole mel, so a request at another speed is not streamed
        stream = self.settings.streaming and abs(speed - 1.0) < 1e-6
        bind_thread(self._cuda)
        try:
            pieces = [p for p in self.frontend.text_normalize(text, split=True, text_frontend=True) if str(p).strip()]
            if not pieces:
                raise TextRejected("There is nothing to say.")
            for piece in pieces:
                if cancel is not None and cancel.cancelled:
                    return
                model_input = self._model_input(piece, voice)
                if self._own_loop:
                    yield from self._tts(model_input, stream, speed, cancel)
                else:
                    yield from self._tts_upstream(model_input, stream, speed)
        except Exception as exc:
            self._raise_if_oom(exc)
            raise

    def _raise_if_oom(self, exc: BaseException) -> None:
        if not _is_oom(exc):
            return
        import torch

        log.warning("CosyVoice ran out of GPU memory: %s", exc)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        raise EngineError(OOM_MESSAGE) from exc

    @staticmethod
    def _audio(tensor: Any) -> np.ndarray:
        return to_numpy(tensor).astype(np.float32, copy=False).reshape(-1)

    def _tts(self, inp: dict[str, Any], stream: bool, speed: float, cancel: CancelToken | None) -> Iterator[np.ndarray]:
        """One piece through upstream's LLM job and token2wav, with this request's own hop lengths."""
        import torch

        m = self.model
        empty_tokens = torch.zeros(1, 0, dtype=torch.int32)
        prompt_token = inp.get("flow_prompt_speech_token", empty_tokens)
        prompt_feat = inp.get("prompt_speech_feat", torch.zeros(1, 0, 80))
        embedding = inp.get("flow_embedding", torch.zeros(0, 192))
        req = _Request(rid=f"voicebot-{uuid.uuid4().hex}")
        tokens = _TokenList(req.cond)
        with m.lock:
            m.tts_speech_token_dict[req.rid] = tokens
            m.llm_end_dict[req.rid] = False
            m.hift_cache_dict[req.rid] = None
        args = (
            inp["text"],
            inp.get("prompt_text", empty_tokens),
            inp.get("llm_prompt_speech_token", empty_tokens),
            inp.get("llm_embedding", torch.zeros(0, 192)),
            req.rid,
        )
        thread = threading.Thread(target=self._llm, args=(req, tokens, args), name="cosyvoice-llm", daemon=True)
        remove = cancel.on_cancel(lambda: self._stop(req, tokens)) if cancel is not None else (lambda: None)
        thread.start()

        def wav(upto: int | None, offset: int, finalize: bool) -> np.ndarray:
            kwargs: dict[str, Any] = {
                "token": torch.tensor(list(tokens[:upto]) if upto is not None else list(tokens),
                                      dtype=torch.int32).unsqueeze(0),
                "prompt_token": prompt_token,
                "prompt_feat": prompt_feat,
                "embedding": embedding,
                "token_offset": offset,
                "uuid": req.rid,
                "finalize": finalize,
                "stream": stream and not finalize,
            }
            if finalize and not stream:
                kwargs["speed"] = speed
            return self._audio(m.token2wav(**kwargs))

        try:
            offset = 0
            if stream:
                hops = hop_schedule(
                    int(prompt_token.shape[1]), self.settings.first_hop_len, self.settings.token_hop_len,
                    self._chunk, self._scale, self._max_hop,
                )
                hop = next(hops)
                while True:
                    with req.cond:
                        while not req.llm_done and len(tokens) - offset < hop + self._lookahead:
                            if cancel is not None and cancel.cancelled:
                                return
                            req.cond.wait(0.05)
                        ready = len(tokens) - offset >= hop + self._lookahead
                    if req.error is not None:
                        raise req.error
                    if cancel is not None and cancel.cancelled:
                        return
                    if not ready:
                        break
                    chunk = wav(offset + hop + self._lookahead, offset, finalize=False)
                    offset += hop
                    hop = next(hops)
                    yield chunk
            thread.join()
            if req.error is not None:
                raise req.error
            if cancel is not None and cancel.cancelled:
                return
            yield wav(None, offset, finalize=True)
        finally:
            remove()
            self._finish(req, tokens)

    def _llm(self, req: _Request, tokens: _TokenList, args: tuple[Any, ...]) -> None:
        """Upstream's llm_job in our thread, so an error or a stop reaches the streaming loop."""
        try:
            bind_thread(self._cuda)
            self.model.llm_job(*args)
        except _Stop:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the request's thread
            req.error = exc
        finally:
            with req.cond:
                req.llm_done = True
                req.cond.notify_all()
            self._finish(req, tokens, llm=True)

    def _stop(self, req: _Request, tokens: _TokenList) -> None:
        if not self._vllm:  # vLLM keeps its own request queue; stopping our consumer mid-way would leak it
            tokens.stop = True
        with req.cond:
            req.cond.notify_all()

    def _finish(self, req: _Request, tokens: _TokenList, llm: bool = False) -> None:
        """Remove the request's entries from the model once both the consumer and the LLM are done."""
        with req.cond:
            if not llm:
                req.finished = True
                if not req.llm_done:
                    self._stop(req, tokens)
                    return  # the LLM thread removes them when it ends
            elif not req.finished:
                return
            if req.removed:
                return
            req.removed = True
        m = self.model
        with m.lock:
            for table in (m.tts_speech_token_dict, m.llm_end_dict, m.hift_cache_dict):
                table.pop(req.rid, None)

    def _tts_upstream(self, inp: dict[str, Any], stream: bool, speed: float) -> Iterator[np.ndarray]:
        """Fallback for releases without the internals: upstream's own tts, its hop length reset first."""
        m = self.model
        if hasattr(m, "token_hop_len"):
            m.token_hop_len = self._chunk
        for out in m.tts(**inp, stream=stream, speed=speed):
            yield self._audio(out["tts_speech"])

    def close(self) -> None:
        with self._lock:
            for spk in self._speakers.values():
                self.frontend.spk2info.pop(spk, None)
            self._speakers.clear()
