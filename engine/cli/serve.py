"""`python -m engine serve [--config FILE]`: the engine server, set up from config.toml's [engine] tables,
VOICEBOT__ENGINE__... environment overrides, then the flags given on the command line."""

from __future__ import annotations

import argparse
import asyncio
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from conf.loader import DEFAULT_CONFIG, ConfigError, load_section
from engine.backends import backend_names
from engine.backends.piper.settings import PiperSettings
from engine.base import EngineError
from engine.settings import EngineSettings

# flag -> (section, key): a flag given on the command line wins over the file and the environment
_ENGINE_FLAGS = {"backend": "backend", "workers": "workers", "max_concurrency": "max_concurrency",
                 "per_client": "per_key_limit"}
_SERVER_FLAGS = {"host": "host", "port": "port", "max_streams": "max_streams", "max_input_chars": "max_input_chars",
                 "voices_dir": "voices_dir", "tls_cert": "tls_cert", "tls_key": "tls_key",
                 "trusted_proxy_tls": "trusted_proxy_tls"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, metavar="FILE",
                   help="settings file whose [engine] tables are read (default: config.toml when present)")
    p.add_argument("--host", default=None, help="address to listen on (engine.server.host)")
    p.add_argument("--port", type=int, default=None, help="port; 0 picks one (engine.server.port)")
    p.add_argument("--workers", type=int, default=None, help="inference threads (engine.workers)")
    p.add_argument("--max-concurrency", type=int, default=None, help="segments synthesizing at once "
                                                                     "(engine.max_concurrency)")
    p.add_argument("--per-client", type=int, default=None, help="segments of one client at once (engine.per_key_limit)")
    p.add_argument("--max-streams", type=int, default=None, help="speech responses at once; past it: 429")
    p.add_argument("--max-input-chars", type=int, default=None, help="longest 'input' accepted")
    p.add_argument("--voices-dir", default=None, help="folder of registered voices (engine.server.voices_dir)")
    p.add_argument("--backend", default=None, help=f"{backend_names()} (engine.backend)")
    p.add_argument("--model", default=None, help="a Piper .onnx voice (engine.piper.model)")
    p.add_argument("--tls-cert", default=None, help="PEM certificate chain: serve HTTPS")
    p.add_argument("--tls-key", default=None, help="PEM private key of --tls-cert")
    p.add_argument("--trusted-proxy-tls", action="store_const", const=True, default=None,
                   help="a trusted reverse proxy terminates TLS: allow plain HTTP beyond loopback")


def settings_from(args: argparse.Namespace, environ: dict[str, str] | None = None) -> EngineSettings:
    """The file's [engine] tables, the environment's overrides, then the flags given."""
    path = args.config if args.config is not None else (DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None)
    try:
        base = load_section(EngineSettings, "engine", path, environ) if path is not None else EngineSettings()
    except ConfigError as exc:
        raise EngineError(str(exc)) from None

    def given(mapping: dict[str, str]) -> dict[str, Any]:
        return {key: getattr(args, flag) for flag, key in mapping.items() if getattr(args, flag) is not None}

    server = replace(base.server, **given(_SERVER_FLAGS))
    settings = replace(base, **given(_ENGINE_FLAGS), server=server)
    if args.model is not None:
        settings = settings.with_tables(replace(PiperSettings.of(settings), model=args.model))
    if not 0 <= server.port <= 65535:
        raise EngineError("--port must be from 0 to 65535.")
    for name in ("workers", "max_concurrency", "per_key_limit"):
        if getattr(settings, name) < 1:
            raise EngineError(f"engine.{name} must be 1 or more.")
    if server.max_streams < 1:
        raise EngineError("--max-streams must be 1 or more.")
    problems = settings.table_problems()  # each backend package checks its own table
    if problems:
        raise EngineError(f"{path}: {problems[0]}")
    # the server accepts `max_input_chars`; the engine must not refuse what the server accepted
    return replace(settings, max_text_chars=max(settings.max_text_chars, server.max_input_chars))


def voices_dir(settings: EngineSettings) -> str:
    if settings.server.voices_dir:
        return str(Path(settings.server.voices_dir).expanduser())
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "voicebot", "engine-voices")


def run(args: argparse.Namespace) -> int:
    from engine.server.app import api_keys_from_env, run_server

    settings = settings_from(args)
    server = settings.server
    asyncio.run(run_server(settings, api_key=api_keys_from_env(server), voices_dir=voices_dir(settings),
                           max_streams=server.max_streams))
    return 0
