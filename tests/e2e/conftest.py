"""E2E fixtures: the sandbox, a demo guild and the project's real VoiceBot connected to it."""

from __future__ import annotations

import dataclasses

import pytest

from bot.config import DEFAULT_CONFIG, load_settings
from demo.sandbox_bot import sandbox_settings, start_bot
from engine.backends.piper.settings import PiperSettings
from engine.settings import EngineSettings
from sandbox import Sandbox, restore_discord
from sandbox.demo import create_demo

# The tests of the bot's behaviour (queues, readout, permissions, faults) speak with Piper, the operator's choice
# for many streams, without its sampling noise: the same text gives the same audio every time, so what the channel
# heard can be compared with a fresh rendering closely (with the noise two renderings of a sentence differ in length
# and envelope enough to fail such a check a few times in a hundred), and it costs a seventh of Kokoro's CPU, which
# keeps the suite's timings what they were measured at. The shipped default, Kokoro, is what tests/e2e/test_kokoro.py
# and the benches hear; tests/engine keeps Piper's noise.
STEADY_PIPER = {"noise_scale": 0.0, "noise_w": 0.0}
STEADY_CLI = ["--backend", "piper",
              *(a for k, v in STEADY_PIPER.items() for a in (f"--{k.replace('_', '-')}", str(v)))]  # engine say


def steady_engine(engine: EngineSettings) -> EngineSettings:
    steady = dataclasses.replace(PiperSettings.of(engine), **STEADY_PIPER)
    return dataclasses.replace(engine, backend="piper").with_tables(steady)


def make_settings(tmp_path, **sections):
    """The shipped defaults with a per-test SQLite file and steady Piper; `sections` replace fields per section."""
    s = load_settings(DEFAULT_CONFIG, environ={})
    s = dataclasses.replace(s, database=dataclasses.replace(s.database, path=str(tmp_path / "bot.db")),
                            engine=steady_engine(s.engine))
    for section, changes in sections.items():
        s = dataclasses.replace(s, **{section: dataclasses.replace(getattr(s, section), **changes)})
    return s


@pytest.fixture
async def sb():
    async with Sandbox() as box:
        yield box
    restore_discord()


@pytest.fixture
async def demo(sb):
    return await create_demo(sb)


@pytest.fixture
def settings(tmp_path):
    return make_settings(tmp_path, speech={"idle_leave_s": 0.0})


@pytest.fixture
async def running(sb, demo, settings):
    r = await start_bot(sb, sandbox_settings(settings, sb))
    yield r
    await r.stop()


@pytest.fixture
def bot(running):
    return running.bot
