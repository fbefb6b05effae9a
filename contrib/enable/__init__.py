"""``contrib enable``: draft the patch that opens a gate-only gate, from the audit."""
