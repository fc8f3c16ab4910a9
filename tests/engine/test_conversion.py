"""engine.conversion: a miniature OpenVoice converter (random weights) exported by the real exporter, run by the engine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import warnings
from pathlib import Path

import numpy as np
import onnx  # noqa: F401 - torch's ONNX exporter needs it (the test extra installs it)
import pytest
import torch
from torch import nn

from engine.__main__ import main  # noqa: E402
from engine.base import FRAME_BYTES, BackendUnavailable, CancelToken, EngineError, Voice  # noqa: E402
from engine.conversion.backend import ConvertedBackend  # noqa: E402
from engine.conversion.export_openvoice import export  # noqa: E402
from engine.conversion.model import Converter, ConverterConfig, linear_spectrogram  # noqa: E402
from engine.factory import build_engine  # noqa: E402
from engine.settings import ConversionSettings, EngineSettings  # noqa: E402
from engine.streaming import StreamingEngine  # noqa: E402
from engine.voices.registration import Registration, register_clip  # noqa: E402
from tests.engine import clips  # noqa: E402

DATA = {"sampling_rate": 22_050, "filter_length": 1024, "hop_length": 256, "win_length": 1024}
GIN = 256
BINS = 513
HOP = 256


class TinyReferenceEncoder(nn.Module):
    """Spectrogram frames [1, T, bins] -> [1, gin]: layer norm, strided 2-D convolutions, a GRU, a projection."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(BINS)
        self.convs = nn.ModuleList([
            nn.utils.parametrizations.weight_norm(nn.Conv2d(1, 4, 3, 2, 1)), nn.Conv2d(4, 8, 3, 2, 1)])
        self.gru = nn.GRU(8 * 129, 16, batch_first=True)
        self.proj = nn.Linear(16, GIN)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        x = self.norm(frames.view(1, 1, -1, BINS))
        for conv in self.convs:
            x = torch.relu(conv(x))
        x = x.transpose(1, 2).reshape(1, x.size(2), -1)
        _, h = self.gru(x)
        return self.proj(h.squeeze(0))


