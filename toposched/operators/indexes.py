"""The Kopf indexes as the reconcilers read them: read-only mappings from an object's key to what
is kept of each object under it. The handler modules declare the indexes; the start-up handler
hands them to the reconcilers (``operators.main``)."""

from collections.abc import Collection, Mapping
from typing import Any

from toposched.operators.appgroup.status import PodView

Key = tuple[str, str]
"""(namespace, name): of the object itself, or of the AppGroup a member pod belongs to."""

Bodies = Mapping[Key, Collection[dict[str, Any]]]
"""The bodies of one kind of object as ``k8s.kept_body`` keeps them."""

PodViews = Mapping[Key, Collection[PodView]]
"""What the AppGroups' member pods say of themselves, by AppGroup."""
