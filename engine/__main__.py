"""CLI: `python -m engine say|bench|register|serve`, a thin argparse dispatcher over subcommand modules.

A subcommand is a module with `add_arguments(parser)` and `run(args) -> int`, listed in SUBCOMMANDS.
Errors a user can fix print one line `error: ...` and exit 2; no traceback reaches the terminal.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from engine.base import EngineError

# name -> (module, one-line help). Add a subcommand by adding a line here.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "say": ("engine.cli_say", "speak TEXT into a WAV file, exactly as the bot would play it (48 kHz stereo)"),
    "bench": ("engine.bench", "measure the engine against raw Piper; prints ratios from one run"),
    "register": ("engine.registration", "register a voice from a reference clip"),
    "serve": ("engine.server", "run the engine server (OpenAI-compatible /v1/audio/speech)"),
}

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse's default prints usage too)
        self.exit(EXIT_USAGE, f"error: {message}\n")


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, object]]:
    parser = _Parser(prog="python -m engine", description="Text to speech engine of the voice bot.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    modules: dict[str, object] = {}
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue  # written later by another part of the project
        if not hasattr(module, "add_arguments") or not hasattr(module, "run"):
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p)  # type: ignore[attr-defined]
        modules[name] = module
    return parser, modules


def main(argv: list[str] | None = None) -> int:
    parser, modules = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(modules[args.command].run(args) or 0)  # type: ignore[attr-defined]
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
