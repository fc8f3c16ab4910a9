"""Plugin loader: a broken plugin is logged and skipped, the others load; load, unload and reload at run time."""

from __future__ import annotations

import logging
import sys
import textwrap
import uuid

import discord
import pytest
from discord.ext import commands

from bot.plugins import PluginManager

GOOD = '''
"""good plugin"""
from discord.ext import commands
VERSION = {version}
class Good(commands.Cog):
    pass
async def setup(bot):
    bot.loaded_versions.append(VERSION)
    await bot.add_cog(Good())
'''


@pytest.fixture
def plugin_pkg(tmp_path, monkeypatch):
    name = "tplugins_" + uuid.uuid4().hex[:8]
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))

    def add(plugin: str, source: str) -> None:
        (root / plugin).mkdir(exist_ok=True)
        (root / plugin / "__init__.py").write_text(textwrap.dedent(source))

    yield name, root, add
    for mod in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[mod]


@pytest.fixture
async def bot():
    b = commands.Bot(command_prefix="!", intents=discord.Intents.none())
    b.loaded_versions = []
    yield b
    await b.close()


async def test_broken_plugins_are_skipped_and_logged(bot, plugin_pkg, caplog):
    name, root, add = plugin_pkg
    add("good", GOOD.format(version=1))
    add("syntax", "def broken(:\n")
    add("raises", "async def setup(bot):\n    raise RuntimeError('setup exploded')\n")
    add("nosetup", "X = 1\n")
    add("importerr", "import module_that_does_not_exist_xyz\n")
    pm = PluginManager(bot, package=name, directory=root)
    assert pm.available() == ["good", "importerr", "nosetup", "raises", "syntax"]
    with caplog.at_level(logging.ERROR, logger="bot.plugins"):
        result = await pm.load_all(["syntax", "raises", "good", "nosetup", "importerr", "missing"])
    assert result == {"syntax": False, "raises": False, "good": True, "nosetup": False, "importerr": False,
                      "missing": False}
    assert bot.get_cog("Good") is not None
    assert "setup exploded" in pm.errors["raises"]
    assert "SyntaxError" in pm.errors["syntax"]
    assert "no plugin named 'missing'" in pm.errors["missing"]
    assert "Traceback" in caplog.text and "setup exploded" in caplog.text
    status = {s.name: s for s in pm.status()}
    assert status["good"].loaded and not status["raises"].loaded


async def test_reload_picks_up_new_code_and_failed_reload_keeps_old(bot, plugin_pkg):
    name, root, add = plugin_pkg
    add("good", GOOD.format(version=1))
    pm = PluginManager(bot, package=name, directory=root)
    assert await pm.load("good")
    add("good", GOOD.format(version=2))
    assert await pm.reload("good")
    assert bot.loaded_versions == [1, 2]
    add("good", "async def setup(bot):\n    raise ValueError('v3 broken')\n")
    assert not await pm.reload("good")
    assert "v3 broken" in pm.errors["good"]
    assert pm.is_loaded("good") and bot.get_cog("Good") is not None  # old version still running
    assert await pm.unload("good")
    assert not pm.is_loaded("good") and bot.get_cog("Good") is None
    assert not await pm.unload("good")


async def test_project_plugins_all_load(bot):
    """Every shipped plugin imports and sets up on a bare bot with the project's services present."""
    pm = PluginManager(bot)
    bot.plugins = pm
    assert "admin" in pm.available()
    assert await pm.load("admin")
    names = {c.name for c in bot.tree.get_commands()}
    assert "plugins" in names
