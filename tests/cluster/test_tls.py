"""TLS end to end: the sandbox serving HTTPS with a throwaway CA, ``collect``/``advise --tls-ca`` through
the CLI, and every way it can go wrong as one line (exit 2, no traceback, the token never printed).

The CA and the server certificate (for 127.0.0.1 and localhost) are made per test module with the
``openssl`` command (Debian's package; ``scripts/ensure-openssl.sh``); without it the module is skipped.
Real components only: httpx and the CLI over loopback TLS, kazoo against a real ZooKeeper.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from builders import fresh_scenario
from kazoo.client import KazooClient

from shedlab.cluster.sandbox import Sandbox
from shedlab.cluster.tls import client_context

ROOT = Path(__file__).resolve().parents[2]
SHEDLAB = [sys.executable, "-m", "shedlab"]
SECRET = "tls-test-secret-token-Q7w3"  # recognisable: it must appear in no output
OPENSSL = shutil.which("openssl")

pytestmark = pytest.mark.skipif(
    OPENSSL is None, reason="the openssl command is not installed (run scripts/ensure-openssl.sh as root)"
)


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA certificate a client trusts
    cert: Path  # the server's certificate, signed by the CA, for 127.0.0.1 and localhost
    key: Path  # its private key
    other_key: Path  # a key that does not belong to the certificate


def _openssl(*args: str, cwd: Path) -> None:
    assert OPENSSL is not None
    done = subprocess.run([OPENSSL, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A throwaway CA (EC P-256, one day) and a server certificate it signs, as a CA's tooling makes them:
    basicConstraints/keyUsage on the CA; subjectAltName, serverAuth and key identifiers on the leaf."""
    d = tmp_path_factory.mktemp("pki")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
        "-subj", "/CN=shedlab throwaway test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=d,
    )  # fmt: skip
    _openssl(
        "req", "-new", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=d
    )
    (d / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid\n",
        encoding="utf-8",
    )
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "2",
        "-days", "1", "-extfile", "server.ext", "-out", "server.pem",
        cwd=d,
    )  # fmt: skip
    return Pki(ca=d / "ca.pem", cert=d / "server.pem", key=d / "server.key", other_key=d / "ca.key")


@pytest.fixture
def https(pki: Pki) -> Iterator[Sandbox]:
    """over-unloading-90-10 (two brokers) behind HTTPS with a token; no ZooKeeper (admin API only)."""
    with Sandbox(
        fresh_scenario("over-unloading-90-10"),
        seed=1,
        zookeeper=None,
        tokens={SECRET: "admin"},
        tls_cert=pki.cert,
        tls_key=pki.key,
    ) as sb:
        sb.advance(8)  # the second broker has joined
        yield sb


