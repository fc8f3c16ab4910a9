"""Spoken names for the emoji that Unicode's character names read badly: sequences, flags, a few overrides."""

from __future__ import annotations

# Single code points whose Unicode name is not what people call them. Everything else is read by
# its lowercased Unicode name, less a trailing " sign" ("THUMBS UP SIGN" -> "thumbs up").
NAMES: dict[str, str] = {
    "\u2764": "red heart",
    "\u2665": "heart suit",
    "\u263a": "smiling face",
    "\u2639": "frowning face",
    "\u2b50": "star",
    "\u2705": "check mark",
    "\u2714": "check mark",
    "\U0001f3f3": "white flag",
    "\U0001f3f4": "black flag",
    "\U0001f4af": "hundred points",
    "\U0001f60d": "smiling face with heart eyes",
    "\U0001f64f": "folded hands",
}

# Zero-width-joiner sequences, keyed without variation selectors and skin tones. A sequence not
# listed here is read by the name of its first emoji ("man technologist" -> "man" at worst).
SEQUENCES: dict[str, str] = {
    "\u2764\u200d\U0001f525": "heart on fire",
    "\u2764\u200d\U0001fa79": "mending heart",
    "\U0001f3f3\u200d\U0001f308": "rainbow flag",
    "\U0001f3f3\u200d\u26a7": "transgender flag",
    "\U0001f3f4\u200d\u2620": "pirate flag",
    "\U0001f62e\u200d\U0001f4a8": "face exhaling",
    "\U0001f635\u200d\U0001f4ab": "face with spiral eyes",
    "\U0001f636\u200d\U0001f32b": "face in clouds",
    "\U0001f441\u200d\U0001f5e8": "eye in speech bubble",
    "\U0001f9d1\u200d\U0001f4bb": "technologist",
    "\U0001f468\u200d\U0001f4bb": "man technologist",
    "\U0001f469\u200d\U0001f4bb": "woman technologist",
    "\U0001f408\u200d\u2b1b": "black cat",
    "\U0001f43b\u200d\u2744": "polar bear",
    "\U0001f415\u200d\U0001f9ba": "service dog",
    "\U0001f469\u200d\u2764\u200d\U0001f468": "couple with heart",
}

# A ZWJ sequence made only of these people is read as "family".
FAMILY_MEMBERS: frozenset[str] = frozenset("\U0001f468\U0001f469\U0001f466\U0001f467\U0001f9d1\U0001f9d2")

# Regional-indicator pairs (country codes) read as "flag of ..."; other pairs read as "a flag".
FLAGS: dict[str, str] = {
    "US": "the United States",
    "GB": "the United Kingdom",
    "CA": "Canada",
    "AU": "Australia",
    "IE": "Ireland",
    "DE": "Germany",
    "FR": "France",
    "ES": "Spain",
    "IT": "Italy",
    "NL": "the Netherlands",
    "SE": "Sweden",
    "PL": "Poland",
    "UA": "Ukraine",
    "RU": "Russia",
    "JP": "Japan",
    "KR": "South Korea",
    "CN": "China",
    "IN": "India",
    "BR": "Brazil",
    "MX": "Mexico",
    "EU": "the European Union",
}
