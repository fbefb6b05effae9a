"""Features: what a user turns on (a server's setting, a library's API), followed across
the stack to one verdict per arch, for the audit's feature table and ``contrib why``.
"""
