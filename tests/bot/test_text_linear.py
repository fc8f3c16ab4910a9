"""Text cleaning stays linear on hostile whitespace (it runs on the event loop before any rate limit)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.speech.text.text import _SPACE_BEFORE_PUNCT, speakable

# The pattern before it was made linear: the reference for what it must still match.
_QUADRATIC = re.compile(r"\s+(?=[.,!?;:)\]])|(?<=[(\[])\s+")


@pytest.mark.timeout(60)  # the quadratic pattern needs many minutes on this input; the linear one, milliseconds
def test_a_long_run_of_spaces_is_cleaned_in_linear_time() -> None:
    hostile = "a" + " " * 300_000 + "b" + "\t" * 300_000 + "."
    assert _SPACE_BEFORE_PUNCT.sub("", hostile) == "a" + " " * 300_000 + "b."


@pytest.mark.timeout(60)
def test_a_message_of_spaces_reads_quickly() -> None:
    assert speakable("a" + " " * 3_998 + "b") == "a b"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=" \t\n.,!?;:()[]ab", max_size=40))
def test_same_matches_as_before(text: str) -> None:
    assert _SPACE_BEFORE_PUNCT.sub("", text) == _QUADRATIC.sub("", text)
