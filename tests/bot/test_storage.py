"""Storage on a real SQLite file and a real PostgreSQL server: migrations and repository round trips."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import inspect, text

from bot.storage import settings_repo, voices_repo
from bot.storage.database import Database, downgrade_sync, upgrade, upgrade_sync

TABLES = {"voices", "voice_features", "voice_shares", "user_settings", "member_settings", "guild_settings",
          "dictionary_entries", "user_dictionary_entries", "dictionary_patterns"}


async def _tables(url: str) -> set[str]:
    db = Database(url)
    try:
        async with db.engine.connect() as conn:
            return set(await conn.run_sync(lambda c: inspect(c).get_table_names())) - {"alembic_version"}
    finally:
        await db.close()


def test_upgrade_downgrade_upgrade(db_url):
    upgrade_sync(db_url)
    assert asyncio.run(_tables(db_url)) == TABLES
    downgrade_sync(db_url, "base")
    assert asyncio.run(_tables(db_url)) == set()
    upgrade_sync(db_url)
    upgrade_sync(db_url)  # idempotent
    assert asyncio.run(_tables(db_url)) == TABLES


@pytest.fixture
async def db(db_url):
    await upgrade(db_url)
    database = Database(db_url)
    yield database
    await database.close()


async def _voice(db, owner=1, name="mine", **kw):
    return await voices_repo.add_voice(
        db, owner_id=owner, name=name, transcript=kw.get("transcript", "hello"), clip_flac=b"fLaC" + b"\0" * 100,
        clip_seconds=5.0, embedding=b"\1" * 1024,
        features=kw.get("features", {("piper", "1.8:joe"): b'{"warp":1.0}'}),
    )


async def test_sqlite_uses_wal_and_foreign_keys(sqlite_url):
    await upgrade(sqlite_url)
    db = Database(sqlite_url)
    async with db.engine.connect() as conn:
        assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
        assert (await conn.execute(text("PRAGMA foreign_keys"))).scalar() == 1
    await db.close()


async def test_voice_round_trip_and_features_by_backend_version(db):
    v = await _voice(db)
    got = await voices_repo.load_features(db, v.id, "piper", "1.8:joe")
    assert got.info.name == "mine" and got.blob == b'{"warp":1.0}'
    assert (await voices_repo.load_features(db, v.id, "piper", "other")).blob is None
    assert await voices_repo.load_features(db, "nope", "piper", "1.8:joe") is None
    await voices_repo.put_features(db, v.id, "cosyvoice2", "2.0", b"npz")
    assert (await voices_repo.load_features(db, v.id, "cosyvoice2", "2.0")).blob == b"npz"
    clip, transcript = await voices_repo.load_clip(db, v.id)
    assert clip.startswith(b"fLaC") and transcript == "hello"


async def test_duplicate_name_per_owner_is_refused_and_nothing_half_written(db):
    await _voice(db, owner=1, name="mine")
    with pytest.raises(voices_repo.DuplicateVoiceName):
        await _voice(db, owner=1, name="mine", features={("piper", "x"): b"1"})
    await _voice(db, owner=2, name="mine")  # another owner may use the name
    assert await voices_repo.count_owned(db, 1) == 1


async def test_visibility_sharing_and_delete_removes_everything(db):
    v = await _voice(db, owner=1, name="alpha")
    assert [x.name for x in await voices_repo.list_visible(db, 1, 10)] == ["alpha"]
    assert await voices_repo.list_visible(db, 2, 10) == []
    assert not await voices_repo.may_use(db, v.id, 2, 10)
    assert await voices_repo.share(db, v.id, "user", 2)
    assert not await voices_repo.share(db, v.id, "user", 2)
    assert await voices_repo.may_use(db, v.id, 2, 99)
    assert not await voices_repo.may_use(db, v.id, 3, 10)
    await voices_repo.share(db, v.id, "guild", 10)
    assert await voices_repo.may_use(db, v.id, 3, 10)
    assert not await voices_repo.may_use(db, v.id, 3, 11)
    assert [x.name for x in await voices_repo.list_visible(db, 3, 10, prefix="AL")] == ["alpha"]
    assert await voices_repo.list_visible(db, 3, 10, prefix="%") == []
    await settings_repo.update_user_prefs(db, 2, active_voice_id=v.id)
    assert await voices_repo.delete_voice(db, v.id)
    assert (await settings_repo.get_user_prefs(db, 2)).active_voice_id is None
    async with db.engine.connect() as conn:
        for table in ("voices", "voice_features", "voice_shares"):
            assert (await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar() == 0


async def test_rename_conflict(db):
    a = await _voice(db, owner=1, name="a")
    await _voice(db, owner=1, name="b")
    with pytest.raises(voices_repo.DuplicateVoiceName):
        await voices_repo.rename(db, a.id, "b")
    await voices_repo.rename(db, a.id, "c")
    assert (await voices_repo.find_owned(db, 1, "c")).id == a.id


async def test_settings_round_trip(db):
    assert (await settings_repo.get_guild_prefs(db, 5)).readout_channel_ids == []
    g = await settings_repo.update_guild_prefs(db, 5, readout_channel_ids=[11, 12], xsaid=False)
    assert g.readout_channel_ids == [11, 12] and not g.xsaid
    assert (await settings_repo.get_guild_prefs(db, 5)).readout_channel_ids == [11, 12]
    with pytest.raises(ValueError, match="unknown setting"):
        await settings_repo.update_guild_prefs(db, 5, bogus=1)
    u = await settings_repo.update_user_prefs(db, 7, opted_out=True, speed=1.5)
    assert u.opted_out and u.speed == 1.5
    await settings_repo.update_member(db, 5, 7, nickname="Seven")
    await settings_repo.update_member(db, 5, 7, voice="af_heart")
    assert await settings_repo.get_member(db, 5, 7) == settings_repo.MemberPrefs(5, 7, "Seven", "af_heart")
    assert await settings_repo.get_member(db, 6, 7) == settings_repo.MemberPrefs(6, 7)
