"""The load bench's accounting: what was heard (talk spurts paired with the bot's record of each utterance, its audio
checked against renderings of its text), told and skipped, per item; lost is what none of them accounts for."""

from __future__ import annotations

import collections
import math
import re
from dataclasses import dataclass, field

import numpy as np

from bench.load.traffic import Dump, Item, Room, Traffic, first_text
from sandbox.capture import FRAME_S
from tests.audio_util import mono, speech_frames, stretched_frames_correlation

LENGTH_TOLERANCE = 1.35  # a heard item's spurt is within this ratio of its text's expected length


SENT_SLACK_S = 0.1  # a stretch's spurt arrives no earlier than this before its first frame left the player ...


MAX_LAG_S = 5.0  # ... and no later than this after it (the sandbox's loop falls behind on a busy machine)


CONTENT_MARGIN = 0.0  # heard audio correlates with its own text's renderings by this much more than with another's


REFERENCES = 3  # renderings of each text (Piper's sampling noise on: one alone gave a right phrase -0.04 at 1.2x)


SPEED_STEP = 0.05  # references are rendered at each speed played, to this step


FRAMES_SLACK = 2  # frames an utterance's spurt may lack and still count as heard ...


FRAMES_LOST = 0.05  # ... or this share of them: UDP on loopback drops a few when the sandbox falls behind


END_BURST = 5  # Opus silence frames discord.py sends when a source ends


class References:
    """The speech_frames of renderings of each text that is the same in every guild (not the mentions, whose names
    differ), by (kind, phrase or hostile kind), at each speed an utterance was played at (its user's speed and the
    catch-up, to SPEED_STEP): what a heard item is checked against. Rendered on an engine built from the bot's
    settings, as the bot builds it; REFERENCES renderings where the engine's are not all the same (Piper's sampling
    noise), one where they are (Kokoro)."""

    def __init__(self, engine, texts: dict[tuple[str, str], str | None]) -> None:
        self.engine = engine
        self.texts = {key: text for key, text in texts.items() if text and key[1] != "mentions"}
        self._frames: dict[tuple[str, float], list[np.ndarray]] = {}
        self.seconds: dict[tuple[str, float], float] = {}  # how long the first rendering is

    @staticmethod
    def step(speed: float) -> float:
        return round(round(speed / SPEED_STEP) * SPEED_STEP, 3)

    async def render(self, speeds: set[float]) -> None:
        """Render every text at each of `speeds` (to SPEED_STEP) not rendered yet."""
        from engine.base import Voice

        for speed in sorted({self.step(s) for s in speeds}):
            for text in set(self.texts.values()):
                if (text, speed) in self._frames:
                    continue
                renders = [await self.engine.synthesize_all(text, Voice(speed=speed))]
                renders += [await self.engine.synthesize_all(text, Voice(speed=speed))]
                if renders[0] != renders[1]:  # a sampling model: several renderings, the best counts
                    renders += [await self.engine.synthesize_all(text, Voice(speed=speed))
                                for _ in range(REFERENCES - 2)]
                self._frames[(text, speed)] = [speech_frames(mono(pcm)) for pcm in dict.fromkeys(renders)]
                self.seconds[(text, speed)] = len(renders[0]) / (48_000 * 4)

    def own(self, key: tuple[str, str], speed: float) -> list[np.ndarray] | None:
        text = self.texts.get(key)
        return None if text is None else self._frames.get((text, self.step(speed)))

    def others(self, key: tuple[str, str], speed: float) -> list[np.ndarray]:
        texts = {t for k, t in self.texts.items() if k[0] == key[0] and t != self.texts.get(key)}
        return [f for t in texts for f in self._frames.get((t, self.step(speed)), [])]


@dataclass
class Spurt:
    start: float
    end: float
    frames: int
    packets: list = field(default_factory=list, repr=False)
    seqs: list = field(default_factory=list, repr=False)  # each packet's RTP sequence number, unwrapped

    @property
    def seconds(self) -> float:
        return self.frames * FRAME_S