@pytest.fixture
def trusting(pki: Pki) -> Iterator[httpx.Client]:
    with httpx.Client(
        verify=client_context(pki.ca), timeout=10.0, headers={"Authorization": f"Bearer {SECRET}"}
    ) as c:
        yield c


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="100", TLS_TEST_TOKEN=SECRET)
    return subprocess.run(
        [*SHEDLAB, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert SECRET not in result.stdout + result.stderr
    return lines[0]


# ------------------------------------------------------------------------------------ the sandbox itself


def test_every_address_the_sandbox_gives_out_is_https(https: Sandbox, trusting: httpx.Client) -> None:
    assert https.admin_url.startswith("https://127.0.0.1:")
    assert len(https.broker_urls) == 2
    assert all(url == f"https://{broker}" for broker, url in https.broker_urls.items())
    leader = trusting.get(f"{https.admin_url}/admin/v2/brokers/leaderBroker").json()
    assert leader["serviceUrl"] == f"https://{leader['brokerId']}"
    for broker, url in https.broker_urls.items():
        report = trusting.get(f"{url}/admin/v2/broker-stats/load-report").json()
        # a broker with webServicePortTls only: getSafeWebServiceAddress() falls back to the https address
        assert report["webServiceUrl"] == report["webServiceUrlTls"] == f"https://{broker}"
        assert report["pulsarServiceUrlTls"] == f"pulsar+ssl://{broker.split(':')[0]}:6651"


def test_a_redirect_points_at_https(https: Sandbox, trusting: httpx.Client) -> None:
    """An unload sent to a broker that does not own the bundle is redirected to the owner's https URL."""
    owners = {b: https.owner_of(b) for b in https.simulation.bundle_index}
    bundle, owner = next((b, o) for b, o in sorted(owners.items()) if o is not None)
    other = next(b for b in https.broker_urls if b != owner)
    namespace, _, rng = bundle.rpartition("/")
    url = f"{https.broker_urls[other]}/admin/v2/namespaces/{namespace}/{rng}/unload"
    answer = trusting.put(url)
    assert answer.status_code == 307
    assert answer.headers["location"].startswith(f"https://{owner}/admin/v2/namespaces/")
    assert trusting.put(answer.headers["location"]).status_code == 204


def test_clients_that_do_not_trust_it_or_speak_http_get_nothing(
    https: Sandbox, trusting: httpx.Client
) -> None:
    path = "/admin/v2/brokers/leaderBroker"
    with (
        httpx.Client(timeout=10.0) as default_trust,
        pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY"),
    ):
        default_trust.get(https.admin_url + path)
    with httpx.Client(timeout=10.0) as plain, pytest.raises(httpx.TransportError):
        plain.get(https.admin_url.replace("https://", "http://") + path)
    # the refused handshakes left the server serving
    assert trusting.get(https.admin_url + path).status_code == 200


@pytest.mark.zookeeper
def test_znodes_carry_the_https_addresses(pki: Pki, zk_hosts: str) -> None:
    with Sandbox("broker-loss", seed=3, zookeeper=zk_hosts, tls_cert=pki.cert, tls_key=pki.key) as sb:
        zk = KazooClient(hosts=zk_hosts, timeout=10.0)
        zk.start(timeout=10)
        try:
            leader = json.loads(zk.get("/loadbalance/leader")[0])
            assert leader["serviceUrl"] == f"https://{leader['brokerId']}"
            for broker in zk.get_children("/loadbalance/brokers"):
                report = json.loads(zk.get(f"/loadbalance/brokers/{broker}")[0])
                assert report["webServiceUrl"] == report["webServiceUrlTls"] == f"https://{broker}"
            assert sorted(zk.get_children("/loadbalance/brokers")) == sorted(sb.broker_urls)
        finally:
            zk.stop()
            zk.close()


# ------------------------------------------------------------------------------- collect and advise (CLI)


def test_collect_with_the_ca_records_every_load_report(https: Sandbox, pki: Pki, tmp_path: Path) -> None:
    out = tmp_path / "rec"
    token = ("--token-env", "TLS_TEST_TOKEN")
    result = run(
        "collect",
        "--admin-url",
        https.admin_url,
        "--tls-ca",
        str(pki.ca),
        *token,
        "--count",
        "1",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr
    (record,) = out.glob("load-reports-*.jsonl")
    lines = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["broker"] for line in lines) == sorted(https.broker_urls)
    assert all(line["report"]["webServiceUrlTls"] == f"https://{line['broker']}" for line in lines)
    assert SECRET not in "".join(p.read_text(encoding="utf-8") for p in out.iterdir())


def test_advise_with_the_ca_reads_the_cluster(https: Sandbox, pki: Pki) -> None:
    result = run(
        "advise",
        "--admin-url",
        https.admin_url,
        "--tls-ca",
        str(pki.ca),
        "--token-env",
        "TLS_TEST_TOKEN",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["snapshot"]["source"] == https.admin_url and doc["snapshot"]["brokers"] == 2
    assert doc["snapshot"]["missing"] == {}
    assert SECRET not in result.stdout + result.stderr


@pytest.mark.parametrize("command", ["advise", "collect"])
def test_without_the_ca_one_line_naming_the_url(https: Sandbox, command: str, tmp_path: Path) -> None:
    extra = ("--out", str(tmp_path / "rec"), "--count", "1") if command == "collect" else ()
    result = run(command, "--admin-url", https.admin_url, "--token-env", "TLS_TEST_TOKEN", *extra)
    line = one_line_error(result)
    assert f"GET {https.admin_url}/admin/v2/" in line
    assert "certificate verify failed" in line and "--tls-ca" in line
    assert "unreachable" not in line  # not retried as if the network were down


def test_https_url_on_a_plain_http_sandbox_is_one_line(pki: Pki) -> None:
    with Sandbox("broker-loss", seed=3, zookeeper=None) as plain:
        url = plain.admin_url.replace("http://", "https://")
        line = one_line_error(
            run("advise", "--admin-url", url, "--tls-ca", str(pki.ca), "--token-env", "TLS_TEST_TOKEN")
        )
    assert url in line and "does not speak TLS" in line


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("notes.txt", "just some text\n", "not a PEM certificate"),
        ("server.key", None, "a private key, not a certificate"),
        ("missing.pem", "", "certificate file not found"),
        (
            "garbled.pem",
            "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n",
            "cannot use",
        ),
    ],
)
def test_a_tls_ca_that_is_not_a_certificate_is_one_line(
    https: Sandbox, pki: Pki, tmp_path: Path, name: str, content: str | None, message: str
) -> None:
    path = pki.key if content is None else tmp_path / name
    if content:
        path.write_text(content, encoding="utf-8")
    line = one_line_error(
        run("advise", "--admin-url", https.admin_url, "--tls-ca", str(path), "--token-env", "TLS_TEST_TOKEN")
    )
    assert str(path) in line and "--tls-ca" in line and message in line


def test_a_tls_ca_with_a_plain_http_url_is_one_line(pki: Pki) -> None:
    """``--tls-ca`` with an ``http://`` admin URL was accepted and ignored: nothing is verified there."""
    line = one_line_error(run("advise", "--admin-url", "http://127.0.0.1:9", "--tls-ca", str(pki.ca)))
    assert line == (
        "error: --tls-ca: is used only with an https:// admin URL: this one is plain http://, nothing is "
        f"verified (got '{pki.ca}')"
    )


def test_a_der_ca_is_named_with_the_conversion(https: Sandbox, pki: Pki, tmp_path: Path) -> None:
    der = tmp_path / "ca.der"
    _openssl("x509", "-in", str(pki.ca), "-outform", "der", "-out", str(der), cwd=tmp_path)
    line = one_line_error(
        run("collect", "--admin-url", https.admin_url, "--tls-ca", str(der), "--out", str(tmp_path / "rec"))
    )
    assert "DER" in line and "openssl x509 -inform der" in line


# ----------------------------------------------------------------------------------- shedlab sandbox (CLI)


def test_the_command_serves_https(pki: Pki) -> None:
    result = run(
        "sandbox", "broker-loss", "--zookeeper", "none", "--duration", "1s", "--speed", "60",
        "--tls-cert", str(pki.cert), "--tls-key", str(pki.key),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "admin URL   https://127.0.0.1:" in result.stdout
    assert result.stdout.count("https://127.0.0.1:") == 11  # the admin URL and ten brokers
    assert "http://" not in result.stdout


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (("cert", "other_key"), "--tls-key: this key does not belong to the certificate"),
        (("key", "key"), "--tls-cert: a private key, not a certificate"),
        (("cert", "cert"), "--tls-key: not a PEM private key"),
        (("cert", None), "--tls-cert: needs --tls-key too"),
        ((None, "key"), "--tls-key: needs --tls-cert too"),
    ],
)
def test_bad_certificate_or_key_is_one_line(
    pki: Pki, files: tuple[str | None, str | None], message: str
) -> None:
    cert, key = files
    args = ["sandbox", "broker-loss", "--zookeeper", "none", "--duration", "1s"]
    if cert is not None:
        args += ["--tls-cert", str(getattr(pki, cert))]
    if key is not None:
        args += ["--tls-key", str(getattr(pki, key))]
    assert message in one_line_error(run(*args))


def test_an_encrypted_key_is_refused_without_a_prompt(pki: Pki, tmp_path: Path) -> None:
    encrypted = tmp_path / "encrypted.key"
    _openssl(
        "pkey", "-in", str(pki.key), "-aes256", "-passout", "pass:pw", "-out", str(encrypted), cwd=tmp_path
    )
    args = ("--tls-cert", str(pki.cert), "--tls-key", str(encrypted))
    line = one_line_error(run("sandbox", "broker-loss", "--zookeeper", "none", "--duration", "1s", *args))
    assert str(encrypted) in line and "encrypted" in line
