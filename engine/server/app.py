"""The engine server: OpenAI's speech API over an Engine (engine/base.py), streamed as synthesized (aiohttp).

`python -m engine serve [--host H] [--port P]`, one process per GPU. Routes:

- `POST /v1/audio/speech` JSON `{model, input, voice, response_format, speed}`; unknown fields are
  ignored. Extensions: `sample_rate` (pcm/wav output rate, one of SAMPLE_RATES) and `pitch`
  (semitones, -12..12). The body is chunked and written as each piece is synthesized.
  - `pcm`: raw s16le mono at 24 kHz like OpenAI's (or `sample_rate`); the rate is also sent in
    the `X-Sample-Rate` header.
  - `wav`: a WAV header with unknown sizes (0xFFFFFFFF), then the same PCM. The default when
    `response_format` is absent (OpenAI's default, mp3, is not offered).
  - `opus`: Ogg/Opus at 48 kHz mono, encoded by libsndfile with ~100 ms Ogg pages (engine/encoders.py).
  - `mp3`, `aac`, `flac`: 400 "not supported by this server".
  - `model`: "default", an OpenAI model name (tts-1, tts-1-hd, gpt-4o-mini-tts) or the backend's
    name: all the same engine. `voice`: "default"; a voice the backend lists; a registered id
    (`GET /v1/voices`); or an OpenAI voice name (alloy, echo, ...): on a single-speaker model these
    are all the default voice (no pitch trick: it would cost a WORLD pass per segment), on a
    multi-speaker model each name is one of its speakers.
- `POST /v1/voices` multipart `file` (WAV/FLAC/Ogg/MP3, at most max_upload_bytes), `name`,
  `transcript` -> `{"id", "name", ...}`, registered by the engine's `register` (off the loop) and kept
  in a VoiceStore folder (an LRU); `GET /v1/voices` lists them. The id is the content's
  (clip + transcript, per tenant): a server that lacks a voice answers 404 `voice_not_found` and a
  client uploads the clip again (engine/backends/remote.py does), so a fleet shares no voice state.
- `GET /healthz` (no auth) -> `{"status": "ok"}` only; `GET /v1/status` (auth) -> `{"status", "backend",
  "version", "sample_rate", "languages", ...}` (a remote backend declares the languages its server's voices speak).
- `GET /metrics`: Prometheus text from a per-app registry.

Auth (engine/server/auth.py): with a key in the environment variable `settings.api_key_env` (several
keys may be given, comma-separated; a blank one is refused at start) every route but /healthz needs
`Authorization: Bearer <key>`. Each key is a tenant: it sees and uses its own registered voices and
those the operator marked public. Without a key, any or no token is accepted (one tenant), and the
server refuses to listen beyond loopback. Errors are OpenAI-shaped:
`{"error": {"message", "type", "param", "code"}}`. Each request's segments are scheduled by the
engine's fair scheduler keyed by client (its token's fingerprint, else its address), so
`per_key_limit` is a per-client limit here; at most `max_streams` streams run at once (429 past it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import json
import logging
import os
import signal
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from engine.base import Engine, EngineError, SynthesisTimeout, TextRejected, Voice
from engine.encoders import OPUS_RATE, encoder_for
from engine.server.auth import Tenants, parse_keys, voice_id_for_tenant
from engine.settings import EngineSettings, ServerSettings
from engine.server.voice_store import StoredVoice, VoiceStore, VoiceStoreFull, clean_name, content_id, is_voice_id

log = logging.getLogger(__name__)

OPENAI_RATE = 24_000
SAMPLE_RATES = (8_000, 16_000, 22_050, 24_000, 44_100, 48_000)
FORMATS = ("pcm", "wav", "opus")
MODELS = ("default", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse",
    "marin", "cedar",
)
MIN_SPEED, MAX_SPEED = 0.25, 4.0
MAX_PITCH = 12.0
MAX_TRANSCRIPT_BYTES = 8_000
_JSON_OVERHEAD = 16_384
_MULTIPART_OVERHEAD = 65_536
OPEN_PATHS = frozenset({"/healthz"})
TENANT = web.RequestKey("tenant", str)  # set by the auth middleware on every authenticated request

# A registrar turns an upload (bytes, transcript) into (features for this backend, FLAC of the clip).
Registrar = Callable[[bytes, str], Awaitable[tuple[bytes, bytes]]]


class ApiError(Exception):
    """An error answered as OpenAI does: status plus {"error": {...}}."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param

    def response(self) -> web.Response:
        body = {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
        return web.json_response(body, status=self.status)


# -- requests -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpeechRequest:
    text: str
    voice: str
    fmt: str
    speed: float
    pitch: float
    rate: int


def _number(body: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    value = body.get(name, default)
    if value is None:
        return default
    # a range check alone: it refuses NaN and infinities, and math.isfinite overflows on a 400-digit int
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ApiError(400, f"'{name}' must be a number from {low:g} to {high:g}.", code="invalid_value", param=name)
    return float(value)


def parse_speech(body: Any, engine_name: str, max_chars: int) -> SpeechRequest:
    """Validate a /v1/audio/speech body (a parsed JSON value); unknown fields are ignored."""
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    model = body.get("model", "default")
    if not isinstance(model, str) or model not in (*MODELS, engine_name):
        raise ApiError(404, f"The model {model!r} does not exist; use one of: {', '.join(MODELS)}.",
                       code="model_not_found", param="model")
    text = body.get("input")
    if not isinstance(text, str) or not text.strip():
        raise ApiError(400, "'input' must be a non-empty string.", code="invalid_value", param="input")
    if len(text) > max_chars:
        raise ApiError(400, f"'input' is {len(text)} characters; the limit is {max_chars}.",
                       code="string_above_max_length", param="input")
    voice = body.get("voice", "default")
    if isinstance(voice, dict):  # newer clients send {"id": ...} for custom voices
        voice = voice.get("id")
    if not isinstance(voice, str) or len(voice) > 200:
        raise ApiError(400, "'voice' must be a voice name or id.", code="invalid_value", param="voice")
    fmt = body.get("response_format") or "wav"
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise ApiError(400, f"response_format {fmt!r} is not supported by this server; use one of: {', '.join(FORMATS)}.",
                       code="unsupported_response_format", param="response_format")
    if body.get("stream_format") not in (None, "audio"):
        raise ApiError(400, "Only stream_format 'audio' is supported.", code="invalid_value", param="stream_format")
    speed = _number(body, "speed", 1.0, MIN_SPEED, MAX_SPEED)
    pitch = _number(body, "pitch", 0.0, -MAX_PITCH, MAX_PITCH)
    rate = body.get("sample_rate") or OPENAI_RATE
    if rate not in SAMPLE_RATES or isinstance(rate, bool):
        raise ApiError(400, f"'sample_rate' must be one of {', '.join(map(str, SAMPLE_RATES))}.",
                       code="invalid_value", param="sample_rate")
    return SpeechRequest(text, voice.strip(), fmt, speed, pitch, OPUS_RATE if fmt == "opus" else int(rate))


async def _read_bounded(request: web.Request, limit: int, timeout_s: float) -> bytes:
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)
    out = bytearray()
    async with _body_deadline(timeout_s):
        while True:
            chunk = await request.content.read(65_536)
            if not chunk:
                return bytes(out)
            out += chunk
            if len(out) > limit:
                raise _too_large(limit)


@contextlib.asynccontextmanager
async def _body_deadline(timeout_s: float) -> AsyncIterator[None]:
    """The request body must arrive within `timeout_s` (408 otherwise)."""
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except TimeoutError:
        raise ApiError(408, f"The request body did not arrive within {timeout_s:g} s.", code="request_timeout") from None


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"The request body is larger than {limit} bytes.", code="request_too_large")


