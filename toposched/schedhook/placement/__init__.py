"""Placement logic shared by the extender, the explain command and the benchmarks. Pure."""
