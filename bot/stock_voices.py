"""StockVoices (bot.stock): the voices the engine ships, by name, language and gender; a user's choice among them
(/voice use), a server's voice per language (/settings set voice), their autocomplete and previews."""

from __future__ import annotations

from discord import app_commands

from bot.guild_options import OptionError
from engine.base import Engine, StockVoice, Voice

MAX_CHOICES = 25  # Discord's limit on autocomplete choices
DEFAULT = "default"  # /settings set voice default: every language back to the bot's own voice
# what a preview says when the user gives no text, in the voice's language
PREVIEW = {
    "en": "This is how my voice sounds now. The quick brown fox jumps over the lazy dog.",
    "ja": "こんにちは。これが私の声です。今日もよろしくお願いします。",
    "zh": "你好，这是我的声音。今天天气很好，我们一起去公园吧。",
    "es": "Hola, así suena mi voz. Hoy hace un día precioso para dar un paseo.",
    "fr": "Bonjour, voici ma voix. Il fait beau aujourd'hui, allons nous promener.",
    "it": "Ciao, questa è la mia voce. Oggi è una bella giornata per fare una passeggiata.",
    "pt": "Olá, esta é a minha voz. Hoje está um lindo dia para passear.",
    "hi": "नमस्ते, यह मेरी आवाज़ है। आज घूमने के लिए बहुत अच्छा दिन है।",
}


def parse_mapping(stored: str) -> dict[str, str]:
    """A guild's stored voices, "en=am_michael ja=jf_alpha", as language -> voice name."""
    pairs = (item.split("=", 1) for item in stored.split() if "=" in item)
    return {language: name for language, name in pairs}


def format_mapping(mapping: dict[str, str]) -> str:
    return " ".join(f"{language}={name}" for language, name in sorted(mapping.items()))


class StockVoices:
    """The engine's stock voices (BackendInfo.stock); none on a backend without them (Piper, a remote server)."""

    def __init__(self, engine: Engine) -> None:
        self.by_name: dict[str, StockVoice] = {v.name: v for v in engine.info.stock}
        self.names = engine.languages

    def find(self, raw: str) -> StockVoice | None:
        """The stock voice `raw` names: its name (af_heart), or "Heart (af_heart) ..." as autocomplete shows it."""
        text = " ".join((raw or "").split()).lower()
        if text in self.by_name:
            return self.by_name[text]
        if "(" in text and ")" in text:
            return self.by_name.get(text.split("(", 1)[1].split(")", 1)[0].strip())
        return None

    def voice(self, name: str | None, speed: float, pitch: float) -> Voice | None:
        """The Voice of a stored stock voice name (None when there is none, or the engine no longer has it)."""
        stock = self.by_name.get(name or "")
        return Voice(name=stock.name, speed=speed, pitch=pitch) if stock is not None else None

    def preview_text(self, name: str) -> str:
        """What a preview of the voice `name` says: a stock voice's in its language, a registered voice's in English."""
        stock = self.find(name)
        return PREVIEW.get(stock.language if stock is not None else "en", PREVIEW["en"])

    # -- /voice list and autocomplete ------------------------------------------------------------------
    def lines(self) -> list[str]:
        """One line per accent: its women's and men's voices by name."""
        by_accent: dict[str, list[StockVoice]] = {}
        for voice in self.by_name.values():
            by_accent.setdefault(voice.accent, []).append(voice)
        lines = []
        for accent, voices in by_accent.items():
            parts = [f"{plural}: " + ", ".join(f"{v.label} (`{v.name}`)" for v in voices if v.gender == gender)
                     for gender, plural in (("woman", "women"), ("man",
                                                                 "men")) if any(v.gender == gender for v in voices)]
            lines.append(f"**{accent}** — " + "; ".join(parts))
        return lines

    def choices(self, current: str, taken: int = 0) -> list[app_commands.Choice[str]]:
        """Stock voices whose name, label, accent or gender matches what was typed, after `taken` other choices."""
        typed = " ".join(current.split()).lower()[:40]
        found = [v for v in self.by_name.values()
                 if not typed or typed in v.describe().lower()]
        found.sort(key=lambda v: (not v.name.startswith(typed), not v.label.lower().startswith(typed), v.name))
        return [app_commands.Choice(name=v.describe()[:100], value=v.name) for v in found[:MAX_CHOICES - taken]]

    # -- the server's voice per language ----------------------------------------------------------------
    def guild_voice(self, stored: str, language: str, speed: float, pitch: float) -> Voice | None:
        """The server's voice for `language` (its stored mapping), None when it chose none."""
        name = parse_mapping(stored).get(language)
        voice = self.voice(name, speed, pitch)
        return voice if voice is not None and self.by_name[voice.name].language == language else None

    def reader(self, stored: str):
        """The reader of `/settings set voice RAW` for a guild whose mapping is `stored`: (new mapping, in words)."""

        def read(raw: str) -> tuple[str, str]:
            if " ".join(raw.split()).lower() == DEFAULT:
                return "", "the bot's own voice in every language"
            stock = self.find(raw)
            if stock is None:
                raise OptionError(f"There is no stock voice {raw[:40]!r}; type a few letters and pick one from the "
                                  "list (see /voice list), or default.")
            mapping = parse_mapping(stored)
            mapping[stock.language] = stock.name
            language = self.names().get(stock.language, stock.language)
            return format_mapping(mapping), f"{stock.label} ({stock.name}) for {language}"

        return read