# -- the app ------------------------------------------------------------------------------------------


class _Metrics:
    def __init__(self, engine: Engine) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("engine_server_requests", "HTTP requests by route and status",
                                ("route", "status"), registry=self.registry)
        self.errors = Counter("engine_server_errors", "Failed requests by error code", ("code",), registry=self.registry)
        self.ttfa = Histogram("engine_server_ttfa_seconds", "Request start to first audio byte written",
                              buckets=(0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0),
                              registry=self.registry)
        self.active = Gauge("engine_server_active_streams", "Speech responses being streamed", registry=self.registry)
        self.audio = Counter("engine_server_audio_seconds", "Audio seconds sent", registry=self.registry)
        self.registry.register(_EngineCollector(engine))


class _EngineCollector:
    """The engine's running totals and its scheduler's state (Engine.stats()), read at scrape time."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Any:
        totals = asdict(self.engine.stats())
        running, waiting = totals.pop("running"), totals.pop("waiting")
        totals.pop("sessions")  # for soaks, in /v1/status
        for name, value in totals.items():
            yield GaugeMetricFamily(f"engine_{name}", f"Engine counter {name}", value=float(value))
        yield GaugeMetricFamily("engine_scheduler_running", "Segments synthesizing now", value=running)
        yield GaugeMetricFamily("engine_scheduler_waiting", "Segments waiting for a slot", value=waiting)


def _bearer(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def client_key(request: web.Request) -> str:
    """The scheduler key of a request: its token's fingerprint, else the peer address."""
    token = _bearer(request)
    if token:
        return "key:" + hashlib.sha256(token.encode()).hexdigest()[:12]
    return "addr:" + (request.remote or "unknown")


