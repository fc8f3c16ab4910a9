"""Dictionary plugin: each server's pronunciations (/dictionary add, remove, list, export, import)."""

from __future__ import annotations

from plugins.dictionary.cog import DictionaryCog


async def setup(bot) -> None:
    await bot.add_cog(DictionaryCog(bot))
