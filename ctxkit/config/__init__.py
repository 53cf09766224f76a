"""Configuration: the YAML file (`file`) and the settings of one run built from flags and the
file (`settings`).

Its typed fields and parsers are `ctxkit.fields`, a leaf that strategies and summarizers declare
their parameters with; `file` is built from their registries and sits above them, so this
package's `__init__` imports nothing.
"""
