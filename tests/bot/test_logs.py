"""The token never reaches a log line, not even inside a traceback."""

from __future__ import annotations

import io
import logging

from bot.logs import RedactFilter


def test_token_is_redacted_from_messages_args_and_tracebacks():
    token = "MTA.secret.token-value"
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactFilter([token]))
    logger = logging.getLogger("test.redact")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("login with %s failed", token)
        try:
            raise RuntimeError(f"bad header Bot {token}")
        except RuntimeError:
            logger.exception("boom")
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert token not in out
    assert out.count("[redacted]") >= 2
    assert "login with [redacted] failed" in out
