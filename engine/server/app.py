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
  client uploads the clip again (engine/backends/remote/ does), so a fleet shares no voice state.
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

The pieces: `SpeechServer` (here) holds the routes' handlers; the middlewares are engine/server/middleware.py,
request bodies engine/server/requests.py, errors errors.py, metrics metrics.py, and a request's voice is
resolved by the voice store (engine/server/voice_store.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from engine.base import Engine, EngineError, SynthesisTimeout, TextRejected, Voice
from engine.encoders import encoder_for
from engine.server import middleware
from engine.server.auth import Tenants, parse_keys
from engine.server.errors import ApiError, too_large
from engine.server.metrics import ServerMetrics
from engine.server.middleware import TENANT, client_key
from engine.server.requests import (
    JSON_OVERHEAD,
    MODELS,
    MULTIPART_OVERHEAD,
    OPENAI_RATE,
    SpeechRequest,
    body_deadline,
    parse_json,
    parse_speech,
    read_bounded,
    read_multipart,
)
from engine.server.voice_store import (
    VoiceBackendMismatch,
    VoiceNotFound,
    VoiceStore,
    VoiceStoreFull,
    clean_name,
    upload_id,
)
from engine.settings import EngineSettings, ServerSettings

log = logging.getLogger(__name__)

# A registrar turns an upload (bytes, transcript) into (features for this backend, FLAC of the clip).
Registrar = Callable[[bytes, str], Awaitable[tuple[bytes, bytes]]]


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


class SpeechServer:
    """The routes' handlers over a running engine (the caller owns and closes it), its voices and its registrar."""

    def __init__(self, engine: Engine, settings: ServerSettings, *, voice_store: VoiceStore, registrar: Registrar,
                 max_streams: int) -> None:
        self.engine, self.settings, self.store, self.register = engine, settings, voice_store, registrar
        self.info = engine.info
        self.max_streams = max_streams
        self.metrics = ServerMetrics(engine)
        self.active = 0  # speech responses being streamed
        self._registering = asyncio.Semaphore(1)  # registration is CPU-heavy: one at a time

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/audio/speech", self.speech)
        app.router.add_get("/v1/voices", self.list_voices)
        app.router.add_post("/v1/voices", self.add_voice)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/v1/status", self.status)
        app.router.add_get("/metrics", self.metrics_route)

    # -- speech -------------------------------------------------------------------------------------------

    async def speech(self, request: web.Request) -> web.StreamResponse:
        t0 = time.perf_counter()
        max_chars = self.settings.max_input_chars
        raw = await read_bounded(request, JSON_OVERHEAD + 12 * max_chars, self.settings.body_timeout_s)
        req = parse_speech(parse_json(raw), self.info.name, max_chars)
        voice = self._voice(req, request[TENANT])
        if self.active >= self.max_streams:
            raise ApiError(429, "The voice server is busy; try again shortly.", type="rate_limit_error",
                           code="server_busy")
        self.active += 1
        self.metrics.active.inc()
        encoder = encoder_for(req.fmt, req.rate)
        chunks = self.engine.stream(req.text, voice, key=client_key(request), rate=req.rate, channels=1)
        try:
            return await self._stream(request, chunks, encoder, req, t0)
        finally:
            await chunks.aclose()
            if hasattr(encoder, "close"):
                encoder.close()
            self.active -= 1
            self.metrics.active.dec()

    def _voice(self, req: SpeechRequest, tenant: str) -> Voice:
        try:
            return self.store.voice_for(req.voice, tenant, self.info, speed=req.speed, pitch=req.pitch)
        except VoiceNotFound as exc:
            raise ApiError(404, str(exc), code="voice_not_found", param="voice") from None
        except VoiceBackendMismatch as exc:
            raise ApiError(400, str(exc), code="voice_backend_mismatch", param="voice") from None

    async def _stream(self, request: web.Request, chunks: AsyncIterator[Any], encoder: Any, req: SpeechRequest,
                      t0: float) -> web.StreamResponse:
        first = await _first_chunk(chunks)  # errors before any byte are OpenAI-shaped answers
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
            async with asyncio.timeout(self.settings.write_timeout_s):
                await resp.write(data)

        try:
            await send(encoder.header() + await encoder.encode(first.pcm))
            self.metrics.ttfa.observe(time.perf_counter() - t0)
            sent += first.duration
            async for chunk in chunks:
                await send(await encoder.encode(chunk.pcm))
                sent += chunk.duration
            await send(await encoder.finish())
            await resp.write_eof()
        except Exception as exc:  # noqa: BLE001 - a client gone mid-stream: logged, its slot freed
            self._broken_stream(request, exc)
        finally:
            self.metrics.audio.inc(sent)
        return resp

    def _broken_stream(self, request: web.Request, exc: Exception) -> None:
        """A stream that failed once its headers were out: the client gone, too slow, or synthesis failed."""
        if isinstance(exc, ConnectionError):
            log.debug("client went away mid-stream")
            return
        if isinstance(exc, TimeoutError):
            log.info("client %s read nothing for %g s: dropped", request.remote, self.settings.write_timeout_s)
            self.metrics.errors.labels("write_timeout").inc()
        else:  # break the chunked body so the client sees a failure
            if isinstance(exc, EngineError):
                log.warning("speech failed mid-stream: %s", exc)
            else:
                log.exception("speech failed mid-stream", exc_info=exc)
            self.metrics.errors.labels("midstream").inc()
        if request.transport is not None:
            request.transport.close()

    # -- voices -------------------------------------------------------------------------------------------

    async def list_voices(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [v.public() for v in self.store.list(request[TENANT])]})

    async def add_voice(self, request: web.Request) -> web.Response:
        fields = await self._upload(request)
        data = fields.get("file")
        if not data:
            raise ApiError(400, "The upload has no 'file' field (the reference clip).", code="invalid_upload",
                           param="file")
        name = clean_name(fields.get("name", b"").decode("utf-8", "replace"))
        transcript = fields.get("transcript", b"").decode("utf-8", "replace")
        tenant = request[TENANT]
        async with self._registering:
            known = await asyncio.to_thread(self.store.find_upload, data, transcript, tenant, self.info.version,
                                            max_bytes=self.settings.max_upload_bytes)
            if known is not None:  # a client giving this server a voice it already holds: no work again
                return web.json_response(known.public())
            try:
                features, flac = await self.register(data, transcript)
            except EngineError as exc:  # ClipRejected, TextRejected: the message says what to do
                raise ApiError(400, str(exc), code="invalid_clip", param="file") from exc
            from engine.voices.registration import clean_transcript

            transcript = clean_transcript(transcript)
            try:
                stored = await asyncio.to_thread(  # the id is the content's: the same upload is the same voice anywhere
                    self.store.add, upload_id(flac, transcript, tenant), name, backend=self.info.name,
                    backend_version=self.info.version, features=features, transcript=transcript, clip_flac=flac,
                    owner=tenant)
            except VoiceStoreFull as exc:
                raise ApiError(507, str(exc), type="server_error", code="voice_store_full") from exc
        return web.json_response(stored.public())

    async def _upload(self, request: web.Request) -> dict[str, bytes]:
        """An upload's fields, read within the upload limits and the body deadline."""
        limit = self.settings.max_upload_bytes + MULTIPART_OVERHEAD
        if request.content_length is not None and request.content_length > limit:
            raise too_large(limit)
        if not request.content_type.startswith("multipart/"):
            raise ApiError(400, "Send the clip as multipart/form-data with fields file, name and transcript.",
                           code="invalid_upload")
        async with body_deadline(self.settings.body_timeout_s):
            return await read_multipart(request, self.settings.max_upload_bytes, limit, self.settings.max_upload_parts)

    # -- about the server ---------------------------------------------------------------------------------

    async def healthz(self, request: web.Request) -> web.Response:  # no auth: says nothing about the server
        return web.json_response({"status": "ok"})

    async def status(self, request: web.Request) -> web.Response:
        info = self.info
        return web.json_response({
            "status": "ok", "backend": info.name, "version": info.version, "sample_rate": info.sample_rate,
            "clones": info.clones, "voices": list(info.voices), "languages": list(info.languages),
            "pcm_rate": OPENAI_RATE, "registered_voices": len(self.store),
            "active_streams": self.active, "sessions": self.engine.stats().sessions,  # for soaks
        })

    async def metrics_route(self, request: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(self.metrics.registry))
        resp.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        return resp

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": m, "object": "model",
                                                              "owned_by": "voicebot"} for m in MODELS]})


