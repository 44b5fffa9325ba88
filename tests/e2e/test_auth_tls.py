"""Tokens and TLS end to end: real server processes, real gRPC, certificates made here.

One server per configuration (token over plaintext, TLS with a token file, mutual TLS), each
shared by the tests of that configuration; a Spark JVM boots with each, so there are few.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2_grpc

from pomoview.client import AsyncClient, Unauthenticated, Unavailable
from pomoview.server.api.security import ServerSecurity, is_loopback
from pomoview.server.cli.commands import main

from .server_process import VOTES, ServerProcess

TOKEN = "s3cret-token-for-tests"


# ---------------------------------------------------------------- certificates


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    usage: x509.ObjectIdentifier | None = None,
) -> x509.Certificate:
    """A CA certificate (issuer None: self-signed) or a leaf for 127.0.0.1 and localhost."""
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer[0].subject if issuer else _name(subject))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is None:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        assert usage is not None
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


@dataclass
class Pki:
    ca: Path  # signs the server's and the client's certificates
    server_cert: Path
    server_key: Path
    client_cert: bytes
    client_key: bytes
    other_ca: bytes  # signed nothing here

    @property
    def ca_pem(self) -> bytes:
        return self.ca.read_bytes()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    out = Path(tmp_path_factory.mktemp("pki"))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("pomoview test CA", ca_key, None)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert("pomoview test server", server_key, (ca, ca_key), ExtendedKeyUsageOID.SERVER_AUTH)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert("pomoview test client", client_key, (ca, ca_key), ExtendedKeyUsageOID.CLIENT_AUTH)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other = _cert("another CA", other_key, None)
    pem = serialization.Encoding.PEM
    (out / "ca.pem").write_bytes(ca.public_bytes(pem))
    (out / "server.pem").write_bytes(server.public_bytes(pem))
    (out / "server.key").write_bytes(_pem_key(server_key))
    return Pki(
        ca=out / "ca.pem",
        server_cert=out / "server.pem",
        server_key=out / "server.key",
        client_cert=client.public_bytes(pem),
        client_key=_pem_key(client_key),
        other_ca=other.public_bytes(pem),
    )


# ---------------------------------------------------------------- servers


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Plaintext on 127.0.0.1, the token from POMOVIEW_TOKEN: the README's first setup."""
    data = Path(tmp_path_factory.mktemp("token")) / "data"
    server = ServerProcess(data, program=VOTES, env={"POMOVIEW_TOKEN": TOKEN}).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[ServerProcess]:
    """TLS, the token from --token-file, no client certificates asked for."""
    base = Path(tmp_path_factory.mktemp("tls"))
    (base / "token").write_text(TOKEN + "\n")
    args = ["--token-file", str(base / "token"), "--tls-cert", str(pki.server_cert)]
    server = ServerProcess(
        base / "data", extra_args=args, env={"POMOVIEW_TLS_KEY": str(pki.server_key)}
    ).start()
    yield server
    server.kill()  # it holds no writes; a graceful stop would wait for its Spark JVM to boot


@pytest.fixture(scope="module")
def mtls_server(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[ServerProcess]:
    """Mutual TLS without a token: the client certificate is the credential."""
    data = Path(tmp_path_factory.mktemp("mtls")) / "data"
    args = ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]
    args += ["--tls-client-ca", str(pki.ca)]
    server = ServerProcess(data, extra_args=args).start()
    yield server
    server.kill()  # as tls_server


# ---------------------------------------------------------------- a token over plaintext


def test_a_good_token_writes_and_looks_up(token_server: ServerProcess) -> None:
    with token_server.client(token=TOKEN) as db:
        db.write("article", insert=[{"id": 1, "title": "one"}])
        epoch = db.write("vote", insert=[{"article_id": 1, "user_id": u} for u in range(3)])
        assert db.lookup("articleWithVotes", {"id": 1}, min_epoch=epoch) == [
            {"id": 1, "title": "one", "votes": 3}
        ]

    async def from_asyncio() -> list[dict[str, object]]:
        async with AsyncClient(token_server.address, token=TOKEN) as db:
            return await db.lookup("articleWithVotes", {"id": 1}, min_epoch=epoch)

    assert asyncio.run(from_asyncio()) == [{"id": 1, "title": "one", "votes": 3}]
    log = token_server.log_path.read_text()
    assert "auth=bearer token (env POMOVIEW_TOKEN), tls=off" in log
    assert TOKEN not in log


def test_a_call_without_a_token_is_unauthenticated(token_server: ServerProcess) -> None:
    with token_server.client() as db:
        with pytest.raises(Unauthenticated, match="missing token") as caught:
            db.lookup("articleWithVotes", {"id": 1})
        assert caught.value.code == grpc.StatusCode.UNAUTHENTICATED
        # A server-streaming call is refused the same way, before the file is looked at.
        with pytest.raises(Unauthenticated, match="missing token"):
            db.load("article", "/no/such/file.csv")

    async def from_asyncio() -> None:
        async with AsyncClient(token_server.address) as db:
            await db.stats()

    with pytest.raises(Unauthenticated, match="missing token"):
        asyncio.run(from_asyncio())


