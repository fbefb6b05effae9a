"""The sync engine: patch series carried onto a new upstream commit (3-way, never
fuzz), upstreamed and breaking commits found, conflicts handed over and resumed,
versions written, edits taken back, and what a sync reports.
"""
