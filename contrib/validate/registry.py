"""The table of validate's stages: their order, and which ones open-pr needs by default.

Kept apart from the stages themselves on purpose: ``status`` and ``open-pr``
read it for every patchset (which stages a record must have passed), while
:mod:`contrib.validate.stages` loads the whole analysis machinery, several
times the cost of the rest of a ``status`` (issue 12).  Stage ``NAME`` runs
``contrib.validate.stages.stage_NAME`` (dashes as underscores).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contrib.validate.report import StageResult
    from contrib.validate.stages import Context


@dataclass(frozen=True)
class StageDef:
    """One row of the stage table: its name and whether open-pr needs it."""

    name: str
    required: bool  # in the default ``[validation] require``

    @property
    def run(self) -> Callable[[Context], StageResult]:
        """The stage's function, ``stages.stage_<name>``."""
        from contrib.validate import stages

        run: Callable[[Context], StageResult] = getattr(
            stages, "stage_" + self.name.replace("-", "_"))
        return run


STAGES: tuple[StageDef, ...] = (
    StageDef("apply", required=True),
    StageDef("syntax", required=True),
    StageDef("gates", required=True),
    StageDef("arch-guards", required=True),
    StageDef("ptx", required=True),
    StageDef("tests", required=False),
    StageDef("requires", required=False),
)
