"""The sandbox's modules import one way (state, then the servers, then core), type-only imports counted."""
from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "structure.py"


def _structure():
    spec = importlib.util.spec_from_file_location("structure", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sandbox_has_no_import_circle():
    structure = _structure()
    known = structure.modules()
    graph = {name: structure.imports(name, path, known) for name, path in known.items()}
    assert [g for g in structure.circles(graph) if g[0].startswith("sandbox")] == []


def test_servers_do_not_import_core():
    structure = _structure()
    known = structure.modules()
    for server in ("sandbox.gateway", "sandbox.voice", "sandbox.rest", "sandbox.client", "sandbox.state"):
        assert "sandbox.core" not in structure.imports(server, known[server], known), server


def test_type_only_imports_count(tmp_path):
    structure = _structure()
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .core import Sandbox\n")
    known = {"sandbox.m": module, "sandbox.core": module}
    assert structure.imports("sandbox.m", module, known) == {"sandbox.core"}
