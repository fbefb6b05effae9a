"""Shared test helpers: real git fixtures, the fake GitHub, scenes (pre-commit's `testing/`)."""
