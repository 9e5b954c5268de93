"""Sums of 64-element blocks: a shared tile and a barrier per step (lesson 03_persistent's warm-up exercise)."""

ORDER = 3  # where it stands among the topics: its lesson's number