def in_send_order(packets: list) -> list[tuple[int, object]]:
    """(unwrapped RTP sequence number, packet) in the order the bot sent them: discord.py numbers every packet it
    sends, so the order holds however the arrival times lag and bunch when the sandbox's loop falls behind. A
    new SSRC (a new connection) follows the one before it."""
    last: dict[int, int] = {}
    keyed = []
    for i, p in enumerate(packets):
        prev = last.get(p.ssrc)
        seq = p.seq if prev is None else prev + ((p.seq - prev + 32768) % 65536 - 32768)
        last[p.ssrc] = seq if prev is None else max(prev, seq)
        keyed.append((list(last).index(p.ssrc), seq, i, p))
    return [(seq, p) for _, seq, _, p in sorted(keyed, key=lambda k: k[:3])]


def spurts(capture) -> list[Spurt]:
    """Each stretch the bot played, as the channel heard it: the packets in the order they were sent, cut at the
    Opus silence frames that end every stretch (discord.py's player and the bot's driver send five; the bot's
    own audio never encodes to that frame). Timing plays no part: a burst that arrived spread out still ends."""
    out: list[Spurt] = []
    current: Spurt | None = None
    for seq, p in in_send_order(capture.packets):
        if p.silence:
            current = None
            continue
        if current is None:
            current = Spurt(p.at, p.at, 0)
            out.append(current)
        current.end = max(current.end, p.at)
        current.frames += 1
        current.packets.append(p)
        current.seqs.append(seq)
    return out


def cut(s: Spurt, frames: int) -> tuple[Spurt, Spurt | None]:
    """A spurt of a stretch of `frames` frames, and what of the next stretch ran into it (None if nothing): the
    next one starts after END_BURST or more missing sequence numbers (the burst between them, all lost) that end
    no earlier than the stretch's frames and a burst after its first. More packets without such a gap are the
    stretch's own: the silence the player sent when its buffer ran dry (underruns, not in its frame count)."""
    def part(a: int, b: int) -> Spurt | None:
        ps = s.packets[a:b]
        return Spurt(ps[0].at, max(p.at for p in ps), len(ps), ps, s.seqs[a:b]) if ps else None
    k = next((k for k in range(1, len(s.seqs)) if s.seqs[k] - s.seqs[k - 1] > END_BURST
              and s.seqs[k] >= s.seqs[0] + frames + END_BURST), None)
    return (s, None) if k is None else (part(0, k), part(k, len(s.packets)))


def length_fits(seconds: float, item: Item) -> bool:
    """Whether `seconds` of heard audio is as long as `item`'s text should sound (a check independent of the
    bot's record)."""
    if not item.expected_s:
        return False
    hi = item.expected_hi or item.expected_s
    faster = item.record["catch_up"] if item.record else 1.0  # made faster while its channel was behind
    return item.expected_s / (LENGTH_TOLERANCE * faster) <= seconds <= hi * LENGTH_TOLERANCE


def label(items: list[Item], records: list[dict]) -> None:
    """Give each item the bot's record of its utterance, if it was queued: readout by its message's id, /say by
    its author in the order asked."""
    readout = {r["message_id"]: r for r in records if r["kind"] == "readout"}
    says: dict[int, collections.deque] = collections.defaultdict(collections.deque)
    for r in sorted((r for r in records if r["kind"] == "say"), key=lambda r: r["created_at"]):
        says[r["author"]].append(r)
    for it in items:
        if it.kind == "readout":
            it.record = readout.get(it.message_id)
        elif it.accepted and says[it.user_id]:
            it.record = says[it.user_id].popleft()


def whole(s: Spurt | None, frames: int) -> bool:
    """Whether spurt `s` holds a stretch of `frames` frames: all of them but what loopback may lose."""
    return s is not None and s.frames >= frames - max(FRAMES_SLACK, FRAMES_LOST * frames)


