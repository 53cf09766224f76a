"""How other agents compact: when each one's auto-compaction fires (`triggers`)."""
