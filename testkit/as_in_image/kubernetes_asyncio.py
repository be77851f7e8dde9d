"""Stands in for the generated Kubernetes client, which the operator's image does not install.

Operators started by the tests and benchmarks run with this directory first on their path
(``testkit.cluster.as_in_image``): Kopf imports the client whenever it can (only to recognise its
objects and offer a login handler that toposched replaces), and in the development environment,
which has it for the tests, it would add about 35 MiB to the operator's RSS that the image never
carries (98 instead of 64 MiB once started and watching).
"""

raise ImportError("kubernetes_asyncio is not installed where the operator runs (its image)")