async def _first_chunk(chunks: AsyncIterator[Any]) -> Any:
    """The stream's first chunk; an engine error before it is an ApiError (nothing is sent yet)."""
    try:
        return await chunks.__anext__()
    except TextRejected as exc:
        raise ApiError(400, str(exc), code="invalid_input", param="input") from exc
    except SynthesisTimeout as exc:
        raise ApiError(500, str(exc), type="server_error", code="synthesis_timeout") from exc
    except EngineError as exc:
        raise ApiError(500, str(exc), type="server_error", code="engine_error") from exc


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
    server = SpeechServer(engine, settings, voice_store=voice_store if voice_store is not None else VoiceStore(),
                          registrar=registrar or registrar_for(engine, settings), max_streams=max_streams)
    upload_limit = settings.max_upload_bytes + MULTIPART_OVERHEAD
    app = web.Application(middlewares=[middleware.errors, middleware.auth], client_max_size=upload_limit)
    app[middleware.METRICS] = server.metrics
    app[middleware.TENANTS] = Tenants(parse_keys(api_key, settings.api_key_env))
    app[middleware.UPLOAD_LIMIT] = upload_limit
    server.add_routes(app)
    return app


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
        raise EngineError(f"cannot load the TLS certificate {settings.tls_cert} and key {settings.tls_key}: "
                          f"{exc}") from exc
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
                (ready or (lambda u: print(f"engine server on {u} ({engine.info.name})", file=sys.stderr,
                                           flush=True)))(url)
                await stop.wait()
        except OSError as exc:
            raise EngineError(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}") from exc
    finally:
        await engine.close()
