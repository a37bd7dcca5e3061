"""Certificates and keys for the local control plane, generated on the fly with openssl.

Nothing here is committed: every cluster start writes a fresh CA, an API-server serving
certificate, an admin client certificate (group system:masters) and the service-account key
pair into the cluster's state directory.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def generate(
    directory: Path, hosts: list[str], ips: list[str], ca_name: str = "dmrollout-local-ca"
) -> Pki:
    """``ca_name``: the CA's common name; clusters side by side (localenv.multicluster) each
    name theirs, so a certificate error says which cluster's CA it was about."""
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    _openssl("genrsa", "-out", "ca.key", "2048", cwd=d)
    _openssl(
        "req", "-x509", "-new", "-nodes", "-key", "ca.key", "-days", "3650",
        "-subj", f"/CN={ca_name}", "-out", "ca.crt", cwd=d,
    )  # fmt: skip
    san = ",".join([f"DNS:{h}" for h in hosts] + [f"IP:{ip}" for ip in ips])
    (d / "serving.ext").write_text(
        f"subjectAltName={san}\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n"
    )
    (d / "client.ext").write_text(
        "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n"
    )
    for name, subj, ext in (
        ("serving", "/CN=kube-apiserver", "serving.ext"),
        ("admin", "/O=system:masters/CN=dmrollout-admin", "client.ext"),
    ):
        _openssl("genrsa", "-out", f"{name}.key", "2048", cwd=d)
        _openssl("req", "-new", "-key", f"{name}.key", "-subj", subj, "-out", f"{name}.csr", cwd=d)
        _openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "3650", "-extfile", ext, "-out", f"{name}.crt", cwd=d,
        )  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    return Pki(
        ca_cert=d / "ca.crt",
        ca_key=d / "ca.key",
        serving_cert=d / "serving.crt",
        serving_key=d / "serving.key",
        admin_cert=d / "admin.crt",
        admin_key=d / "admin.key",
        sa_key=d / "sa.key",
        sa_pub=d / "sa.pub",
    )
