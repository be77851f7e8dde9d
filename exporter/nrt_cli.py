"""``toposched nrt``: print the NodeResourceTopology the exporter would publish, without a cluster."""

from exporter.cli import add_nrt_arguments as add_arguments
from exporter.cli import run_nrt as run

__all__ = ["add_arguments", "run"]
