"""What a compacted transcript still holds of the original and whether what it says is true:
probes of the original and their recall (`probes`), the claims of a compaction's own text
checked against the original log (`claims`, over the log's own reading in `evidence`), ctxkit
beside its peers (`compare`), fidelity measures (`measures`) and the ground truth of simulated
transcripts, with needle retention (`truth`)."""
