"""The analyses and stages behind ``contrib validate``.

Every analysis reports :class:`~contrib.record.finding.Finding` objects
(file:line, severity, message); a ``[[waivers]]`` entry of patchset.toml marks a
finding waived, with its reason, and a waived finding is still reported.
"""
