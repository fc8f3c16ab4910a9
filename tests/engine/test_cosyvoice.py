"""The cosyvoice2 backend against FakeCosyVoice2, a test double of the upstream CosyVoice2 API.

The double stands only for upstream's `CosyVoice2` object, its `.frontend` (CosyVoiceFrontEnd) and its
`.model` (CosyVoice2Model): the calls and attributes the adapter relies on, with upstream's shapes
(25 Hz int32 speech tokens, 2x mel frames, 192-d embeddings, 24 kHz output) and upstream's chunk sizes:
`token2wav` holds back HiFT's cache overlap (8 mel frames, 3,840 samples) from every streamed chunk and
adds it to the next, so a 15-token first hop yields 10,560 samples. Those numbers were measured once on
upstream's real CosyVoice2Model (ace7c47) with a tiny random HiFTGenerator on the CPU: hops 15, 35, 50 and
a 20-token tail gave 10,560, 33,600, 48,000 and 23,040 samples. The adapter code under test is the real one.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
import types

import numpy as np
import pytest
import soundfile
import torch

from engine.backends.cosyvoice import backend as cv
from engine.backends.cosyvoice import device as cosyvoice_device
from engine.backends.cosyvoice import features as cosyvoice_features
from engine.backends.cosyvoice import loader as cosyvoice_loader
from engine.backends.cosyvoice.backend import CosyVoiceBackend
from engine.backends.cosyvoice.settings import CosyVoiceSettings
from engine.base import BackendUnavailable, CancelToken, EngineError, TextRejected, Voice, VoiceProfile

RATE = 24_000
SAMPLES_PER_TOKEN = RATE // 25  # 960: one 25 Hz speech token of 24 kHz audio
HIFT_CACHE = 8 * 480  # upstream's source_cache_len: 8 mel frames of 480 samples, held back until the next chunk
LOOKAHEAD = 3
TEXT = "The quick brown fox jumps over the lazy dog near the river bank today."


# -- the test double ----------------------------------------------------------------------------------


def _text_tokens(text: str) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.tensor([[ord(c) % 6000 for c in text]], dtype=torch.int32)
    return ids, torch.tensor([ids.shape[1]], dtype=torch.int32)


class FakeFrontEnd:
    """Test double of upstream CosyVoiceFrontEnd (new API: `frontend_zero_shot(..., prompt_wav, ...)`)."""

    def __init__(self) -> None:
        self.spk2info: dict[str, dict[str, torch.Tensor]] = {}
        self.device = torch.device("cpu")
        self.speech_calls = 0  # runs of the speech frontend (speech tokenizer, CAM++, mel)
        self.prompts: list[object] = []  # what each speech-frontend run was given as the prompt
        self.prompt_speech: list[np.ndarray] = []  # and the 16 kHz samples it read from it

    def text_normalize(self, text: str, split: bool = True, text_frontend: bool = True) -> list[str] | str:
        text = text.strip()
        if not split:
            return text
        return [p.strip() + "." for p in text.split(".") if p.strip()]

    def _speech(self, speech16k: np.ndarray, prompt_text: str) -> dict[str, torch.Tensor]:
        self.speech_calls += 1
        n_tok = int(len(speech16k) / 16000 * 25)
        seed = int(abs(float(speech16k.sum())) * 1000)
        tokens = torch.tensor([[(seed + 7 * i) % 6561 for i in range(n_tok)]], dtype=torch.int32)
        feat = torch.full((1, 2 * n_tok, 80), float(speech16k.std()), dtype=torch.float32)
        emb = (torch.arange(192, dtype=torch.float32) * float(speech16k.std())).unsqueeze(0)
        ptext, ptext_len = _text_tokens(prompt_text)
        n = torch.tensor([n_tok], dtype=torch.int32)
        return {
            "prompt_text": ptext, "prompt_text_len": ptext_len,
            "llm_prompt_speech_token": tokens, "llm_prompt_speech_token_len": n,
            "flow_prompt_speech_token": tokens, "flow_prompt_speech_token_len": n,
            "prompt_speech_feat": feat, "prompt_speech_feat_len": torch.tensor([2 * n_tok], dtype=torch.int32),
            "llm_embedding": emb, "flow_embedding": emb,
        }  # fmt: skip

    def _zero_shot(self, tts_text: str, prompt_text: str, speech16k: object, spk_id: str) -> dict[str, torch.Tensor]:
        if spk_id == "":
            model_input = self._speech(speech16k, prompt_text)  # type: ignore[arg-type]
        else:
            model_input = {**self.spk2info[spk_id]}
        model_input["text"], model_input["text_len"] = _text_tokens(tts_text)
        return model_input

    def frontend_zero_shot(self, tts_text, prompt_text, prompt_wav, resample_rate, zero_shot_spk_id):  # noqa: ANN001
        speech = None
        if zero_shot_spk_id == "":
            self.prompts.append(prompt_wav)
            speech, rate = soundfile.read(prompt_wav, dtype="float32")
            assert rate == 16000 and speech.ndim == 1
            self.prompt_speech.append(speech)
        return self._zero_shot(tts_text, prompt_text, speech, zero_shot_spk_id)

    def frontend_sft(self, tts_text: str, spk_id: str) -> dict[str, torch.Tensor]:
        text, text_len = _text_tokens(tts_text)
        emb = self.spk2info[spk_id]["embedding"]
        return {"text": text, "text_len": text_len, "llm_embedding": emb, "flow_embedding": emb}


class FakeLegacyFrontEnd(FakeFrontEnd):
    """Test double of the frontend before 2025-12-08, which took a (1, N) 16 kHz tensor."""

    def frontend_zero_shot(self, tts_text, prompt_text, prompt_speech_16k, resample_rate, zero_shot_spk_id):  # noqa: ANN001
        speech = None
        if zero_shot_spk_id == "":
            self.prompts.append(prompt_speech_16k)
            assert isinstance(prompt_speech_16k, torch.Tensor) and prompt_speech_16k.ndim == 2
            speech = prompt_speech_16k[0].numpy()
        return self._zero_shot(tts_text, prompt_text, speech, zero_shot_spk_id)


class FakeModel:
    """Test double of upstream CosyVoice2Model: per-request dicts under `lock`, `llm_job` appending
    25 Hz tokens, `token2wav` returning 960 samples a token less the HiFT overlap it holds back (released
    with the next chunk), and `tts` with upstream's habit of growing `self.token_hop_len` on the shared
    instance."""

    def __init__(self, tokens_per_char: int = 2, token_delay: float = 0.0) -> None:
        self.lock = threading.Lock()
        self.tts_speech_token_dict: dict[str, list[int]] = {}
        self.llm_end_dict: dict[str, bool] = {}
        self.hift_cache_dict: dict[str, object] = {}
        self.token_hop_len = 25
        self.token_max_hop_len = 100
        self.stream_scale_factor = 2
        self.flow = types.SimpleNamespace(pre_lookahead_len=LOOKAHEAD)
        self.llm = types.SimpleNamespace()
        self.tokens_per_char = tokens_per_char
        self.token_delay = token_delay
        self.gate: threading.Event | None = None  # llm_job waits on it once `gate_after` tokens are out
        self.gate_after = 0
        self.fail_token2wav: BaseException | None = None
        self.fail_llm: BaseException | None = None
        self.token2wav_calls: list[dict[str, object]] = []
        self.llm_jobs_finished = 0

    def llm_job(self, text, prompt_text, llm_prompt_speech_token, llm_embedding, uuid):  # noqa: ANN001
        if self.fail_llm is not None:
            exc, self.fail_llm = self.fail_llm, None
            raise exc
        for i in range(text.shape[1] * self.tokens_per_char):
            if self.gate is not None and i == self.gate_after:
                assert self.gate.wait(5)
            if self.token_delay:
                time.sleep(self.token_delay)
            self.tts_speech_token_dict[uuid].append(i % 6561)
        self.llm_end_dict[uuid] = True
        self.llm_jobs_finished += 1

    def token2wav(self, token, prompt_token, prompt_feat, embedding, token_offset, uuid, stream=False, finalize=False,
                  speed=1.0):  # noqa: ANN001
        self.token2wav_calls.append(
            {"n": token.shape[1], "offset": token_offset, "finalize": finalize, "stream": stream, "speed": speed,
             "prompt_token": prompt_token, "prompt_feat": prompt_feat, "embedding": embedding, "uuid": uuid}
        )  # fmt: skip
        assert uuid in self.hift_cache_dict
        if self.fail_token2wav is not None:
            exc, self.fail_token2wav = self.fail_token2wav, None
            raise exc
        new = (token.shape[1] - token_offset - (0 if finalize else LOOKAHEAD)) * SAMPLES_PER_TOKEN
        held = self.hift_cache_dict[uuid]
        if not finalize:  # upstream keeps the last 8 mel frames and their audio for the next call's cross-fade
            self.hift_cache_dict[uuid] = {"speech": HIFT_CACHE}
            return torch.full((1, new + (HIFT_CACHE if held else 0) - HIFT_CACHE), 0.1)
        assert speed == 1.0 or held is None, "speed change only support non-stream inference mode"
        return torch.full((1, int((new + (HIFT_CACHE if held else 0)) / speed)), 0.1)

    def tts(self, text, flow_embedding, llm_embedding=None, prompt_text=None, llm_prompt_speech_token=None,  # noqa: ANN001
            flow_prompt_speech_token=None, prompt_speech_feat=None, stream=False, speed=1.0, **kwargs):  # fmt: skip
        rid = f"up-{time.monotonic_ns()}"
        with self.lock:
            self.tts_speech_token_dict[rid], self.llm_end_dict[rid], self.hift_cache_dict[rid] = [], False, None
        self.llm_job(text, prompt_text, llm_prompt_speech_token, llm_embedding, rid)
        tokens, offset = self.tts_speech_token_dict[rid], 0
        n_prompt = flow_prompt_speech_token.shape[1]
        pad = -n_prompt % self.token_hop_len
        while stream:
            hop = self.token_hop_len + pad if offset == 0 else self.token_hop_len
            if len(tokens) - offset < hop + LOOKAHEAD:
                break
            out = self.token2wav(torch.tensor([tokens[: offset + hop + LOOKAHEAD]]), flow_prompt_speech_token,
                                 prompt_speech_feat, flow_embedding, offset, rid, stream=True)  # fmt: skip
            offset += hop
            self.token_hop_len = min(self.token_max_hop_len, self.token_hop_len * self.stream_scale_factor)
            yield {"tts_speech": out}
        yield {"tts_speech": self.token2wav(torch.tensor([tokens]), flow_prompt_speech_token, prompt_speech_feat,
                                            flow_embedding, offset, rid, finalize=True, speed=speed)}  # fmt: skip
        with self.lock:
            for d in (self.tts_speech_token_dict, self.llm_end_dict, self.hift_cache_dict):
                d.pop(rid)


class FakeCosyVoice2:
    """Test double of upstream `cosyvoice.cli.cosyvoice.CosyVoice2`: `.frontend`, `.model`, `.sample_rate`."""

    sample_rate = RATE

    def __init__(self, legacy: bool = False, **model_kwargs: object) -> None:
        self.frontend = FakeLegacyFrontEnd() if legacy else FakeFrontEnd()
        self.model = FakeModel(**model_kwargs)  # type: ignore[arg-type]


class FakeFrontEnd202503(FakeFrontEnd):
    """Test double of the frontend of the 2025-03 code: no zero_shot_spk_id."""

    def frontend_zero_shot(self, tts_text, prompt_text, prompt_speech_16k, resample_rate):  # noqa: ANN001
        return self._zero_shot(tts_text, prompt_text, prompt_speech_16k[0].numpy(), "")


class FakeModel202503(FakeModel):
    """Test double of CosyVoice2Model of the 2025-03 code: `token2wav` with a flow cache, no token_offset."""

    def __init__(self) -> None:
        super().__init__()
        self.flow_cache_dict: dict[str, object] = {}

    def token2wav(self, token, prompt_token, prompt_feat, embedding, uuid, finalize=False, speed=1.0):  # noqa: ANN001
        raise AssertionError("the adapter must refuse this release before synthesis")


class FakeModelTrtContexts(FakeModel):
    """Test double of CosyVoice2Model from 2025-04-16 to 2025-05-30: token2wav enters `trt_context_dict[uuid]`,
    which only upstream's own `tts` fills."""

    def __init__(self) -> None:
        super().__init__()
        self.trt_context_dict: dict[str, object] = {}


