"""NRTs validated as they arrive in the first lists, while the rest of the cluster streams in, and
taken by the snapshot builder when it parses everything at warm-up (``Coordinator.warm``). Pure.

Validating an NRT (its model) is most of what parsing it costs, and the lists leave the extender
waiting on the apiserver most of the time: done then, it is off the path between the last list and
Ready. The view of an NRT also holds its node's allocatable, so it is still made at warm-up.
"""

from typing import Any

from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.schedhook.extender.store import object_key


class ParsedAhead:
    def __init__(self) -> None:
        self._nrts: dict[str, tuple[object, NodeResourceTopology]] = {}
        """Store key -> (resourceVersion, model) of NRTs validated on arrival, not yet taken."""

    def arrived(self, kind: str, obj: dict[str, Any]) -> None:
        """An object of a first list has arrived: an NRT is validated now. One that does not
        validate is left to the builder, which says why (once per version)."""
        if kind != "nrts":
            return
        try:
            key, model = object_key(obj), NodeResourceTopology.model_validate(obj)
        except Exception:  # the builder validates it again and reports it
            return
        self._nrts[key] = (obj["metadata"].get("resourceVersion"), model)

    def nrt(self, key: str, body: dict[str, Any]) -> NodeResourceTopology:
        """The model of NRT ``body``: the one validated on arrival when it is of this version."""
        found = self._nrts.pop(key, None)
        if found is not None and found[0] == body["metadata"].get("resourceVersion"):
            return found[1]
        return NodeResourceTopology.model_validate(body)

    def clear(self) -> None:
        """Forget what was not taken (the start is over)."""
        self._nrts.clear()
