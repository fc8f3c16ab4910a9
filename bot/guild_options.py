"""The guild settings an admin may change with /settings: names, kinds, bounds and parsing of values."""

from __future__ import annotations

from dataclasses import dataclass

from bot.errors import UserError
from bot.storage.settings_repo import GuildPrefs

_TRUE = {"on", "true", "yes", "1", "enable", "enabled"}
_FALSE = {"off", "false", "no", "0", "disable", "disabled"}


@dataclass(frozen=True)
class Option:
    field: str
    kind: type
    help: str
    low: int = 0
    high: int = 0


OPTIONS: dict[str, Option] = {
    "xsaid": Option("xsaid", bool, 'say "NAME said" before a new author\'s message'),
    "autojoin": Option("autojoin", bool, "join the author's voice channel when a readout message arrives"),
    "bots": Option("read_bots", bool, "read messages from bots and webhooks"),
    "require_voice": Option("require_in_voice", bool, "only read authors who are in the bot's voice channel"),
    "custom_voices": Option("custom_voices", bool, "allow members' registered voices"),
    "spoilers": Option("read_spoilers", bool, "read spoilers aloud instead of skipping them"),
    "max_length": Option("max_message_chars", int, "characters read of one message", 10, 2000),
    "max_queue": Option("max_queue", int, "messages waiting before new ones are refused", 1, 100),
}


def parse(name: str, raw: str) -> tuple[str, object]:
    """(field, value) for `/settings set name raw`, or a UserError saying what is expected."""
    option = OPTIONS.get(name)
    if option is None:
        raise UserError(f"Unknown setting {name!r}. Settings: {', '.join(OPTIONS)}.")
    text = raw.strip().lower()
    if option.kind is bool:
        if text in _TRUE:
            return option.field, True
        if text in _FALSE:
            return option.field, False
        raise UserError(f"{name} takes on or off, not {raw[:40]!r}.")
    try:
        value = int(text)
    except ValueError:
        raise UserError(f"{name} takes a whole number from {option.low} to {option.high}.") from None
    if not option.low <= value <= option.high:
        raise UserError(f"{name} must be from {option.low} to {option.high}.")
    return option.field, value


def describe(prefs: GuildPrefs) -> list[str]:
    """One line per setting, as /settings show prints them."""
    lines = []
    for name, option in OPTIONS.items():
        value = getattr(prefs, option.field)
        shown = ("on" if value else "off") if option.kind is bool else str(value)
        lines.append(f"**{name}**: {shown} — {option.help}")
    channels = ", ".join(f"<#{c}>" for c in prefs.readout_channel_ids) or "none"
    role = f"<@&{prefs.required_role_id}>" if prefs.required_role_id else "none"
    return [f"**readout channels**: {channels}", f"**required role**: {role}", *lines]
