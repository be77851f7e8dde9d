"""``toposched operator``: run every operator handler of the suite (same as ``kopf run -m operators.main``)."""

import argparse
import os
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="watch only this namespace (repeatable; glob patterns allowed); default: all namespaces",
    )
    parser.add_argument(
        "--liveness",
        metavar="URL",
        default=None,
        help="serve a liveness probe, e.g. http://0.0.0.0:8080/healthz",
    )
    parser.add_argument(
        "--metrics-address",
        default=None,
        help="metrics listen address ($TOPOSCHED_METRICS_ADDRESS; default: all interfaces in a pod, else 127.0.0.1)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def run(args: argparse.Namespace) -> int:
    # Kopf imports kubernetes_asyncio, when it is installed, only to offer a login handler that
    # operators.main replaces; in this process it would cost about 60 MiB of generated models.
    sys.modules.setdefault("kubernetes_asyncio", None)  # type: ignore[arg-type]
    import kopf
    from kopf._core.engines.peering import Identity  # a NewType of str that kopf does not export

    import toposched.operators.main  # noqa: F401  (registers the handlers)
    from toposched.kube import credentials

    # Unusable credentials stop the command here with one line (toposched.cli); inside Kopf they
    # would be a login retried for ever, with a traceback each time.
    credentials.load().ssl_context()
    from toposched.operators.settings import OperatorSettings

    if args.metrics_address:  # the settings are read from the environment (as under `kopf run -m`)
        os.environ["TOPOSCHED_METRICS_ADDRESS"] = args.metrics_address

    kopf.configure(verbose=args.verbose)
    kopf.run(
        # Kopf would name itself after the login user: an image's numeric user has no passwd entry.
        identity=Identity(OperatorSettings.from_env().identity),
        standalone=True,
        clusterwide=not args.namespace,
        namespaces=args.namespace,
        liveness_endpoint=args.liveness,
    )
    return 0