# -- helpers --------------------------------------------------------------------------------------------


def clip(seconds: float = 4.0, freq: float = 180.0) -> np.ndarray:
    t = np.arange(int(16000 * seconds)) / 16000
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):  # noqa: ANN001, ANN202 - the default voice's cache goes to a temp folder
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def backend(fake: FakeCosyVoice2 | None = None, **settings: object) -> CosyVoiceBackend:
    s = CosyVoiceSettings(model_dir="/models/CosyVoice2-0.5B", device="cpu", **settings)  # type: ignore[arg-type]
    return CosyVoiceBackend(s, model=fake or FakeCosyVoice2(), version="test")


def profile(b: CosyVoiceBackend, voice_id: str, blob: bytes) -> Voice:
    return Voice(profile=VoiceProfile(voice_id, "cosyvoice2", b.info.version, blob, "transcript"))


def registered(fake: FakeCosyVoice2 | None = None, voice_id: str = "v1",
               **settings: object) -> tuple[CosyVoiceBackend, Voice]:
    b = backend(fake, **settings)
    return b, profile(b, voice_id, b.extract_features(clip(), 16000, "Hello there, this is my voice."))


def first_chunks(model: FakeModel) -> list[int]:
    """Tokens emitted by the first chunk of each request, from the double's token2wav log."""
    seen: dict[str, int] = {}
    for call in model.token2wav_calls:
        if call["uuid"] not in seen:
            seen[call["uuid"]] = call["n"] - LOOKAHEAD - call["offset"]  # type: ignore[operator]
    return list(seen.values())


