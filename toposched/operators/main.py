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
from toposched.operators.appgroup.reconciler import AppGroupReconciler
from toposched.operators.appgroup.status import PodView
from toposched.operators.indexes import Key
from toposched.operators.memo import OperatorMemo
from toposched.operators.networktopology import handlers as networktopology_handlers
from toposched.operators.networktopology.reconciler import NetworkTopologyReconciler, node_slim
from toposched.operators.runtime import Runtime
from toposched.operators.settings import OperatorSettings
from toposched.settings import SettingsError

logger = logging.getLogger(__name__)

HANDLER_MODULES = (appgroup_handlers, networktopology_handlers)
"""Importing them registers their handlers and indexes with Kopf, in this order."""


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


# Kopf types an activity handler as taking **kwargs alone; it passes the indexes by their names.
@kopf.on.startup()  # type: ignore[arg-type]
async def start(
    settings: kopf.OperatorSettings,
    memo: OperatorMemo,
    appgroup_bodies: kopf.Index[Key, dict[str, Any]],
    appgroup_pods: kopf.Index[Key, PodView],
    networktopology_bodies: kopf.Index[Key, dict[str, Any]],
    **_: Any,
) -> None:
    """Builds what the handlers share. The indexes the handler modules declare reach every handler
    as keyword arguments, read here once; the reconcilers keep them for their background runs
    (coalesced pod events, leadership changes)."""
    if "settings" not in memo:  # under `kopf run -m`: no flags of ours
        try:
            memo.settings = OperatorSettings.from_env()
        except SettingsError as exc:  # the same again in a minute: stop, saying why
            raise kopf.PermanentError(str(exc)) from None
    config = memo.settings
    _configure_kopf(settings)
    runtime = Runtime(settings=config, api=await connect())
    appgroups = AppGroupReconciler(runtime, appgroup_bodies, appgroup_pods)
    nt = NetworkTopologyReconciler(runtime, networktopology_bodies, appgroup_bodies, appgroup_pods)
    memo.runtime, memo.appgroups, memo.networktopologies = runtime, appgroups, nt
    if config.metrics_port:
        prometheus_client.start_http_server(config.metrics_port, config.metrics_address)
    # Everything loaded so far lives as long as the process: keep the collector from rescanning it.
    gc.freeze()
    runtime.tasks.append(asyncio.create_task(nt.resync_forever()))
    runtime.tasks.append(asyncio.create_task(k8s.follow_nodes(runtime.api, nt.listed_nodes, nt.node_event, node_slim)))

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


def _configure_kopf(settings: kopf.OperatorSettings) -> None:
    # Replicas coordinate through a Lease (operators.leader), not Kopf peering objects.
    settings.peering.standalone = True
    settings.watching.server_timeout = 300
    # Kopf would post an Event for every handler log line at INFO; keep Events for what matters.
    settings.posting.level = logging.WARNING
    # Retry API errors every 2 s at most for about 30 s: a restarted apiserver is followed again
    # within 2 s of being back, and an outage of half a minute does not give up a watch.
    settings.networking.error_backoffs = [0.5, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]


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
