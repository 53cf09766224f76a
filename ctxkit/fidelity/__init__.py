"""What a compacted transcript still holds of the original and whether what it says is true:
probes of the original and their recall (`probes`), the claims of a compaction's own text
checked against the original log (`claims`, over the log's own reading in `evidence`), fidelity
measures (`measures`) and the ground truth of simulated transcripts, with needle retention
(`truth`). The evaluation imports nothing of what it judges (strategies, summarizers,
compaction) and none of them imports it: running ctxkit beside its peers is the engines'
(`engines.methods`, `engines.fidelity`)."""
