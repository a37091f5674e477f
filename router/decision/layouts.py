"""Which engine deployment serves which mode: the app's layout (`AppArgs.layout`).

- **split**: `BlockEngine` serves block and verified (verification rides on the same weights'
  commit pass), `AREngine` serves AR: two copies of the weights, each deployment scaled by Ray
  on its own; two CPU cores decode two modes at once.
- **shared**: one `SharedEngine` serves all three from one copy of the weights; its scheduler
  interleaves the modes' batches step by step (engines.replica.scheduler). A replica that dies takes
  every mode with it, so there is no other engine to fail over to: another replica of it, or a 503.

The gateway, the routing view and the router read the engine of a mode from the layout, never
from a fixed mapping. (`engines.types.ENGINE_OF_MODE` names the kind of pass a mode's work is
priced by in the cost profile, canvas or AR token: not a deployment.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engines.types import MODES


@dataclass(frozen=True)
class Layout:
    name: str  # "split" or "shared"
    deployments: Mapping[str, str]  # engine name (the gateway's key) -> its Ray Serve deployment name
    engine_of_mode: Mapping[str, str]  # mode -> the engine that serves it

    def engine(self, mode: str) -> str:
        """The engine that serves `mode`."""
        return self.engine_of_mode[mode]

    def modes(self, engine: str) -> list[str]:
        """The modes `engine` serves, in MODES order."""
        return [m for m in MODES if self.engine_of_mode[m] == engine]


SPLIT = Layout("split", {"block": "BlockEngine", "ar": "AREngine"}, {"block": "block", "verified": "block", "ar": "ar"})
SHARED = Layout("shared", {"shared": "SharedEngine"}, {m: "shared" for m in MODES})
LAYOUTS = {layout.name: layout for layout in (SPLIT, SHARED)}


class EngineViews(dict):
    """The routing view's snapshot (engine name -> `EngineView`), with the layout it was taken in."""

    def __init__(self, views: Mapping, layout: Layout = SPLIT):
        super().__init__(views)
        self.layout = layout


def engine_of(view: Mapping | None, mode: str) -> str:
    """The engine that serves `mode` in the layout `view` was taken in (a plain mapping: the split layout)."""
    return getattr(view, "layout", SPLIT).engine(mode)
