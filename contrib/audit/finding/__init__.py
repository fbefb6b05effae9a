"""Finding: each gate of a Python file, what it does to the target, and what it guards."""
