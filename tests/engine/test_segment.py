"""Segmentation and text cleaning: properties over arbitrary text, and the hostile cases by name."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.segment import _WIDE_CHARS, MAX_COMBINING_RUN, WIDE, clean_text, scrub, split_segments, split_sentences

_WS = re.compile(r"\s+")


def _letters(s: str) -> str:
    return _WS.sub("", s)


text_strategy = st.lists(
    st.sampled_from(list("abcdefgh  ,.;:!?-—。，！？、\n") + ["word ", "Mr. ", "…", "é", "字"]),
    max_size=600,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text_strategy, st.integers(1, 120), st.integers(1, 400))
def test_segments_bounded_and_lossless(text: str, first: int, max_chars: int) -> None:
    cleaned = clean_text(text)
    segs = split_segments(cleaned, first, max_chars)
    assert all(s and s == s.strip() for s in segs)
    assert all(len(s) <= max_chars for s in segs)
    if segs:
        assert len(segs[0]) <= min(first, max_chars)
    assert _letters("".join(segs)) == _letters(cleaned)  # nothing lost, nothing reordered


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_clean_text_of_anything_is_printable(text: str) -> None:
    cleaned = clean_text(text)
    assert cleaned == cleaned.strip()
    assert "  " not in cleaned
    assert all(ch == "\n" or ch.isprintable() for ch in cleaned)
    for seg in split_segments(cleaned, 60, 240):
        assert 0 < len(seg) <= 240


def test_first_segment_is_a_short_clause() -> None:
    text = (
        "When the old lighthouse keeper climbed the stairs, he found the lamp dark and cold "
        "and a small gray bird sleeping beside the rail. He did not wake it."
    )
    segs = split_segments(text, 60, 240)
    assert segs[0] == "When the old lighthouse keeper climbed the stairs,"
    assert len(segs) >= 2


def test_text_without_punctuation_is_cut_at_spaces() -> None:
    text = " ".join(["word"] * 500)
    segs = split_segments(text, 60, 240)
    assert all(len(s) <= 240 for s in segs)
    assert all(not s.startswith("ord") for s in segs)  # never inside a word
    assert sum(s.count("word") for s in segs) == 500


def test_one_20000_character_token() -> None:
    segs = split_segments("x" * 20_000, 60, 240)
    assert "".join(segs) == "x" * 20_000
    assert len(segs[0]) == 60 and max(len(s) for s in segs) == 240


def test_cjk_punctuation_splits_without_spaces() -> None:
    text = "今天天气很好，我们去公园散步吧。然后我们回家吃饭！你觉得怎么样？" * 4
    segs = split_segments(text, 50, 100)  # 20 and 40 hanzi: each says as much as 2.5 Latin letters
    assert segs[0] == "今天天气很好，我们去公园散步吧。"
    assert all(len(s) <= 40 for s in segs)
    assert all(s[-1] in "。！？，" for s in segs[:-1])


def test_limits_count_what_a_character_takes_to_say() -> None:
    japanese = "次の会議は午後三時から始まります。資料を忘れずに持ってきてください。"  # 34 characters, 5 s of speech
    assert split_segments(japanese, 60, 150)[0] == "次の会議は午後三時から始まります。"
    english = "The next meeting starts at three. Please bring your notes along."
    assert split_segments(english, 60, 150)[0] == "The next meeting starts at three."
    assert split_segments("短い。", 60, 150) == ["短い。"]


def test_later_segments_grow_and_prefer_sentence_ends() -> None:
    sentence = "This is a sentence of about fifty characters, ok. "
    segs = split_segments(sentence * 10, 60, 240)
    assert all(s.endswith(".") for s in segs)
    lengths = [len(s) for s in segs]
    assert lengths[:3] == [49, 49, 99]  # limits 60, 90, 135: whole sentences only
    assert max(lengths) > 150 and all(n <= 240 for n in lengths)


def test_clean_text_strips_controls_caps_zalgo_and_collapses_space() -> None:
    assert clean_text("he\x00l\x1bl\x7fo \u200b  there\t\t!") == "hello there !"
    zalgo = "Z" + "\u0301\u0302\u0303\u0304\u0305\u0306" * 10 + "algo"
    cleaned = clean_text(zalgo)
    assert unicodedata.normalize("NFD", cleaned)[0] == "Z" and cleaned.endswith("algo")
    assert len(cleaned) <= 1 + MAX_COMBINING_RUN + 4
    assert clean_text("one\n\n\n  two") == "one\ntwo"
    assert clean_text("\ud800 lone surrogate") == "lone surrogate"


def test_scrub_is_the_one_unicode_hygiene() -> None:
    assert scrub("\uff48\uff49 \U0001d421\U0001d422", form="NFKC") == "hi hi"  # fullwidth and styled letters
    assert scrub("\uff48\uff49") == "\uff48\uff49"  # NFC keeps them
    assert scrub("a\u2028b\u2029c\x00\u202e\u200d") == "a\nb\nc"  # separators are lines; controls and format go
    assert scrub("a\u200d\U0001f600", keep="\u200d") == "a\u200d\U0001f600"
    assert scrub("\u0301a \u0301b\n\u0301c") == "a b\nc"  # a mark on nothing or on whitespace
    assert scrub("1\ufe0f\u20e3 \u2764\ufe0f") == "1 \u2764"  # selectors and keycaps: the base says it all
    assert scrub("z" + "\u0301\u0302\u0303" * 3) == "\u017a\u0302\u0303"  # at most MAX_COMBINING_RUN marks


def test_clean_text_drops_marks_that_sit_on_nothing() -> None:
    assert clean_text("\u0301\u0302 hello \u0301") == "hello"
    assert clean_text("one\u2028two\r\nthree") == "one\ntwo\nthree"


def _worth(s: str) -> float:
    """Latin characters' worth of speech (a CJK character counts WIDE)."""
    return len(s) + (WIDE - 1) * len(_WIDE_CHARS.findall(s))


