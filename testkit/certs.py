"""Test certificates made with openssl: a CA, serving certificates for 127.0.0.1 and client certificates.

What the chart generates for a release, for processes that run on this machine: schedhook serves
the extender and the webhooks with a certificate for 127.0.0.1, and kube-scheduler calls the
extender with a client certificate of the same CA (common name ``toposched-scheduler``, the
extender's default). ``extender_pki`` also makes the certificates the extender must refuse.
"""

import subprocess
from dataclasses import dataclass
from pathlib import Path

from toposched.schedhook.settings import DEFAULT_CLIENT

SCHEDULER_CLIENT = DEFAULT_CLIENT
"""kube-scheduler's common name: the one the extender accepts by default (``--extender-client-name``)."""


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class ExtenderPKI:
    ca: Path
    """The CA of every certificate below but ``stranger``: the webhooks' caBundle, the extender's client CA."""
    serving: KeyPair
    """schedhook's certificate for 127.0.0.1 and localhost."""
    scheduler: KeyPair
    """kube-scheduler's client certificate."""
    impostor: KeyPair
    """A client certificate of the right CA with another name."""
    stranger: KeyPair
    """A client certificate with the scheduler's name from another CA."""


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _new_key(key: Path) -> None:
    # EC keys: generated in milliseconds, where RSA takes a good part of a second each.
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key))


def make_ca(directory: Path, name: str) -> KeyPair:
    pair = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
    _new_key(pair.key)
    _openssl(
        *("req", "-x509", "-new", "-key", str(pair.key), "-days", "2", "-subj", f"/CN={name}"),
        *("-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"),
        *("-out", str(pair.cert)),
    )
    return pair


def issue(ca: KeyPair, directory: Path, name: str, server: bool) -> KeyPair:
    """A certificate signed by ``ca``: for a server (127.0.0.1, localhost) or a client (common name ``name``)."""
    pair = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
    _new_key(pair.key)
    csr, extensions = directory / f"{name}.csr", directory / f"{name}.ext"
    _openssl("req", "-new", "-key", str(pair.key), "-subj", f"/CN={name}", "-out", str(csr))
    usage = "serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost" if server else "clientAuth"
    extensions.write_text(f"basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage={usage}\n")
    _openssl(
        *("x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key), "-CAcreateserial"),
        *("-days", "2", "-extfile", str(extensions), "-out", str(pair.cert)),
    )
    return pair


def extender_pki(directory: Path) -> ExtenderPKI:
    directory.mkdir(parents=True, exist_ok=True)
    ca = make_ca(directory, "toposched-ca")
    (directory / "other").mkdir(exist_ok=True)
    other = make_ca(directory / "other", "other-ca")
    return ExtenderPKI(
        ca=ca.cert,
        serving=issue(ca, directory, "schedhook", server=True),
        scheduler=issue(ca, directory, SCHEDULER_CLIENT, server=False),
        impostor=issue(ca, directory, "someone-else", server=False),
        stranger=issue(other, directory / "other", SCHEDULER_CLIENT, server=False),
    )
