"""What a compacted transcript still holds of the original: fidelity measures (`measures`) and
the ground truth of simulated transcripts, with needle retention (`truth`)."""
