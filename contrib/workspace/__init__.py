"""The workspace on disk: where things live, ``contrib.toml``, the ``patchset.toml``
schema and its one TOML reader, patchsets and their versions, transactions and locks.

Nothing here runs git or talks to GitHub; every layer above reads the workspace
through these types.
"""
