"""Configuration: the YAML file (`file`), its typed fields and parsers (`fields`), and the settings
of one run built from flags and the file (`settings`).

`fields` is a leaf that strategies and summarizers declare their parameters with; `file` is built
from their registries, so this package's `__init__` imports nothing.
"""