def api_keys_from_env(settings: ServerSettings) -> str | None:
    """The keys in the environment, validated (EngineError on a blank one), comma-joined; None if unset."""
    keys = parse_keys(os.environ.get(settings.api_key_env), settings.api_key_env)
    return ",".join(keys) or None


def registrar_for(engine: Engine, settings: ServerSettings) -> Registrar:
    """The default registrar: the engine's own `register` (its backend derives the features)."""

    async def register(data: bytes, transcript: str) -> tuple[bytes, bytes]:
        reg = await engine.register(data, transcript, max_bytes=settings.max_upload_bytes)
        return reg.features.get((engine.info.name, engine.info.version), b""), reg.flac

    return register


def create_app(
    engine: Engine,
    settings: ServerSettings,
    *,
    api_key: str | None,
    voice_store: VoiceStore | None = None,
    registrar: Registrar | None = None,
    max_streams: int = 64,
) -> web.Application:
    """The server's aiohttp app over a running engine (the caller owns and closes the engine)."""
    tenants = Tenants(parse_keys(api_key, settings.api_key_env))
    store = voice_store if voice_store is not None else VoiceStore()
    register = registrar or registrar_for(engine, settings)
    metrics = _Metrics(engine)
    info = engine.info
    max_chars = settings.max_input_chars
    speakers = info.voices[1:] if len(info.voices) > 1 else ()
    registering = asyncio.Semaphore(1)  # registration is CPU-heavy: one at a time
    active = 0

    @web.middleware
    async def errors(request: web.Request, handler: Any) -> web.StreamResponse:
        route = request.match_info.route.resource.canonical if request.match_info.route.resource else "other"
        try:
            resp = await handler(request)
        except ApiError as exc:
            resp = exc.response()
            metrics.errors.labels(exc.code or exc.type).inc()
        except web.HTTPException as exc:
            if exc.status == 413:
                err = _too_large(settings.max_upload_bytes + _MULTIPART_OVERHEAD)
            else:
                err = ApiError(exc.status, exc.reason, code=str(exc.status))
            resp = err.response()
            metrics.errors.labels(err.code).inc()
        except ConnectionError as exc:  # the client hung up while sending: one line, no traceback
            log.info("client %s went away during %s %s (%s)", request.remote, request.method, request.path,
                     type(exc).__name__)
            metrics.errors.labels("client_gone").inc()
            resp = web.Response(status=499)  # nginx's "client closed request"; nobody reads it
        except Exception:  # a bug before any byte was sent: still an OpenAI-shaped 500
            log.exception("request %s %s failed", request.method, request.path)
            resp = ApiError(500, "The voice server failed; see its log.", type="server_error", code="internal_error").response()
            metrics.errors.labels("internal_error").inc()
        metrics.requests.labels(route, str(resp.status)).inc()
        return resp

    @web.middleware
    async def auth(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path not in OPEN_PATHS:
            tenant = tenants.tenant_of(_bearer(request))
            if tenant is None:
                raise ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer <key>'.",
                               code="invalid_api_key")
            request[TENANT] = tenant
        return await handler(request)

    def resolve_voice(req: SpeechRequest, tenant: str) -> Voice:
        name = req.voice
        if name in ("", "default"):
            return Voice(speed=req.speed, pitch=req.pitch)
        if is_voice_id(name):
            stored: StoredVoice | None = store.get(name)
            if stored is None or not stored.visible_to(tenant):
                raise ApiError(404, f"No voice with id {name!r} is registered here; upload its clip to POST /v1/voices "
                               "(the same clip and transcript give the same id).", code="voice_not_found", param="voice")
            if stored.profile.backend != info.name:
                raise ApiError(400, f"Voice {name!r} was registered for the {stored.profile.backend} backend; register it again.",
                               code="voice_backend_mismatch", param="voice")
            return Voice(name="default", speed=req.speed, pitch=req.pitch, profile=stored.profile)
        if name in info.voices:
            return Voice(name=name, speed=req.speed, pitch=req.pitch)
        if name.lower() in OPENAI_VOICES:
            builtin = speakers[OPENAI_VOICES.index(name.lower()) % len(speakers)] if speakers else "default"
            return Voice(name=builtin, speed=req.speed, pitch=req.pitch)
        raise ApiError(404, f"The voice {name!r} does not exist; see GET /v1/voices.", code="voice_not_found", param="voice")

    async def speech(request: web.Request) -> web.StreamResponse:
        nonlocal active
        t0 = time.perf_counter()
        raw = await _read_bounded(request, _JSON_OVERHEAD + 12 * max_chars, settings.body_timeout_s)
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise ApiError(400, "The request body is not valid JSON.", code="invalid_json") from None
        req = parse_speech(body, info.name, max_chars)
        voice = resolve_voice(req, request[TENANT])
        if active >= max_streams:
            raise ApiError(429, "The voice server is busy; try again shortly.", type="rate_limit_error", code="server_busy")
        active += 1
        metrics.active.inc()
        encoder = encoder_for(req.fmt, req.rate)
        chunks = engine.stream(req.text, voice, key=client_key(request), rate=req.rate, channels=1)
        try:
            return await _stream(request, chunks, encoder, req, t0)
        finally:
            await chunks.aclose()
            if hasattr(encoder, "close"):
                encoder.close()
            active -= 1
            metrics.active.dec()

    async def _stream(request: web.Request, chunks: AsyncIterator[Any], encoder: Any, req: SpeechRequest,
                      t0: float) -> web.StreamResponse:
        try:
            first = await chunks.__anext__()
        except TextRejected as exc:
            raise ApiError(400, str(exc), code="invalid_input", param="input") from exc
        except SynthesisTimeout as exc:
            raise ApiError(500, str(exc), type="server_error", code="synthesis_timeout") from exc
        except EngineError as exc:
            raise ApiError(500, str(exc), type="server_error", code="engine_error") from exc
        resp = web.StreamResponse(headers={
            "Content-Type": encoder.content_type,
            "X-Sample-Rate": str(encoder.rate),
            "X-Channels": "1",
            "X-Sample-Format": "s16le" if req.fmt != "opus" else "opus",
            "Cache-Control": "no-store",
        })
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        sent = 0.0

        async def send(data: bytes) -> None:  # a client that stops reading is dropped, not waited for
            async with asyncio.timeout(settings.write_timeout_s):
                await resp.write(data)

        try:
            await send(encoder.header() + await encoder.encode(first.pcm))
            metrics.ttfa.observe(time.perf_counter() - t0)
            sent += first.duration
            async for chunk in chunks:
                await send(await encoder.encode(chunk.pcm))
                sent += chunk.duration
            await send(await encoder.finish())
            await resp.write_eof()
        except ConnectionError:
            log.debug("client went away mid-stream")
        except TimeoutError:
            log.info("client %s read nothing for %g s: dropped", request.remote, settings.write_timeout_s)
            metrics.errors.labels("write_timeout").inc()
            if request.transport is not None:
                request.transport.close()
        except Exception as exc:  # headers are out: break the chunked body so the client sees a failure
            if isinstance(exc, EngineError):
                log.warning("speech failed mid-stream: %s", exc)
            else:
                log.exception("speech failed mid-stream")
            metrics.errors.labels("midstream").inc()
            if request.transport is not None:
                request.transport.close()
        finally:
            metrics.audio.inc(sent)
        return resp

    def known_voice(data: bytes, transcript: str, tenant: str) -> StoredVoice | None:
        """The stored voice an upload would register, if this tenant has it for this backend (blocking)."""
        from engine.voices.clip import load_clip, to_flac
        from engine.voices.registration import clean_transcript

        try:
            flac = to_flac(load_clip(data, max_bytes=settings.max_upload_bytes))
            vid = voice_id_for_tenant(content_id(flac, clean_transcript(transcript)), tenant)
        except EngineError:
            return None  # the registration says what is wrong with it
        stored = store.get(vid)
        if stored is None or stored.owner != tenant or stored.profile.backend_version != info.version:
            return None
        return stored

    async def list_voices(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [v.public() for v in store.list(request[TENANT])]})

    async def add_voice(request: web.Request) -> web.Response:
        limit = settings.max_upload_bytes + _MULTIPART_OVERHEAD
        if request.content_length is not None and request.content_length > limit:
            raise _too_large(limit)
        if not request.content_type.startswith("multipart/"):
            raise ApiError(400, "Send the clip as multipart/form-data with fields file, name and transcript.",
                           code="invalid_upload")
        async with _body_deadline(settings.body_timeout_s):
            fields = await _read_multipart(request, settings.max_upload_bytes, limit, settings.max_upload_parts)
        data = fields.get("file")
        if not data:
            raise ApiError(400, "The upload has no 'file' field (the reference clip).", code="invalid_upload", param="file")
        name = clean_name(fields.get("name", b"").decode("utf-8", "replace"))
        transcript = fields.get("transcript", b"").decode("utf-8", "replace")
        async with registering:
            known = await asyncio.to_thread(known_voice, data, transcript, request[TENANT])
            if known is not None:  # a client giving this server a voice it already holds: no work again
                return web.json_response(known.public())
            try:
                features, flac = await register(data, transcript)
            except EngineError as exc:  # ClipRejected, TextRejected: the message says what to do
                raise ApiError(400, str(exc), code="invalid_clip", param="file") from exc
            from engine.voices.registration import clean_transcript

            tenant, transcript = request[TENANT], clean_transcript(transcript)
            try:
                stored = await asyncio.to_thread(  # the id is the content's: the same upload is the same voice anywhere
                    store.add, voice_id_for_tenant(content_id(flac, transcript), tenant), name, backend=info.name,
                    backend_version=info.version, features=features, transcript=transcript, clip_flac=flac,
                    owner=tenant)
            except VoiceStoreFull as exc:
                raise ApiError(507, str(exc), type="server_error", code="voice_store_full") from exc
        return web.json_response(stored.public())

    async def healthz(request: web.Request) -> web.Response:  # no auth: says nothing about the server
        return web.json_response({"status": "ok"})

    async def status(request: web.Request) -> web.Response:
        return web.json_response({
            "status": "ok", "backend": info.name, "version": info.version, "sample_rate": info.sample_rate,
            "clones": info.clones, "voices": list(info.voices), "languages": list(info.languages),
            "pcm_rate": OPENAI_RATE, "registered_voices": len(store),
            "active_streams": active, "sessions": engine.stats().sessions,  # for soaks
        })

    async def metrics_route(request: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(metrics.registry))
        resp.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        return resp

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": m, "object": "model", "owned_by": "voicebot"} for m in MODELS]})

    app = web.Application(middlewares=[errors, auth], client_max_size=settings.max_upload_bytes + _MULTIPART_OVERHEAD)
    app.router.add_post("/v1/audio/speech", speech)
    app.router.add_get("/v1/voices", list_voices)
    app.router.add_post("/v1/voices", add_voice)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/v1/status", status)
    app.router.add_get("/metrics", metrics_route)
    return app


