"""README's "How messages are read" says what bot/speech/text/ does: each example's reading is quoted in its row."""

from __future__ import annotations

import pytest

from bot.readout import compose
from bot.speech.text.text import Mentions, attachment_kind, speakable
from tests.content_examples import ATTACHMENTS, EXAMPLES, readme_rows

MENTIONS = Mentions(users={1: "Bob"}, roles={5: "Mods"}, channels={7: "general"})
IDS = {"user": "<@1>", "role": "<@&5>", "channel": "<#7>"}


@pytest.mark.parametrize("kind, written, said", EXAMPLES)
def test_each_example_is_read_as_its_row_says(kind, written, said):
    assert speakable(written.format(**IDS), MENTIONS) == said
    assert f'"{said}"' in readme_rows()[kind]


def test_attachments_are_read_as_their_row_says():
    kind, files, said = ATTACHMENTS
    assert compose("alice", "", [attachment_kind(f) for f in files], xsaid=True) == said
    assert f'"{said}"' in readme_rows()[kind]


def test_the_table_has_a_row_for_each_kind_the_issue_names():
    named = {"Links", "Emoji", "Custom emoji", "Mentions", "Attachments", "Code blocks", "Spoilers"}
    assert named <= set(readme_rows())
