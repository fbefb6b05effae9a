"""What an upstream's source says, read beneath validate and the audit.

Tree views, build profiles, JIT gates, `__CUDA_ARCH__` analysis, `#if`
evaluation, C scanning, includes, units, a patch's diff per file, the call
graph, and the PTX compile with its cache. Nothing here runs a stage or judges a
patchset: validate and the audit do that with what this package reads.
"""
