"""The examples of README's table "How messages are read": a message as written and what is said for it."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = "## How messages are read"
# (the README row's first cell, the message as written, what is said); {user}, {role} and {channel} are mentions of
# the member "Bob", the role "Mods" and the channel "general"
EXAMPLES = [
    ("Links", "see https://example.com/page.", "see a link."),
    ("Links", "read [the docs](https://docs.example.com) first", "read the docs first"),
    ("Emoji", "\U0001f600", "grinning face"),
    ("Emoji", "\U0001f44d\U0001f3fd", "thumbs up"),
    ("Emoji", "\U0001f1eb\U0001f1f7", "flag of France"),
    ("Emoji", "\U0001f602" * 4, "face with tears of joy"),
    ("Custom emoji", "<:pepe_laugh:123>", "pepe laugh"),
    ("Mentions", "{user}", "Bob"),
    ("Mentions", "ask {role} in {channel}", "ask Mods in general"),
    ("Code blocks", "run `pip install x`", "run pip install x"),
    ("Code blocks", "```py\nprint(1)\n```", "code block"),
    ("Spoilers", "the end is ||a twist||", "the end is"),
    ("Formatting", "**bold** and __under__", "bold and under"),
    ("Formatting", "snake_case", "snake case"),
    ("Repeats", "sooooo good!!!!!", "sooo good!!!"),
    ("Repeats", "hahahahaha", "hahaha"),
]
ATTACHMENTS = ("Attachments", ["cat.png", "dog.jpg", "notes.pdf"], "alice sent two images and a file")


def readme_rows() -> dict[str, str]:
    """The table's rows by their first cell."""
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    rows = {}
    for line in text[start:text.index("\n## ", start + 1)].splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            rows[line.split("|")[1].strip()] = line
    return rows
