"""The scheduler extender: kube-scheduler's filter, prioritize and bind calls for the toposched
profile (server), answered from a watch-fed cache of the cluster (cache) that owns the ledger of
NUMA reservations for pods bound ahead of their node's NRT (reservations)."""
