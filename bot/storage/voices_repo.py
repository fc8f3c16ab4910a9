"""Repository functions for registered voices: add, find, list what a user may see, share, rename, delete."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError

from bot.storage.database import Database, rowcount
from bot.storage.models import UserSettingsRow, VoiceFeatureRow, VoiceRow, VoiceShareRow


class VoiceLimitReached(Exception):
    """The owner already has the most voices allowed (checked in the storing transaction)."""


class DuplicateVoiceName(Exception):
    """The owner already has a voice of that name."""


@dataclass(frozen=True)
class VoiceInfo:
    """A voice's metadata, without its clip."""

    id: str
    owner_id: int
    name: str
    transcript: str
    clip_seconds: float


@dataclass(frozen=True)
class VoiceFeatures:
    """What synthesis needs of a voice for one backend."""

    info: VoiceInfo
    blob: bytes | None  # None: no features stored for this backend and version


def _info(row: VoiceRow) -> VoiceInfo:
    return VoiceInfo(row.id, row.owner_id, row.name, row.transcript, row.clip_seconds)


_INFO_COLUMNS = (VoiceRow.id, VoiceRow.owner_id, VoiceRow.name, VoiceRow.transcript, VoiceRow.clip_seconds)


async def add_voice(
    db: Database,
    *,
    owner_id: int,
    name: str,
    transcript: str,
    clip_flac: bytes,
    clip_seconds: float,
    embedding: bytes,
    features: dict[tuple[str, str], bytes],
    max_owned: int | None = None,
) -> VoiceInfo:
    """Store a voice and all its features in one transaction: all of it or none of it. With `max_owned`,
    the owner's count is taken after the insert, in the same transaction (VoiceLimitReached past it):
    the insert holds SQLite's write lock, so concurrent registrations see each other and never overshoot."""
    row = VoiceRow(
        id=uuid.uuid4().hex,
        owner_id=owner_id,
        name=name,
        transcript=transcript,
        clip_flac=clip_flac,
        clip_seconds=clip_seconds,
        embedding=embedding,
    )
    row.features = [
        VoiceFeatureRow(backend=b, backend_version=v, blob=blob) for (b, v), blob in features.items()
    ]
    try:
        async with db.sessions() as session, session.begin():
            session.add(row)
            if max_owned is not None:
                await session.flush()
                owned = await session.scalar(select(func.count()).where(VoiceRow.owner_id == owner_id))
                if int(owned or 0) > max_owned:
                    raise VoiceLimitReached(max_owned)  # rolls the insert back
    except IntegrityError as exc:
        raise DuplicateVoiceName(name) from exc
    return _info(row)


async def put_features(db: Database, voice_id: str, backend: str, version: str, blob: bytes) -> None:
    """Store (or replace) one backend's features of a voice, e.g. after a model upgrade."""
    async with db.sessions() as session, session.begin():
        row = await session.get(VoiceFeatureRow, (voice_id, backend, version))
        if row is None:
            session.add(VoiceFeatureRow(voice_id=voice_id, backend=backend, backend_version=version, blob=blob))
        else:
            row.blob = blob


async def find_owned(db: Database, owner_id: int, name: str) -> VoiceInfo | None:
    async with db.sessions() as session:
        row = (
            await session.execute(
                select(*_INFO_COLUMNS).where(VoiceRow.owner_id == owner_id, VoiceRow.name == name)
            )
        ).first()
        return VoiceInfo(*row) if row else None


async def count_owned(db: Database, owner_id: int) -> int:
    async with db.sessions() as session:
        return int(await session.scalar(select(func.count()).where(VoiceRow.owner_id == owner_id)) or 0)


def _visible_filter(user_id: int, guild_id: int | None):
    shared = select(VoiceShareRow.voice_id).where(
        or_(
            (VoiceShareRow.target_kind == "user") & (VoiceShareRow.target_id == user_id),
            (VoiceShareRow.target_kind == "guild") & (VoiceShareRow.target_id == (guild_id or -1)),
        )
    )
    return or_(VoiceRow.owner_id == user_id, VoiceRow.id.in_(shared))


