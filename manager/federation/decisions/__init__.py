"""What the federation decides, as pure functions of facts: each module one decision, table-
tested; import-linter keeps this package free of clients and writers.
"""
