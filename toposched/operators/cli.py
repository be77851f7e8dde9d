"""``toposched operator``: run every operator handler of the suite (as ``kopf run -m toposched.operators.main``)."""

import argparse
import contextlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any, cast

from toposched.operators.settings import OperatorSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    OperatorSettings.add_arguments(parser)


class _NotInstalled(importlib.abc.MetaPathFinder):
    """Finds ``package`` missing, as it is in the operator's image."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] == self.package:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


@contextlib.contextmanager
def _not_installed(package: str) -> Iterator[None]:
    finder = _NotInstalled(package)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def run(args: argparse.Namespace) -> int:
    settings = OperatorSettings.from_args(args)
    # Kopf imports kubernetes_asyncio when it is installed, to recognise its objects and to offer
    # a login handler that operators.main replaces. The image does not install it; a development
    # venv does (tests, benchmarks), and there it would add 35 MiB to the operator's RSS: 98 MiB
    # instead of 64 MiB once started and watching, which the benchmarks' footprint would count.
    # Kopf looks for it only while it and the handlers are imported.
    with _not_installed("kubernetes_asyncio"):
        import kopf

        import toposched.operators.main  # noqa: F401  (registers the handlers)
    from toposched.kube import credentials
    from toposched.operators.memo import OperatorMemo

    # Unusable credentials stop the command here with one line (toposched.cli); inside Kopf they
    # would be a login retried for ever, with a traceback each time.
    credentials.load().ssl_context()
    kopf.configure(verbose=settings.verbose)
    kopf.run(
        # Kopf would name itself after the login user: an image's numeric user has no passwd entry.
        # kopf.run takes a str here (its type, peering.Identity, is a NewType Kopf does not export).
        identity=cast(Any, settings.identity),
        standalone=True,
        clusterwide=not settings.namespaces,
        namespaces=list(settings.namespaces),
        liveness_endpoint=settings.liveness,
        memo=OperatorMemo(settings=settings),
    )
    return 0
