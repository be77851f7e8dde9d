"""Pure models of the toposched CRDs, shared by the operators, the exporter and schedhook.

Nothing here talks to Kubernetes: the models parse and dump plain dicts with the upstream
camelCase field names, so an object read from the apiserver round-trips unchanged.
"""
