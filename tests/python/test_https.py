"""test_https.py — TLS on the HTTP side (docs/security.md, docs/http.md):
https and wss through libwebsockets' OpenSSL support.

Usage: PYTHON test_https.py PHYSD_BIN CERT_DIR WORK_DIR  (PYTHON: the venv
with physd_client, tests/python/install_venv.sh)

Shows:
- with tls_cert/tls_key the HTTP side speaks TLS too: /healthz, /readyz and
  /metrics (text format 0.0.4, physd_connections{kind="ws"} counting the
  wss session) over https verified against the test CA and 127.0.0.1; a
  physd_client session over wss:// (create, subscribe, a frame); plain HTTP
  and TLS 1.1 on that port get no HTTP answer;
- http_tls_cert/http_tls_key alone: https on the HTTP side while the
  protocol port stays plain TCP; http_tls = off: plain HTTP beside a TLS
  protocol port;
- with tls_client_ca: no client certificate and a self-signed one (made
  here) are refused at the handshake, the CA's client certificate gets 200
  and a wss session (libwebsockets accepts any certificate unless physd
  passes OpenSSL's verdict on: this is the check that it does);
- a TLS handshake that never starts is closed after tls_handshake_timeout
  (1 s here; libwebsockets counts in whole seconds);
- start-up refusals with their reason: http_tls_cert without http_tls_key,
  a missing file, http_tls_cert with http_tls off, and a non-loopback
  http_listen without access control (protected mode holds with TLS).
"""
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
import unittest
import urllib.request
import warnings

import physd_client

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
from physd_py import Physd  # noqa: E402

PHYSD_BIN, CERT_DIR, WORK = sys.argv[1:4]
del sys.argv[1:4]
os.makedirs(WORK, exist_ok=True)


def cert(name):
    return os.path.join(CERT_DIR, name)


def start(*extra):
    p = Physd([PHYSD_BIN, "--port", "0", "--http-port", "0", "--no-demo", "--workers", "1"] + list(extra))
    m = p.wait_log(r"listening on 127\.0\.0\.1:(\d+)")
    mh = p.wait_log(r"HTTP on (https?)://127\.0\.0\.1:(\d+)/")
    if not m or not mh:
        p.proc.kill()
        raise RuntimeError("physd did not start:\n" + p.log())
    return p, int(m.group(1)), mh.group(1), int(mh.group(2))


def stop(p):
    rc = p.stop()
    assert rc == 0, "physd exited with %d:\n%s" % (rc, p.log()[-3000:])
    assert "AddressSanitizer" not in p.log(), p.log()[-5000:]


def ctx(client_cert=None, client_key=None):
    c = ssl.create_default_context(cafile=cert("ca.pem"))
    if client_cert:
        c.load_cert_chain(client_cert, client_key)
    return c


def get(scheme, port, path, context=None):
    with urllib.request.urlopen("%s://127.0.0.1:%d%s" % (scheme, port, path), timeout=10, context=context) as r:
        return r.status, r.headers, r.read().decode()


def refused_start(*args):
    """physd's exit status and stderr when it refuses to start."""
    p = subprocess.run([PHYSD_BIN, "--port", "0", "--http-port", "0", "--no-demo"] + list(args),
                       capture_output=True, text=True, timeout=60)
    assert "Sanitizer" not in p.stderr, p.stderr  # the failed start leaves nothing behind
    return p.returncode, p.stderr


