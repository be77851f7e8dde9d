"""Fixtures for unit and integration tests alike."""

import shutil

import pytest

from testkit.certs import ExtenderPKI, extender_pki
from testkit.cluster import skip_or_fail


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ExtenderPKI:
    """The extender's certificates, as the chart makes them (a CA, schedhook's serving certificate,
    kube-scheduler's client certificate) and those the extender must refuse; one set per run."""
    if shutil.which("openssl") is None:
        skip_or_fail("the certificates are made with openssl: run `make test-tools`")
    return extender_pki(tmp_path_factory.mktemp("pki"))