def model_is_clean(model: FakeModel) -> bool:
    return not (model.tts_speech_token_dict or model.llm_end_dict or model.hift_cache_dict)


# -- missing package, CUDA, model folder ------------------------------------------------------------------


def full_model_dir(tmp_path):  # noqa: ANN001, ANN201
    d = tmp_path / "CosyVoice2-0.5B"
    d.mkdir()
    for name in cosyvoice_loader.REQUIRED_FILES:
        if name == "CosyVoice-BlankEN":
            (d / name).mkdir()
        else:
            (d / name).write_bytes(b"x")
    return d


def test_missing_model_dir_names_what_to_download(tmp_path):  # noqa: ANN001
    with pytest.raises(BackendUnavailable, match="model_dir is not set.*CosyVoice2-0.5B"):
        CosyVoiceBackend(CosyVoiceSettings(model_dir=""))
    with pytest.raises(BackendUnavailable, match="does not exist.*snapshot_download"):
        CosyVoiceBackend(CosyVoiceSettings(model_dir=str(tmp_path / "nope")))
    d = full_model_dir(tmp_path)
    (d / "flow.pt").unlink()
    with pytest.raises(BackendUnavailable, match=r"incomplete \(missing flow.pt\).*iic/CosyVoice2-0.5B"):
        CosyVoiceBackend(CosyVoiceSettings(model_dir=str(d)))


