"""Typed, frozen engine settings; bot/config.py fills them from the [engine] tables of config.toml."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.backends import DEFAULT_BACKEND


@dataclass(frozen=True)
class PiperSettings:
    model: str = ""  # path to a Piper .onnx voice; empty = the bundled en_US-joe-medium
    speaker_id: int = 0  # for multi-speaker models
    noise_scale: float = 0.667
    noise_w: float = 0.8
    voices_dir: str = ""  # folder of extra Piper voices (.onnx + .onnx.json), each speaking its .onnx.json's language
    intra_op_threads: int = 0  # onnxruntime threads per worker; 0: the CPUs this process may use // workers
    # how a registered voice is matched (engine.voices.matching.MATCHING_MODES): "clear" (Piper's own audio,
    # words as clear as the bundled voice) or "close" (vocoded, nearer the speaker, about 1.7x the word errors)
    matching: str = "clear"


@dataclass(frozen=True)
class KokoroSettings:
    assets_dir: str = ""  # the model and voice packs setup installs; empty: inside the Python environment
    intra_op_threads: int = 0  # onnxruntime threads per inference (sessions shared by the workers); 0: the usable CPUs


@dataclass(frozen=True)
class EspeakSettings:
    enabled: bool = True  # speak languages no other voice speaks with eSpeak NG (when installed)
    command: str = "espeak-ng"


@dataclass(frozen=True)
class CosyVoiceSettings:
    model_dir: str = ""  # folder of the downloaded CosyVoice2-0.5B model
    device: str = "cuda"
    fp16: bool = False
    load_jit: bool = False
    load_trt: bool = False
    load_vllm: bool = False
    streaming: bool = True
    token_hop_len: int = 25  # tokens per streamed chunk after the first
    first_hop_len: int = 15  # a short first hop lowers first-chunk latency
    speed: float = 1.0
    speaker_cache: int = 64  # voices kept in the model's speaker table (LRU)


@dataclass(frozen=True)
class ConversionSettings:
    model: str = ""  # an operator's voice-conversion .onnx (docs/conversion.md); empty: off


@dataclass(frozen=True)
class RemoteSettings:
    url: str = "http://127.0.0.1:8600"  # base URL of an OpenAI-compatible speech server
    model: str = "default"
    api_key_env: str = "VOICEBOT_ENGINE_API_KEY"  # name of the environment variable holding the key
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    retries: int = 2  # on connect errors only


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8600
    api_key_env: str = "VOICEBOT_ENGINE_API_KEY"
    max_input_chars: int = 4096
    max_upload_bytes: int = 10_000_000
    max_upload_parts: int = 8  # multipart parts in one upload (file, name, transcript and a few unknown)
    header_timeout_s: float = 10.0  # a connection must send a whole request head within this (also idle keep-alive)
    body_timeout_s: float = 30.0  # a request body must arrive within this
    write_timeout_s: float = 15.0  # a client that reads nothing for this long is dropped and frees its slot
    tls_cert: str = ""  # PEM certificate chain: serve HTTPS
    tls_key: str = ""  # PEM private key of tls_cert
    trusted_proxy_tls: bool = False  # a trusted reverse proxy terminates TLS: allow plain HTTP beyond loopback
    max_streams: int = 64  # speech responses at once; past it: 429
    voices_dir: str = ""  # folder of registered voices; empty: $XDG_DATA_HOME/voicebot/engine-voices


@dataclass(frozen=True)
class EngineSettings:
    backend: str = DEFAULT_BACKEND  # a name of engine.backends.BACKENDS
    workers: int = 2  # inference threads
    max_concurrency: int = 2  # segments synthesizing at once, across all keys
    per_key_limit: int = 1  # segments of one key (guild, client) synthesizing at once
    segment_timeout_s: float = 30.0
    max_abandoned: int = 2  # timed-out/skipped inference threads that may still be finishing (see streaming.py)
    first_segment_chars: int = 60  # the first segment is cut at a clause near this length
    max_segment_chars: int = 150  # also bounds one inference's memory: a session's arena grows with it
    max_text_chars: int = 2000  # longer text is refused; the bot checks its speech.max_text_chars fits (bot/config.py)
    loudness_target_dbfs: float = -20.0  # RMS target for normalization
    fade_ms: float = 5.0  # fade at utterance edges only
    kokoro: KokoroSettings = field(default_factory=KokoroSettings)
    piper: PiperSettings = field(default_factory=PiperSettings)
    espeak: EspeakSettings = field(default_factory=EspeakSettings)
    cosyvoice: CosyVoiceSettings = field(default_factory=CosyVoiceSettings)
    conversion: ConversionSettings = field(default_factory=ConversionSettings)
    remote: RemoteSettings = field(default_factory=RemoteSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
