"""bench/load's accounting: talk spurts cut by the order the bot sent its packets, paired in order with the bot's
stretches (however late the sandbox heard them), notices matched to the items they tell about, double counts and
unanswered /say counted as failures, and heard audio checked against its text."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from types import SimpleNamespace

import numpy as np

from bench.load import report as load_report
from bench.load.accounting import CONTENT_MARGIN, bot_posts, content_margin, find_audio, spurts, tally, told
from bench.load.traffic import OVER, QUICK, UNDER, Item
from sandbox.capture import Packet

FRAME = 0.02
T0 = 1_000.0  # monotonic seconds of the first stretch


def capture_of(*runs: tuple[float, int, float], lag: float = 0.0) -> SimpleNamespace:
    """Packets of stretches as sent: (sent at, voiced frames, seconds between its five end silence frames), each
    heard `lag` s later, numbered in sending order from 65530 (so the numbers wrap)."""
    packets, seq = [], 65_530
    for start, voiced, step in runs:
        at = start + lag
        for _ in range(voiced):
            packets.append(Packet(at, seq % 65_536, 0, 1, b"v", False))
            at, seq = at + FRAME, seq + 1
        for _ in range(5):
            packets.append(Packet(at, seq % 65_536, 0, 1, b"s", True))
            at, seq = at + step, seq + 1
    return SimpleNamespace(packets=packets)


def records(*stretches: list[tuple[float, int]]) -> list[dict]:
    return [{"spans": [list(sp) for sp in spans]} for spans in stretches]


def test_the_end_burst_closes_each_stretch_however_it_arrived() -> None:
    # the first burst took 20 ms a frame (a player thread held up, the sandbox's loop behind): it still ends it
    found = spurts(capture_of((T0, 50, FRAME), (T0 + 1.2, 80, 0.0005)))
    assert [(round(s.start, 2), s.frames) for s in found] == [(T0, 50), (T0 + 1.2, 80)]


def test_packets_are_taken_in_the_order_they_were_sent() -> None:
    cap = capture_of((T0, 30, 0.0), (T0 + 0.8, 30, 0.0))
    cap.packets[10], cap.packets[40] = cap.packets[40], cap.packets[10]  # two arrived out of order
    found = spurts(cap)
    assert [s.frames for s in found] == [30, 30]
    assert max(p.at for p in found[0].packets) < found[1].start


def test_stretches_pair_with_spurts_in_order_however_late_the_sandbox_heard_them() -> None:
    # the sandbox's loop 1.5 s behind: each spurt starts nearer the next stretch than its own
    recs = records([(T0, 40)], [(T0 + 0.9, 40)], [(T0 + 1.8, 40)])
    found = spurts(capture_of((T0, 40, 0.0), (T0 + 0.9, 40, 0.0), (T0 + 1.8, 40, 0.0), lag=1.5))
    assert find_audio(found, recs) == 0
    assert [r["spurts"][0].start for r in recs] == [s.start for s in found]


def test_a_short_stretch_right_before_another_keeps_its_own_audio() -> None:
    # three frames (a readout that gave way at once), the next one 80 ms later: neither takes the other's frames
    recs = records([(T0, 3)], [(T0 + 0.08, 60)])
    found = spurts(capture_of((T0, 3, 0.0), (T0 + 0.08, 60, 0.0), lag=0.05))
    assert find_audio(found, recs) == 0
    assert [r["spurts"][0].frames for r in recs] == [3, 60]


def test_audio_heard_before_any_stretch_began_is_audio_of_no_item() -> None:
    recs = records([(T0 + 2.0, 40)])
    assert find_audio(spurts(capture_of((T0, 20, 0.0), (T0 + 2.0, 40, 0.0))), recs) == 1
    assert recs[0]["spurts"][0].frames == 40


def test_two_stretches_run_together_are_cut_by_sequence_number() -> None:
    cap = capture_of((T0, 50, 0.0), (T0 + 1.1, 80, 0.0))
    del cap.packets[50:55]  # every packet of the burst between them lost
    recs = records([(T0, 50)], [(T0 + 1.1, 80)])
    found = spurts(cap)
    assert [s.frames for s in found] == [130]
    assert find_audio(found, recs) == 0
    assert [r["spurts"][0].frames for r in recs] == [50, 80]


def test_silence_the_player_sent_when_its_buffer_ran_dry_stays_with_its_stretch() -> None:
    # 52 packets sent for a stretch of 40 frames (12 underruns), then the next one: nothing cut off, nothing left
    recs = records([(T0, 40)], [(T0 + 1.2, 30)])
    assert find_audio(spurts(capture_of((T0, 52, 0.0), (T0 + 1.2, 30, 0.0))), recs) == 0
    assert [r["spurts"][0].frames for r in recs] == [52, 30]


def test_a_stretch_whose_audio_never_came_does_not_take_the_next_ones() -> None:
    cap = capture_of((T0, 30, 0.0), (T0 + 0.7, 50, 0.0))
    del cap.packets[:35]  # the first stretch and its burst all lost
    recs = records([(T0, 30)], [(T0 + 0.7, 50)])
    assert find_audio(spurts(cap), recs) == 0
    assert recs[0]["spurts"] == [None] and recs[1]["spurts"][0].frames == 50


def test_a_lost_stretch_is_told_from_the_next_by_sequence_number() -> None:
    # the middle one all lost: the last has as many frames and came later, but its numbers are the last one's
    cap = capture_of((T0, 40, 0.0), (T0 + 0.9, 30, 0.0), (T0 + 1.6, 30, 0.0), lag=0.8)
    del cap.packets[45:80]
    recs = records([(T0, 40)], [(T0 + 0.9, 30)], [(T0 + 1.6, 30)])
    assert find_audio(spurts(cap), recs) == 0
    assert recs[1]["spurts"] == [None] and [recs[0]["spurts"][0].frames, recs[2]["spurts"][0].frames] == [40, 30]


# -- notices and the tally -----------------------------------------------------------------------------------


def snowflake(seconds: float) -> int:
    return int(seconds * 1000) << 22


def readout(user: int, sent_s: float, **kw) -> Item:
    return Item("readout", "Hello everyone.", sent_s, user, 1.0, message_id=snowflake(sent_s), **kw)


def notice(user: int, at_s: float, text: str = "sending messages faster than I can read them") -> SimpleNamespace:
    return SimpleNamespace(id=snowflake(at_s), content=f"<@{user}>, {text}")


def test_each_notice_tells_about_its_own_item() -> None:
    items = [readout(7, 100.0), readout(7, 200.0), readout(8, 100.0)]
    # one notice to user 7 long before their second message, none to user 8
    assert told(items, [notice(7, 100.5)]) == 1
    assert told(items, [notice(7, 100.5), notice(7, 200.4), notice(8, 101.0)]) == 3
    # a notice posted before the message it would tell about tells nothing of it
    assert told([readout(7, 200.0)], [notice(7, 150.0)]) == 0


def test_a_flooding_user_is_told_once_in_the_bots_window() -> None:
    items = [readout(7, 100.0), readout(7, 101.0), readout(7, 110.0)]
    assert told(items, [notice(7, 100.2)]) == 3


def answered(text: str | None) -> SimpleNamespace:
    responses = [] if text is None else [SimpleNamespace(kind="followup", type=None, message=None, content=text)]
    return SimpleNamespace(responses=responses)


def played(item: Item, start: float, frames: int, **kw) -> dict:
    return {"kind": item.kind, "message_id": item.message_id, "author": item.user_id, "created_at": item.sent_at,
            "outcome": "played", "catch_up": 1.0, "spans": [[start, frames]], **kw}


def test_a_say_never_answered_is_counted_and_not_accepted() -> None:
    say = Item("say", "Thanks a lot.", T0, 7, 1.0, interaction=answered(None))
    counts = tally([say], [], [], [], [])
    assert counts["say_unanswered"] == 1 and counts["accepted"] == 0 and counts["lost"] == 0


def test_a_double_count_is_counted_twice_and_hides_no_loss() -> None:
    heard, lost = readout(7, T0), readout(8, T0 + 5)
    cap = capture_of((T0, 40, 0.0))
    skip = [("skip", answered("Skipped."))]  # a /skip that ended none of the load's items
    counts = tally([heard], [played(heard, T0, 40)], spurts(cap), [], skip)
    assert (counts["heard"], counts["skipped_by_user"], counts["lost"], counts["counted_twice"]) == (1, 0, 0, 1)
    # an item lost beside it in the same guild: still lost, not netted away by the answer that claims too much
    counts = tally([heard, lost], [played(heard, T0, 40)], spurts(cap), [], skip)
    assert (counts["lost"], counts["counted_twice"]) == (1, 1)
    # a catch-up notice counting more than the guild's readout that could have been skipped
    counts = tally([heard, lost], [played(heard, T0, 40)], spurts(cap),
                   [SimpleNamespace(id=snowflake(T0 + 9), content="Skipped 2 messages to catch up.")], [])
    assert (counts["told"], counts["lost"], counts["counted_twice"]) == (1, 0, 1)


def test_an_item_ended_by_a_user_counts_as_skipped_once_answered() -> None:
    item = readout(7, T0)
    rec = dict(played(item, T0, 40), outcome="skipped")
    cap = capture_of((T0, 10, 0.0))
    counts = tally([item], [rec], spurts(cap), [], [("skip", answered("Skipped."))])
    assert (counts["skipped_by_user"], counts["lost"], counts["counted_twice"]) == (1, 0, 0)
    # the same without a /skip answered: nobody said so, so lost
    assert tally([readout(7, T0)], [dict(rec, spurts=[])], spurts(cap), [], [])["lost"] == 1


def test_a_stretch_that_lost_frames_beyond_the_slack_is_not_heard() -> None:
    item = readout(7, T0)
    cap = capture_of((T0, 40, 0.0))
    del cap.packets[5:15]
    counts = tally([item], [played(item, T0, 40)], spurts(cap), [], [])
    assert (counts["heard"], counts["lost"]) == (0, 1)


# -- the goals -----------------------------------------------------------------------------------------------


def result(**changes) -> dict:
    r = {"plan": QUICK, "actions": 40, "calibration": {}, "sent_s": 20.0, "drained": True, "load_s": 30.0,
         "setup_s": 5.0,
         "capacity": 5.0, "mean_phrase_s": 1.2, "sent": {}, "hostile": {}, "engine_beside": {}, "cores": (1.0, 0.5),
         "offered": 0.7, "accepted": 30, "heard": 30, "told": 0, "skipped_by_user": 0, "lost": 0, "counted_twice": 0,
         "say_told": 0, "say_unanswered": 0, "unidentified_spurts": 0, "off_length": 0, "frames_missing": 0,
         "content_checked": 30, "content_failed": 0, "content_margin_min": 0.3, "outcomes": {}, "faster": [],
         "played": 30, "underruns": 0, "commands": 5, "commands_unanswered": 0, "busy": {"say": [], "readout": []},
         "rest": {"say": [0.5], "readout": [0.5]}, "say_ttfa": [0.5], "readout_delay": [0.5], "bot_peak_rss_mb": 300.0,
         "loop_lag_p99_ms": 5.0}
    return r | changes


def report(**changes) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        rc = load_report.report(result(**changes))
    return rc, out.getvalue()


def test_unanswered_say_and_double_counts_are_goals_of_zero() -> None:
    rc, out = report()
    assert rc == 0 and "say_unanswered: 0 (goal <= 0) OK" in out and "counted_twice: 0 (goal <= 0) OK" in out
    for name in ("say_unanswered", "counted_twice", "unidentified_spurts", "content_failed"):
        rc, out = report(**{name: 1})
        assert rc == 1 and f"{name}: 1 (goal <= 0) MISSED" in out, out


def test_the_quick_plan_has_the_under_plans_goals() -> None:
    assert QUICK.goals == UNDER.goals
    rc, out = report(rest={"say": [1.5], "readout": [0.5]})
    assert rc == 1 and "say_own_wait_p95_s: 1.50 (goal <= 1.00) MISSED" in out
    rc, out = report(rest={"say": [0.5], "readout": [2.5]})
    assert rc == 1 and "readout_own_wait_p95_s: 2.50 (goal <= 2.00) MISSED" in out


def test_under_goals_count_the_bots_own_wait_and_the_totals_are_shown_without_a_goal() -> None:
    rc, out = report(say_ttfa=[6.0], readout_delay=[13.0], rest={"say": [0.5], "readout": [1.5]})
    assert rc == 0, out
    assert "say_ttfa_p95_s: 6.00 (no goal" in out and "readout_delay_p95_s: 13.00 (no goal" in out
    assert "say_own_wait_p95_s: 0.50 (goal <= 1.00) OK" in out
    rc, out = report(plan=OVER, say_ttfa=[11.0])  # the over plan keeps its goals on the total waits
    assert rc == 1 and "say_ttfa_p95_s: 11.00 (goal <= 10.00) MISSED" in out
    assert "say_own_wait_p95_s: 0.00 (no goal" not in out and "say_own_wait_p95_s:" in out


# -- what the audio says -------------------------------------------------------------------------------------


def speechlike(seed: int, n: int = 150) -> np.ndarray:
    """speech_frames of a short phrase: 24 bands a 10 ms frame, sounds that hold for 50 to 200 ms."""
    rng = np.random.default_rng(seed)
    frames = []
    while len(frames) < n:
        frames += [rng.normal(0, 6, 24)] * int(rng.integers(5, 20))
    return np.array(frames[:n])


def test_heard_audio_must_sound_like_its_own_text() -> None:
    own, others = speechlike(1), [speechlike(s) for s in range(2, 12)]
    at = np.linspace(0, len(own) - 1, 125)  # spoken 1.2x faster, and noisy
    faster = np.stack([np.interp(at, np.arange(len(own)), own[:, k]) for k in range(24)], axis=1)
    noisy = faster + np.random.default_rng(0).normal(0, 3.0, faster.shape)
    assert content_margin(noisy, [own], others) > CONTENT_MARGIN
    assert content_margin(others[3], [own], others[:3] + others[4:] + [others[3]]) < CONTENT_MARGIN
    # the best of its text's renderings counts: one far off (Piper's sampling noise) does not fail it
    assert content_margin(noisy, [speechlike(40), own], others) > CONTENT_MARGIN


def test_the_bots_posts_before_the_run_are_about_none_of_its_items() -> None:
    """The under plan's calibration leaves catch-up notices in the channels: counted, they would be claims about
    this run's items (counted_twice)."""
    bot, user = SimpleNamespace(id=1), SimpleNamespace(id=7)
    earlier = SimpleNamespace(id=snowflake(T0 - 30), author=bot, content="Skipped 3 messages to catch up.")
    mark = SimpleNamespace(id=snowflake(T0 - 1), author=user, content="last message before the run")
    later = SimpleNamespace(id=snowflake(T0 + 9), author=bot, content="Skipped 1 message to catch up.")
    theirs = SimpleNamespace(id=snowflake(T0 + 10), author=user, content="hello")
    assert bot_posts([earlier, mark, later, theirs], 1, mark.id) == [later]
    assert bot_posts([earlier, mark, later, theirs], 1, 0) == [earlier, later]


def test_the_plans_mix_is_dealt_exactly_in_a_random_order() -> None:
    import random

    from bench.load.traffic import HOSTILE, HOSTILE_SHARE, dealt, speech_texts

    kinds = dealt(random.Random(1), {"readout": 45.0, "say": 20.0, "skip": 5.0}, 140)
    assert (kinds.count("readout"), kinds.count("say"), kinds.count("skip")) == (90, 40, 10)
    assert kinds != sorted(kinds, key=["readout", "say", "skip"].index)  # shuffled
    texts = speech_texts(random.Random(2), 400)
    hostile = [t for t in texts if t in HOSTILE]
    assert len(texts) == 400 and len(hostile) == round(400 * HOSTILE_SHARE)
    assert {hostile.count(h) for h in HOSTILE} == {10}  # each kind alike: no run draws four 10k messages by luck
