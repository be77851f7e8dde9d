"""Development kit shared by tests/ and bench/ (never imported by toposched/, never shipped).

Fakes of what toposched talks to (a PodResources server, sysfs trees), builders of NRTs, AppGroups,
pods, nodes and placement models, the simulated kubelet of the kwok benchmarks, helpers for the
local cluster, and ``testkit.realnode``: real kubelets with fake NUMA topologies as nodes of the
local cluster.
"""
