"""Piper runs no longer than the warm-up's: long sentences go in runs of words (memory stays at the warm-up's)."""

from __future__ import annotations

from engine.backends.cpu import WARM_UP_TEXT
from engine.backends.runs import clause_runs, word_runs
from engine.base import Voice

NAMES = " ".join(f"user12x{i}" for i in range(20))[:150]  # reads far longer than its 150 characters


def test_word_runs_cut_after_a_space_and_keep_every_phoneme():
    phonemes = list("ab cd efg hij k lmnop")
    runs = list(word_runs(phonemes, 6))
    assert [p for run in runs for p in run] == phonemes
    assert all(len(run) <= 6 for run in runs)
    assert all(run[-1] == " " for run in runs[:-1])  # each cut is after a word
    assert list(word_runs(list("abcdefghij"), 4)) == [list("abcd"), list("efgh"), list("ij")]  # no space: anywhere
    assert list(word_runs([], 4)) == []


def test_no_run_has_more_phonemes_than_the_warm_up_sentence_at_its_speed(piper_backend):
    runs: list[int] = []
    original = piper_backend._run

    def counting(pv, ids, speed, voice, cancel):
        runs.append(len(ids))
        return original(pv, ids, speed, voice, cancel)

    piper_backend._run = counting
    try:
        warm = list(piper_backend.synthesize(WARM_UP_TEXT, Voice()))
        longest = max(runs)
        runs.clear()
        names = list(piper_backend.synthesize(NAMES, Voice()))
        assert len(names) > 1 and max(runs) <= longest, runs  # the names sentence was split into runs
        runs.clear()
        slow = list(piper_backend.synthesize(WARM_UP_TEXT, Voice(speed=0.5)))
        assert len(slow) >= 2 and max(runs) <= longest // 2 + 2, runs  # half the speed: half the phonemes a run
    finally:
        piper_backend._run = original
    assert len(warm) == 1


def test_clause_runs_cut_at_a_clause_and_at_a_space_only_inside_a_long_clause():
    phonemes = list("ab cd, ef gh. ij kl mn op qr st")
    runs = list(clause_runs(phonemes, 14, frozenset(",."), frozenset(" ")))
    assert [p for run in runs for p in run] == phonemes
    assert all(len(run) <= 14 for run in runs)
    assert "".join(runs[0]) == "ab cd, ef gh."  # the last clause mark within the bound, not a later space
    assert "".join(runs[1]).endswith(" ")  # no clause mark left: a space
    assert list(clause_runs(list("abcdefghij"), 4, frozenset(","), frozenset(" "))) == [
        list("abcd"), list("efgh"), list("ij")]  # one word over the bound: anywhere
    assert list(clause_runs(list("short, run"), 40, frozenset(","), frozenset(" "))) == [list("short, run")]
