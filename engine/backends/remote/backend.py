"""The `remote` backend: a streaming client of an OpenAI-compatible `/v1/audio/speech` server.

Works against this project's engine server (engine/server/app.py) or another OpenAI-compatible one.
Each segment is one `POST /v1/audio/speech` with `response_format: "pcm"`; the body is read as it
arrives and yielded as float32 mono at `info.sample_rate` (48 kHz: the server is asked for that
rate via the `sample_rate` extension; a server that ignores it is read at its `X-Sample-Rate`, or
OpenAI's 24 kHz when it sends none, and resampled here). Nothing is read ahead of the consumer: the
body is pulled from the socket only when the engine asks for the next piece (back-pressure is TCP's).

Timeouts: `connect_timeout_s` to connect, `read_timeout_s` between two reads of the body. Retries:
`retries` times, only when the request never reached the server (connection refused, connect
timeout, a pooled connection closed before any byte of the answer), never once audio has arrived.

Voices: `voice.profile` with backend "remote" carries a feature blob that is all a fleet needs
(engine/backends/remote/voice.py): the server's voice id and the clip (FLAC) and transcript that were uploaded.
`extract_features` uploads the clip to `POST /v1/voices`. Ids are content addresses, so any server of a
fleet gives the same id for the same upload: a server that lacks the voice (another one behind the load
balancer, or one that evicted it) answers 404 `voice_not_found`, and the backend uploads the clip there
and asks for the segment again, before any audio (the first word comes a registration later; behind a
load balancer the upload and the retry may meet different servers, so up to MAX_UPLOADS times). A blob of
the old kind (the id alone) is spoken where it is known. A profile of any other backend cannot be spoken
by the server and falls back to "default" (logged once).
Otherwise `voice.name` is sent as is ("default", an OpenAI name, a server voice). `speed` is sent;
`pitch` is sent as an extension field that only this project's server honours.

Languages: `warm_up` (the engine's warm-up calls it) takes them from the server's /v1/status, so
text in a language the server's voices speak goes there, and other text to the bot's own voices.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import io
import json
import logging
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import numpy as np
import soxr

from engine.backends.remote.settings import RemoteSettings
from engine.backends.remote.voice import RemoteVoice
from engine.base import DISCORD_RATE, BackendInfo, EngineError, Progress, SynthesisTimeout, TextRejected, Voice

log = logging.getLogger(__name__)

OPENAI_PCM_RATE = 24_000
MIN_YIELD_BYTES = 2 * DISCORD_RATE // 50  # 20 ms at 48 kHz: smaller reads wait for more
_ERROR_BODY_LIMIT = 65_536
# A server lacking a voice gets its clip, then the segment is asked again; behind a load balancer the
# upload and the retry may reach different servers, so this happens at most this many times per segment.
MAX_UPLOADS = 3
MAX_ALIASES = 4096
_RETRYABLE = (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError)
_ConnectTimeout: type[BaseException] = getattr(aiohttp, "ConnectionTimeoutError", aiohttp.ServerTimeoutError)


class RemoteBackend:
    """AsyncBackend over HTTP. The aiohttp session is made on first use and closed by `aclose()`."""

    @classmethod
    def from_settings(cls, settings) -> RemoteBackend:
        return cls(RemoteSettings.of(settings))

    def __init__(self, settings: RemoteSettings | None = None, *, sample_rate: int = DISCORD_RATE) -> None:
        self.settings = settings or RemoteSettings()
        self.url = self.settings.url.rstrip("/")
        self.api_key = os.environ.get(self.settings.api_key_env, "").strip() or None
        self.info = BackendInfo(name="remote", version=f"remote {self.url}", sample_rate=sample_rate, clones=True)
        self._session: aiohttp.ClientSession | None = None
        self._warned_profile = False
        self._uploads: dict[str, asyncio.Future[str]] = {}  # voice id -> its upload in flight (one per voice)
        # blob id -> the id the server gave the same upload (another API key is another tenant, so another id)
        self._aliases: collections.OrderedDict[str, str] = collections.OrderedDict()

    # -- plumbing -------------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            s = self.settings
            timeout = aiohttp.ClientTimeout(total=None, connect=s.connect_timeout_s, sock_connect=s.connect_timeout_s,
                                            sock_read=s.read_timeout_s)
            self._session = aiohttp.ClientSession(timeout=timeout, headers=self._headers())
        return self._session

    def _unreachable(self, exc: BaseException) -> EngineError:
        return EngineError(f"The voice server at {self.url} is unreachable ({type(exc).__name__}: {exc}).")

    async def _post(self, path: str, body: dict[str, Any]) -> aiohttp.ClientResponse:
        """POST JSON; retries only failures that happened before the server answered anything."""
        session = self._session_now()
        attempts = max(0, self.settings.retries) + 1
        for attempt in range(attempts):
            try:
                return await session.post(self.url + path, json=body)
            except (*_RETRYABLE, _ConnectTimeout) as exc:
                if attempt + 1 >= attempts:
                    raise self._unreachable(exc) from exc
                log.debug("voice server %s: %s; retry %d", self.url, exc, attempt + 1)
                await asyncio.sleep(min(0.1 * 2**attempt, 1.0))
            except aiohttp.InvalidURL as exc:
                raise EngineError(f"The voice server URL {self.url!r} is not valid.") from exc
            except aiohttp.ClientError as exc:
                raise self._unreachable(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _error_of(self, resp: aiohttp.ClientResponse) -> tuple[str, str]:
        """The (code, message) of a non-200 answer, as far as the server sent them."""
        code = message = ""
        try:
            raw = await resp.content.read(_ERROR_BODY_LIMIT)
            err = json.loads(raw).get("error", {})
            message = str(err.get("message", "") if isinstance(err, dict) else err)[:300]
            code = str(err.get("code") or "") if isinstance(err, dict) else ""
        except (ValueError, AttributeError, aiohttp.ClientError, asyncio.TimeoutError):
            pass
        return code, message

    async def _refusal(self, resp: aiohttp.ClientResponse, message: str | None = None) -> EngineError:
        """An EngineError for a non-200 answer, with the server's message when it sent one."""
        if message is None:
            message = (await self._error_of(resp))[1]
        return refusal_error(self.url, resp.status, message, self.settings.api_key_env)

    def _registered(self, voice: Voice) -> RemoteVoice | None:
        prof = voice.profile
        return RemoteVoice.from_blob(prof.features) if prof is not None and prof.backend == "remote" else None

    def voice_field(self, voice: Voice) -> str:
        prof = voice.profile
        if prof is not None:
            registered = self._registered(voice)
            if registered is not None:
                return self._aliases.get(registered.voice_id, registered.voice_id)
            if not self._warned_profile:
                self._warned_profile = True
                log.warning("voice %s has no features for the remote backend (it was registered for %s); "
                            "the server's default voice speaks it", prof.voice_id, prof.backend)
            return "default"
        return voice.name or "default"

    # -- AsyncBackend ---------------------------------------------------------------------------

    async def astream(self, text: str, voice: Voice) -> AsyncIterator[np.ndarray]:
        body: dict[str, Any] = {
            "model": self.settings.model, "input": text, "voice": self.voice_field(voice),
            "response_format": "pcm", "speed": voice.speed, "sample_rate": self.info.sample_rate,
        }
        if voice.pitch:
            body["pitch"] = voice.pitch
        resp = await self._post("/v1/audio/speech", body)
        complete = False
        try:
            registered = self._registered(voice)
            for _ in range(MAX_UPLOADS if registered is not None and registered.flac else 0):
                if resp.status != 404:
                    break
                code, message = await self._error_of(resp)
                if code != "voice_not_found":
                    raise await self._refusal(resp, message)
                resp.release()  # this server lacks the voice: give it the clip, then ask again
                assert registered is not None
                log.info("voice server %s lacks voice %s: uploading its clip", self.url, registered.voice_id)
                body["voice"] = await self._upload_once(registered)
                resp = await self._post("/v1/audio/speech", body)
            if resp.status != 200:
                raise await self._refusal(resp)
            rate = _header_rate(resp)
            resampler = None if rate == self.info.sample_rate else soxr.ResampleStream(
                rate, self.info.sample_rate, 1, dtype="float32", quality="HQ")
            carry = b""
            while True:
                data = await self._read(resp)
                if data:
                    carry += data
                    if len(carry) < MIN_YIELD_BYTES:
                        continue
                usable = len(carry) & ~1
                samples = np.frombuffer(carry[:usable], dtype="<i2").astype(np.float32) / 32768.0
                carry = carry[usable:]
                if resampler is not None:
                    samples = resampler.resample_chunk(samples, last=not data)
                if len(samples):
                    yield samples
                if not data:
                    break
            complete = True
        finally:
            resampler = None  # free the native resampler now, not when a traceback lets go of this frame
            if complete:
                resp.release()
            else:
                resp.close()  # drop the connection: the server stops synthesizing this segment

    async def _read(self, resp: aiohttp.ClientResponse) -> bytes:
        """What has arrived: waits for one read, then takes whatever else is already buffered."""
        try:
            data = await resp.content.readany()
            while data and (more := resp.content.read_nowait()):
                data += more
            return data
        except asyncio.TimeoutError as exc:
            raise SynthesisTimeout(
                f"The voice server at {self.url} sent nothing for {self.settings.read_timeout_s:g} s.") from exc
        except aiohttp.ClientError as exc:
            raise EngineError(f"The voice server at {self.url} broke off the speech ({type(exc).__name__}).") from exc

    async def health(self) -> dict[str, Any]:
        """The server's /v1/status answer, with its key (EngineError when it cannot be had)."""
        session = self._session_now()
        try:
            async with session.get(self.url + "/v1/status") as resp:
                if resp.status != 200:
                    raise await self._refusal(resp)
                return dict(await resp.json(content_type=None))
        except aiohttp.ClientConnectorError as exc:
            raise self._unreachable(exc) from exc
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            why = type(exc).__name__
            raise EngineError(f"The voice server at {self.url} gave no usable health answer ({why}).") from exc

    def voice_languages(self, voice: Voice) -> tuple[str, ...]:
        """Every voice speaks what the server does (warm_up learns it)."""
        return self.info.languages

    async def warm_up(self) -> None:
        """Declare the languages the server's voices speak (its /v1/status), so text in them is sent to the
        server rather than to a local voice; a server that cannot say keeps the declared ones (English)."""
        try:
            status = await self.health()
        except EngineError as exc:
            log.warning("the voice server's languages are unknown, English assumed: %s", exc)
            return
        codes = status.get("languages")
        if isinstance(codes, list) and codes and all(isinstance(c, str) and c for c in codes):
            self.info = dataclasses.replace(self.info, languages=tuple(codes))

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- registration ---------------------------------------------------------------------------

    async def _upload_once(self, voice: RemoteVoice) -> str:
        """Upload a voice's clip to the server (one upload per voice at a time; others wait for it) -> its id."""
        pending = self._uploads.get(voice.voice_id)
        if pending is None:
            pending = asyncio.ensure_future(self._upload(voice))
            self._uploads[voice.voice_id] = pending
            pending.add_done_callback(lambda f: (self._uploads.pop(voice.voice_id, None),
                                                 f.cancelled() or f.exception()))  # retrieved: no "never retrieved"
        return await asyncio.shield(pending)

    async def _upload(self, voice: RemoteVoice) -> str:
        form = aiohttp.FormData()
        form.add_field("name", "registered")
        form.add_field("transcript", voice.transcript)
        form.add_field("file", voice.flac, filename="clip.flac", content_type="audio/flac")
        try:
            async with self._session_now().post(self.url + "/v1/voices", data=form) as resp:
                if resp.status != 200:
                    raise await self._refusal(resp)
                answer = await resp.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            raise self._unreachable(exc) from exc
        vid = self._voice_id(answer)
        if vid != voice.voice_id:  # registered with another key (tenant), or by a server that trims differently
            log.info("voice server %s gave voice %s the id %s for this key", self.url, voice.voice_id, vid)
            self._aliases[voice.voice_id] = vid
            while len(self._aliases) > MAX_ALIASES:
                self._aliases.popitem(last=False)
        return vid

    def extract_features(self, clip: np.ndarray, sample_rate: int, transcript: str, *,
                         reference_embedding: np.ndarray | None = None,
                         progress: Progress | None = None) -> bytes | None:
        """Upload the clip to the server's `POST /v1/voices`; the feature blob is the server's voice id with
        the uploaded FLAC and transcript, so any other server can be given the voice again.

        Blocking (urllib): engine.registration calls it from a worker thread."""
        import soundfile as sf

        flac = io.BytesIO()
        sf.write(flac, np.clip(np.asarray(clip, dtype=np.float32).reshape(-1), -1.0, 1.0), sample_rate,
                 format="FLAC", subtype="PCM_16")
        transcript = transcript or ""
        boundary = uuid.uuid4().hex
        body = _multipart(boundary, [("name", b"registered", None), ("transcript", transcript.encode(), None),
                                     ("file", flac.getvalue(), "clip.flac")])
        req = urllib.request.Request(self.url + "/v1/voices", data=body, method="POST", headers={
            **self._headers(), "Content-Type": f"multipart/form-data; boundary={boundary}"})
        timeout = self.settings.connect_timeout_s + self.settings.read_timeout_s
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - a configured URL
                answer = json.loads(resp.read(_ERROR_BODY_LIMIT))
        except urllib.error.HTTPError as exc:
            try:
                message = str(json.loads(exc.read(_ERROR_BODY_LIMIT))["error"]["message"])[:300]
            except (ValueError, KeyError, TypeError):
                message = ""
            raise refusal_error(self.url, exc.code, message, self.settings.api_key_env) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise self._unreachable(exc) from exc
        return RemoteVoice(self._voice_id(answer), flac.getvalue(), transcript).to_blob()

    def _voice_id(self, answer: object) -> str:
        """The id in a `POST /v1/voices` answer."""
        vid = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(vid, str) or not vid:
            raise EngineError(f"The voice server at {self.url} did not return a voice id.")
        return vid


