"""CI gates: a checked-in token budget per transcript and prompt file (`baseline`), prompt files
beside transcripts (`prompts`, `inputs`), and the checks of a run as records (`cases`) that
`report.ci` renders as GitHub annotations, JUnit XML and a Markdown summary."""
