"""The engine server's request bodies: a speech request validated, bodies and uploads read within their bounds."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from engine.encoders import OPUS_RATE
from engine.server.errors import ApiError, too_large

OPENAI_RATE = 24_000
SAMPLE_RATES = (8_000, 16_000, 22_050, 24_000, 44_100, 48_000)
FORMATS = ("pcm", "wav", "opus")
MODELS = ("default", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
MIN_SPEED, MAX_SPEED = 0.25, 4.0
MAX_PITCH = 12.0
MAX_TRANSCRIPT_BYTES = 8_000
JSON_OVERHEAD = 16_384
MULTIPART_OVERHEAD = 65_536


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


def parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "The request body is not valid JSON.", code="invalid_json") from None


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
        raise ApiError(400,
                       f"response_format {fmt!r} is not supported by this server; use one of: {', '.join(FORMATS)}.",
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


async def read_bounded(request: web.Request, limit: int, timeout_s: float) -> bytes:
    """The whole body, at most `limit` bytes (413) arriving within `timeout_s` (408)."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large(limit)
    out = bytearray()
    async with body_deadline(timeout_s):
        while True:
            chunk = await request.content.read(65_536)
            if not chunk:
                return bytes(out)
            out += chunk
            if len(out) > limit:
                raise too_large(limit)


@contextlib.asynccontextmanager
async def body_deadline(timeout_s: float) -> AsyncIterator[None]:
    """The request body must arrive within `timeout_s` (408 otherwise)."""
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except TimeoutError:
        raise ApiError(408, f"The request body did not arrive within {timeout_s:g} s.",
                       code="request_timeout") from None


async def read_multipart(request: web.Request, max_file: int, max_total: int, max_parts: int) -> dict[str, bytes]:
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
                    raise too_large(max_total)
                if keep:
                    buf += chunk
                    if len(buf) > limit:
                        raise ApiError(413, f"The '{name}' field is larger than {limit} bytes.",
                                       code="request_too_large", param=name)
            if keep:
                fields[str(name)] = bytes(buf)
    except (ValueError, AssertionError) as exc:
        raise ApiError(400, "The multipart body is malformed.", code="invalid_upload") from exc
    return fields
