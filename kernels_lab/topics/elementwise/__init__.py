"""The elementwise chain out = alpha * gelu(x + b): unfused, fused, persistent (lesson 01_fusion).
workload.py, demo.py, numbers.py (what the README quotes)."""

ORDER = 1  # where it stands among the topics: its lesson's number
