"""CI gates: a checked-in token budget per transcript and prompt file (`baseline`), prompt files
beside transcripts (`prompts`, `inputs`), and the checks of a run as records (`cases`) that
`report.ci` renders as GitHub annotations, JUnit XML and a Markdown summary."""

# The suffixes of a prompt file (`prompts.is_prompt_file`): here, so that `inputs` loads `prompts`
# (its regexes and records) only for a path that may be one.
PROMPT_SUFFIXES = (".txt", ".md", ".markdown", ".prompt", ".yaml", ".yml")
