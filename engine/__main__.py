"""CLI: `python -m engine say|bench|register|serve`, a thin argparse dispatcher over subcommand modules.

A subcommand is a module with `add_arguments(parser)` and `run(args) -> int`, listed in SUBCOMMANDS.
Errors a user can fix print one line `error: ...` and exit 2; no traceback reaches the terminal.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import NoReturn

from engine.base import EngineError

# name -> (module, one-line help). Add a subcommand by adding a line here.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "say": ("engine.cli.say", "speak TEXT into a WAV file, exactly as the bot would play it (48 kHz stereo)"),
    "bench": ("engine.bench", "measure the engine against raw Piper; prints ratios from one run"),
    "register": ("engine.cli.register", "register a voice from a reference clip"),
    "serve": ("engine.cli.serve", "run the engine server (OpenAI-compatible /v1/audio/speech)"),
}

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse's default prints usage too)
        self.exit(EXIT_USAGE, f"error: {message}\n")


def _command_of(argv: list[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return None


def build_parser(command: str | None = None) -> tuple[argparse.ArgumentParser, object | None]:
    """The parser, with the arguments of `command` only: other subcommands' modules stay unimported,
    so one that is missing or broken never breaks the rest."""
    parser = _Parser(prog="python -m engine", description="Text to speech engine of the voice bot.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    module = None
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name != command:
            continue
        try:
            module = importlib.import_module(module_name)
            add_arguments, _ = module.add_arguments, module.run
        except Exception as exc:  # noqa: BLE001 - ImportError, or a module not finished yet
            logging.getLogger("engine").debug("cannot load %s", module_name, exc_info=True)
            raise EngineError(f"the {name!r} command is not available: {type(exc).__name__}: {exc}") from exc
        add_arguments(p)
    return parser, module


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(
        level=logging.DEBUG if ("-v" in argv or "--verbose" in argv) else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        parser, module = build_parser(_command_of(argv))
        args = parser.parse_args(argv)
        if module is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        return int(module.run(args) or 0)  # type: ignore[attr-defined]
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a CLI prints one line, the log keeps the traceback
        logging.getLogger("engine").debug("unexpected error", exc_info=True)
        print(f"error: internal error: {type(exc).__name__}: {exc} (run with -v for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