async def _read_multipart(request: web.Request, max_file: int, max_total: int, max_parts: int) -> dict[str, bytes]:
    """The known fields of an upload. Every byte read counts toward `max_total`, unknown and repeated
    parts included (they are read and dropped), and at most `max_parts` parts are read: 413 past either."""
    fields: dict[str, bytes] = {}
    total = parts = 0
    try:
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            parts += 1
            if parts > max_parts:
                raise ApiError(413, f"The upload has more than {max_parts} parts.", code="request_too_large")
            name = getattr(part, "name", None)
            keep = name in ("file", "name", "transcript") and name not in fields
            limit = max_file if name == "file" else MAX_TRANSCRIPT_BYTES
            buf = bytearray()
            while chunk := await part.read_chunk(65_536):  # type: ignore[union-attr]
                total += len(chunk)
                if total > max_total:
                    raise _too_large(max_total)
                if keep:
                    buf += chunk
                    if len(buf) > limit:
                        raise ApiError(413, f"The '{name}' field is larger than {limit} bytes.", code="request_too_large", param=name)
            if keep:
                fields[str(name)] = bytes(buf)
    except (ValueError, AssertionError) as exc:
        raise ApiError(400, "The multipart body is malformed.", code="invalid_upload") from exc
    return fields


# -- running it ---------------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None, settings: ServerSettings) -> None:
    """Refuse to listen beyond loopback without an API key, or over plain HTTP unless a trusted proxy
    terminates TLS (EngineError: one line for the CLI)."""
    if is_loopback(host):
        return
    if not parse_keys(api_key, settings.api_key_env):
        raise EngineError(
            f"refusing to listen on {host or 'all interfaces'} without an API key: set {settings.api_key_env}, "
            "or bind to 127.0.0.1"
        )
    if not (settings.tls_cert or settings.trusted_proxy_tls):
        raise EngineError(
            f"refusing to listen on {host or 'all interfaces'} over plain HTTP (keys would travel in clear): give "
            "--tls-cert and --tls-key, or --trusted-proxy-tls when a trusted reverse proxy terminates TLS"
        )


