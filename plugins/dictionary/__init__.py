"""Dictionary plugin: each server's pronunciations (/dictionary add, remove, list, export, import,
test; mine add, remove, list; pattern add, remove, list)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plugins.dictionary.cog import DictionaryCog

if TYPE_CHECKING:
    from bot.app import VoiceBot


async def setup(bot: VoiceBot) -> None:
    await bot.add_cog(DictionaryCog(bot))
