"""GitHub behind one protocol: the protocol and its value objects (``api``), the
PyGithub implementation (``github``, ``http``, ``shapes``), the recorder that is
every dry run (``recording``), and the one place a forge is made (``connect``).
"""