class Coupling(nn.Module):
    """A mean-only affine coupling conditioned on the speaker, then a channel flip."""

    def __init__(self, channels: int, hidden: int) -> None:
        super().__init__()
        self.pre = nn.Conv1d(channels // 2, hidden, 5, padding=2)
        self.cond = nn.Conv1d(GIN, hidden, 1)
        self.post = nn.Conv1d(hidden, channels // 2, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, g: torch.Tensor, reverse: bool = False) -> torch.Tensor:
        if reverse:
            x = torch.flip(x, [1])
        x0, x1 = torch.chunk(x, 2, dim=1)
        shift = self.post(torch.tanh(self.pre(x0) + self.cond(g))) * mask
        x = torch.cat([x0, x1 - shift if reverse else x1 + shift], 1) * mask
        return x if reverse else torch.flip(x, [1])


class TinyOpenVoice(nn.Module):
    """OpenVoice's converter in miniature: `ref_enc`, and `voice_conversion` through a posterior encoder, a
    speaker-conditioned flow (forward with the source, back with the target) and an upsampling decoder."""

    def __init__(self, inter: int = 8, hidden: int = 16) -> None:
        super().__init__()
        self.ref_enc = TinyReferenceEncoder()
        self.inter = inter
        self.enc_pre = nn.Conv1d(BINS, hidden, 1)
        self.enc_cond = nn.Conv1d(GIN, hidden, 1)
        self.enc_proj = nn.Conv1d(hidden, 2 * inter, 1)
        self.flow = Coupling(inter, hidden)
        self.dec_pre = nn.Conv1d(inter, 32, 7, padding=3)
        self.dec_cond = nn.Conv1d(GIN, 32, 1)
        with warnings.catch_warnings():  # the old weight_norm, as upstream's decoder has it
            warnings.simplefilter("ignore", FutureWarning)
            self.ups = nn.ModuleList(  # 256 samples a frame, as the hop
                nn.utils.weight_norm(nn.ConvTranspose1d(32 >> i, 16 >> i, 2 * rate, rate, rate // 2))
                for i, rate in enumerate((8, 8, 4)))
        self.dec_post = nn.Conv1d(4, 1, 7, padding=3)

    def voice_conversion(self, y, y_lengths, sid_src, sid_tgt, tau=1.0):
        mask = (torch.arange(y.size(2)).unsqueeze(0) < y_lengths.unsqueeze(1)).unsqueeze(1).to(y.dtype)
        h = torch.tanh(self.enc_pre(y) + self.enc_cond(sid_src)) * mask
        m, logs = torch.split(self.enc_proj(h) * mask, self.inter, dim=1)
        z = (m + torch.randn_like(m) * tau * torch.exp(logs)) * mask
        z_hat = self.flow(self.flow(z, mask, sid_src), mask, sid_tgt, reverse=True)
        x = self.dec_pre(z_hat * mask) + self.dec_cond(sid_tgt)
        for up in self.ups:
            x = up(torch.nn.functional.leaky_relu(x, 0.1))
        return torch.tanh(self.dec_post(x)), mask, (z, z_hat)


@pytest.fixture(scope="module")
def tiny() -> TinyOpenVoice:
    torch.manual_seed(0)
    return TinyOpenVoice()


@pytest.fixture(scope="module")
def model_path(tmp_path_factory, tiny: TinyOpenVoice) -> str:
    out = tmp_path_factory.mktemp("converter") / "tiny.onnx"
    written = export(tiny, DATA, out, gin_channels=GIN)
    assert [p.name for p in written] == ["tiny.onnx", "tiny.speaker.onnx", "tiny.onnx.json"]
    return str(out)


@pytest.fixture(scope="module")
def converter(model_path) -> Converter:
    return Converter(model_path, intra_op_threads=1, workers=1)


class CountingConverter(Converter):
    """The converter, counting conversions begun and keeping each one's cancel token."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.tokens: list[CancelToken | None] = []

    def convert(self, audio, rate, source, target, cancel=None):
        self.tokens.append(cancel)
        return super().convert(audio, rate, source, target, cancel)


def test_spectrogram_is_openvoices_stft() -> None:
    x = clips.speechlike(1.3, 22_050)
    config = ConverterConfig(speaker_encoder="")
    ours = linear_spectrogram(x, config)
    pad = (1024 - HOP) // 2
    padded = torch.nn.functional.pad(torch.from_numpy(x)[None, None], (pad, pad), mode="reflect")[0]
    stft = torch.stft(padded.double(), 1024, HOP, 1024, window=torch.hann_window(1024, dtype=torch.float64),
                      center=False, return_complex=True)
    theirs = torch.sqrt(stft.real ** 2 + stft.imag ** 2 + 1e-6).float().numpy()
    assert ours.shape == theirs.shape == (1, BINS, (len(x) + 2 * pad - 1024) // HOP + 1)
    assert np.allclose(ours, theirs, atol=1e-4, rtol=1e-4)
    assert linear_spectrogram(x[:200], config).shape == (1, BINS, 0)  # too short: no frame


def test_exported_graphs_shapes_and_values(converter: Converter, tiny: TinyOpenVoice) -> None:
    x = clips.speechlike(1.0, 16_000)
    se = converter.embed(x, 16_000)
    assert se.shape == (GIN,) and se.dtype == np.float32 and np.all(np.isfinite(se))
    other = converter.embed(clips.speechlike(1.0, 16_000, f0=220.0, seed=1), 16_000)
    assert not np.allclose(se, other)
    spec = converter.spectrogram(x, 16_000)
    feeds = {"spec": spec, "spec_lengths": np.array([spec.shape[-1]]), "src_se": se.reshape(1, -1, 1),
             "tgt_se": other.reshape(1, -1, 1), "tau": np.array([0.0], np.float32)}
    with converter._sessions.lease() as session:
        audio = session.run(None, feeds)[0]
    assert audio.shape == (1, 1, spec.shape[-1] * HOP)
    with torch.no_grad():  # the graphs compute what the model does (tau 0: no sampling)
        want_se = tiny.ref_enc(torch.from_numpy(spec).transpose(1, 2)).numpy().reshape(-1)
        args = [torch.from_numpy(np.asarray(feeds[k])) for k in ("spec", "spec_lengths", "src_se", "tgt_se", "tau")]
        want_audio = tiny.voice_conversion(*args)[0].numpy()
    assert np.allclose(se, want_se, atol=1e-5) and np.allclose(audio, want_audio, atol=1e-5)
    out = converter.convert(x, 16_000, se, other)  # back at the caller's rate
    assert abs(len(out) - len(x)) < 0.02 * 16_000 and np.max(np.abs(out)) <= 1.0
    cancelled = CancelToken()
    cancelled.cancel()
    with pytest.raises(EngineError, match="cancelled"):  # the token reaches onnxruntime (RunOptions.terminate)
        converter.convert(x, 16_000, se, other, cancelled)


def test_registration_stores_the_target_embedding(piper_backend, converter: Converter) -> None:
    backend = ConvertedBackend(piper_backend, converter)
    assert backend.info.name == "piper+converter" and backend.info.clones
    assert backend.info.version.startswith(piper_backend.info.version) and converter.sha256[:16] in backend.info.version
    assert backend.source.shape == (GIN,)
    clip = clips.speechlike(4.0, 16_000, f0=210.0)
    reg = register_clip(clips.wav(clip), "A test clip.", [backend])
    blob = reg.features[(backend.info.name, backend.info.version)]
    assert len(blob) == 4 * GIN and reg.profile is None  # no voice matching: the converter speaks it
    voice = reg.voice(backend.info)
    assert np.allclose(backend.target(voice), converter.embed(clip, 16_000), atol=1e-3)
    assert backend.target(Voice()) is None
    with pytest.raises(EngineError, match="register the voice again"):
        backend.target(dataclasses.replace(voice, profile=dataclasses.replace(voice.profile, features=b"x" * 12)))


async def test_streams_each_segment_converted(piper_backend, model_path) -> None:
    counting = CountingConverter(model_path, intra_op_threads=1, workers=1)
    backend = ConvertedBackend(piper_backend, counting)
    features = backend.extract_features(clips.speechlike(4.0, 16_000, f0=210.0), 16_000, "")
    voice = Voice(name="v1", profile=_profile(backend, features))
    engine = StreamingEngine(backend, EngineSettings(workers=1, max_concurrency=1, first_segment_chars=20))
    text = "Hello there, my friend. The weather is fine today, and the river is calm."
    try:
        counting.tokens.clear()
        chunks = [c async for c in engine.stream(text, voice, key="g")]
        converted = len(counting.tokens)
        plain = b"".join([c.pcm async for c in engine.stream(text, Voice(), key="g")])
    finally:
        await engine.close()
    assert len(engine.segments(text)) >= 2 and converted >= len(engine.segments(text))
    assert len(counting.tokens) == converted  # the default voice is not converted
    assert all(isinstance(t, CancelToken) for t in counting.tokens)
    assert all(len(c.pcm) % FRAME_BYTES == 0 and c.sample_rate == 48_000 and c.channels == 2 for c in chunks)
    assert chunks[-1].final and {c.segment for c in chunks} == set(range(len(engine.segments(text))))
    pcm = b"".join(c.pcm for c in chunks)
    assert pcm != plain[: len(pcm)]
    level = 20 * np.log10(np.sqrt(np.mean((np.frombuffer(pcm, "<i2") / 32768.0) ** 2)))
    assert -26 < level < -14  # the engine's loudness normalization, as for any backend


def _profile(backend: ConvertedBackend, features: bytes):
    from engine.base import VoiceProfile

    return VoiceProfile("v1", backend.info.name, backend.info.version, features)


async def test_closing_the_stream_stops_conversion(piper_backend, model_path) -> None:
    counting = CountingConverter(model_path, intra_op_threads=1, workers=1)
    backend = ConvertedBackend(piper_backend, counting)
    features = backend.extract_features(clips.speechlike(4.0, 16_000, f0=210.0), 16_000, "")
    voice = Voice(name="v1", profile=_profile(backend, features))
    engine = StreamingEngine(backend, EngineSettings(workers=1, max_concurrency=1))
    text = " ".join(f"Sentence number {n} is here, and it goes on a while." for n in range(12))
    counting.tokens.clear()
    try:
        stream = engine.stream(text, voice, key="g")
        await stream.__anext__()
        await stream.aclose()
        for _ in range(20):  # a slot granted as the stream closed is given back on the loop's next turns
            if engine.stats().running == 0:
                break
            await asyncio.sleep(0.01)
        assert engine.stats().running == 0
        begun = len(counting.tokens)
        await asyncio.sleep(1.0)
        assert len(counting.tokens) <= begun + 1  # at most the piece in flight finishes; nothing new starts
        assert begun < len(engine.segments(text))
        assert all(t.cancelled for t in counting.tokens)
        assert engine.stats().cancelled == 1
        after = [c async for c in engine.stream("Next one.", voice, key="h")]
        assert after and after[-1].final
    finally:
        await engine.close()


def test_bad_model_is_a_clear_startup_error(tmp_path, model_path) -> None:
    def build(path: str, backend: str = "piper"):
        return build_engine(EngineSettings(backend=backend, conversion=ConversionSettings(model=path)))

    with pytest.raises(BackendUnavailable, match="no voice converter at"):
        build(str(tmp_path / "missing.onnx"))
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(BackendUnavailable, match="config .* is missing or invalid"):
        build(str(junk))
    (tmp_path / "junk.onnx.json").write_text('{"speaker_encoder": "junk.speaker.onnx"}')
    with pytest.raises(BackendUnavailable, match="speaker encoder .*junk.speaker.onnx .* is missing"):
        build(str(junk))
    (tmp_path / "junk.onnx.json").write_text('{"speaker_encoder": "junk.onnx"}')
    with pytest.raises(BackendUnavailable, match="does not load"):
        build(str(junk))
    swapped = tmp_path / "swapped.onnx"  # the speaker encoder given as the converter
    swapped.write_bytes(Path(model_path).with_name("tiny.speaker.onnx").read_bytes())
    (tmp_path / "swapped.onnx.json").write_text('{"speaker_encoder": "swapped.onnx"}')
    with pytest.raises(BackendUnavailable, match="expected spec, spec_lengths"):
        build(str(swapped))
    with pytest.raises(BackendUnavailable, match="the remote backend's voices are its server's"):
        build(model_path, backend="remote")


def test_cli_registers_and_speaks_through_the_converter(tmp_path, model_path, capsys) -> None:
    clip, profile = tmp_path / "clip.wav", tmp_path / "voice.json"
    clip.write_bytes(clips.wav(clips.speechlike(4.0, 16_000, f0=210.0)))
    assert main(["register", str(clip), "--out", str(profile), "--converter", model_path, "--backend", "piper"]) == 0
    assert [name for name, _ in Registration.from_json(profile.read_text()).features] == ["piper+converter"]
    say = ["say", "Hello there.", "--profile", str(profile), "--out", str(tmp_path / "x.wav"), "--backend", "piper"]
    assert main([*say, "--converter", model_path]) == 0
    assert main(say) == 2  # without the converter the engine has no features for that voice
    capsys.readouterr()
    missing = tmp_path / "missing.onnx"
    assert main(["say", "Hello.", "--out", str(tmp_path / "y.wav"), "--converter", str(missing)]) == 2
    assert capsys.readouterr().err == f"error: engine.conversion.model: no voice converter at {missing}.\n"
