"""Small Kubernetes helpers shared by the schedhook loops."""

import logging
from datetime import UTC, datetime

from kubernetes_asyncio import client

logger = logging.getLogger(__name__)

COMPONENT = "toposched-schedhook"


async def pod_event(core: client.CoreV1Api, pod: client.V1Pod, reason: str, message: str) -> None:
    """A Warning Event on the pod; losing one is logged, not fatal."""
    now = datetime.now(UTC)
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name=f"{pod.metadata.name}.", namespace=pod.metadata.namespace),
        involved_object=client.V1ObjectReference(
            api_version="v1", kind="Pod", name=pod.metadata.name, namespace=pod.metadata.namespace, uid=pod.metadata.uid
        ),
        type="Warning",
        reason=reason,
        message=message,
        first_timestamp=now,
        last_timestamp=now,
        count=1,
        source=client.V1EventSource(component=COMPONENT),
    )
    try:
        await core.create_namespaced_event(pod.metadata.namespace, event)
    except client.ApiException as exc:
        logger.warning("could not post a %s event on %s: %s", reason, pod.metadata.name, exc.reason)