class Https(unittest.TestCase):
    def test_same_certificate(self):
        p, port, scheme, hp = start("--tls-cert", cert("server.pem"), "--tls-key", cert("server.key"))
        try:
            self.assertEqual(scheme, "https")
            st, _, body = get("https", hp, "/healthz", ctx())
            self.assertEqual((st, body), (200, "ok\n"))
            st, _, body = get("https", hp, "/readyz", ctx())
            self.assertEqual(st, 200)
            c = physd_client.connect("wss://127.0.0.1:%d/ws" % hp, ca=cert("ca.pem"))
            w = c.create_world(name="wss", preset="box_drop").world_id
            f = c.subscribe(w).get(timeout=10)
            self.assertEqual(f.world_id, w)
            self.assertGreater(len(f.body_ids), 0)
            st, headers, text = get("https", hp, "/metrics", ctx())
            self.assertEqual(st, 200)
            self.assertTrue(headers["Content-Type"].startswith("text/plain; version=0.0.4"))
            self.assertRegex(text, r'(?m)^physd_connections\{kind="ws"\} 1$')
            self.assertRegex(text, r'(?m)^physd_world_ticks_total\{world="%d",name="wss"\} [1-9]' % w)
            self.assertIsNotNone(p.wait_log(r"conn \d+ \(wss:127\.0\.0\.1\) WebSocket accepted"))
            c.close()
            # No HTTP answer to plain HTTP or to TLS 1.1 on the TLS port.
            s = socket.create_connection(("127.0.0.1", hp), timeout=10)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                data = s.recv(4096)
            except ConnectionResetError:
                data = b""
            self.assertFalse(data.startswith(b"HTTP/"), data)
            s.close()
            old = ctx()
            old.minimum_version = old.maximum_version = ssl.TLSVersion.TLSv1_1
            old.set_ciphers("ALL:@SECLEVEL=0")
            with self.assertRaises((ssl.SSLError, ConnectionError, urllib.error.URLError)) as e:
                get("https", hp, "/healthz", old)
            self.assertIn("protocol version", str(e.exception))
            print("\n  https: /healthz, /readyz, /metrics; wss session (world %d, a frame of %d bodies); plain HTTP "
                  "got %r; TLS 1.1 refused" % (w, len(f.body_ids), data[:20]))
        finally:
            stop(p)

    def test_separate_and_off(self):
        # http_tls_cert alone: https beside a plain protocol port.
        p, port, scheme, hp = start("--http-tls-cert", cert("server.pem"), "--http-tls-key", cert("server.key"))
        try:
            self.assertEqual(scheme, "https")
            self.assertEqual(get("https", hp, "/healthz", ctx())[0], 200)
            c = physd_client.connect("tcp://127.0.0.1:%d" % port)  # plain TCP protocol port
            self.assertEqual(c.ping(b"p").payload, b"p")
            c.close()
        finally:
            stop(p)
        # http_tls off: plain HTTP beside a TLS protocol port.
        p, port, scheme, hp = start("--tls-cert", cert("server.pem"), "--tls-key", cert("server.key"),
                                    "--http-tls", "off")
        try:
            self.assertEqual(scheme, "http")
            self.assertEqual(get("http", hp, "/healthz")[0], 200)
            c = physd_client.connect("ws://127.0.0.1:%d/ws" % hp)
            self.assertEqual(c.ping(b"q").payload, b"q")
            c.close()
        finally:
            stop(p)

    def test_client_certificates(self):
        selfsigned = os.path.join(WORK, "selfsigned")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", selfsigned + ".key", "-out", selfsigned + ".pem", "-days", "2",
                        "-subj", "/CN=not from the CA", "-addext", "extendedKeyUsage=clientAuth"],
                       check=True, capture_output=True)
        p, port, scheme, hp = start("--tls-cert", cert("server.pem"), "--tls-key", cert("server.key"),
                                    "--tls-client-ca", cert("ca.pem"))
        try:
            self.assertIsNotNone(p.wait_log(r"HTTP on https://127\.0\.0\.1:\d+/ .* with client certificates"))
            for label, c in (("no certificate", ctx()),
                             ("self-signed", ctx(selfsigned + ".pem", selfsigned + ".key"))):
                with self.assertRaises((ssl.SSLError, ConnectionError, urllib.error.URLError), msg=label):
                    get("https", hp, "/healthz", c)
            good = ctx(cert("client.pem"), cert("client.key"))
            self.assertEqual(get("https", hp, "/healthz", good)[0], 200)
            w = physd_client.connect("wss://127.0.0.1:%d/ws" % hp, ca=cert("ca.pem"), cert=cert("client.pem"),
                                     key=cert("client.key"))
            self.assertEqual(w.ping(b"c").payload, b"c")
            w.close()
            with self.assertRaises(physd_client.TransportError):
                physd_client.connect("wss://127.0.0.1:%d/ws" % hp, ca=cert("ca.pem"), cert=selfsigned + ".pem",
                                     key=selfsigned + ".key", timeout=5)
            print("\n  tls_client_ca: no certificate and a self-signed one refused; the CA's client certificate "
                  "answered (https and wss)")
        finally:
            stop(p)

    def test_handshake_timeout(self):
        p, port, scheme, hp = start("--tls-cert", cert("server.pem"), "--tls-key", cert("server.key"),
                                    "--tls-handshake-timeout", "1")
        try:
            s = socket.create_connection(("127.0.0.1", hp), timeout=15)
            t0 = time.monotonic()
            data = s.recv(1)  # nothing sent: the server gives up
            dt = time.monotonic() - t0
            s.close()
            self.assertEqual(data, b"")
            self.assertLess(dt, 5.0)
            self.assertEqual(get("https", hp, "/healthz", ctx())[0], 200)
            print("\n  a silent client on the https port closed after %.2f s (tls_handshake_timeout 1 s)" % dt)
        finally:
            stop(p)

    def test_refusals(self):
        rc, err = refused_start("--http-tls-cert", cert("server.pem"))
        self.assertNotEqual(rc, 0)
        self.assertIn("HTTPS needs both http_tls_cert and http_tls_key (only http_tls_cert is set)", err)
        rc, err = refused_start("--http-tls-cert", os.path.join(WORK, "nope.pem"), "--http-tls-key",
                                cert("server.key"))
        self.assertNotEqual(rc, 0)
        self.assertIn("HTTPS (http_tls_cert, http_tls_key):", err)
        self.assertIn("nope.pem", err)
        rc, err = refused_start("--http-tls-cert", cert("server.pem"), "--http-tls-key", cert("other_key.key"))
        self.assertNotEqual(rc, 0)
        self.assertIn("other_key.key: cannot load the private key", err)
        rc, err = refused_start("--http-tls-cert", cert("server.pem"), "--http-tls-key", cert("server.key"),
                                "--http-tls", "off")
        self.assertNotEqual(rc, 0)
        self.assertIn("http_tls_cert is set but http_tls is off", err)
        rc, err = refused_start("--tls-cert", cert("server.pem"), "--tls-key", cert("server.key"),
                                "--http-listen", "0.0.0.0")
        self.assertNotEqual(rc, 0)
        self.assertIn("refusing to serve HTTP on 0.0.0.0 without access control (protected mode)", err)
        print("\n  refused at start: %s" % json.dumps(re.sub(r"\s+", " ", err.strip().splitlines()[-1])[:100]))


if __name__ == "__main__":
    warnings.simplefilter("ignore", ResourceWarning)
    unittest.main(verbosity=2, warnings="ignore")
