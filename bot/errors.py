"""User-facing errors and the one place that turns any command failure into a short ephemeral reply."""

from __future__ import annotations

import logging
import secrets

import discord
from discord import app_commands
from sqlalchemy.exc import OperationalError

log = logging.getLogger("bot.errors")


class UserError(app_commands.AppCommandError):
    """A failure the user can act on; its message is shown to them as is (also when a check raises it)."""


def request_id() -> str:
    return secrets.token_hex(4)


async def reply(interaction: discord.Interaction, text: str, *, ephemeral: bool = True, **kwargs) -> None:
    """Answer an interaction whether or not it was already answered or deferred."""
    try:
        if interaction.response.is_done():
            await interaction.followup.send(text, ephemeral=ephemeral, **kwargs)
        else:
            await interaction.response.send_message(text, ephemeral=ephemeral, **kwargs)
    except discord.HTTPException as exc:
        log.warning("could not answer interaction %s: %s", interaction.id, exc)


MESSAGE_MAX_CHARS = 2000  # Discord's limit on one message's content


def messages(lines: list[str], limit: int = MESSAGE_MAX_CHARS) -> list[str]:
    """`lines` joined into as few messages as fit Discord's limit, broken between lines (a longer line is cut)."""
    out: list[str] = []
    for line in (line[:limit] for line in lines):
        if out and len(out[-1]) + 1 + len(line) <= limit:
            out[-1] += "\n" + line
        else:
            out.append(line)
    return out


async def reply_lines(interaction: discord.Interaction, lines: list[str], **kwargs) -> None:
    """`reply` with `lines` in as many messages as Discord's limit needs."""
    for text in messages(lines):
        await reply(interaction, text, **kwargs)


DATABASE_BUSY = "The database is busy or read-only right now; nothing was changed. Try again in a moment."

_CHECK_MESSAGES: list[tuple[type[Exception], str]] = [
    (app_commands.NoPrivateMessage, "This command only works in a server."),
    (app_commands.MissingPermissions, "You need the {perms} permission to do that."),
    (app_commands.BotMissingPermissions, "I need the {perms} permission to do that."),
    (app_commands.CommandOnCooldown, "Slow down: try again in {retry:.0f} s."),
    (app_commands.CheckFailure, "You are not allowed to use this command."),
]


def describe(error: Exception) -> str | None:
    """The user-facing line for an expected failure, or None for a bug."""
    if isinstance(error, app_commands.CommandInvokeError):
        error = error.original
    if isinstance(error, UserError):
        return str(error)
    for kind, text in _CHECK_MESSAGES:
        if isinstance(error, kind):
            perms = ", ".join(getattr(error, "missing_permissions", []) or []).replace("_", " ").title()
            return text.format(perms=perms or "required", retry=getattr(error, "retry_after", 0.0))
    if isinstance(error, app_commands.TransformerError):
        if isinstance(error.value, discord.abc.User):  # a member option given someone outside the server
            return f"I cannot see {error.value.name} in this server; name one of its members."
        return f"I could not understand {error.value!r} as a {error.type.name.lower()}."
    if isinstance(error, OperationalError):  # locked, read-only, unreachable: the request itself was fine
        log.warning("database unavailable: %s", error.orig if error.orig is not None else error)
        return DATABASE_BUSY
    return None


async def on_app_command_error(interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
    """Tree error handler: a one-line ephemeral answer; the traceback goes to the log with context."""
    text = describe(error)
    if text is None:
        rid = request_id()
        original = getattr(error, "original", error)
        log.error(
            "command %s failed (request %s, guild %s, user %s)",
            interaction.command.qualified_name if interaction.command else "?",
            rid, interaction.guild_id, interaction.user.id if interaction.user else "?",
            exc_info=(type(original), original, original.__traceback__),
        )
        text = f"Something went wrong on my side (ref {rid}). Please try again."
    await reply(interaction, text)
