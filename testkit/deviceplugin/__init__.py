"""A device plugin for the real kubelet nodes of :mod:`testkit.realnode` (dev and test only).

It speaks the kubelet's device plugin API v1beta1 over gRPC (stubs in ``_generated/``, made by
``hack/gen-proto.sh`` from ``_generated/api.proto``) and serves every resource of a node's
:class:`~testkit.realnode.devices.NodeDevices`: one socket and one ``Register`` per resource, as
real plugins do. ``testkit.realnode.device_plugin`` starts it as ``python -m testkit.deviceplugin``
in the node's cgroups; nothing in ``testkit.realnode`` imports this package, so real nodes work
without gRPC until a node has devices.
"""
