"""Pattern entries (the safe subset, refused ones told why, the time budget), precedence of a user's words over the
server's over the operator's, and the operator's global file checked at start."""

from __future__ import annotations

import json
import logging

import pytest

from bot.config import ConfigError, load_settings
from bot.dictionary import Layer, Rules, pronounce
from bot.dictionary_file import MAX_FILE_BYTES, GlobalFileError, load_global
from bot.dictionary_patterns import MAX_PATTERN_CHARS, check_pattern, compile_pattern
from bot.errors import UserError


@pytest.mark.parametrize("source,why", [
    (r"(a+)+b", "a repeat inside a repeat"),
    (r"(?:\w*\s?)*!", "a repeat inside a repeat"),
    (r"(a|ab)*c", "a choice inside a repeat"),
    (r"(\w)\1", "backreferences"),
    (r"(?P<x>a)(?P=x)", "backreferences"),
    (r"foo(?=bar)", "lookarounds"),
    (r"(?<!x)foo", "lookarounds"),
    (r"(a)?(?(1)b|c)", "conditionals"),
    (r"a*", "empty text"),
    (r"x|", "empty text"),
    (r"\w+\s+\w+\s+\w+\s+\w+", "open-ended repeats"),
    (r"(unclosed", "does not compile"),
    (r"[z-a]", "does not compile"),
    ("", "1 to"),
    ("a" * (MAX_PATTERN_CHARS + 1), "1 to"),
])
def test_patterns_that_could_backtrack_or_do_not_compile_are_refused_with_the_reason(source: str, why: str) -> None:
    with pytest.raises(UserError, match=why):
        check_pattern(source)


@pytest.mark.parametrize("source", [r"\d+ ?kg", r"(?:st|nd|rd)\b", r"[A-Z]{2,5}", r"https?://\S+", r"\d+[.,]\d+",
                                    r"(?:ab)+", r"a{2,}b"])
def test_the_safe_subset_accepts_ordinary_patterns(source: str) -> None:
    assert check_pattern(source) == source


def test_a_users_entries_win_over_the_servers_over_the_operators() -> None:
    kg = compile_pattern(r"\d+ ?kg", "some weight")
    rules = Rules((Layer({"gif": "jif"}),
                   Layer({"gif": "graphics", "sql": "sequel"}, (kg, compile_pattern(r"s\w+", "an S word"))),
                   Layer({"sql": "S Q L", "kg": "kilos", "lb": "pounds"}, (compile_pattern("g", "gee"),))))
    assert pronounce("GIF, SQL and 5 kg or 2 lb", rules) == "jif, sequel and some weight or 2 pounds"
    # a pattern sees only what no entry replaced: "sequel" is not an S word again, "jif" has no "g" to say
    assert pronounce("gif sql so big", rules) == "jif sequel an S word bigee"
    assert pronounce("", rules) == ""


def test_patterns_apply_in_order_and_replaced_text_is_not_replaced_again() -> None:
    rules = Rules((Layer({}, (compile_pattern(r"ab", "ba"), compile_pattern(r"ba", "x"))),))
    assert pronounce("abba", rules) == "bax"  # the first made "ba" from "ab"; the second only saw the original "ba"


def test_patterns_stop_at_the_time_budget_and_the_text_is_still_said(caplog) -> None:
    slow = compile_pattern(r"\w*\w*\w*\W\d", "never")  # polynomial on a long word: bounded by the budget
    rules = Rules((Layer({"hello": "hi"}, (slow, compile_pattern("world", "earth"))), Layer({"world": "planet"})))
    text = "hello " + "a" * 3000 + " world"
    with caplog.at_level(logging.WARNING, logger="bot.dictionary"):
        out = pronounce(text, rules, budget_s=0.0)  # a spent budget: no pattern runs, the words still apply
    assert out == "hi " + "a" * 3000 + " planet"
    assert "2 of 2 not applied" in caplog.text
    assert pronounce(text, rules, budget_s=5.0).endswith(" earth")  # within the budget both patterns ran


def test_the_operators_file_in_json_and_toml(tmp_path) -> None:
    j = tmp_path / "words.json"
    j.write_text(json.dumps({"words": {"GIF": "jif"}, "patterns": {r"\d+ ?kg": "some weight"}}))
    t = tmp_path / "words.toml"
    t.write_text('[words]\nsql = "sequel"\n[patterns]\n\'\\d+ ?kg\' = "some weight"\n')
    for path, word in ((j, "gif"), (t, "sql")):
        entries = load_global(path)
        assert word in entries.words and [p.source for p in entries.patterns] == [r"\d+ ?kg"]


@pytest.mark.parametrize("name,content,why", [
    ("a.json", "{not json", "not valid JSON"),
    ("a.toml", "words = [", "not valid TOML"),
    ("a.yaml", "{}", "expected a .json or .toml file"),
    ("a.json", "[1, 2]", 'a table "words"'),
    ("a.json", json.dumps({"word": {}}), "unknown key 'word'"),
    ("a.json", json.dumps({"words": {"a": 1}}), "must map text to text"),
    ("a.json", json.dumps({"words": {"two words": "x"}}), "words 'two words': A dictionary word is one word"),
    ("a.json", json.dumps({"patterns": {"(a+)+": "x"}}), "patterns '(a+)+': That pattern is refused"),
    ("a.json", " " * (MAX_FILE_BYTES + 1), "over the limit"),
])
def test_a_bad_operators_file_is_one_line_naming_the_file_and_what_is_wrong(tmp_path, name, content, why) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(GlobalFileError) as bad:
        load_global(path)
    assert str(bad.value).startswith(f"{path}: ") and why in str(bad.value) and "\n" not in str(bad.value)


def test_the_config_checks_the_file_at_start(tmp_path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[dictionary]\nglobal_file = "missing.json"\n')
    with pytest.raises(ConfigError, match=r"'dictionary.global_file': .*missing.json: cannot be read"):
        load_settings(config, environ={})
    (tmp_path / "missing.json").write_text(json.dumps({"words": {"gif": "jif"}}))
    assert load_settings(config, environ={}).dictionary.global_file == "missing.json"
