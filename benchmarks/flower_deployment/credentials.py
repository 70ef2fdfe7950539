"""Credentials for a TLS deployment on loopback, made at run time (nothing secret is in
the repository): a certificate authority, the SuperLink's certificate for 127.0.0.1
and localhost, and one SuperNode key pair per name (ECDSA on NIST P-384, OpenSSH
format, as ``flower-supernode --auth-supernode-private-key`` and ``flwr supernode
register`` read them).

    python credentials.py FOLDER NAME [NAME ...]

writes ``FOLDER/ca.crt``, ``FOLDER/server.pem``, ``FOLDER/server.key`` and, per name,
``FOLDER/NAME`` (private key) and ``FOLDER/NAME.pub``. For a loopback run only: a
consortium's certificates come from its own authority.
"""

import datetime
import ipaddress
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALID_FOR = datetime.timedelta(days=1)


def _certificate(subject, public_key, issuer, issuer_key, *, authority, names=()):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(public_key)
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + VALID_FOR)
               .add_extension(x509.BasicConstraints(ca=authority, path_length=None),
                              critical=True))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(names)),
                                        critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def write_credentials(folder, node_names):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    authority_key = ec.generate_private_key(ec.SECP384R1())
    authority = _certificate("skfedkt loopback CA", authority_key.public_key(),
                             "skfedkt loopback CA", authority_key, authority=True)
    server_key = ec.generate_private_key(ec.SECP384R1())
    server = _certificate(
        "127.0.0.1", server_key.public_key(), "skfedkt loopback CA", authority_key,
        authority=False, names=[x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                x509.DNSName("localhost")])
    (folder / "ca.crt").write_bytes(authority.public_bytes(serialization.Encoding.PEM))
    (folder / "server.pem").write_bytes(server.public_bytes(serialization.Encoding.PEM))
    (folder / "server.key").write_bytes(_pem_key(server_key))
    for name in node_names:
        key = ec.generate_private_key(ec.SECP384R1())
        (folder / name).write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption()))
        (folder / f"{name}.pub").write_bytes(key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH))
    for path in folder.iterdir():
        path.chmod(0o600)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    write_credentials(sys.argv[1], sys.argv[2:])
