"""Settings declared once: prefs, rows, the migrated schema, /settings parsing and config all agree."""

from __future__ import annotations

import dataclasses
import re

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from bot import guild_options, readout
from bot.config import DEFAULT_CONFIG, ConfigError, load_settings
from bot.errors import MESSAGE_MAX_CHARS, messages
from bot.guild_options import GUILD_OPTIONS, OPTIONS, OptionError
from bot.storage import settings_repo
from bot.storage.database import Database, upgrade
from bot.storage.models import Base, GuildSettingsRow, UserSettingsRow
from bot.storage.settings_repo import GuildPrefs, UserPrefs
from bot.user_options import BY_FIELD as USER_BY_FIELD
from bot.user_options import USER_OPTIONS

FIELDS = [o.field for o in GUILD_OPTIONS]


@pytest.fixture
def config():
    return load_settings(DEFAULT_CONFIG, environ={})


def _with(config, **speech):
    return dataclasses.replace(config, speech=dataclasses.replace(config.speech, **speech))


def test_prefs_and_row_take_fields_and_defaults_from_the_declaration():
    fields = dataclasses.fields(GuildPrefs)
    assert [f.name for f in fields] == ["guild_id", *FIELDS]
    prefs = GuildPrefs(1)
    columns = GuildSettingsRow.__table__.columns
    assert sorted(c.name for c in columns) == sorted(["guild_id", *FIELDS])
    for option in GUILD_OPTIONS:
        assert getattr(prefs, option.field) == option.initial(), option.field
        default = columns[option.field].default
        value = default.arg(None) if default is not None and default.is_callable else getattr(default, "arg", None)
        assert value == option.initial(), option.field
    assert GuildPrefs(1).readout_channel_ids is not GuildPrefs(2).readout_channel_ids


async def test_migrated_schema_matches_the_declaration_and_a_bare_row_gets_its_defaults(db_url):
    await upgrade(db_url)
    db = Database(db_url)
    try:
        async with db.engine.connect() as conn:
            names = await conn.run_sync(lambda c: [col["name"] for col in inspect(c).get_columns("guild_settings")])
            drift = await conn.run_sync(lambda c: compare_metadata(MigrationContext.configure(c), Base.metadata))
        assert sorted(names) == sorted(["guild_id", *FIELDS])
        assert drift == [], drift  # the model (defaults derived) needs no new migration
        async with db.sessions() as session, session.begin():
            session.add(GuildSettingsRow(guild_id=9))  # only the keys: every column from its declared default
            session.add(UserSettingsRow(user_id=9))
        assert await settings_repo.get_guild_prefs(db, 9) == GuildPrefs(9)
        assert await settings_repo.get_user_prefs(db, 9) == UserPrefs(9)
        changed = await settings_repo.update_guild_prefs(db, 10, max_queue=3)
        assert dataclasses.replace(changed, max_queue=GuildPrefs(10).max_queue) == GuildPrefs(10)
    finally:
        await db.close()


def test_user_prefs_and_row_take_fields_defaults_and_bounds_from_the_declaration():
    assert [f.name for f in dataclasses.fields(UserPrefs)] == ["user_id", *(o.field for o in USER_OPTIONS)]
    columns = UserSettingsRow.__table__.columns
    for option in USER_OPTIONS:
        assert getattr(UserPrefs(1), option.field) == option.default
        assert getattr(columns[option.field].default, "arg", None) == option.default, option.field
    speed, pitch = USER_BY_FIELD["speed"], USER_BY_FIELD["pitch"]
    assert speed.check(2) == 2.0 and pitch.check(-12) == -12.0
    for option, bad, said in [(speed, 2.01, "Speed goes from 0.5 (slow) to 2.0 (fast)."),
                              (speed, float("nan"), "Speed goes from 0.5 (slow) to 2.0 (fast)."),
                              (pitch, 12.5, "Pitch goes from -12 to 12 semitones.")]:
        with pytest.raises(OptionError) as info:
            option.check(bad)
        assert str(info.value) == said


def test_settings_set_offers_each_settable_option_once():
    assert list(OPTIONS) == ["xsaid", "autojoin", "bots", "require_voice", "custom_voices", "spoilers",
                             "max_length", "max_queue", "max_delay", "language", "voice", "required_prefix",
                             "ignore_prefix", "repeated_characters", "announce", "role_voice", "lock_voice", "ducking"]
    assert all(o.ceiling for o in OPTIONS.values() if o.kind is int)
    with pytest.raises(ValueError, match="ceiling"):
        guild_options.GuildOption("x", int, 1, "help", name="x")


