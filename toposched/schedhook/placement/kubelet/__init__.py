"""The kubelet's admission, predicted: every kubelet rule toposched follows is written here, once.

``claims`` (what each resource manager takes), ``hints`` (the managers' topology hints, over
arrays, for one node or many), ``topologymanager`` (the merge and the policies), ``state`` (one
node's managers while a pod is admitted) and ``admission`` (``predict``, the whole decision). The
columnar fast path (``placement.columnar``) calls the same hint and merge functions on its columns.
"""
