"""schedhook: the part of toposched that makes placements.

- ``placement``: pure logic (the kubelet's admission predicted from NRTs, NUMA and network scores);
- ``extender``: kube-scheduler's extender endpoints over a watch-fed cache;
- ``webhooks``: admission webhooks that route and gate pods;
- ``controllers``: background loops that release topology-order gates and remediate rejections;
- ``explain``: the same placement logic as a command, on files.
"""
