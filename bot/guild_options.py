"""Every guild setting declared once (field, type, default, bounds, help); prefs, rows and /settings derive from it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot import role_voices

if TYPE_CHECKING:
    from bot.config import Settings

PREFIX_MAX_CHARS = 20  # a server's readout prefix
_TRUE = {"on", "true", "yes", "1", "enable", "enabled"}
_FALSE = {"off", "false", "no", "0", "disable", "disabled"}


class OptionError(ValueError):
    """A value a setting cannot take; the message says what it takes, in words for the user."""


@dataclass(frozen=True)
class GuildOption:
    field: str  # the GuildPrefs attribute and the guild_settings column
    kind: Any  # bool, int, list[int] or int | None
    default: Any  # a tuple stands for a list: each guild gets its own copy
    help: str
    name: str = ""  # as typed in `/settings set`; empty: changed by its own command
    low: int = 0  # ints: the least value accepted
    ceiling: str = ""  # ints: the config key ("section.key") a guild may not exceed; this bot's own limit
    chars: int = 0  # str taken as typed (a prefix): at most this many characters, shown in code; empty: off
    shown: Callable[[Any], str] | None = None  # how /settings show says the value, where it is not plain
    off: bool = False  # ints: "off" is taken for 0 and 0 shown as off

    def __post_init__(self) -> None:
        if self.name and self.kind is int and not self.ceiling:
            raise ValueError(f"guild option {self.name!r}: a number needs a ceiling in the config")

    def initial(self) -> Any:
        """The default as a fresh value (lists are never shared between guilds)."""
        return list(self.default) if isinstance(self.default, tuple) else self.default


GUILD_OPTIONS: tuple[GuildOption, ...] = (
    GuildOption("readout_channel_ids", list[int], (), "channels read aloud (/readout channel)"),
    GuildOption("required_role_id", int | None, None, "only members with this role are read (/settings role)"),
    GuildOption("xsaid", bool, True, 'say "NAME said" before a new author\'s message', name="xsaid"),
    GuildOption("autojoin", bool, False, "join the author's voice channel when a readout message arrives",
                name="autojoin"),
    GuildOption("read_bots", bool, False, "read messages from bots and webhooks", name="bots"),
    GuildOption("require_in_voice", bool, True, "only read authors who are in the bot's voice channel",
                name="require_voice"),
    GuildOption("custom_voices", bool, True, "allow members' registered voices", name="custom_voices"),
    GuildOption("read_spoilers", bool, False, "read spoilers aloud instead of skipping them", name="spoilers"),
    GuildOption("max_message_chars", int, 300, "characters read of one message", name="max_length", low=10,
                ceiling="speech.max_text_chars"),
    GuildOption("max_queue", int, 20, "messages waiting before new ones are refused", name="max_queue", low=1,
                ceiling="speech.queue_max"),
    GuildOption("max_delay", int, 30, "seconds a message may wait to be read; older ones are skipped to catch up",
                name="max_delay", low=5, ceiling="speech.max_delay_s"),
    GuildOption("language", str, "", "the language messages are spoken in: auto (detected per message) or one",
                name="language"),
    GuildOption("voices", str, "", "the server's voice for a language: a stock voice (/voice list), or default",
                name="voice"),
    GuildOption("required_prefix", str, "", "only messages starting with this are read, without it; off: all",
                name="required_prefix", chars=PREFIX_MAX_CHARS),
    GuildOption("ignore_prefix", str, "", "messages starting with this are not read (beside the bot's own list)",
                name="ignore_prefix", chars=PREFIX_MAX_CHARS),
    GuildOption("repeated_characters", int, 3, "a character is said at most this many times in a row",
                name="repeated_characters", low=1, ceiling="speech.max_repeated_characters"),
    GuildOption("announce_voice", bool, False, 'say "NAME joined" and "NAME left" in the bot\'s voice channel',
                name="announce"),
    GuildOption("role_voices", str, "", "a role's voice: @role VOICE (a stock voice or one shared with the server), "
                "@role off; a member's own voice wins unless lock_voice", name="role_voice",
                shown=role_voices.shown),
    GuildOption("lock_voice", bool, False, "role voices and /voice set win over members' own voices",
                name="lock_voice"),
    GuildOption("ducking", int, 10, "dB the bot's level falls while a member speaks in its call; off: never",
                name="ducking", ceiling="speech.max_ducking_db", off=True),
)
BY_FIELD: dict[str, GuildOption] = {o.field: o for o in GUILD_OPTIONS}
OPTIONS: dict[str, GuildOption] = {o.name: o for o in GUILD_OPTIONS if o.name}  # what /settings set offers


def prefs_fields() -> list[tuple[str, Any, dataclasses.Field]]:
    """The GuildPrefs fields after guild_id, with their defaults, for dataclasses.make_dataclass."""
    return [
        (o.field, o.kind, dataclasses.field(default_factory=o.initial) if isinstance(o.default, tuple)
         else dataclasses.field(default=o.default))
        for o in GUILD_OPTIONS
    ]


def column_default(field: str) -> Any:
    """The guild_settings column default: the value, or a callable making a fresh list."""
    option = BY_FIELD[field]
    return option.initial if isinstance(option.default, tuple) else option.default


def ceiling(option: GuildOption, config: Settings) -> int:
    """The most this bot allows for `option`: its ceiling key read from the bot's settings."""
    value: Any = config
    for part in option.ceiling.split("."):
        value = getattr(value, part)
    return int(value)


