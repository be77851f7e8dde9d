"""Scheduler extender and admission webhooks that place pods NUMA- and network-aware."""
