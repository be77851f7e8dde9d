"""Development kit shared by tests/ and bench/ (never imported by toposched/, never shipped).

Fakes of what toposched talks to (a PodResources server, sysfs trees), builders of NRTs, pods and
placement models, the simulated kubelet of the kwok benchmarks, and helpers for the local cluster.
"""
