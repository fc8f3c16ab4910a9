"""What plays when: a guild's queue and its policy, the speaker that plays it in turn, synthesis ahead, pacing."""