def test_a_wrong_token_is_unauthenticated(token_server: ServerProcess) -> None:
    with token_server.client(token="not-" + TOKEN) as db:
        with pytest.raises(Unauthenticated, match="wrong token") as caught:
            db.write("article", insert=[{"id": 2, "title": "two"}])
    assert "not-" + TOKEN not in str(caught.value) and TOKEN not in str(caught.value)
    with grpc.insecure_channel(token_server.address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        # A streaming call is refused before its first message, even if none ever comes.
        call = stub.ServerReflectionInfo(iter([]), metadata=[("authorization", f"Basic {TOKEN}")], timeout=30)
        with pytest.raises(grpc.RpcError) as raw:
            list(call)
    assert raw.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "malformed" in raw.value.details()


def test_health_checks_need_no_token(token_server: ServerProcess) -> None:
    with grpc.insecure_channel(token_server.address) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_the_cli_sends_the_token_from_the_environment_or_a_file(
    token_server: ServerProcess,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("POMOVIEW_TOKEN", raising=False)
    lookup = ["lookup", "--address", token_server.address, "articleWithVotes", "id=1"]
    assert main(lookup) == 1
    err = capsys.readouterr().err
    assert "error: UNAUTHENTICATED: missing token" in err and "--token-file FILE or POMOVIEW_TOKEN" in err
    monkeypatch.setenv("POMOVIEW_TOKEN", TOKEN)
    assert main(lookup) == 0
    assert capsys.readouterr().out == '{"id": 1, "title": "one", "votes": 3}\n'
    (tmp_path / "token").write_text("wrong\n")
    assert main([*lookup, "--token-file", str(tmp_path / "token")]) == 1  # the file wins
    assert "error: UNAUTHENTICATED: wrong token" in capsys.readouterr().err


# ---------------------------------------------------------------- TLS


def test_a_tls_client_trusting_the_ca_gets_in(tls_server: ServerProcess, pki: Pki) -> None:
    with tls_server.client(token=TOKEN, root_certificates=pki.ca_pem) as db:
        assert db.stats()["applied_epoch"] == 0

    async def from_asyncio() -> dict[str, object]:
        async with AsyncClient(tls_server.address, token=TOKEN, root_certificates=pki.ca_pem) as db:
            return await db.stats()

    assert asyncio.run(from_asyncio())["applied_epoch"] == 0
    with tls_server.client(root_certificates=pki.ca_pem) as db:
        with pytest.raises(Unauthenticated):  # TLS is not a credential here; the token is
            db.stats()
    log = tls_server.log_path.read_text()
    assert "auth=bearer token (flag --token-file), tls=on (cert" in log
    assert "key " + str(pki.server_key) + " (env POMOVIEW_TLS_KEY)" in log


def test_plaintext_or_an_untrusted_certificate_is_refused(tls_server: ServerProcess, pki: Pki) -> None:
    for options in ({}, {"root_certificates": pki.other_ca}):
        with tls_server.client(token=TOKEN, **options) as db:
            db.timeout = 10
            with pytest.raises(Unavailable):
                db.stats()


def test_the_cli_connects_with_tls_ca(
    tls_server: ServerProcess, pki: Pki, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POMOVIEW_TOKEN", TOKEN)
    assert main(["stats", "--json", "--address", tls_server.address, "--tls-ca", str(pki.ca)]) == 0
    assert '"applied_epoch": 0' in capsys.readouterr().out


def test_mutual_tls_needs_a_client_certificate(mtls_server: ServerProcess, pki: Pki) -> None:
    client_cert = {"private_key": pki.client_key, "certificate_chain": pki.client_cert}
    with mtls_server.client(root_certificates=pki.ca_pem, **client_cert) as db:
        assert db.stats()["applied_epoch"] == 0
    for options in ({"root_certificates": pki.ca_pem}, {}):
        with mtls_server.client(**options) as db:
            db.timeout = 10
            with pytest.raises(Unavailable):
                db.stats()
    assert "auth=client certificate, tls=mutual (" in mtls_server.log_path.read_text()


# ---------------------------------------------------------------- where a server may listen


def test_only_loopback_counts_as_safe_without_credentials() -> None:
    for host in ("127.0.0.1", "127.4.5.6", "localhost", "::1", "[::1]"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "", "10.1.2.3", "example.com", "127.0.0.1.example.com"):
        assert not is_loopback(host), host
    ServerSecurity(token=TOKEN).check_host("0.0.0.0")
    ServerSecurity(insecure=True).check_host("0.0.0.0")


def test_a_server_without_a_token_beyond_loopback_is_refused_unless_insecure(
    tmp_path: Path, pki: Pki
) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("POMOVIEW_")}
    command = [sys.executable, "-m", "pomoview.server.cli", "serve", "--data", str(tmp_path / "data")]
    command += ["--host", "0.0.0.0", "--port", "0"]
    # TLS alone authenticates nobody: still refused.
    for more in ([], ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]):
        done = subprocess.run([*command, *more], capture_output=True, text=True, timeout=60, env=clean)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("pomoview: refusing to listen on 0.0.0.0 without a token"), done.stderr
        assert "--insecure" in done.stderr and "Traceback" not in done.stderr
        assert not (tmp_path / "data").exists()  # refused before touching anything

    # Listens on every address, but only loopback is spoken to.
    server = ServerProcess(tmp_path / "data", extra_args=["--host", "0.0.0.0", "--insecure"]).start()
    try:
        port = server.address.rsplit(":", 1)[1]
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        server.stop()  # quick: the Spark JVM still booting is killed, not waited for
    log = server.log_path.read_text()
    assert "auth=none (--insecure), tls=off" in log
    assert "listening on 0.0.0.0 without authentication (--insecure)" in log
