"""Every per-user setting declared once (field, type, default, bounds, help); UserPrefs and its row derive from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.guild_options import OptionError


@dataclass(frozen=True)
class UserOption:
    field: str  # the UserPrefs attribute and the user_settings column
    kind: Any  # bool, float or str | None
    default: Any
    help: str
    low: float = 0.0  # floats: the accepted range, inclusive
    high: float = 0.0
    range_words: str = ""  # floats: how the range is said, "{low}" and "{high}" filled in

    @property
    def range(self) -> str:
        return self.range_words.format(low=self.low, high=self.high)

    def check(self, value: float) -> float:
        """`value` as stored, or OptionError saying the range."""
        if not self.low <= value <= self.high:
            raise OptionError(f"{self.help.capitalize()} goes from {self.range}.")
        return float(value)


USER_OPTIONS: tuple[UserOption, ...] = (
    UserOption("active_voice_id", str | None, None, "the registered voice this user speaks in (/voice use)"),
    UserOption("stock_voice", str | None, None, "the stock voice this user speaks in (/voice use), when no "
                                                "registered one"),
    UserOption("speed", float, 1.0, "speed", 0.5, 2.0, "{low} (slow) to {high} (fast)"),
    UserOption("pitch", float, 0.0, "pitch", -12, 12, "{low} to {high} semitones"),
    UserOption("opted_out", bool, False, "never read this user's messages (/optout)"),
    UserOption("language", str | None, None, "the language this user's messages are spoken in: auto, a code, or "
               "None for the server's (/voice language)"),
    UserOption("lend_voice", bool, False, "let others have your messages spoken in your voice (/voice lend)"),
    UserOption("name_say_as", str | None, None, "how your name is said, in every server (/voice name)"),
)
BY_FIELD: dict[str, UserOption] = {o.field: o for o in USER_OPTIONS}
VOICE_DEFAULTS = {f: BY_FIELD[f].default for f in ("active_voice_id", "stock_voice", "speed",
                                                   "pitch")}  # what /voice reset restores
