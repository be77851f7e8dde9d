"""Entry module of the operator suite: ``kopf run -m toposched.operators.main`` or ``toposched operator``.

Importing it registers every handler module; the start-up handler builds what they share and
puts it in Kopf's memo (``operators.memo``).
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
from toposched.operators.memo import OperatorMemo
from toposched.operators.networktopology import handlers as networktopology_handlers
from toposched.operators.runtime import Runtime
from toposched.operators.settings import OperatorSettings
from toposched.settings import SettingsError

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
async def start(settings: kopf.OperatorSettings, memo: OperatorMemo, **kwargs: Any) -> None:
    if "settings" not in memo:  # under `kopf run -m`: no flags of ours
        try:
            memo.settings = OperatorSettings.from_env()
        except SettingsError as exc:  # the same again in a minute: stop, saying why
            raise kopf.PermanentError(str(exc)) from None
    config = memo.settings
    # Replicas coordinate through a Lease (operators.leader), not Kopf peering objects.
    settings.peering.standalone = True
    settings.watching.server_timeout = 300
    # Kopf would post an Event for every handler log line at INFO; keep Events for what matters.
    settings.posting.level = logging.WARNING
    # Retry API errors every 2 s at most for about 30 s: a restarted apiserver is followed again
    # within 2 s of being back, and an outage of half a minute does not give up a watch.
    settings.networking.error_backoffs = [0.5, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]
    runtime = Runtime(settings=config, api=await connect())
    # Indexes reach every handler as keyword arguments; the reconcilers keep them for their
    # background runs (coalesced pod events, leadership changes).
    appgroups = appgroup_handlers.AppGroupReconciler(runtime, kwargs["appgroup_bodies"], kwargs["appgroup_pods"])
    nt = networktopology_handlers.NetworkTopologyReconciler(
        runtime,
        kwargs["networktopology_bodies"],
        kwargs["appgroup_bodies"],
        kwargs["appgroup_pods"],
    )
    memo.runtime, memo.appgroups, memo.networktopologies = runtime, appgroups, nt
    if config.metrics_port:
        prometheus_client.start_http_server(config.metrics_port, config.metrics_address)
    # Everything loaded so far lives as long as the process: keep the collector from rescanning it.
    gc.freeze()
    runtime.tasks.append(asyncio.create_task(nt.resync_forever()))
    nodes = k8s.follow_nodes(runtime.api, nt.listed_nodes, nt.node_event, networktopology_handlers.node_slim)
    runtime.tasks.append(asyncio.create_task(nodes))

    async def elected() -> None:
        await appgroups.reconcile_all()
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
async def stop(memo: OperatorMemo, **_: Any) -> None:
    if "runtime" not in memo:  # the start-up did not get that far
        return
    runtime = memo.runtime
    for task in runtime.tasks:
        task.cancel()
    await asyncio.gather(*runtime.tasks, return_exceptions=True)
    await memo.appgroups.coalescer.close()
    await memo.networktopologies.coalescer.close()
    await runtime.api.close()