def test_missing_cuda_names_the_torch_build(tmp_path, monkeypatch):  # noqa: ANN001
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BackendUnavailable, match="No CUDA device.*install the CUDA build of torch"):
        CosyVoiceBackend(CosyVoiceSettings(model_dir=str(full_model_dir(tmp_path)), device="cuda"))


def test_missing_package_names_the_repository(tmp_path, monkeypatch):  # noqa: ANN001
    monkeypatch.setitem(sys.modules, "cosyvoice", None)  # import fails even where cosyvoice is installed
    with pytest.raises(BackendUnavailable, match="cosyvoice package is not "
                                                 "importable.*FunAudioLLM/CosyVoice.*requirements"):
        CosyVoiceBackend(CosyVoiceSettings(model_dir=str(full_model_dir(tmp_path)), device="cpu"))


def test_loader_passes_the_load_flags_the_installed_release_takes(tmp_path, monkeypatch):  # noqa: ANN001
    made: list[tuple[str, dict[str, object]]] = []

    class CosyVoice2:  # stand-in constructor of an older release (no load_vllm, no trt_concurrent)
        def __new__(cls, model_dir, load_jit=False, load_trt=False, fp16=False):  # noqa: ANN001
            made.append((model_dir, {"load_jit": load_jit, "load_trt": load_trt, "fp16": fp16}))
            return FakeCosyVoice2()

    mod = types.ModuleType("cosyvoice.cli.cosyvoice")
    mod.CosyVoice2 = CosyVoice2  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cosyvoice", types.ModuleType("cosyvoice"))
    monkeypatch.setitem(sys.modules, "cosyvoice.cli", types.ModuleType("cosyvoice.cli"))
    monkeypatch.setitem(sys.modules, "cosyvoice.cli.cosyvoice", mod)
    d = full_model_dir(tmp_path)
    b = CosyVoiceBackend(CosyVoiceSettings(model_dir=str(d), device="cpu", fp16=True, load_vllm=True), workers=4)
    assert made == [(str(d.resolve()), {"load_jit": False, "load_trt": False, "fp16": True})]
    assert b.info.name == "cosyvoice2" and b.info.sample_rate == RATE and b.info.clones
    assert "CosyVoice2-0.5B" in b.info.version and "fp16" not in b.info.version


# -- features ---------------------------------------------------------------------------------------------


