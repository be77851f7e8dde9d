"""Entry module of the operator suite: ``kopf run -m operators.main`` or ``toposched operator``.

Importing it registers every handler module; the start-up handler builds what they share.
"""

import asyncio
import gc
import logging
from typing import Any

import kopf
import prometheus_client

from toposched.kube import credentials
from toposched.kube.rest import connect
from toposched.operators import k8s
from toposched.operators.appgroup import handlers as appgroup_handlers
from toposched.operators.networktopology import handlers as networktopology_handlers
from toposched.operators.runtime import Runtime
from toposched.operators.settings import OperatorSettings

logger = logging.getLogger(__name__)


@kopf.on.login()
async def login(**_: Any) -> kopf.ConnectionInfo:
    """Kopf's watches use the identity toposched's own client uses (``kube.credentials``)."""
    creds = await asyncio.to_thread(lambda: credentials.load().refreshed())
    pair = creds.client_pair
    return kopf.ConnectionInfo(
        server=creds.server,
        ca_data=creds.ca.decode() if creds.ca else None,
        insecure=creds.insecure or None,
        certificate_data=pair[0].decode() if pair else None,
        private_key_data=pair[1].decode() if pair else None,
        token=creds.bearer,
        default_namespace=creds.namespace,
        # A rotating token (service account file, exec plugin): Kopf logs in again when it ends.
        expiration=creds.issued.expires if creds.issued else None,
    )


@kopf.on.startup()
async def start(
    settings: kopf.OperatorSettings,
    memo: Any,
    **kwargs: Any,
) -> None:
    config = OperatorSettings.from_env()
    # Replicas coordinate through a Lease (operators.leader), not Kopf peering objects.
    settings.peering.standalone = True
    settings.watching.server_timeout = 300
    # Kopf would post an Event for every handler log line at INFO; keep Events for what matters.
    settings.posting.level = logging.WARNING
    # Retry API errors every 2 s at most for about 30 s: a restarted apiserver is followed again
    # within 2 s of being back, and an outage of half a minute does not give up a watch.
    settings.networking.error_backoffs = [0.5, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]
    runtime = Runtime(settings=config, api=await connect())
    memo["runtime"] = runtime
    if config.metrics_port:
        prometheus_client.start_http_server(config.metrics_port, config.metrics_address)
    # Everything loaded so far lives as long as the process: keep the collector from rescanning it.
    gc.freeze()
    # Indexes reach every handler as keyword arguments; the reconciler keeps them for its
    # background runs (coalesced pod events, leadership changes).
    memo["appgroup_reconciler"] = appgroup_handlers.AppGroupReconciler(
        runtime, kwargs["appgroup_bodies"], kwargs["appgroup_pods"]
    )

    nt = networktopology_handlers.NetworkTopologyReconciler(
        runtime,
        kwargs["networktopology_bodies"],
        kwargs["appgroup_bodies"],
        kwargs["appgroup_pods"],
    )
    memo["networktopology_reconciler"] = nt
    runtime.tasks.append(asyncio.create_task(nt.resync_forever()))
    nodes = k8s.follow_nodes(runtime.api, nt.listed_nodes, nt.node_event, networktopology_handlers.node_slim)
    runtime.tasks.append(asyncio.create_task(nodes))

    async def elected() -> None:
        await memo["appgroup_reconciler"].reconcile_all()
        nt.poke_all()

    if config.leader_election:
        runtime.tasks.append(
            asyncio.create_task(
                runtime.leadership.run(runtime.api, config.lease_namespace, config.lease_name, config.identity, elected)
            )
        )
    else:
        runtime.leadership.grant_unconditionally()


@kopf.on.cleanup()
async def stop(memo: Any, **_: Any) -> None:
    runtime: Runtime | None = memo.get("runtime")
    if runtime is None:
        return
    for task in runtime.tasks:
        task.cancel()
    await asyncio.gather(*runtime.tasks, return_exceptions=True)
    for name in ("appgroup_reconciler", "networktopology_reconciler"):
        reconciler = memo.get(name)
        if reconciler is not None:
            await reconciler.coalescer.close()
    await runtime.api.close()
