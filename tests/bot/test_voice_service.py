"""VoiceService without Discord: features are derived again from the stored clip after a backend change, in the
background, the voice speaking with its earlier features meanwhile."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import text

from bot.config import VoiceSettings
from bot.prefs import PrefsService
from bot.storage.database import Database, upgrade
from bot.voices import VoiceService
from engine.base import Engine, EngineError
from engine.factory import build_engine
from engine.settings import EngineSettings
from engine.voices.registration import Registration
from tests.e2e.test_voices import FIT, espeak_clip


class Upgraded:
    """Test double: the same engine after a model change, as the bot sees it through the Engine protocol (a new
    backend version, whose features registration derives anew)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.info = dataclasses.replace(engine.info, version=engine.info.version + "+upgraded")

    async def register(self, data: bytes, transcript: str, *, max_bytes: int, progress=None) -> Registration:
        reg = await self.engine.register(data, transcript, max_bytes=max_bytes, progress=progress)
        blob = reg.features[(self.engine.info.name, self.engine.info.version)]
        return dataclasses.replace(reg, features={(self.info.name, self.info.version): blob})

    def __getattr__(self, name: str) -> object:
        return getattr(self.engine, name)


@pytest.fixture
async def service(sqlite_url):
    await upgrade(sqlite_url)
    db = Database(sqlite_url)
    engine = build_engine(EngineSettings(backend="piper"))  # the service's logic; Kokoro's fit: test_kokoro_voice
    svc = VoiceService(db, engine, VoiceSettings(), PrefsService(db))
    yield svc
    await svc.close()
    await engine.close()
    await db.close()


async def test_new_backend_version_derives_features_once_from_the_stored_clip(service):
    info = await service.register(42, "mine", espeak_clip(), FIT)
    voice = await service.resolve(42, None, "mine")
    assert voice.profile is not None and voice.profile.voice_id == info.id
    old = service.engine.info
    engine, service.engine = service.engine, Upgraded(service.engine)
    try:
        service._profiles.clear()
        meanwhile = await service.resolve(42, None, "mine")  # at once, with the features it had
        assert meanwhile.profile is not None and meanwhile.profile.backend_version == old.version
        assert meanwhile.profile.features == voice.profile.features
        await service.refitted()
        again = await service.resolve(42, None, "mine")
        assert again.profile is not None and again.profile.backend_version.endswith("+upgraded")
        async with service.db.engine.connect() as conn:
            versions = {r[0] for r in await conn.execute(text("SELECT backend_version FROM voice_features"))}
        assert versions == {old.version, old.version + "+upgraded"}
        calls = []
        original = service._derive
        service._derive = lambda vid: calls.append(vid) or original(vid)
        service._profiles.clear()
        await service.resolve(42, None, "mine")
        assert calls == []  # stored now: never derived again
    finally:
        service.engine = engine


async def test_a_refit_that_fails_keeps_the_earlier_features_and_is_not_retried(service):
    await service.register(42, "mine", espeak_clip(), FIT)
    voice = await service.resolve(42, None, "mine")
    engine, service.engine = service.engine, Upgraded(service.engine)
    calls = []

    async def broken(data, transcript, progress=None):
        calls.append(transcript)
        raise EngineError("the model is gone")

    service._run_registration = broken
    try:
        for _ in range(2):
            service._profiles.clear()
            meanwhile = await service.resolve(42, None, "mine")
            await service.refitted()
            assert meanwhile.profile is not None and meanwhile.profile.features == voice.profile.features
        assert len(calls) == 1
    finally:
        service.engine = engine


async def test_names_with_path_separators_or_markup_are_refused(service):
    from bot.errors import UserError

    for bad in ["../../etc/passwd", "a/b", "<@123>", "", " ", "x" * 33, "'; DROP TABLE voices; --"]:
        with pytest.raises(UserError, match="voice name"):
            await service.register(1, bad, b"", "")
