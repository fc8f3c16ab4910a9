"""VoiceService without Discord: features are derived again from the stored clip after a backend change."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import text

from bot.config import VoiceSettings
from bot.prefs import PrefsService
from bot.storage.database import Database, upgrade
from bot.voices import VoiceService
from engine.factory import build_engine
from tests.e2e.test_voices import FIT, espeak_clip


@pytest.fixture
async def service(sqlite_url):
    await upgrade(sqlite_url)
    db = Database(sqlite_url)
    engine = build_engine()
    svc = VoiceService(db, engine, VoiceSettings(), PrefsService(db))
    yield svc
    await svc.close()
    await engine.close()
    await db.close()


async def test_new_backend_version_derives_features_once_from_the_stored_clip(service):
    info = await service.register(42, "mine", espeak_clip(), FIT)
    voice = await service.resolve(42, None, "mine")
    assert voice.profile is not None and voice.profile.voice_id == info.id
    old = service.engine.backend.info
    service.engine.backend.info = dataclasses.replace(old, version=old.version + "+upgraded")
    try:
        service._profiles.clear()
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
        service.engine.backend.info = old


async def test_names_with_path_separators_or_markup_are_refused(service):
    from bot.errors import UserError

    for bad in ["../../etc/passwd", "a/b", "<@123>", "", " ", "x" * 33, "'; DROP TABLE voices; --"]:
        with pytest.raises(UserError, match="voice name"):
            await service.register(1, bad, b"", "")
