"""What kind a registered voice's feature blob is: each names its kind; match profiles written before they did are
read by their format."""

from __future__ import annotations

import json

MATCH_PROFILE = "match-profile"  # engine/voices/profile.py's MatchProfile: pitch, warp and envelope toward a speaker


def kind(blob: bytes) -> str:
    """The blob's kind ("" when it names none and is no older match profile)."""
    if not blob[:64].lstrip().startswith(b"{"):
        return ""
    try:
        raw = json.loads(blob.decode())
    except (UnicodeDecodeError, ValueError):
        return ""
    if not isinstance(raw, dict):
        return ""
    if isinstance(raw.get("kind"), str):
        return raw["kind"]
    return MATCH_PROFILE if "target_lf0_mean" in raw and raw.get("format") in (1, 2, 3) else ""