def find_audio(spurt_list: list[Spurt], records: list[dict]) -> int:
    """Give each stretch the player played its talk spurt: one voice per channel, so the stretches in the order
    they started and the spurts in the order they were sent pair up one after the other. A spurt heard before
    the stretch it would pair with began (SENT_SLACK_S) is audio of no item. A stretch was not heard when its next
    spurt comes more than MAX_LAG_S after it began, or starts where the stretch after it starts: by sequence
    number, each stretch's frames (or more: underruns) and a burst after the spurt before it; before any spurt
    was found, when the spurt came after the next stretch began and its frames are nearer that one's. A spurt
    may hold the next stretch too (the burst between them lost): cut. Sets record["spurts"] (None where a
    stretch has none); returns the spurts no stretch accounts for."""
    queue = collections.deque(spurt_list)
    spans = sorted(((start, frames, r) for r in records for start, frames in r["spans"]), key=lambda x: x[0])
    unclaimed = 0
    expected: int | None = None  # the sequence number this stretch's first frame had, from the spurts before it
    for i, (start, frames, r) in enumerate(spans):
        while queue and queue[0].start < start - SENT_SLACK_S:
            queue.popleft()
            unclaimed += 1
        found = queue[0] if queue and queue[0].start <= start + MAX_LAG_S else None
        if found is not None:
            if expected is not None:
                later = found.seqs[0] >= expected + frames + END_BURST
            else:
                later = i + 1 < len(spans) and whole(found, spans[i + 1][1]) and found.start >= spans[i + 1][0] \
                    - SENT_SLACK_S and abs(found.frames - spans[i + 1][1]) < abs(found.frames - frames)
            if later:
                found = None  # this stretch's audio never came: the spurt is a later one's
        if found is not None:
            queue.popleft()
            found, rest = cut(found, frames)
            if rest is not None:
                queue.appendleft(rest)
            expected = max(found.seqs[0] + frames, found.seqs[-1] + 1) + END_BURST
        elif expected is not None:
            expected += frames + END_BURST
        r.setdefault("spurts", []).append(found)
    return unclaimed + len(queue)


def heard_at(it: Item) -> float | None:
    """When the item's audio started in the capture, if the channel heard all of it: played, and every frame the
    player took is there, each stretch as one spurt (no gap that ended it early)."""
    r = it.record
    if r is None or r["outcome"] != "played" or not r["spans"]:
        return None
    if not all(whole(s, frames) for (_, frames), s in zip(r["spans"], r["spurts"])):
        return None
    return r["spurts"][0].start


def channel_busy(it: Item, others: list[Item]) -> float:
    """Seconds between the item's sending and its first heard frame that its channel spent speaking other items
    (one voice per channel: the wait no scheduling can remove)."""
    return sum(max(0.0, min(s.end, it.heard_at) - max(s.start, it.sent_at))
               for o in others if o is not it for s in o.record["spurts"] if s is not None)


def frames_missing(it: Item) -> int:
    """Frames of a heard item that did not reach the sandbox (within the slack heard_at allows)."""
    return sum(max(0, frames - s.frames) for (_, frames), s in zip(it.record["spans"], it.record["spurts"]))


def content_margin(heard: np.ndarray, own: list[np.ndarray], others: list[np.ndarray]) -> float:
    """How much more heard audio (its speech_frames) correlates with the renderings of its own text at the speed it
    was played (References; stretched to the same length: Piper's sampling noise; the best of them) than with any
    rendering of this load's other texts about as long at that speed; below CONTENT_MARGIN it does not sound like its
    text."""
    def best(refs: list[np.ndarray]) -> float:
        near = [o for o in refs if 1 / LENGTH_TOLERANCE ** 2 <= len(o) / max(1, len(heard)) <= LENGTH_TOLERANCE ** 2]
        return max((stretched_frames_correlation(heard, o) for o in near), default=-1.0)
    return max(stretched_frames_correlation(heard, o) for o in own) - best(others)


def content_margins(capture, items: list[Item], refs: References) -> list[float]:
    """The content_margin of each heard item's decoded audio (also set as its margin), beside the bot's record;
    items whose text is not rendered the same in every guild (mentions: the names differ) are not checked."""
    margins = []
    for it in items:
        speed = it.record.get("speed", 1.0) if it.record else 1.0
        own = refs.own((it.kind, it.key), speed)
        if it.heard_at is None or own is None:
            continue
        pcm = b"".join(pcm for s in it.record["spurts"] for _, pcm in capture.decoded(s.packets))
        others = refs.others((it.kind, it.key), speed)
        it.margin = content_margin(speech_frames(mono(pcm)), own, others)
        margins.append(it.margin)
    return margins


