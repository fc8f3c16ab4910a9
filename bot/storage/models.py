"""SQLAlchemy 2.0 typed models: voices, their per-backend features, user, member and guild settings."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from bot.guild_options import BY_FIELD as GUILD_OPTIONS
from bot.guild_options import column_default as _guild_default
from bot.user_options import BY_FIELD as USER_OPTIONS


def _user_default(field: str) -> object:
    return USER_OPTIONS[field].default


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    pass


class VoiceRow(Base):
    """A registered voice: its owner, reference clip (FLAC) and transcript, and speaker embedding."""

    __tablename__ = "voices"
    __table_args__ = (UniqueConstraint("owner_id", "name", name="uq_voices_owner_name"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner_id: Mapped[int] = mapped_column(BigInteger, index=True)
    name: Mapped[str] = mapped_column(String(64))
    transcript: Mapped[str] = mapped_column(Text, default="")
    clip_flac: Mapped[bytes] = mapped_column(LargeBinary)
    clip_seconds: Mapped[float] = mapped_column(Float)
    embedding: Mapped[bytes] = mapped_column(LargeBinary)  # 256 float32, Resemblyzer
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    features: Mapped[list[VoiceFeatureRow]] = relationship(
        back_populates="voice", cascade="all, delete-orphan", passive_deletes=True
    )
    shares: Mapped[list[VoiceShareRow]] = relationship(
        back_populates="voice", cascade="all, delete-orphan", passive_deletes=True
    )


class VoiceFeatureRow(Base):
    """Features one backend extracted from a voice once, at registration: the speaker cache."""

    __tablename__ = "voice_features"

    voice_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("voices.id", ondelete="CASCADE"), primary_key=True
    )
    backend: Mapped[str] = mapped_column(String(32), primary_key=True)
    backend_version: Mapped[str] = mapped_column(String(128), primary_key=True)
    blob: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    voice: Mapped[VoiceRow] = relationship(back_populates="features")


class VoiceShareRow(Base):
    """An explicit share of a voice with one user or one whole guild."""

    __tablename__ = "voice_shares"

    voice_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("voices.id", ondelete="CASCADE"), primary_key=True
    )
    target_kind: Mapped[str] = mapped_column(String(8), primary_key=True)  # "user" | "guild"
    target_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, index=True)

    voice: Mapped[VoiceRow] = relationship(back_populates="shares")


class UserSettingsRow(Base):
    """A user's choices, in every guild: voice, speed, pitch, opt-out, lending the voice, how the name is said."""

    __tablename__ = "user_settings"

    user_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    active_voice_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("voices.id", ondelete="SET NULL"), nullable=True,
        default=_user_default("active_voice_id"),
    )
    speed: Mapped[float] = mapped_column(Float, default=_user_default("speed"))
    pitch: Mapped[float] = mapped_column(Float, default=_user_default("pitch"))
    opted_out: Mapped[bool] = mapped_column(Boolean, default=_user_default("opted_out"))
    language: Mapped[str | None] = mapped_column(String(16), nullable=True, default=_user_default("language"))
    lend_voice: Mapped[bool] = mapped_column(Boolean, default=_user_default("lend_voice"))
    name_say_as: Mapped[str | None] = mapped_column(String(64), nullable=True, default=_user_default("name_say_as"))
    stock_voice: Mapped[str | None] = mapped_column(String(32), nullable=True, default=_user_default("stock_voice"))


class MemberSettingsRow(Base):
    """A user's settings in one guild: the nickname read for "NAME said", the voice a moderator set (/voice set)."""

    __tablename__ = "member_settings"

    guild_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    nickname: Mapped[str | None] = mapped_column(String(64), nullable=True)
    voice: Mapped[str | None] = mapped_column(String(32), nullable=True)  # a stock voice's name or a voice's id


class GuildSettingsRow(Base):
    """A guild's settings: readout channels, xsaid, autojoin, limits, required role, custom voices, prefixes."""

    __tablename__ = "guild_settings"

    guild_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    readout_channel_ids: Mapped[list[int]] = mapped_column(JSON, default=_guild_default("readout_channel_ids"))
    xsaid: Mapped[bool] = mapped_column(Boolean, default=_guild_default("xsaid"))
    autojoin: Mapped[bool] = mapped_column(Boolean, default=_guild_default("autojoin"))
    read_bots: Mapped[bool] = mapped_column(Boolean, default=_guild_default("read_bots"))
    require_in_voice: Mapped[bool] = mapped_column(Boolean, default=_guild_default("require_in_voice"))
    required_role_id: Mapped[int | None] = mapped_column(
        BigInteger, nullable=True, default=_guild_default("required_role_id")
    )
    max_message_chars: Mapped[int] = mapped_column(Integer, default=_guild_default("max_message_chars"))
    max_queue: Mapped[int] = mapped_column(Integer, default=_guild_default("max_queue"))
    language: Mapped[str] = mapped_column(String(16), default=_guild_default("language"))
    voices: Mapped[str] = mapped_column(String(400), default=_guild_default("voices"))
    max_delay: Mapped[int] = mapped_column(Integer, default=_guild_default("max_delay"))
    custom_voices: Mapped[bool] = mapped_column(Boolean, default=_guild_default("custom_voices"))
    read_spoilers: Mapped[bool] = mapped_column(Boolean, default=_guild_default("read_spoilers"))
    required_prefix: Mapped[str] = mapped_column(String(GUILD_OPTIONS["required_prefix"].chars),
                                                 default=_guild_default("required_prefix"))
    ignore_prefix: Mapped[str] = mapped_column(String(GUILD_OPTIONS["ignore_prefix"].chars),
                                               default=_guild_default("ignore_prefix"))
    repeated_characters: Mapped[int] = mapped_column(Integer, default=_guild_default("repeated_characters"))
    announce_voice: Mapped[bool] = mapped_column(Boolean, default=_guild_default("announce_voice"))
    role_voices: Mapped[str] = mapped_column(String(1000), default=_guild_default("role_voices"))
    lock_voice: Mapped[bool] = mapped_column(Boolean, default=_guild_default("lock_voice"))
    ducking: Mapped[int] = mapped_column(Integer, default=_guild_default("ducking"))


class DictionaryEntryRow(Base):
    """A guild's pronunciation: a whole word (lowercase) and what is said instead."""

    __tablename__ = "dictionary_entries"

    guild_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    word: Mapped[str] = mapped_column(String(64), primary_key=True)
    say_as: Mapped[str] = mapped_column(String(200))


class UserDictionaryEntryRow(Base):
    """A user's own pronunciation, in every server: a whole word (lowercase) and what is said instead."""

    __tablename__ = "user_dictionary_entries"

    user_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    word: Mapped[str] = mapped_column(String(64), primary_key=True)
    say_as: Mapped[str] = mapped_column(String(200))


class DictionaryPatternRow(Base):
    """A guild's pattern entry: a regular expression of the safe subset (bot/dictionary_patterns.py) and what is
    said instead."""

    __tablename__ = "dictionary_patterns"

    guild_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    pattern: Mapped[str] = mapped_column(String(200), primary_key=True)
    say_as: Mapped[str] = mapped_column(String(200))
