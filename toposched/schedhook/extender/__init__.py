"""The scheduler extender: kube-scheduler's filter, prioritize and bind calls for the toposched profile.

From the top: the HTTP adapter (``server``) hands each call to the ``coordinator``, which waits in
a filter for earlier binds (``bindwait``), keeps each pod's latest filter (``filtered``) and binds
through ``binding`` (reservations in the ledger, a node's bindings in prediction order:
``bindorder``). Placement runs on the ``clusterview``: snapshots (``snapshots``) of the object store
(``store``, fed by the watches in ``feed``) minus the NUMA reservations (``reservations``), with the
nodes the extender is blind to (``knowledge``). ``eventsink`` posts the Warning Events;
``clientauth`` admits kube-scheduler's client certificate only.
"""
