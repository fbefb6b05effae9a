"""How a walk follows the settings it meets, chosen by its caller when the walker is made.

A gate's walk (:mod:`contrib.audit.stack.link`) follows only the flags its code sets
(``self.flag = True``).  A feature's walk (:mod:`contrib.audit.feature.chain`) follows a
setting's value too: where a function binds it (``backend = getattr(args, "x")``) and
a string it is set to (``args.x = "auto"``); and it leaves out the reads of a setting
that another program of the tree declares under the same name (sglang's
``multimodal_gen/`` has a ``ServerArgs`` of its own with an ``attention_backend``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Mode:
    """``values``: the walk follows settings' values (a feature's), not only flags set
    True (a gate's); ``elsewhere``: per setting, the folders whose reads of it are
    another program's, as sorted pairs."""

    values: bool = False
    elsewhere: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def features(cls, elsewhere: Mapping[str, tuple[str, ...]]) -> Mode:
        """A feature's walk, with the folders ``elsewhere`` reading each setting as another
        program's (:func:`~contrib.audit.feature.declared.settings_elsewhere`)."""
        return cls(True, tuple(sorted(elsewhere.items())))

    @cached_property
    def _folders(self) -> dict[str, tuple[str, ...]]:
        return dict(self.elsewhere)

    def folders_elsewhere(self, attr: str) -> tuple[str, ...]:
        """The folders whose reads of setting ``attr`` are not the server's."""
        return self._folders.get(attr, ())


GATES = Mode()  # a gate's walk: flags only
