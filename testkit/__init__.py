"""Development helpers for toposched's tests and benchmarks (never imported by the product).

``testkit.realnode`` runs real kubelets with fake NUMA topologies as nodes of the local cluster.
"""