def refusal_error(url: str, status: int, message: str, key_env: str) -> EngineError:
    """What the user sees for a server's non-200 answer."""
    said = f": {message}" if message else ""
    if status in (401, 403):
        return EngineError(f"The voice server at {url} answered {status}: check {key_env}.")
    if status in (400, 413, 422):
        return TextRejected(f"The voice server refused the request{said}")
    if status == 404:
        return EngineError(f"The voice server at {url} does not offer that voice or model{said}")
    if status == 429:
        return EngineError(f"The voice server at {url} is busy; try again in a moment.")
    return EngineError(f"The voice server at {url} failed ({status}){said}")


def _header_rate(resp: aiohttp.ClientResponse) -> int:
    try:
        rate = int(resp.headers.get("X-Sample-Rate", OPENAI_PCM_RATE))
    except ValueError:
        rate = OPENAI_PCM_RATE
    return rate if 4_000 <= rate <= 192_000 else OPENAI_PCM_RATE


def _multipart(boundary: str, parts: list[tuple[str, bytes, str | None]]) -> bytes:
    out = bytearray()
    for name, value, filename in parts:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{boundary}\r\nContent-Disposition: {disp}\r\n".encode()
        if filename:
            out += b"Content-Type: application/octet-stream\r\n"
        out += b"\r\n" + value + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out)
