"""A patchset's pull request: opening and updating it, its title and body, and what
GitHub says about it now.
"""