def test_features_round_trip_skips_the_frontend_at_synthesis():
    fake = FakeCosyVoice2()
    b = backend(fake)
    blob = b.extract_features(clip(), 16000, "Hello there, this is my voice.")
    assert fake.frontend.speech_calls == 1
    assert isinstance(fake.frontend.prompts[0], str) and fake.frontend.prompts[0].endswith(".wav")  # new API: a path
    arrays, meta = cosyvoice_features.unpack_features(blob)
    assert meta["transcript"] == "Hello there, this is my voice."
    assert arrays["flow_prompt_speech_token"].dtype == np.int32 and arrays["flow_prompt_speech_token"].shape == (1, 100)
    assert arrays["prompt_speech_feat"].shape == (1, 200, 80) and arrays["flow_embedding"].shape == (1, 192)
    assert arrays["prompt_speech_feat_len"].tolist() == [200]

    # a fresh process: a new model, the blob from the database
    fresh = FakeCosyVoice2()
    b2 = backend(fresh)
    voice = profile(b2, "v1", blob)
    for _ in range(2):
        audio = np.concatenate(list(b2.synthesize(TEXT, voice)))
        assert audio.dtype == np.float32 and audio.ndim == 1 and len(audio) > RATE
    assert fresh.frontend.speech_calls == 0
    call = fresh.model.token2wav_calls[0]
    assert torch.equal(call["prompt_token"], torch.from_numpy(arrays["flow_prompt_speech_token"]))
    assert torch.equal(call["embedding"], torch.from_numpy(arrays["flow_embedding"]))
    assert [k for k in fresh.frontend.spk2info] == [f"voicebot:v1:{hashlib.sha256(blob).hexdigest()[:16]}"]
    assert model_is_clean(fresh.model)


def test_legacy_api_gets_a_16k_tensor():
    fake = FakeCosyVoice2(legacy=True)
    b = backend(fake)
    blob = b.extract_features(clip(3.0), 16000, "Hello.")
    prompt = fake.frontend.prompts[0]
    assert isinstance(prompt, torch.Tensor) and prompt.shape == (1, 48000)
    assert cosyvoice_features.unpack_features(blob)[0]["llm_prompt_speech_token"].shape == (1, 75)
    assert len(np.concatenate(list(b.synthesize(TEXT, profile(b, "v", blob))))) > 0


def test_extract_features_resamples_and_bounds_the_clip():
    fake = FakeCosyVoice2()
    b = backend(fake)
    b.extract_features(np.zeros(48000 * 2, dtype=np.float32) + 0.1, 48000, "Hi there.")
    features = cosyvoice_features.unpack_features(b.extract_features(clip(2.0), 16000, "Hi."))[0]
    assert features["flow_prompt_speech_token"].shape == (1, 50)
    with pytest.raises(EngineError, match="0.5 to 30 s"):
        b.extract_features(clip(31.0), 16000, "Too long.")
    with pytest.raises(TextRejected, match="transcript"):
        b.extract_features(clip(), 16000, "  ")


def test_bad_blobs_and_foreign_profiles_are_clear_errors():
    b = backend()
    with pytest.raises(EngineError, match="unreadable; register the voice again"):
        list(b.synthesize(TEXT, profile(b, "v", b"not an npz")))
    foreign = Voice(profile=VoiceProfile("v", "piper", "x", b"{}", ""))
    with pytest.raises(EngineError, match="registered for the piper engine"):
        list(b.synthesize(TEXT, foreign))


def test_speaker_table_is_lru_bounded():
    fake = FakeCosyVoice2()
    fake.frontend.spk2info["builtin"] = {"embedding": torch.ones(1, 192)}
    b = backend(fake, speaker_cache=2)
    voices = [profile(b, f"v{i}", b.extract_features(clip(freq=150.0 + 30 * i), 16000, "Hello.")) for i in range(3)]
    calls = fake.frontend.speech_calls
    ours = lambda: sorted(k.split(":")[1] for k in fake.frontend.spk2info if k.startswith("voicebot:"))  # noqa: E731
    for v in voices[:2]:
        list(b.synthesize("Hi.", v))
    assert ours() == ["v0", "v1"]
    list(b.synthesize("Hi.", voices[0]))  # v0 is now the most recent
    list(b.synthesize("Hi.", voices[2]))  # evicts v1
    assert ours() == ["v0", "v2"] and "builtin" in fake.frontend.spk2info
    list(b.synthesize("Hi.", voices[1]))  # back from its blob, evicting v0
    assert ours() == ["v1", "v2"]
    assert fake.frontend.speech_calls == calls  # never the speech frontend again
    b.close()
    assert list(fake.frontend.spk2info) == ["builtin"]


