"""Pronunciation dictionary rules: whole words, case-insensitive, linear on hostile text, bounded, import checked;
how a user's own name is said."""

from __future__ import annotations

import json

import pytest

from bot.dictionary import MAX_ENTRIES, MAX_IMPORT_BYTES, apply, export, parse_import
from bot.dictionary_entries import MAX_NAME_CHARS, check_entry, check_spoken_name
from bot.errors import UserError


def test_whole_words_case_insensitively() -> None:
    words = {"gif": "jif", "kubectl": "cube control", "o'neil": "oh neil"}
    assert apply("GIF or gifs? Kubectl, O'Neil!", words) == "jif or gifs? cube control, oh neil!"
    assert apply("giffy gif-like", words) == "giffy gif-like"  # not inside another word


@pytest.mark.timeout(20)
def test_hostile_text_is_handled_in_one_pass() -> None:
    """Separator runs that would make a nested pattern backtrack: the word pattern has no nested choice."""
    words = {f"w{i}": "x" for i in range(MAX_ENTRIES)}
    for hostile in ("a'" * 200_000 + "!", "a-" * 200_000 + "-", "w1 " * 100_000):
        out = apply(hostile, words)
        assert len(out) <= len(hostile)


@pytest.mark.parametrize("word,say_as", [("", "x"), ("two words", "x"), ("x" * 41, "x"), ("ok", ""), ("ok", "y" * 101),
                                         ("<@123>", "x")])
def test_bad_entries_are_refused(word: str, say_as: str) -> None:
    with pytest.raises(UserError):
        check_entry(word, say_as)


def test_export_then_import_round_trips_and_bad_import_changes_nothing() -> None:
    entries = {"gif": "jif", "sql": "sequel"}
    assert parse_import(export(entries)) == entries
    with pytest.raises(UserError, match="Nothing was imported"):
        parse_import(json.dumps({"gif": "jif", "two words": "x"}).encode())
    for bad in (b"\xff\xfe", b"[1, 2]", b'{"a": 1}',
                json.dumps({f"w{i}": "x" for i in range(MAX_ENTRIES + 1)}).encode(),
                b" " * (MAX_IMPORT_BYTES + 1), b"{not json"):
        with pytest.raises(UserError):
            parse_import(bad)


def test_a_users_name_is_said_as_they_chose_within_the_bound() -> None:
    assert check_spoken_name("  Shi\u200b  vawn\n ") == "Shi vawn"  # one line, blanks folded
    assert check_spoken_name("Sh\x00ivawn") == "Sh ivawn"
    assert check_spoken_name("") is None and check_spoken_name(None) is None and check_spoken_name(" \t") is None
    assert check_spoken_name("x" * MAX_NAME_CHARS) == "x" * MAX_NAME_CHARS
    with pytest.raises(UserError, match=str(MAX_NAME_CHARS)):
        check_spoken_name("x" * (MAX_NAME_CHARS + 1))
