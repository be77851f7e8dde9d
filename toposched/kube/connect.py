"""An API client for the operators and schedhook: in-cluster service account, else the kubeconfig."""

import os

from kubernetes_asyncio import client, config
from kubernetes_asyncio.config.config_exception import ConfigException

PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")


async def connect(pool_size: int | None = None, read_environment: bool = True) -> client.ApiClient:
    """A client from the pod's service account when running in a cluster, else from the kubeconfig.

    ``pool_size`` raises the connection pool (a process that holds several watches open must not
    queue its requests behind them). ``read_environment=False`` stops the session from reading
    ~/.netrc and the proxy variables in a thread on every request, unless a proxy is set: for a
    process that sends many small requests that lookup was a sixth of its time.
    """
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
    except ConfigException:
        await config.load_kube_config(client_configuration=configuration)
    if pool_size is not None:
        configuration.connection_pool_maxsize = pool_size
    api = client.ApiClient(configuration)
    if not read_environment and not any(os.environ.get(v) for v in PROXY_VARIABLES):
        api.rest_client.pool_manager._trust_env = False
    return api
