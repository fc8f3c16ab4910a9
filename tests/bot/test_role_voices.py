"""The role_voice setting's stored form: round trip, the highest role's voice first, shown by name, junk ignored."""

from __future__ import annotations

from bot import guild_options, role_voices


def test_round_trip_highest_role_first_and_shown_by_name() -> None:
    stored = role_voices.format_mapping({7: ("af_heart", "Heart"), 3: ("0123abcd" * 4, "robot")})
    assert role_voices.parse(stored) == {3: ("0123abcd" * 4, "robot"), 7: ("af_heart", "Heart")}
    assert role_voices.voice_of(stored, [7, 3]) == "af_heart" and role_voices.voice_of(stored, [9, 3]) == "0123abcd" * 4
    assert role_voices.voice_of(stored, [9]) is None
    assert role_voices.shown(stored) == "<@&3> robot, <@&7> Heart"
    assert role_voices.format_mapping({}) == "" and role_voices.shown("") == "none"
    longest = role_voices.format_mapping({10**19 + i: ("f" * 32, "v" * 32) for i in range(role_voices.MAX_ROLES)})
    assert len(longest) <= 1000  # the column's width (migration 0010)


def test_an_unreadable_value_is_no_mapping_and_show_says_none() -> None:
    for junk in ("{not json", "[1]", "12=af_heart"):
        assert role_voices.parse(junk) == {} and role_voices.voice_of(junk, [12]) is None
    assert guild_options._shown(guild_options.OPTIONS["role_voice"], "") == "none"
