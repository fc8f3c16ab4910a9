"""The engine server's registered voices: an in-memory index over a folder, one voice per id.

Layout of the folder (created on first write): `<id>.json` (name, backend, backend_version,
transcript, created_at, owner, public), `<id>.features` (the backend's feature blob) and, when the clip was
decoded, `<id>.flac` (the reference, so features can be derived again after a model change).
Files are written atomically (temp file + rename); a voice whose files are damaged is skipped at
load with a warning. Ids are content addresses (`content_id`: `v` + 16 hex of the hash of the trimmed
clip and its transcript), so the same upload is the same voice on every server of a fleet (the engine
server scopes ids per tenant, engine/server/auth.py) and a server that lacks a voice can be given it again.

The store is an LRU: at `max_voices`, adding a voice evicts the least recently used one that is not
public (its files are deleted; a client that still holds its id uploads the clip again). Use order
survives a restart through the `<id>.json` modification time, touched at most every TOUCH_EVERY_S.

Each voice has an `owner` (the engine server's tenant, "" without API keys) and a `public` flag that
only the operator sets (`"public": true` in `<id>.json`, or `set_public`): a tenant sees and uses its
own voices and the public ones. Names are cleaned of control and format characters on the way in.

A speech request's voice is resolved here too (`VoiceStore.voice_for`): "default", a registered id the
tenant sees, one of the backend's own voices, or an OpenAI voice name (alloy, echo, ...); and an upload the
tenant already registered is found again (`VoiceStore.find_upload`) rather than registered twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path

from engine.base import BackendInfo, EngineError, Voice, VoiceProfile
from engine.segment import clean_text
from engine.server.auth import voice_id_for_tenant

log = logging.getLogger(__name__)

_ID_RE = re.compile(r"^v[0-9a-f]{16}$")
MAX_NAME_CHARS = 100
TOUCH_EVERY_S = 600.0  # a used voice's <id>.json mtime is refreshed at most this often (LRU order on disk)
OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse",
    "marin", "cedar",
)


def content_id(flac: bytes, transcript: str) -> str:
    """A voice's id from what defines it: the trimmed clip (FLAC) and its transcript."""
    digest = hashlib.sha256(flac)
    if transcript:
        digest.update(b"\0" + transcript.encode("utf-8"))
    return "v" + digest.hexdigest()[:16]


def clean_name(name: str) -> str:
    """A voice name as stored and shown: no control or format characters (NUL, ESC, RLO, CR/LF), one line."""
    return " ".join(clean_text(name[: 4 * MAX_NAME_CHARS]).split())[:MAX_NAME_CHARS] or "voice"


def upload_id(flac: bytes, transcript: str, tenant: str) -> str:
    """The id of a tenant's upload: its content's id (the trimmed clip and the cleaned transcript) in the tenant."""
    return voice_id_for_tenant(content_id(flac, transcript), tenant)


class VoiceStoreFull(EngineError):
    """The store holds its maximum number of voices and all of them are public (none can be evicted)."""


class VoiceNotFound(EngineError):
    """A speech request names a voice that is neither registered here for its tenant nor one the backend has."""


class VoiceBackendMismatch(EngineError):
    """A speech request names a voice registered for another backend."""


@dataclass(frozen=True)
class StoredVoice:
    id: str
    name: str
    profile: VoiceProfile
    created_at: int
    owner: str = ""
    is_public: bool = False

    def visible_to(self, tenant: str) -> bool:
        return self.is_public or self.owner == tenant

    def public(self) -> dict[str, object]:
        """What `GET /v1/voices` shows (never the features)."""
        return {
            "id": self.id,
            "object": "voice",
            "name": self.name,
            "backend": self.profile.backend,
            "created_at": self.created_at,
        }


def is_voice_id(value: str) -> bool:
    return bool(_ID_RE.match(value))


