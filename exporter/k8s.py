"""The exporter's one layer that connects to the Kubernetes API."""

from kubernetes_asyncio import client, config
from kubernetes_asyncio.config.config_exception import ConfigException


async def connect() -> client.ApiClient:
    """An API client from the in-cluster service account, else from the kubeconfig."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
    except ConfigException:
        await config.load_kube_config(client_configuration=configuration)
    return client.ApiClient(configuration)