def tls_context(settings: ServerSettings) -> ssl.SSLContext | None:
    """The server's TLS context from tls_cert/tls_key, None without them (EngineError when unreadable)."""
    if not settings.tls_cert and not settings.tls_key:
        return None
    if not (settings.tls_cert and settings.tls_key):
        raise EngineError("TLS needs both a certificate (--tls-cert) and its key (--tls-key)")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(settings.tls_cert, settings.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise EngineError(f"cannot load the TLS certificate {settings.tls_cert} and key {settings.tls_key}: {exc}") from exc
    return ctx


@contextlib.asynccontextmanager
async def serve_in_background(
    engine: Engine,
    settings: ServerSettings | None = None,
    *,
    api_key: str | None = None,
    **app_options: Any,
) -> AsyncIterator[str]:
    """Run the server on this loop while the block runs; yields its base URL. Port 0 (the default
    here) picks a free port. The engine is not closed on exit."""
    settings = settings or ServerSettings(port=0)
    check_bind(settings.host, api_key, settings)
    ssl_context = tls_context(settings)
    app = create_app(engine, settings, api_key=api_key, **app_options)
    # keepalive_timeout also closes a connection that has not sent a whole request head by then
    runner = web.AppRunner(app, access_log=None, handle_signals=False, keepalive_timeout=settings.header_timeout_s)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port, shutdown_timeout=1.0, ssl_context=ssl_context)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"{'https' if ssl_context else 'http'}://{'[' + host + ']' if ':' in host else host}:{port}"
    finally:
        await runner.cleanup()


async def run_server(
    engine_settings: EngineSettings,
    *,
    api_key: str | None,
    voices_dir: str | Path | None,
    max_streams: int = 64,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Build the engine, serve until SIGINT/SIGTERM, then close everything."""
    from engine.factory import build_engine

    settings = engine_settings.server
    check_bind(settings.host, api_key, settings)
    engine = build_engine(engine_settings)
    try:
        await engine.warm_up()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        store = VoiceStore(voices_dir)
        try:
            async with serve_in_background(engine, settings, api_key=api_key, voice_store=store,
                                           max_streams=max_streams) as url:
                (ready or (lambda u: print(f"engine server on {u} ({engine.info.name})", file=sys.stderr, flush=True)))(url)
                await stop.wait()
        except OSError as exc:
            raise EngineError(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}") from exc
    finally:
        await engine.close()
