"""toposched: topology-aware Kubernetes scheduling (NUMA zones and network costs)."""

__version__ = "0.1.0"