def test_without_a_profile_the_builtin_speaker():
    fake = FakeCosyVoice2()
    fake.frontend.spk2info["narrator"] = {"embedding": torch.ones(1, 192)}
    b = backend(fake)
    assert b.info.voices == ("narrator",)
    assert len(np.concatenate(list(b.synthesize(TEXT, Voice())))) > 0
    assert fake.model.token2wav_calls[0]["prompt_token"].shape == (1, 0)
    assert fake.frontend.speech_calls == 0  # a built-in speaker needs no default voice
    with pytest.raises(EngineError, match="Unknown voice 'nobody'; this engine has: narrator"):
        list(b.synthesize(TEXT, Voice(name="nobody")))


def test_a_model_without_speakers_speaks_the_piper_made_default_voice(tmp_path):  # noqa: ANN001
    fake = FakeCosyVoice2()  # like the stock CosyVoice2-0.5B download: no spk2info.pt, an empty table
    b = backend(fake)
    assert b.info.voices == ("default",)
    audio = np.concatenate(list(b.synthesize(TEXT, Voice())))
    assert len(audio) == len(TEXT) * 2 * SAMPLES_PER_TOKEN
    assert fake.frontend.speech_calls == 1  # the zero-shot frontend ran once, on the Piper prompt
    prompt, rate = fake.frontend.prompt_speech[0], 16000
    assert 3.0 < len(prompt) / rate < 12.0  # Piper's reading of the fixed sentence
    assert float(np.sqrt(np.mean(prompt**2))) > 0.01  # speech, not silence
    call = fake.model.token2wav_calls[0]
    assert call["prompt_token"].shape[1] == int(len(prompt) / 16000 * 25)  # spoken from those features
    list(b.synthesize("Again.", Voice(name="default")))
    assert fake.frontend.speech_calls == 1  # made once per process
    [cached] = list((tmp_path / "cache" / "voicebot" / "cosyvoice-default").glob("*.npz"))
    assert cosyvoice_features.unpack_features(cached.read_bytes())[1]["transcript"] == cv.cosyvoice_default.SENTENCE

    fresh = FakeCosyVoice2()  # the next start: from the cache, neither Piper nor the frontend
    list(backend(fresh).synthesize(TEXT, Voice()))
    assert fresh.frontend.speech_calls == 0

    cached.write_bytes(b"damaged")
    again = FakeCosyVoice2()
    list(backend(again).synthesize(TEXT, Voice()))
    assert again.frontend.speech_calls == 1 and cosyvoice_features.unpack_features(cached.read_bytes())
    with pytest.raises(EngineError, match="Unknown voice 'nobody'; this engine has: default"):
        list(b.synthesize(TEXT, Voice(name="nobody")))


# -- the upstream API window ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frontend", "model", "why"),
    [
        (FakeFrontEnd202503, FakeModel202503, "no zero_shot_spk_id.*no token_offset and stream"),
        (FakeLegacyFrontEnd, FakeModelTrtContexts, "per-request TensorRT context"),
    ],
)
def test_an_older_clone_is_refused_naming_the_commit_it_needs(frontend, model, why):  # noqa: ANN001
    fake = FakeCosyVoice2()
    fake.frontend, fake.model = frontend(), model()
    with pytest.raises(BackendUnavailable, match=f"older than the API.*{why}.*Check out commit 6dd68b9 "
                                                 "\\(2025-05-30\\) or later.*checkout ace7c47"):
        backend(fake)


# -- one GPU for every part ----------------------------------------------------------------------------------


