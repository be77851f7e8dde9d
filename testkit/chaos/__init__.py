"""A long fault run of toposched, repeatable from a seed (``hack/chaos.sh``, ``python -m testkit.chaos``).

On a control plane of its own (``plane``: its apiserver is killed, the shared one never), real
kubelet nodes and kwok nodes with an exporter each, the operators, and the extender with a real
kube-scheduler (``scene``) take a steady stream of pods (``stream``) while faults come one after
another from a seeded schedule (``schedule``, ``faults``): exporter kill and restart, NRT delete,
Node delete and recreate, apiserver kill -9, the largest NRT rewritten every 100 ms, kubelet
restart, expired watches (410 Gone). ``run`` ends with one line: pods placed, the real kubelets'
TopologyAffinityErrors, pods wrongly passed while blind, the longest recovery, the extender's RSS
at start and end, tracebacks in the components' logs.
"""
