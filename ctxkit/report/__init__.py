"""Rendering results for people and machines: aligned tables, JSON lines and CSV (`tables`) and
the self-contained HTML page of a compaction (`html`)."""