class VoiceStore:
    """Voices by id, least recently used first, kept in memory and, when `folder` is given, on disk.
    Thread-safe."""

    def __init__(self, folder: str | Path | None = None, *, max_voices: int = 10_000) -> None:
        self.folder = Path(folder).expanduser() if folder else None
        self.max_voices = max_voices
        self._lock = threading.Lock()
        self._voices: OrderedDict[str, StoredVoice] = OrderedDict()
        self._touched: dict[str, float] = {}
        if self.folder is not None and self.folder.is_dir():
            self._load()

    def _load(self) -> None:
        assert self.folder is not None
        metas = []
        for meta_path in self.folder.glob("v*.json"):
            try:
                metas.append((meta_path.stat().st_mtime, meta_path.name, meta_path))
            except OSError:
                continue
        for _, _, meta_path in sorted(metas):  # least recently used first
            vid = meta_path.stem
            if not is_voice_id(vid):
                continue
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
                features = (self.folder / f"{vid}.features").read_bytes()
                profile = VoiceProfile(
                    voice_id=vid,
                    backend=str(meta["backend"]),
                    backend_version=str(meta["backend_version"]),
                    features=features,
                    transcript=str(meta.get("transcript", "")),
                )
                self._voices[vid] = StoredVoice(vid, clean_name(str(meta["name"])), profile, int(meta["created_at"]),
                                                owner=str(meta.get("owner", "")), is_public=meta.get("public") is True)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("skipping damaged voice %s in %s: %s", vid, self.folder, exc)

    def __len__(self) -> int:
        return len(self._voices)

    def get(self, voice_id: str) -> StoredVoice | None:
        """The voice, marked as just used (LRU)."""
        with self._lock:
            voice = self._voices.get(voice_id)
            if voice is None:
                return None
            self._voices.move_to_end(voice_id)
            now = time.monotonic()
            touch = self.folder is not None and now - self._touched.get(voice_id, -TOUCH_EVERY_S) >= TOUCH_EVERY_S
            if touch:
                self._touched[voice_id] = now
        if touch:
            assert self.folder is not None
            try:
                os.utime(self.folder / f"{voice_id}.json")
            except OSError:
                pass  # the order on disk is a hint; the one in memory is exact
        return voice

    def voice_for(self, name: str, tenant: str, info: BackendInfo, *, speed: float, pitch: float) -> Voice:
        """The Voice a speech request names for `tenant` on a backend declaring `info`: "default", a registered
        id it sees, one of the backend's voices, or an OpenAI voice name (on a single-speaker backend the
        default voice, on a multi-speaker one one of its speakers). VoiceNotFound, VoiceBackendMismatch."""
        if name in ("", "default"):
            return Voice(speed=speed, pitch=pitch)
        if is_voice_id(name):
            stored = self.get(name)
            if stored is None or not stored.visible_to(tenant):
                raise VoiceNotFound(f"No voice with id {name!r} is registered here; upload its clip to POST /v1/voices "
                                    "(the same clip and transcript give the same id).")
            if stored.profile.backend != info.name:
                raise VoiceBackendMismatch(f"Voice {name!r} was registered for the {stored.profile.backend} backend; "
                                           "register it again.")
            return Voice(name="default", speed=speed, pitch=pitch, profile=stored.profile)
        if name in info.voices:
            return Voice(name=name, speed=speed, pitch=pitch)
        if name.lower() in OPENAI_VOICES:
            speakers = info.voices[1:] if len(info.voices) > 1 else ()
            builtin = speakers[OPENAI_VOICES.index(name.lower()) % len(speakers)] if speakers else "default"
            return Voice(name=builtin, speed=speed, pitch=pitch)
        raise VoiceNotFound(f"The voice {name!r} does not exist; see GET /v1/voices.")

    def find_upload(self, data: bytes, transcript: str, tenant: str, backend_version: str, *,
                    max_bytes: int) -> StoredVoice | None:
        """The stored voice an upload would register, if this tenant has it for this backend version
        (blocking: it decodes the clip)."""
        from engine.voices.clip import load_clip, to_flac
        from engine.voices.registration import clean_transcript

        try:
            vid = upload_id(to_flac(load_clip(data, max_bytes=max_bytes)), clean_transcript(transcript), tenant)
        except EngineError:
            return None  # the registration says what is wrong with it
        stored = self.get(vid)
        if stored is None or stored.owner != tenant or stored.profile.backend_version != backend_version:
            return None
        return stored

    def list(self, tenant: str | None = None) -> list[StoredVoice]:
        """All voices, or those `tenant` may see (its own and the public ones)."""
        with self._lock:
            voices = [v for v in self._voices.values() if tenant is None or v.visible_to(tenant)]
        return sorted(voices, key=lambda v: (v.created_at, v.id))

    def add(
        self,
        voice_id: str,
        name: str,
        *,
        backend: str,
        backend_version: str,
        features: bytes,
        transcript: str = "",
        clip_flac: bytes | None = None,
        owner: str = "",
    ) -> StoredVoice:
        """Store (or replace) a voice and return it (blocking file I/O: call it off the event loop)."""
        if not is_voice_id(voice_id):
            raise ValueError(f"not a voice id: {voice_id!r}")
        name = clean_name(name)
        vid = voice_id
        with self._lock:
            old = self._voices.get(vid)
            if old is not None and old.owner != owner:
                raise EngineError(f"Voice {vid} belongs to another tenant.")
            if old is None:
                while len(self._voices) >= self.max_voices:
                    self._evict_one()
            profile = VoiceProfile(vid, backend, backend_version, features, transcript)
            voice = StoredVoice(vid, name, profile, int(time.time()), owner=owner,
                                is_public=old is not None and old.is_public)
            if self.folder is not None:
                self._write(voice, clip_flac)
            self._voices[vid] = voice
            self._voices.move_to_end(vid)
        return voice

    def _evict_one(self) -> None:
        """Drop the least recently used voice that is not public, with its files (under the lock)."""
        victim = next((v for v in self._voices.values() if not v.is_public), None)
        if victim is None:
            raise VoiceStoreFull(f"The server holds its limit of {self.max_voices} voices, all of them public.")
        del self._voices[victim.id]
        self._touched.pop(victim.id, None)
        if self.folder is not None:
            for suffix in (".json", ".features", ".flac"):  # the meta first: without it the rest is never loaded
                (self.folder / f"{victim.id}{suffix}").unlink(missing_ok=True)
        log.info("voice %s evicted (least recently used of %d)", victim.id, self.max_voices)

    def set_public(self, voice_id: str, public: bool = True) -> StoredVoice:
        """The operator's switch: a public voice is seen and used by every tenant (blocking file I/O)."""
        with self._lock:
            old = self._voices.get(voice_id)
            if old is None:
                raise KeyError(voice_id)
            voice = replace(old, is_public=public)
            if self.folder is not None:
                self._write_meta(voice)
            self._voices[voice_id] = voice
        return voice

    def _write(self, voice: StoredVoice, clip_flac: bytes | None) -> None:
        assert self.folder is not None
        self.folder.mkdir(parents=True, exist_ok=True)
        if clip_flac:
            _atomic_write(self.folder / f"{voice.id}.flac", clip_flac)
        _atomic_write(self.folder / f"{voice.id}.features", voice.profile.features)
        self._write_meta(voice)  # last: marks it complete

    def _write_meta(self, voice: StoredVoice) -> None:
        assert self.folder is not None
        meta = {
            "name": voice.name,
            "backend": voice.profile.backend,
            "backend_version": voice.profile.backend_version,
            "transcript": voice.profile.transcript,
            "created_at": voice.created_at,
            "owner": voice.owner,
            "public": voice.is_public,
        }
        _atomic_write(self.folder / f"{voice.id}.json", json.dumps(meta, sort_keys=True).encode())


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
