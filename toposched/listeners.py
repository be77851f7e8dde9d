"""Where the components' servers listen unless told (every port also has an address flag)."""

import os


def default_address() -> str:
    """Every interface inside a pod, loopback elsewhere.

    A pod of the operator or schedhook has a network namespace of its own, reached through a
    Service (Prometheus, kube-scheduler, the apiserver), so all of its interfaces are meant to be
    reached. Anywhere else -- a developer's machine, a process run beside the local control plane
    -- nothing should be reachable from the network unless asked for. The node exporter does not
    use this: it may run on the host network, where "every interface" is the node's.
    """
    return "0.0.0.0" if os.environ.get("KUBERNETES_SERVICE_HOST") else "127.0.0.1"