def test_a_cuda_index_puts_every_part_on_that_gpu(tmp_path, monkeypatch):  # noqa: ANN001
    current: list[tuple[str, int]] = []  # (thread, GPU) per torch.cuda.set_device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: current.append((threading.current_thread().name, i)))
    sessions: list[tuple[str, int]] = []

    def session_double(path: str, index: int) -> object:  # stands for an onnxruntime CUDA session (no GPU here)
        sessions.append((path.rsplit("/", 1)[-1], index))
        return object()

    made: list[FakeCosyVoice2] = []

    def construct(model_dir: str, **kwargs: object) -> FakeCosyVoice2:
        assert current and current[-1][1] == 1  # upstream builds on the current device: it must already be 1
        made.append(FakeCosyVoice2())
        return made[-1]

    mod = types.ModuleType("cosyvoice.cli.cosyvoice")
    mod.CosyVoice2 = construct  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cosyvoice", types.ModuleType("cosyvoice"))
    monkeypatch.setitem(sys.modules, "cosyvoice.cli", types.ModuleType("cosyvoice.cli"))
    monkeypatch.setitem(sys.modules, "cosyvoice.cli.cosyvoice", mod)
    monkeypatch.setattr(cosyvoice_device, "cuda_session", session_double)
    d = full_model_dir(tmp_path)
    b = CosyVoiceBackend(CosyVoiceSettings(model_dir=str(d), device="cuda:1"))
    fake = made[0]
    assert fake.frontend.device == torch.device("cuda", 1) and fake.model.device == torch.device("cuda", 1)
    assert sorted(sessions) == [("campplus.onnx", 1), ("speech_tokenizer_v2.onnx", 1)]

    fake.frontend.device = torch.device("cpu")  # the double's tensors stay on the CPU for the synthesis below
    voice = profile(b, "v", b.extract_features(clip(), 16000, "Hello."))
    current.clear()
    result: list[np.ndarray] = []
    worker = threading.Thread(target=lambda: result.extend(b.synthesize(TEXT, voice)), name="pool-worker")
    worker.start()
    worker.join(30)
    assert result
    assert ("pool-worker", 1) in current and ("cosyvoice-llm", 1) in current  # each thread binds GPU 1 itself
    assert {i for _, i in current} == {1}

    with pytest.raises(BackendUnavailable, match="cuda:2, but torch sees 2 GPU"):
        CosyVoiceBackend(CosyVoiceSettings(model_dir=str(d), device="cuda:2"))


# -- streaming and hop length -------------------------------------------------------------------------------


def test_streaming_yields_each_chunk_as_the_model_produces_it():
    fake = FakeCosyVoice2()
    b, voice = registered(fake)
    fake.model.gate, fake.model.gate_after = threading.Event(), 30
    gen = b.synthesize(TEXT, voice)
    first = next(gen)  # the LLM is held after 30 tokens: this chunk cannot have waited for the rest
    assert len(first) == 10_560  # first_hop_len (15) tokens less HiFT's held-back overlap, as upstream measured
    assert fake.model.llm_jobs_finished == 0
    fake.model.gate.set()
    rest = list(gen)
    hops = [c["n"] - c["offset"] - LOOKAHEAD for c in fake.model.token2wav_calls if not c["finalize"]]
    assert hops == [15, 35, 50]  # 100 prompt tokens: 100+15+35 = 150 is back on the 25-token grid
    assert sum(map(len, [first, *rest])) == len(TEXT) * 2 * SAMPLES_PER_TOKEN  # every token's audio, once
    assert all(c["stream"] for c in fake.model.token2wav_calls if not c["finalize"])
    assert model_is_clean(fake.model)


def test_upstream_tts_grows_its_first_chunk_but_the_adapter_does_not():
    fake = FakeCosyVoice2()
    b, voice = registered(fake)
    list(b.synthesize(TEXT, voice))  # registers the voice
    inp = fake.frontend.frontend_zero_shot(TEXT, "", None, RATE, next(iter(fake.frontend.spk2info)))
    fake.model.token2wav_calls.clear()
    for _ in range(5):  # the double reproduces upstream's shared-state drift (PR #1849)
        list(fake.model.tts(**inp, stream=True))
    upstream = first_chunks(fake.model)
    assert upstream[0] == 25 and upstream[4] == 100  # ~4 s before the first sound

    fake.model.token2wav_calls.clear()
    for _ in range(5):
        list(b.synthesize(TEXT, voice))
    assert first_chunks(fake.model) == [15] * 5  # request 5 starts as small as request 1


def test_concurrent_requests_both_get_small_first_chunks():
    fake = FakeCosyVoice2(token_delay=0.0005)
    b, voice = registered(fake)
    fake.model.token2wav_calls.clear()
    results: list[list[np.ndarray]] = [[], []]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = list(b.synthesize(TEXT, voice))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert first_chunks(fake.model) == [15, 15]
    assert all(len(r[0]) == 15 * SAMPLES_PER_TOKEN - HIFT_CACHE for r in results)
    assert len({sum(map(len, r)) for r in results}) == 1
    assert model_is_clean(fake.model)


def test_non_streaming_and_speed():
    fake = FakeCosyVoice2()
    b, voice = registered(fake, streaming=False)
    chunks = list(b.synthesize(TEXT, voice))
    assert len(chunks) == 1 and fake.model.token2wav_calls[-1]["finalize"]
    fake2 = FakeCosyVoice2()
    b2, voice2 = registered(fake2)  # streaming on, but a speed change is applied to the whole mel
    chunks = list(b2.synthesize(TEXT, Voice(speed=1.25, profile=voice2.profile)))
    assert len(chunks) == 1 and fake2.model.token2wav_calls[-1]["speed"] == 1.25
    with pytest.raises(EngineError, match="Speed must be between"):
        list(b2.synthesize(TEXT, Voice(speed=5.0, profile=voice2.profile)))