SKIPPED_NOTICE = re.compile(r"^Skipped (\d+) messages? to catch up")


STOPPED = re.compile(r"^Stopped( what was being said)?; (\d+) waiting")


TOLD_AUTHOR = ("faster than I can read", "could not read your message", "queue is full")


def posted_ms(snowflake: int) -> int:
    """When a message was posted (ms, the snowflake's clock)."""
    return snowflake >> 22


def told(items: list[Item], notices: list) -> int:
    """How many of `items` (readout refused at the door or failed) their authors were told about, each by a
    notice of its own: a bot message naming the author and a reason (TOLD_AUTHOR). A notice tells about the
    earliest item of its author not yet told that was sent before it; an item sent within the bot's TOLD_WINDOW_S
    after a notice to its author was told by that one (the bot tells a flooding user once in that window)."""
    from bot.readout import TOLD_WINDOW_S

    count = 0
    for user in {it.user_id for it in items}:
        at = sorted(posted_ms(m.id) for m in notices if f"<@{user}>" in m.content)
        free = list(at)
        for it in sorted((it for it in items if it.user_id == user), key=lambda it: it.message_id):
            sent = posted_ms(it.message_id)
            if any(sent - TOLD_WINDOW_S * 1000 <= t <= sent for t in at if t not in free):
                count += 1  # told moments before, not again
                continue
            own = next((t for t in free if t >= sent), None)
            if own is not None:
                free.remove(own)
                count += 1
    return count


def tally(items: list[Item], records: list[dict], spurt_list: list[Spurt], bot_msgs: list,
          commands: list[tuple[str, object]]) -> collections.Counter:
    """One guild's accounting, item by item: each accepted item is heard (found whole in the capture), skipped by a
    user (its utterance ended or taken out of the queue, as many as /skip and /stop answered), told (readout
    refused at the door or failed, with a notice of its own; readout skipped to catch up, as many as the catch-up
    notices counted; a /say refused with its reason) or lost. What the answers and notices claim beyond the
    items they can be about is counted_twice (a goal of 0, never netted against lost). Sets each item's record
    and heard_at. `commands`: (kind, interaction) of the guild's other commands."""
    counts = collections.Counter()
    for item in items:
        if item.kind == "say":
            answer = first_text(item.interaction)
            item.accepted = (answer or "").startswith(("Speaking", "Queued"))
            counts["say_unanswered" if answer is None else "say_told" if not item.accepted else "say_accepted"] += 1
    counts["unidentified_spurts"] = find_audio(spurt_list, records)
    speech = [it for it in items if it.accepted]  # readout with nothing to say is not
    label(speech, records)
    for it in speech:
        it.heard_at = heard_at(it)
        if it.heard_at is not None:
            counts["off_length"] += not length_fits(sum(s.seconds for s in it.record["spurts"]), it)
            counts["frames_missing"] += frames_missing(it)
    unheard = [it for it in speech if it.heard_at is None]

    def ended(*outcomes: str) -> list[Item]:
        return [it for it in unheard if (it.record["outcome"] if it.record else None) in outcomes]
    # each /skip answered "Skipped." ended one utterance, cut short or before its first word; /stop says how many
    answered = sum(1 for kind, it in commands if kind == "skip" and (first_text(it) or "").startswith("Skipped"))
    answered += sum(int(m.group(2)) + bool(m.group(1)) for kind, it in commands
                    if kind == "stop" for m in [STOPPED.match(first_text(it) or "")] if m)
    by_user = min(answered, len(ended("skipped", "removed")))
    refused = [it for it in ended(None, "failed") if it.kind == "readout"]
    told_own = told(refused, [x for x in bot_msgs if any(t in x.content for t in TOLD_AUTHOR)])
    caught_up = sum(int(m.group(1)) for m in (SKIPPED_NOTICE.match(x.content) for x in bot_msgs) if m)
    stale = len(refused) - told_own + len(ended("stale"))  # readout the catch-up notices can be about
    told_stale = min(caught_up, stale)
    heard = len(speech) - len(unheard)
    counts.update(accepted=len(speech) + counts["say_told"], heard=heard,
                  told=told_own + told_stale + counts["say_told"], skipped_by_user=by_user,
                  lost=len(unheard) - by_user - told_own - told_stale,
                  counted_twice=answered - by_user + caught_up - told_stale)
    return counts


