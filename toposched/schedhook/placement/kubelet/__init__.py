"""The kubelet's admission, predicted: every kubelet rule toposched follows is written here, once.

As the kubelet keeps them: ``claims`` (what each resource manager takes of a pod, its QoS class and
pod-scope sums), ``facts`` (what a node's NRT tells the managers, derived once per node),
``cpumanager`` with ``cpuassignment`` (the static policy and its packed allocator) and
``distribute``, ``memorymanager``, ``devicemanager``, ``hints`` (the managers' topology hints, over
arrays, for one node or many), ``topologymanager`` (the merge and the policies), ``state`` (one
node's managers while a pod is admitted), ``admission`` (``predict``, the whole decision) and
``reasons`` (why a pod is rejected). The columnar fast path (``placement.columnar``) reads the
same facts and calls the same hint, merge and reason functions on its columns.
"""
