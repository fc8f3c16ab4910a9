"""What a voice-matching fit may change, and what each engine.piper.matching choice fits: plain names, light to
import (the settings' check reads them)."""

# What a fit may change. Each part's worth on held-out speakers: bench/voices.py --ablation.
PARTS = frozenset({"f0", "warp", "envelope", "unvoiced", "steady", "vocoded", "rate"})
# What registration fits with engine.piper.matching "clear" (bench/voices.py --ablation, 10 speakers):
# - the envelope and the warp carry the identity (top1 0.6 -> 0.2 without the envelope, 0.4 without the warp);
# - "steady" keeps the words (word errors 1.05x raw Piper's with it, 1.48x without);
# - the pitch moves the speaker models little (gain +0.01) but is what a listener hears first, so it stays;
# - the speaking rate pays a little (d-vector top1 0.6 -> 0.7, gain +0.01, word errors 1.03x -> 1.02x, time to
#   first audio 1.26x -> 1.18x of the bundled voice's: within the run's noise);
# - the unvoiced speech's own correction did not pay (top1 and gain unchanged). Aperiodicity went with WORLD
#   synthesis.
SHIPPED_PARTS = frozenset({"f0", "warp", "envelope", "steady", "rate"})
# engine.piper.matching: what each choice fits. "clear" keeps Piper's own audio and the broad correction steady
# (word errors near raw Piper's); "close" re-synthesizes with WORLD and corrects every band per frame, voiced
# frames and unvoiced speech each by their own statistics: the speaker models find it nearer the speaker, a
# recognizer makes about 1.7 times the word errors (bench/voices.py). It leaves the speaking rate alone: WORLD's
# cost grows with the audio, and a slower voice's first audio came 1.92x the bundled voice's (1.45x without).
MATCHING_MODES = {"clear": SHIPPED_PARTS, "close": (SHIPPED_PARTS - {"steady", "rate"}) | {"unvoiced", "vocoded"}}
