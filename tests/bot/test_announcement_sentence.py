"""What an announcement says for a burst of comings and goings (bot/announcements.py sentence)."""

from __future__ import annotations

import pytest

from bot.announcements import PHRASES, sentence


@pytest.mark.parametrize("joined, left, language, said", [
    (["Alice"], [], "en", "Alice joined"),
    ([], ["Bob"], "en", "Bob left"),
    (["Alice", "Carol", "Dave"], [], "en", "3 people joined"),
    (["Alice"], ["Bob", "Eve"], "en", "Alice joined. 2 people left"),
    ([], [], "en", ""),
    (["Alice"], ["Bob"], "fr", "Alice a rejoint le salon. Bob a quitté le salon"),
    (["アリス"], [], "ja", "アリスさんが参加しました"),
    (["a", "b"], [], "es", "entraron 2 personas"),
    (["Alice"], [], "pt-BR", "Alice entrou"),  # a region is its language's
    (["Alice"], [], "sw", "Alice joined"),  # a language without phrases: English
])
def test_a_burst_is_one_sentence_by_name_or_counted(joined, left, language, said):
    assert sentence(joined, left, language) == said


def test_every_language_says_each_of_the_four():
    for language, phrases in PHRASES.items():
        assert len(phrases) == 4 and all(p.count("{}") == 1 for p in phrases), language