def test_a_number_above_the_bots_limit_is_lowered_to_it_and_the_answer_says_so(config):
    assert config.speech.queue_max == 20
    assert guild_options.parse("max_queue", "100", config) == (
        "max_queue", 20, "max_queue is now 20, the most this bot allows (you asked for 100).")
    assert guild_options.parse("max_queue", " 7 ", config) == ("max_queue", 7, "max_queue is now 7.")
    assert guild_options.parse("max_queue", "20", config) == ("max_queue", 20, "max_queue is now 20.")
    field, value, answer = guild_options.parse("max_length", "5000", _with(config, max_text_chars=400))
    assert (field, value) == ("max_message_chars", 400) and "the most this bot allows" in answer


@pytest.mark.parametrize("name, raw, expected", [
    ("max_queue", "0", "max_queue must be from 1 to 20."),
    ("max_queue", "-3", "max_queue must be from 1 to 20."),
    ("max_queue", "ten", "max_queue takes a whole number from 1 to 20."),
    ("max_queue", "1e3", "max_queue takes a whole number from 1 to 20."),
    ("max_length", "9", "max_length must be from 10 to 500."),
    ("xsaid", "maybe", "xsaid takes on or off, not 'maybe'."),
    ("repeated_characters", "0", "repeated_characters must be from 1 to 20."),
    ("repeated_characters", "many", "repeated_characters takes a whole number from 1 to 20."),
    ("nosuch", "1", "Unknown setting 'nosuch'."),
])
def test_values_a_setting_cannot_take_are_refused_with_its_range(config, name, raw, expected):
    with pytest.raises(OptionError) as info:
        guild_options.parse(name, raw, config)
    assert str(info.value).startswith(expected)


def test_absurd_numbers_are_clamped_or_refused_never_stored(config):
    assert guild_options.parse("max_queue", "9" * 30, config)[1] == 20
    with pytest.raises(OptionError, match="whole number"):
        guild_options.parse("max_queue", "9" * 5000, config)  # past Python's digit limit for int()


def test_a_stored_value_above_a_lowered_config_is_used_and_shown_at_the_bots_limit(config):
    stored = dataclasses.replace(GuildPrefs(1), max_queue=50, max_message_chars=300)
    lowered = _with(config, queue_max=5)
    now = guild_options.effective(stored, lowered)
    assert (now.max_queue, now.max_message_chars) == (5, 300)
    assert guild_options.effective(stored, _with(config, queue_max=80)) is stored
    lines = guild_options.describe(stored, lowered)
    assert "**max_queue**: 5 (set to 50; the most this bot allows is 5)" in "\n".join(lines)
    assert "**max_length**: 300 — characters read of one message" in lines


def test_config_file_says_which_guild_setting_each_ceiling_bounds():
    lines = DEFAULT_CONFIG.read_text().splitlines()
    for option in OPTIONS.values():
        if not option.ceiling:
            continue
        section, key = option.ceiling.split(".")
        start = lines.index(f"[{section}]")
        at = next(i for i in range(start, len(lines)) if lines[i].startswith(f"{key} = "))
        comments = []
        for line in reversed(lines[:at]):
            if not line.startswith("#"):
                break
            comments.append(line)
        assert f"/settings set {option.name}`" in " ".join(comments), option.ceiling