def bot_posts(messages: list, bot_id: int, after: int) -> list:
    """The bot's messages posted after message id `after` (a calibration's catch-up notices are about its own items,
    not this run's)."""
    return [m for m in messages if m.author.id == bot_id and m.id > after]


def account(sb, rooms: list[Room], traffic: Traffic, records: list[dict],
            refs: References | None = None, before: dict[int, int] | None = None) -> dict:
    """Heard, told, skipped and lost per guild (tally), summed; the heard items' audio checked against renderings
    of their texts (`refs`: speech_frames of renderings by (kind, phrase or hostile kind)), TTFA and delays.
    `before`: per guild, the last message id posted before this traffic (the bot's earlier posts are not counted)."""
    totals = collections.Counter()
    say_ttfa: list[float] = []
    readout_delay: list[float] = []
    margins: list[float] = []  # content_margin of each heard item checked
    busy: dict[str, list[float]] = {"say": [], "readout": []}  # per heard item: its channel speaking others
    rest: dict[str, list[float]] = {"say": [], "readout": []}  # ... and the rest of its wait
    for room in rooms:
        gid = room.guild.id
        items = traffic.items.get(gid, [])
        capture = sb.capture(room.guild)
        spurt_list = spurts(capture)
        # everything the bot posted, also the tells it deleted after 20 s (their authors saw them)
        bot_msgs = bot_posts(room.general.messages, sb.bot_user.id, (before or {}).get(gid, 0))
        totals.update(tally(items, [r for r in records if r["guild"] == gid], spurt_list, bot_msgs,
                            [(kind, it) for g, kind, it in traffic.commands if g == gid]))
        heard_items = [it for it in items if it.heard_at is not None]
        if refs is not None:
            margins += content_margins(capture, heard_items, refs)
        say_ttfa += [it.heard_at - it.sent_at for it in heard_items if it.kind == "say"]
        readout_delay += [it.heard_at - it.sent_at for it in heard_items if it.kind == "readout"]
        for it in heard_items:
            busy[it.kind].append(channel_busy(it, heard_items))
            rest[it.kind].append(it.heard_at - it.sent_at - busy[it.kind][-1])
        if Dump.entries is not None:
            Dump.entries.append({"guild": gid, "spurts": [(round(s.start, 2), round(s.seconds, 2)) for s in spurt_list],
                         "packets": [(round(p.at, 3), p.seq, p.silence) for p in capture.packets],
                         "items": [(it.kind, it.key, round(it.sent_at, 2), it.expected_s and round(it.expected_s, 2),
                                    it.accepted, it.record and it.record["outcome"],
                                    it.heard_at and round(it.heard_at, 2), it.margin,
                                    it.record and it.record["catch_up"], it.record and len(it.record["spans"]))
                                   for it in items],
                         "bot": [m.content[:60] for m in bot_msgs],
                         "commands": [(kind, first_text(it)) for g, kind, it in traffic.commands if g == gid]})
    cmds = [it for _, _, it in traffic.commands]
    keys = ("accepted", "heard", "told", "skipped_by_user", "lost", "counted_twice", "say_told", "say_unanswered",
            "unidentified_spurts", "off_length", "frames_missing")
    return {**{k: totals[k] for k in keys}, "content_checked": len(margins),
            "content_failed": sum(1 for m in margins if m < CONTENT_MARGIN),
            "content_margin_min": min(margins, default=math.nan), "say_ttfa": say_ttfa, "readout_delay": readout_delay,
            "busy": busy, "rest": rest,
            "commands": len(cmds), "commands_unanswered": sum(1 for it in cmds if first_text(it) is None)}
