"""Entry point: `python run_bot.py [--config FILE] [--sandbox [--say TEXT] [--out FILE.wav]]`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

NO_TOKEN_HELP = """\
No Discord bot token: set the DISCORD_TOKEN environment variable.

To get one:
  1. Open https://discord.com/developers/applications and create an application.
  2. Under "Bot", reset and copy the token; enable the "Message Content" intent (for channel readout).
  3. Invite it with the "bot" and "applications.commands" scopes and the Connect and Speak permissions.
  4. Run:  DISCORD_TOKEN=your-token make run

To try the bot now without a token, against a local Discord stand-in:
  .venv/bin/python run_bot.py --sandbox --say "hello there"
"""

log = logging.getLogger("run_bot")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run the voice bot.")
    parser.add_argument("--config", default=None, help="settings file (default: config.toml)")
    parser.add_argument("--sandbox", action="store_true", help="run against a local Discord stand-in")
    parser.add_argument("--say", default=None, help="with --sandbox: speak this text and exit")
    parser.add_argument("--out", default=None, help="with --sandbox: WAV file for what the channel heard")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bot.config import ConfigError, load_settings

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from bot.logs import setup_logging

    setup_logging(settings.logging.level, settings.logging.discord_level, [settings.discord.token])
    if args.sandbox:
        from demo.cli import run_demo

        return run_demo(settings, say=args.say, out=args.out)
    if not settings.discord.token:
        print(NO_TOKEN_HELP, file=sys.stderr)
        return 2
    import discord

    from bot.startup import run
    from bot.storage.database import StorageError
    from engine.base import EngineError

    try:
        asyncio.run(run(settings))
    except KeyboardInterrupt:
        return 0
    except discord.LoginFailure:
        print("error: Discord rejected the token in DISCORD_TOKEN; copy it again from the developer portal",
              file=sys.stderr)
        return 2
    except discord.PrivilegedIntentsRequired:
        print("error: enable the Message Content intent for this bot in the developer portal (Bot page)",
              file=sys.stderr)
        return 2
    except (StorageError, EngineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