def test_text_limits_that_apply_together_are_checked_together(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("[speech]\nmax_text_chars = 1995\n")
    with pytest.raises(ConfigError, match=r"'speech.max_text_chars' \(1995\).*'engine.max_text_chars' \(2000\)"):
        load_settings(path, environ={})
    path.write_text("[speech]\nmax_text_chars = 1990\n")
    assert load_settings(path, environ={}).speech.max_text_chars == 1990


def test_clip_speech_bounds_are_not_bot_settings(tmp_path):
    """voices.min_speech_s/max_speech_s were read by nothing; engine/voices/clip.py declares the bounds."""
    path = tmp_path / "config.toml"
    path.write_text("[voices]\nmin_speech_s = 1.0\n")
    with pytest.raises(ConfigError, match=re.escape("unknown key 'voices.min_speech_s'")):
        load_settings(path, environ={})


def test_a_word_setting_is_read_by_the_callers_reader(config):
    def words(raw: str) -> tuple[str, str]:
        if raw != "fr":
            raise OptionError("I don't speak that.")
        return "fr", "French (fr)"

    readers = {"language": words}
    assert guild_options.parse("language", "fr", config, readers) == ("language", "fr", "language is now French (fr).")
    with pytest.raises(OptionError, match="I don't speak that"):
        guild_options.parse("language", "xx", config, readers)
    with pytest.raises(OptionError, match="cannot be changed here"):
        guild_options.parse("language", "fr", config)
    with pytest.raises(OptionError, match="cannot be changed here"):
        guild_options.parse("voice", "af_heart", config, readers)  # a reader for each word setting


@pytest.mark.parametrize("name, raw, expected", [
    ("required_prefix", " tts: ", ("required_prefix", "tts:", "required_prefix is now `tts:`.")),
    ("required_prefix", "OFF", ("required_prefix", "", "required_prefix is now off.")),
    ("ignore_prefix", "//", ("ignore_prefix", "//", "ignore_prefix is now `//`.")),
    ("ignore_prefix", "(", ("ignore_prefix", "(", "ignore_prefix is now `(`.")),  # already skipped: harmless
    ("ignore_prefix", "none", ("ignore_prefix", "", "ignore_prefix is now off.")),
])
def test_a_prefix_is_taken_as_typed_and_off_clears_it(config, name, raw, expected):
    assert guild_options.parse(name, raw, config, readout.prefix_readers(config, GuildPrefs(1))) == expected


@pytest.mark.parametrize("name, raw, expected", [
    ("required_prefix", "x" * 21, "required_prefix takes up to 20 characters without spaces or backticks, or off."),
    ("ignore_prefix", "a b", "ignore_prefix takes up to 20 characters"),
    ("ignore_prefix", "`x", "ignore_prefix takes up to 20 characters"),
    ("ignore_prefix", "x\u200b", "ignore_prefix takes up to 20 characters"),  # an invisible character
    ("required_prefix", "!tts", "Messages starting with '!' are not read here, so required_prefix cannot start"),
    ("required_prefix", "((", "Messages starting with '(' are not read here"),  # the bot's own lists
    ("required_prefix", "//x", "Messages starting with '//' are not read here"),  # the server's ignore_prefix
    ("ignore_prefix", "tts", "Every message read starts with the required_prefix 'tts:', so ignore_prefix 'tts' "
                             "would skip them all."),
])
def test_a_prefix_that_cannot_work_is_refused_with_why(config, name, raw, expected):
    current = dataclasses.replace(GuildPrefs(1), required_prefix="tts:", ignore_prefix="//")
    with pytest.raises(OptionError) as info:
        guild_options.parse(name, raw, config, readout.prefix_readers(config, current))
    assert str(info.value).startswith(expected)


def test_settings_show_lists_the_prefixes_and_the_cap_with_their_defaults(config):
    fresh = guild_options.describe(GuildPrefs(1), config)
    assert "**required_prefix**: off — only messages starting with this are read, without it; off: all" in fresh
    assert any(line.startswith("**ignore_prefix**: off — ") for line in fresh)
    assert any(line.startswith("**repeated_characters**: 3 — ") for line in fresh)
    changed = guild_options.describe(
        dataclasses.replace(GuildPrefs(1), required_prefix="tts:", repeated_characters=5, language="fr"), config)
    assert any(line.startswith("**required_prefix**: `tts:` (default off) — ") for line in changed)
    assert any(line.startswith("**repeated_characters**: 5 (default 3) — ") for line in changed)
    assert any(line.startswith("**language**: fr — ") for line in changed)  # unset says "default" already


def test_settings_show_of_the_fullest_guild_is_sent_whole(config):
    longest = {o.field: "x" * (o.chars or 400) for o in GUILD_OPTIONS if o.kind is str}  # each at its column or more
    prefs = dataclasses.replace(GuildPrefs(1), readout_channel_ids=[10**19 - i for i in range(20)],
                                required_role_id=10**19, **longest)
    lines = guild_options.describe(prefs, config)
    sent = messages(lines)
    assert len(sent) == 2 and all(len(m) <= MESSAGE_MAX_CHARS for m in sent) and "\n".join(sent) == "\n".join(lines)


def test_ducking_takes_off_or_decibels_up_to_the_bots_limit(config):
    assert guild_options.parse("ducking", "off", config) == ("ducking", 0, "ducking is now off.")
    assert guild_options.parse("ducking", "0", config) == ("ducking", 0, "ducking is now off.")
    assert guild_options.parse("ducking", "12", config) == ("ducking", 12, "ducking is now 12.")
    field, value, answer = guild_options.parse("ducking", "90", _with(config, max_ducking_db=30))
    assert (field, value) == ("ducking", 30) and "the most this bot allows" in answer
    with pytest.raises(OptionError, match="^ducking takes off or a whole number up to 30"):
        guild_options.parse("ducking", "loud", _with(config, max_ducking_db=30))
    lines = "\n".join(guild_options.describe(dataclasses.replace(GuildPrefs(1), ducking=0), config))
    assert "**ducking**: off (default 10) — dB the bot's level falls while a member speaks" in lines
    assert "**ducking**: 10 — " in "\n".join(guild_options.describe(GuildPrefs(1), config))