def effective(prefs: Any, config: Settings) -> Any:
    """`prefs` with each number lowered to this bot's ceiling (a stored value may predate a lower config)."""
    changes = {o.field: ceiling(o, config) for o in GUILD_OPTIONS
               if o.ceiling and getattr(prefs, o.field) > ceiling(o, config)}
    return dataclasses.replace(prefs, **changes) if changes else prefs


def _shown(option: GuildOption, value: Any) -> str:
    if option.shown is not None:
        return option.shown(value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if option.chars:
        return f"`{value}`" if value else "off"
    if option.off and value == 0:
        return "off"
    return str(value or "default")


def parse(name: str, raw: str, config: Settings,
          words: Mapping[str, Callable[[str], tuple[str, str]]] | None = None) -> tuple[str, object, str]:
    """(field, value, answer) for `/settings set name raw`; a number above this bot's ceiling is lowered
    to it and the answer says so; a word setting (language, voice) is read by its reader in `words`, which gives
    (stored, in words). OptionError says what is expected."""
    option = OPTIONS.get(name)
    if option is None:
        raise OptionError(f"Unknown setting {name[:40]!r}. Settings: {', '.join(OPTIONS)}.")
    if option.kind is str:
        reader = (words or {}).get(name)
        if reader is None:
            raise OptionError(f"{name} cannot be changed here.")
        value, said = reader(raw)
        return option.field, value, f"{name} is now {said}."
    text = raw.strip().lower()
    if option.kind is bool:
        if text in _TRUE | _FALSE:
            on = text in _TRUE
            return option.field, on, f"{name} is now {_shown(option, on)}."
        raise OptionError(f"{name} takes on or off, not {raw[:40]!r}.")
    high = ceiling(option, config)
    if option.off and text in _FALSE:
        text = "0"
    try:
        number = int(text)
    except ValueError:
        takes = f"off or a whole number up to {high}" if option.off else f"a whole number from {option.low} to {high}"
        raise OptionError(f"{name} takes {takes}.") from None
    if number < option.low:
        raise OptionError(f"{name} must be from {option.low} to {high}.")
    if number > high:
        return option.field, high, f"{name} is now {high}, the most this bot allows (you asked for {number})."
    return option.field, number, f"{name} is now {_shown(option, number)}."


def describe(prefs: Any, config: Settings) -> list[str]:
    """One line per setting, as /settings show prints them: its value, its default when it differs, what it does;
    a stored number above the ceiling shows both."""
    now = effective(prefs, config)
    lines = []
    for name, option in OPTIONS.items():
        value, stored = getattr(now, option.field), getattr(prefs, option.field)
        shown = _shown(option, value)
        if value != stored:
            shown = f"{value} (set to {stored}; the most this bot allows is {value})"
        default = _shown(option, option.initial())
        if value != option.initial() and default != "default":  # an unset word setting says "default" already
            shown += f" (default {default})"
        lines.append(f"**{name}**: {shown} — {option.help}")
    channels = ", ".join(f"<#{c}>" for c in prefs.readout_channel_ids) or "none"
    role = f"<@&{prefs.required_role_id}>" if prefs.required_role_id else "none"
    return [f"**readout channels**: {channels}", f"**required role**: {role}", *lines]
