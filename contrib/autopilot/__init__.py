"""The unattended loop: one run's state, its PR step, the dashboard issue, and the
GitHub Actions workflow that runs it.
"""
