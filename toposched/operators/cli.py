"""``toposched operator``: run every operator handler of the suite (as ``kopf run -m toposched.operators.main``)."""

import argparse
from typing import Any, cast

from toposched.operators.settings import OperatorSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    OperatorSettings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    settings = OperatorSettings.from_args(args)
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
