"""The errors testkit.realnode raises, each saying what went wrong and what to do about it."""

from __future__ import annotations


class RealNodeError(RuntimeError):
    """A real node could not be set up, started or torn down."""


class MissingToolError(RealNodeError):
    """A host tool real nodes need is not installed."""

    def __init__(self, what: str, package: str, how: str = "") -> None:
        self.what = what
        self.package = package
        how = how or f"install {package} with `make test-tools` (runs hack/install-node-tools.sh as root)"
        super().__init__(f"missing {what}: {how}")


class KubeletDiedError(RealNodeError):
    """A node's kubelet (or its containerd) exited, or did not come up in time; the message carries the
    tails of its logs."""