def test_cancel_stops_the_request_and_its_llm():
    fake = FakeCosyVoice2(token_delay=0.001)
    b, voice = registered(fake)
    token = CancelToken()
    gen = b.synthesize(TEXT * 3, voice, cancel=token)
    next(gen)
    token.cancel()
    assert list(gen) == []
    deadline = time.monotonic() + 5
    while not model_is_clean(fake.model) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert model_is_clean(fake.model)
    assert fake.model.llm_jobs_finished == 0  # stopped early, not run to the end


def test_fallback_to_upstream_tts_resets_the_hop_length():
    fake = FakeCosyVoice2()
    inner = fake.model

    class NoInternals:  # a release whose model internals the adapter does not know: only tts
        token_max_hop_len = 100
        token_hop_len = property(lambda self: inner.token_hop_len, lambda self, v: setattr(inner, "token_hop_len", v))

        def tts(self, **kwargs: object):  # noqa: ANN202
            return inner.tts(**kwargs)

    fake.model = NoInternals()  # type: ignore[assignment]
    b = backend(fake)
    voice = profile(b, "v", b.extract_features(clip(), 16000, "Hello."))
    for _ in range(3):
        assert len(list(b.synthesize(TEXT, voice))) > 1
    assert first_chunks(inner) == [25, 25, 25]  # without the reset: 25, 100, 100


# -- out of memory ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["token2wav", "llm"])
def test_out_of_memory_fails_one_request_and_the_next_works(where):  # noqa: ANN001
    fake = FakeCosyVoice2()
    b, voice = registered(fake)
    if where == "token2wav":
        fake.model.fail_token2wav = torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    else:
        fake.model.fail_llm = RuntimeError("CUDA error: out of memory")
    with pytest.raises(EngineError) as info:
        list(b.synthesize(TEXT, voice))
    assert str(info.value) == cv.OOM_MESSAGE
    deadline = time.monotonic() + 5
    while not model_is_clean(fake.model) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert model_is_clean(fake.model)
    assert len(np.concatenate(list(b.synthesize(TEXT, voice)))) > 0


def test_other_errors_are_not_called_out_of_memory():
    fake = FakeCosyVoice2()
    b, voice = registered(fake)
    fake.model.fail_token2wav = AssertionError("shape mismatch")
    with pytest.raises(AssertionError):
        list(b.synthesize(TEXT, voice))


# -- pure helpers -------------------------------------------------------------------------------------------


def test_suggest_concurrency_from_gpu_memory():
    gib, suggest = cosyvoice_loader.GIB, cosyvoice_loader.suggest_concurrency
    assert suggest(80 * gib, per_stream_bytes=2 * gib, reserve_bytes=2 * gib) == 16  # capped
    assert suggest(12 * gib, per_stream_bytes=2 * gib, reserve_bytes=2 * gib) == 5
    assert suggest(1 * gib) == 1  # the model fits: at least one stream
    assert suggest(130 * gib, cap=100) == 85  # (130 - 2) / 1.5
    with pytest.raises(ValueError):
        suggest(gib, per_stream_bytes=0)


def test_hop_schedule():
    take = lambda it, n: [next(it) for _ in range(n)]  # noqa: E731
    assert take(cv.hop_schedule(100, 15, 25, 25, 2, 100), 5) == [15, 35, 50, 100, 100]
    assert take(cv.hop_schedule(112, 15, 25, 25, 2, 100), 3) == [15, 48, 50]  # 112+15+48 = 175
    assert take(cv.hop_schedule(112, 25, 25, 25, 2, 100), 3) == [38, 25, 50]  # upstream's aligned first hop
    assert take(cv.hop_schedule(0, 15, 25, 25, 1, 100), 4) == [15, 35, 25, 25]


def test_gpu_bench_skips_cleanly_without_a_gpu_or_model(tmp_path, monkeypatch, capsys):  # noqa: ANN001
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "gpu.py"
    spec = importlib.util.spec_from_file_location("bench_gpu", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_gpu", bench)
    spec.loader.exec_module(bench)
    no_config = ["--config", str(tmp_path / "none.toml")]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench.main(no_config) == 0
    assert capsys.readouterr().out.startswith("skipped: no CUDA GPU")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert bench.main([*no_config, "--model-dir", str(tmp_path / "missing")]) == 0
    assert capsys.readouterr().out.startswith("skipped: no model dir")
