"""Every git process contrib starts: the runner (a clean environment), repository
operations, a persistent blob reader, the upstream caches, worktrees handed to a
person, and the workspace's own repository.
"""
