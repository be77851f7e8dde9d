"""Kopf operators of the suite: one module per CRD (AppGroup, NetworkTopology)."""
