"""The stack below: an upstream's gates followed into the upstream version it pins."""
