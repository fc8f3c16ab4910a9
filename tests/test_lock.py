"""scripts/check_lock.py: the lock, pyproject.toml and the venv must agree; a one-sided change is caught."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_lock", ROOT / "scripts" / "check_lock.py")
check_lock = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_lock)  # type: ignore[union-attr]


def test_the_committed_lock_agrees() -> None:
    assert check_lock.problems() == []


def test_a_dependency_missing_from_the_lock_is_reported(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    lock.write_text("\n".join(ln for ln in lines if not ln.lower().startswith("soxr==")) + "\n")
    found = check_lock.problems(lock_path=lock)
    assert any(p.startswith("soxr: in pyproject.toml but not in requirements.lock") for p in found), found


def test_a_lock_entry_nothing_needs_is_reported(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text((ROOT / "requirements.lock").read_text() + "six==1.16.0\n")
    found = check_lock.problems(lock_path=lock)
    assert any(p.startswith("six: in requirements.lock but nothing in pyproject.toml needs it") for p in found)


def test_a_range_the_lock_does_not_meet_is_reported(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    text = (ROOT / "pyproject.toml").read_text()
    assert '"soxr>=0.3"' in text
    pyproject.write_text(text.replace('"soxr>=0.3"', '"soxr>=99"'))
    found = check_lock.problems(pyproject=pyproject)
    assert any(p.startswith("soxr: locked at") and "outside" in p for p in found), found
