"""A DRA driver for the real kubelet nodes of :mod:`testkit.realnode` (dev and test only).

It speaks the kubelet's plugin registration API v1 and DRA plugin API v1 over gRPC (stubs in
``_generated/``, made by ``hack/gen-proto.sh`` from ``_generated/*.proto``), and publishes the
node's ResourceSlices through the API server: one process serves every driver of a node's
:class:`~testkit.realnode.dra.NodeDRA`. ``testkit.realnode.dra_driver`` starts it as
``python -m testkit.dra`` in the node's cgroups after the kubelet; nothing in ``testkit.realnode``
imports this package.
"""
