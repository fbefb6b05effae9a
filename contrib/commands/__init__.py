"""One module per command; each exposes a function returning an exit code."""