async def list_visible(db: Database, user_id: int, guild_id: int | None, prefix: str = "",
                       limit: int = 25) -> list[VoiceInfo]:
    """Voices `user_id` may use here: their own, and those shared with them or with this guild."""
    query = select(*_INFO_COLUMNS).where(_visible_filter(user_id, guild_id))
    if prefix:
        escaped = prefix.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(func.lower(VoiceRow.name).like(escaped + "%", escape="\\"))
    query = query.order_by(VoiceRow.owner_id != user_id, VoiceRow.name).limit(limit)
    async with db.sessions() as session:
        return [VoiceInfo(*r) for r in (await session.execute(query)).all()]


async def may_use(db: Database, voice_id: str, user_id: int, guild_id: int | None) -> bool:
    async with db.sessions() as session:
        found = await session.scalar(
            select(VoiceRow.id).where(VoiceRow.id == voice_id, _visible_filter(user_id, guild_id))
        )
        return found is not None


async def load_features(db: Database, voice_id: str, backend: str, version: str) -> VoiceFeatures | None:
    """One indexed query: the voice's metadata and its features for this backend version."""
    query = (
        select(*_INFO_COLUMNS, VoiceFeatureRow.blob)
        .outerjoin(
            VoiceFeatureRow,
            (VoiceFeatureRow.voice_id == VoiceRow.id)
            & (VoiceFeatureRow.backend == backend)
            & (VoiceFeatureRow.backend_version == version),
        )
        .where(VoiceRow.id == voice_id)
    )
    async with db.sessions() as session:
        row = (await session.execute(query)).first()
    if row is None:
        return None
    return VoiceFeatures(VoiceInfo(*row[:5]), row[5])


async def earlier_features(db: Database, voice_id: str, backends: tuple[str, ...]) -> tuple[str, bytes] | None:
    """The newest features any version of `backends` extracted from the voice: (version, blob), or None."""
    query = (select(VoiceFeatureRow.backend_version, VoiceFeatureRow.blob)
             .where(VoiceFeatureRow.voice_id == voice_id, VoiceFeatureRow.backend.in_(backends))
             .order_by(VoiceFeatureRow.created_at.desc()).limit(1))
    async with db.sessions() as session:
        row = (await session.execute(query)).first()
    return (row[0], row[1]) if row else None


async def load_clip(db: Database, voice_id: str) -> tuple[bytes, str] | None:
    """The reference clip (FLAC) and transcript, to derive features again for a new backend."""
    async with db.sessions() as session:
        row = (await session.execute(select(VoiceRow.clip_flac,
                                            VoiceRow.transcript).where(VoiceRow.id == voice_id))).first()
        return (row[0], row[1]) if row else None


async def rename(db: Database, voice_id: str, new_name: str) -> None:
    try:
        async with db.sessions() as session, session.begin():
            row = await session.get(VoiceRow, voice_id)
            if row is not None:
                row.name = new_name
    except IntegrityError as exc:
        raise DuplicateVoiceName(new_name) from exc


async def delete_voice(db: Database, voice_id: str) -> bool:
    """Delete a voice with its clip, features and shares; users using it fall back to the default."""
    async with db.sessions() as session, session.begin():
        await session.execute(delete(VoiceFeatureRow).where(VoiceFeatureRow.voice_id == voice_id))
        await session.execute(delete(VoiceShareRow).where(VoiceShareRow.voice_id == voice_id))
        await session.execute(
            update(UserSettingsRow).where(UserSettingsRow.active_voice_id == voice_id).values(active_voice_id=None)
        )
        result = await session.execute(delete(VoiceRow).where(VoiceRow.id == voice_id))
        return (rowcount(result) or 0) > 0


async def share(db: Database, voice_id: str, kind: str, target_id: int) -> bool:
    """Share with a user or a guild; False when it was already shared so."""
    if kind not in ("user", "guild"):
        raise ValueError("kind must be 'user' or 'guild'")
    async with db.sessions() as session, session.begin():
        if await session.get(VoiceShareRow, (voice_id, kind, target_id)) is not None:
            return False
        session.add(VoiceShareRow(voice_id=voice_id, target_kind=kind, target_id=target_id))
        return True


async def unshare(db: Database, voice_id: str, kind: str, target_id: int) -> bool:
    async with db.sessions() as session, session.begin():
        result = await session.execute(
            delete(VoiceShareRow).where(
                VoiceShareRow.voice_id == voice_id,
                VoiceShareRow.target_kind == kind,
                VoiceShareRow.target_id == target_id,
            )
        )
        return (rowcount(result) or 0) > 0
