"""Logging set up in discord.py's style, with secrets (the token) scrubbed from every record."""

from __future__ import annotations

import logging

import discord


class RedactFilter(logging.Filter):
    """Replaces each secret in a record's final message with [redacted]."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s and len(s) >= 6]

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        changed = False
        for secret in self.secrets:
            if secret in message:
                message = message.replace(secret, "[redacted]")
                changed = True
            if record.exc_text and secret in record.exc_text:
                record.exc_text = record.exc_text.replace(secret, "[redacted]")
        if changed:
            record.msg, record.args = message, None
        return True


def setup_logging(level: str, discord_level: str, secrets: list[str]) -> None:
    discord.utils.setup_logging(level=getattr(logging, level.upper()), root=True)
    logging.getLogger("discord").setLevel(getattr(logging, discord_level.upper()))
    logging.getLogger("alembic").setLevel(logging.WARNING)
    redact = RedactFilter(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redact)
