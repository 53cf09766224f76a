"""The archive and what reads it back: the SQLite store of everything compaction removed
(`store.Archive`, built on `reading` and `database`, with its records as stored in `records`
and `packing`), finding the original of a compacted transcript (`originals`), what recall shows
of a unit (`excerpts`, `patterns`), where archives live (`refs`), the recall and search tools a
model calls (`recall_tool`), and the stdio MCP server that serves them (`mcp_server`)."""
