"""LanguageService (bot.languages): the language each message is spoken in (a user's, the guild's, or detected
per message with `auto`) and the voice that speaks it; the language settings and their autocomplete."""

from __future__ import annotations

import dataclasses
import logging

from discord import app_commands

from bot.errors import UserError
from bot.guild_options import OptionError
from bot.prefs import PrefsService
from bot.stock_voices import StockVoices
from engine import langid
from engine.base import Engine, Voice

log = logging.getLogger(__name__)
AUTO = "auto"  # detect the language of each message
FOLLOW = "server"  # a user's setting: follow the server's (stored as None)
DEFAULT = "default"  # a server's setting: the language of the bot's own voice (stored as "")
MAX_CHOICES = 25  # Discord's limit on autocomplete choices


class LanguageService:
    """Language settings are stored as "auto", a base code ("fr"), or the default (None for a user, "" for a
    guild); the engine says which languages it speaks and routes a language to a voice (engine/catalog.py)."""

    def __init__(self, engine: Engine, prefs: PrefsService, stock: StockVoices | None = None) -> None:
        self.engine = engine
        self.prefs = prefs
        self.stock = stock or StockVoices(engine)

    @property
    def default_language(self) -> str:
        """What the bot's own voice speaks."""
        return self.engine.info.languages[0] if self.engine.info.languages else "en"

    def names(self) -> dict[str, str]:
        return self.engine.languages()

    # -- the language of a message -----------------------------------------------------------------
    def language_of(self, text: str, user_setting: str | None, guild_setting: str) -> str:
        """The user's language, else the guild's, else the bot's; with `auto` the detected language of `text`,
        keeping the first fixed one of those when the text is short or unclear."""
        fixed = [s for s in (user_setting, guild_setting) if s and s != AUTO]
        fallback = fixed[0] if fixed else self.default_language
        if (user_setting or guild_setting) != AUTO:
            return fallback
        return langid.detect(text, fallback).language

    async def voice_for(self, text: str, voice: Voice, user_id: int, guild_setting: str,
                        guild_voices: str = "") -> Voice:
        """The voice that speaks `text` (the body of a message, without its "NAME said" frame): `voice` when it
        speaks the message's language, else the server's voice for that language (/settings set voice), else the
        engine's (engine.route). A stock voice's language stands for a user and server that set none."""
        user = await self.prefs.user(user_id)
        stock = self.stock.by_name.get(voice.name)
        user_setting = user.language or (stock.language if stock is not None and not guild_setting else None)
        routed = self.engine.route(voice, self.language_of(text, user_setting, guild_setting))
        if routed.name == "default" and routed.profile is None:
            chosen = self.stock.guild_voice(guild_voices, routed.language, routed.speed, routed.pitch)
            if chosen is not None:
                return dataclasses.replace(chosen, language=routed.language)
        return routed

    # -- settings ------------------------------------------------------------------------------------
    def parse(self, raw: str, *, user: bool) -> str | None:
        """A stored setting from what was typed: auto, a code, a language's name, or server/default; OptionError
        names what is accepted."""
        text = " ".join((raw or "").split()).lower()
        if text == AUTO:
            return AUTO
        if text in (FOLLOW, DEFAULT):
            return None if user else ""
        names = self.names()
        if text in names:
            return text
        for code, name in names.items():
            if name.lower() == text or f"{name} ({code})".lower() == text:
                return code
        other = FOLLOW if user else DEFAULT
        raise OptionError(f"I don't speak {raw[:40]!r}. Type a few letters of a language and pick it from the list, "
                          f"or use {AUTO} (detected per message) or {other}.")

    def shown(self, value: str | None, *, user: bool) -> str:
        """A stored setting in words."""
        if value == AUTO:
            return "auto (detected per message)"
        if not value:
            return "this server's language" if user else f"default ({self.names().get(self.default_language, '')})"
        return f"{self.names().get(value, value)} ({value})"

    def parse_guild(self, raw: str) -> tuple[str, str]:
        """(stored, in words) for `/settings set language`."""
        value = self.parse(raw, user=False) or ""
        return value, self.shown(value, user=False)

    async def set_user(self, user_id: int, raw: str) -> str:
        """Store the user's language; the answer to show them (UserError for one it does not speak)."""
        try:
            value = self.parse(raw, user=True)
        except OptionError as exc:
            raise UserError(str(exc)) from None
        await self.prefs.update_user(user_id, language=value)
        return f"Your messages are now spoken in {self.shown(value, user=True)}."

    def autocomplete(self, current: str, *, user: bool) -> list[app_commands.Choice[str]]:
        """auto, server/default, then languages whose code starts with or whose name contains what was typed."""
        typed = " ".join(current.split()).lower()[:40]
        special = [(f"{AUTO}: detect each message's language", AUTO),
                   (f"{FOLLOW}: this server's language", FOLLOW) if user else
                   (f"{DEFAULT}: the bot's own voice's language", DEFAULT)]
        choices = [app_commands.Choice(name=n, value=v) for n, v in special if v.startswith(typed)]
        names = self.names()
        ranked = sorted(names.items(), key=lambda cn: (not cn[0].startswith(typed), not cn[1].lower().startswith(typed),
                                                       cn[1]))
        for code, name in ranked:
            if len(choices) >= MAX_CHOICES:
                break
            if code.startswith(typed) or typed in name.lower():
                choices.append(app_commands.Choice(name=f"{name} ({code})"[:100], value=code))
        return choices
