"""The audit: every architecture gate of an upstream tree, judged for one target GPU.

:mod:`contrib.audit.find` finds the gates in Python (validate's gate parser) and
decides which ones turn the target away; :mod:`contrib.audit.classing.judge` looks
behind each JIT gate at the CUDA it builds (validate's arch-guard analysis);
:mod:`contrib.audit.coverage` ties gates to patchsets and to upstream history;
:mod:`contrib.audit.engine` runs it all on a tree of the upstream cache, with a
result cache keyed by tree sha and contrib version.
"""
