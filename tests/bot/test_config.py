"""Settings: defaults, environment overrides, and single-line errors naming file, key and expectation."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bot.config import DEFAULT_CONFIG, ConfigError, Settings, load_settings
from engine.backends.piper.settings import PiperSettings

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.toml"
    p.write_text(text)
    return p


def test_shipped_config_loads_with_defaults():
    s = load_settings(DEFAULT_CONFIG, environ={})
    assert s.engine.backend == "kokoro"
    assert s.database_url.startswith("sqlite+aiosqlite:///")
    assert s.database_url.endswith("data/voicebot.db")
    assert s.discord.token == ""


def _keys(cls, prefix=""):
    for name, table in getattr(cls, "config_tables", dict)().items():  # each backend package's [engine.<TABLE>]
        yield from _keys(table, f"{prefix}{name}.")
    for f in dataclasses.fields(cls):
        if f.name in ("base_dir", "token", "tables"):
            continue
        if dataclasses.is_dataclass(f.type) or (isinstance(f.default_factory,
                                                           type) and dataclasses.is_dataclass(f.default_factory)):
            yield from _keys(f.default_factory, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}"


def test_every_key_in_code_is_in_config_toml_with_a_comment():
    data = tomllib.loads(DEFAULT_CONFIG.read_text())
    text = DEFAULT_CONFIG.read_text().splitlines()
    for dotted in _keys(Settings):
        node = data
        *tables, key = dotted.split(".")
        for t in tables:
            node = node[t]
        assert key in node, f"{dotted} missing from config.toml"
    # every key line is preceded by a comment line or a key sharing its comment block
    for i, line in enumerate(text):
        if re.match(r"^[a-z_]+ = ", line):
            j = i - 1
            while j >= 0 and re.match(r"^[a-z_]+ = ", text[j]):
                j -= 1
            assert text[j].startswith("#") or text[j].startswith("["), f"no comment above: {line}"


def test_environment_overrides_any_key(tmp_path):
    p = write(tmp_path, "[engine]\nworkers = 1\n")
    s = load_settings(p, environ={
        "VOICEBOT__ENGINE__WORKERS": "3",
        "VOICEBOT__ENGINE__PIPER__MODEL": "/voices/x.onnx",
        "VOICEBOT__ENGINE__PIPER__NOISE_SCALE": "0.5",
        "VOICEBOT__DISCORD__SHARD_IDS": "[0, 2]",
        "VOICEBOT__SPEECH__LINKS": "domain",
        "DISCORD_TOKEN": "abc.def.ghi",
    })
    assert s.engine.workers == 3
    piper = PiperSettings.of(s.engine)
    assert (piper.model, piper.noise_scale, piper.noise_w) == ("/voices/x.onnx", 0.5, PiperSettings.noise_w)
    assert s.discord.shard_ids == [0, 2]
    assert s.speech.links == "domain"
    assert s.discord.token == "abc.def.ghi"
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.engine.workers = 4  # type: ignore[misc]


def test_relative_sqlite_path_resolves_against_config_folder(tmp_path):
    p = write(tmp_path, '[database]\npath = "db/bot.db"\n')
    assert load_settings(p, environ={}).database_url == f"sqlite+aiosqlite:///{tmp_path}/db/bot.db"


@pytest.mark.parametrize("text, expected", [
    ("[engine]\nworkers = \"two\"\n", r"'engine\.workers': expected an integer, got 'two'"),
    ("[engine]\nwrokers = 2\n", r"unknown key 'engine\.wrokers'"),
    ("[nope]\nx = 1\n", r"unknown key 'nope'"),
    ("[engine.kokoro]\nbogus = 1\n", r"unknown key 'engine\.kokoro\.bogus' \(check the spelling"),
    ("[engine]\ntables = []\n", r"unknown key 'engine\.tables'"),
    ("[engine]\nkokoro = 1\n", r"'engine\.kokoro' must be a table \[engine\.kokoro\], got 1"),
    ("[engine.piper]\nnoise_scale = \"x\"\n", r"'engine\.piper\.noise_scale': expected a number, got 'x'"),
    ("[engine.piper]\nmatching = \"loud\"\n", r"'engine\.piper\.matching': expected one of clear, close, got 'loud'"),
    ("[engine.cosyvoice]\ntoken_hop_len = 0\n", r"'engine\.cosyvoice\.token_hop_len': expected a number above 0"),
    ("[engine.remote]\nretries = -1\n", r"'engine\.remote\.retries': expected 0 or more, got -1"),
    ("[speech]\nleave_when_alone = 1\n", r"'speech\.leave_when_alone': expected true or false, got 1"),
    ("[discord]\nshard_ids = [\"a\"]\n", r"'discord\.shard_ids\[0\]': expected an integer"),
    ("[engine]\nbackend = \"gpu\"\n", r"'engine\.backend': expected one of kokoro, piper, cosyvoice2, remote"),
    ("[engine]\nmax_concurrency = 0\n", r"'engine\.max_concurrency': expected a number above 0"),
    ("engine = 3\n", r"'engine' must be a table"),
    ("[engine\n", r"not valid TOML"),
    ("[discord]\ntoken = \"secret-token-123\"\n", r"must not be in a file; set the DISCORD_TOKEN"),
])
def test_bad_config_is_one_clear_line_naming_the_file(tmp_path, text, expected):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(p, environ={})
    message = str(info.value)
    assert str(p) in message
    assert re.search(expected, message), message
    assert "\n" not in message
    assert "secret-token-123" not in message


def test_float_accepts_integer_and_env_type_error_names_key(tmp_path):
    p = write(tmp_path, "[speech]\nidle_leave_s = 10\n")
    assert load_settings(p, environ={}).speech.idle_leave_s == 10.0
    with pytest.raises(ConfigError, match=r"'speech\.idle_leave_s': expected a number, got 'soon'"):
        load_settings(p, environ={"VOICEBOT__SPEECH__IDLE_LEAVE_S": "soon"})


def test_backend_tables_from_the_environment_are_checked_like_the_file(tmp_path):
    p = write(tmp_path, "")
    with pytest.raises(ConfigError, match=r"'engine\.piper\.noise_scale': expected a number, got 'loud'"):
        load_settings(p, environ={"VOICEBOT__ENGINE__PIPER__NOISE_SCALE": "loud"})
    with pytest.raises(ConfigError, match=r"unknown key 'engine\.kokoro\.bogus'"):
        load_settings(p, environ={"VOICEBOT__ENGINE__KOKORO__BOGUS": "1"})


def _run_bot(*args, env=None, cwd=ROOT):
    base = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    return subprocess.run([sys.executable, str(ROOT / "run_bot.py"), *args], capture_output=True, text=True,
                          env={**base, **(env or {})}, cwd=cwd, timeout=120)


def test_run_bot_without_token_explains_and_exits_2():
    r = _run_bot()
    assert r.returncode == 2
    assert "DISCORD_TOKEN" in r.stderr and "--sandbox" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_run_bot_config_error_is_one_line_exit_2(tmp_path):
    p = write(tmp_path, "[engine]\nworkers = \"two\"\n")
    r = _run_bot("--config", str(p), env={"DISCORD_TOKEN": "tok-SECRET-999"})
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert str(p) in lines[0] and "engine.workers" in lines[0]
    assert "tok-SECRET-999" not in r.stderr + r.stdout
