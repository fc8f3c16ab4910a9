"""Load through the sandbox at a chosen multiple of the engine's capacity: guilds x users sending readout messages
and slash commands (hostile text included) at the real bot in its own process; what was heard is taken from
the sandbox's capture, each utterance's audio identified in the captured stream.

    python -m bench.load --plan over    # offered speech ~1.3x what the engine can synthesize (>= 1.2x)
    python -m bench.load --plan under   # ~0.7x of the capacity the engine has beside the bot's playback
    python -m bench.load --quick        # the CI smoke: 10 guilds x 5 users over 20 s at ~0.7x

Each run first measures the engine's capacity (audio seconds per wall second, the bot's own engine settings,
concurrent streams of this load's phrases) and sizes the load from it. Then the bot is started in a
subprocess exactly as production starts it (bench/_harness.py child: bot.startup.create_bot), so its memory
and event-loop lag are its own. Each plan then calibrates: load at 1x of that capacity for `calibrate_s`
(drive.CALIBRATE_FACTOR), while the bot's engine reports how fast it synthesizes with every slot busy (its speed
measured window by window at each load) beside the bot's playback and the sandbox; the plan's load is sized from that
capacity, and offered_vs_capacity is the speech offered over it (within 0.1 of the plan's factor). The under plan's
goals are on the bot's own part of
each wait (from when the item could have started, its channel free of earlier items, to its first heard
frame); the total waits, which include the channel speaking earlier items (one voice per channel), are
printed beside them.

Accounting (tally, per guild): every accepted item (a readout message by a user in voice; a /say that was
answered "Speaking"/"Queued") ends as heard, told (a /say refused with its reason; readout counted in a "Skipped N
messages to catch up" notice, or refused at the door and its author told why by a notice of its own) or skipped by
a user (/stop's count, an utterance ended by /skip). Heard means found whole in the channel's capture: the
captured packets in the order the bot sent them (RTP sequence numbers), cut into talk spurts at the end-of-speech
silence frames, are paired in order with the stretches of the bot's record of each utterance (when each went to
the player and how many frames it had; a readout that gave way to a /say plays in two), and the spurt must hold
the stretch's frames (up to 5 % may be lost on loopback when the sandbox falls behind: printed). Checked beside
the record: the audio is as long as the item's text should sound, and its envelope is its own text's rendering
rather than another's. Told and skipped are what the sandbox saw the bot answer and post, given to the items they
can be about (the bot's record says which were ended by a user, refused, or too late); lost is every item none of
them accounts for, and what the answers and notices claim beyond those items is counted_twice, a goal of 0 (it is
not netted against lost). A /say never answered is neither accepted nor lost: say_unanswered, a goal of 0.
"""
