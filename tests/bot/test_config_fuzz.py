"""Random config files (valid TOML, wrong types, unknown keys): load_settings succeeds or raises one ConfigError
line naming the file, never anything else."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import tomllib
import typing

from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from bot.config import ConfigError, Settings, load_settings


def _tree(cls) -> dict:
    """section path -> known keys, from the Settings dataclasses."""
    out: dict = {}
    hints = typing.get_type_hints(cls)

    def walk(c, prefix):
        h = typing.get_type_hints(c)
        for name, table in getattr(c, "config_tables", dict)().items():  # each backend package's table
            walk(table, prefix + (name,))
        for f in dataclasses.fields(c):
            if not f.metadata.get("config", True):
                continue
            if dataclasses.is_dataclass(h[f.name]):
                walk(h[f.name], prefix + (f.name,))
            else:
                out.setdefault(prefix, []).append(f.name)
    walk(cls, ())
    assert hints
    return out


KNOWN = _tree(Settings)
SECTIONS = sorted(p for p in KNOWN if p)

chars = st.characters(blacklist_categories=("Cs",))
scalars = st.one_of(
    st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True), st.text(chars, max_size=20),
    st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2100, 1, 1)), st.dates(),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(chars, min_size=1, max_size=8), inner, max_size=3)),
    max_leaves=8)


def _string(s: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped, the rest as is."""
    body = "".join("\\" + c if c in '"\\' else (f"\\u{ord(c):04x}" if ord(c) < 0x20 or c == "\x7f" else c)
                   for c in s)
    return f'"{body}"'


def _key(k: str) -> str:
    return k if k and all(c.isascii() and (c.isalnum() or c in "_-") for c in k) else _string(k)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")) if not math.isfinite(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def to_toml(data: dict) -> str:
    """A small TOML writer: top-level scalars, then one [table] per nested dict (inline below that)."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for k, v in data.items():
        if isinstance(v, dict):
            lines.append(f"[{_key(k)}]")
            lines += [f"{_key(kk)} = {_value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


@st.composite
def near_valid(draw) -> dict:
    """Real sections and keys (plus the odd unknown one) with values of any type."""
    data: dict = {}
    for _ in range(draw(st.integers(1, 5))):
        section = draw(st.sampled_from(SECTIONS + [("bogus",)]))
        key = draw(st.sampled_from(KNOWN.get(section, []) + ["unknown_key"]))
        node = data
        for part in section[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            table = node.setdefault(section[-1], {})
            if isinstance(table, dict):
                table[key] = draw(values)
    return data


configs = st.one_of(near_valid(), st.dictionaries(st.text(chars, min_size=1, max_size=10), values, max_size=5))


@given(configs)
@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_config_loads_or_gives_one_line_naming_the_file(tmp_path, data):
    text = to_toml(data)
    tomllib.loads(text)  # the file is valid TOML: only its content is wrong
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    try:
        settings = load_settings(path, environ={})
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith(str(path)), message
        assert len(message.splitlines()) == 1 and "Traceback" not in message, message
        assert len(message) < 2000
    else:
        assert isinstance(settings, Settings)


@given(st.sampled_from(SECTIONS), st.data())
@hsettings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_wrong_type_for_a_known_key_names_that_key(tmp_path, section, data):
    key = data.draw(st.sampled_from(KNOWN[section]))
    value = data.draw(st.one_of(st.dictionaries(st.just("x"), st.integers(), min_size=1, max_size=1),
                                st.lists(st.lists(st.integers(), min_size=1), min_size=1, max_size=2)))
    text = f"[{'.'.join(section)}]\n{key} = {_value(value)}\n"
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    try:
        load_settings(path, environ={})
    except ConfigError as exc:
        assert str(exc).startswith(str(path)) and len(str(exc).splitlines()) == 1
        assert f"{'.'.join(section)}.{key}" in str(exc), str(exc)
    else:
        raise AssertionError(f"{text!r} was accepted")
