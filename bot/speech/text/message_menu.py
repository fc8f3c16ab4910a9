"""The message context-menu commands as SayOrders: "Speak this" in your voice, "Speak in their voice" with consent."""

from __future__ import annotations

import discord

from bot.errors import UserError
from bot.prefs import PrefsService
from bot.speech.queue.utterance import Notify
from bot.speech.text.say import Join, SayOrder


async def message_order(prefs: PrefsService, interaction: discord.Interaction, message: discord.Message, *,
                        their_voice: bool, notify: Notify | None = None) -> SayOrder:
    """An order to read `message` now, asked by the interaction's user; their voice, or with `their_voice` the
    author's, which only the author can allow (/voice lend). Someone who opted out is not read by others."""
    invoker = interaction.user
    author = message.author
    if not message.content.strip():
        raise UserError("That message has no text to read.")
    if author.id != invoker.id:
        lender = await prefs.user(author.id)
        name = discord.utils.escape_markdown(author.display_name)
        if lender.opted_out:
            raise UserError(f"{name} opted out of being read aloud.")
        if their_voice and not lender.lend_voice:
            raise UserError(f"{name} has not allowed others to use their voice; only they can, with /voice lend on. "
                            "Use \"Speak this\" to hear it in your own voice.")
    return SayOrder(
        guild=interaction.guild, author=invoker, text=message.content, kind="menu",
        voice_of=author if their_voice else None, channel_id=interaction.channel_id, join=Join.AUTHOR,
        cut_long=True, names={u.id: u.display_name for u in message.mentions}, notify=notify,
        label=f"{author.display_name}'s message",
    )