@settings(max_examples=300, deadline=None)
@given(text_strategy, st.integers(1, 400))
def test_sentences_bounded_and_lossless(text: str, max_chars: int) -> None:
    cleaned = clean_text(text)
    pieces = split_sentences(cleaned, max_chars)
    assert all(p and p == p.strip() for p in pieces)
    assert all(_worth(p) <= max_chars + WIDE for p in pieces)
    assert _letters("".join(pieces)) == _letters(cleaned)


def test_a_long_sentence_is_one_piece_and_text_is_cut_only_at_sentence_ends() -> None:
    text = ("Please remind everyone that the meeting on Thursday afternoon has been moved to the larger room "
            "downstairs, next to the kitchen. Thanks! Mr. Smith and Dr. Jones will join at 5 p.m. today.\nNew line")
    assert split_sentences(clean_text(text), 400) == [
        "Please remind everyone that the meeting on Thursday afternoon has been moved to the larger room downstairs, "
        "next to the kitchen.", "Thanks!", "Mr. Smith and Dr. Jones will join at 5 p.m. today.", "New line"]
    assert split_sentences("e.g. this one. it goes on. Next.", 400) == ["e.g. this one. it goes on.", "Next."]
    japanese = "次の会議は午後三時から始まります。昨日、友達と一緒に新しいレストランへ行きました。"
    assert split_sentences(japanese, 400) == ["次の会議は午後三時から始まります。",
                                              "昨日、友達と一緒に新しいレストランへ行きました。"]


def test_a_sentence_over_the_bound_is_cut_at_clauses_then_spaces() -> None:
    clauses = "one two three four, five six seven eight; nine ten eleven twelve thirteen fourteen fifteen."
    assert split_sentences(clauses, 45) == ["one two three four, five six seven eight;",
                                            "nine ten eleven twelve thirteen fourteen", "fifteen."]
    assert split_sentences("今天天气很好，我们去公园散步吧，然后我们回家吃饭", 30) == [
        "今天天气很好，", "我们去公园散步吧，", "然后我们回家吃饭"]
