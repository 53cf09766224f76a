"""The archive and what reads it back: the SQLite store of everything compaction removed
(`store`), the recall and search tools a model calls (`recall_tool`), and the stdio MCP server
that serves them (`mcp_server`)."""
