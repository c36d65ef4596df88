"""physd_client.transport — one physd.v1 message at a time over TCP, TLS or
WebSocket.

Normal path: open_transport(url, ...) connects and returns an object with
send(bytes) (one serialized ClientMessage), recv() -> bytes of one
ServerMessage or None at the end of the stream, close() and the counters
bytes_sent and bytes_received. TCP and TLS carry the protocol's
length-delimited framing (a base-128 varint length, then the message);
WebSocket carries one message per binary WebSocket message (docs/http.md),
through websocket-client (Debian's python3-websocket), imported only when a
ws:// or wss:// address is used.

Failure modes: connect errors (refused, unreachable, TLS verification,
WebSocket handshake) raise TransportError with the cause chained; recv raises
ProtocolError for a length over max_frame or a malformed varint, and for a
text WebSocket message; a broken socket ends recv with None (the caller
reports the connection as closed).

Invariants: recv is called by one thread only (the client's reader) and
send is serialized by the caller; close() may be called from any thread and
makes a blocked recv return.
"""
import socket
import ssl

from .errors import ProtocolError, TransportError

MAX_VARINT = 10


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def parse_address(address, port, default_port):
    """(scheme, host, port, path) of "tcp://h:p", "tls://h:p", "ws://h:p/ws",
    "wss://h:p/ws" or a bare host (tcp)."""
    scheme, rest = "tcp", address
    if "://" in address:
        scheme, rest = address.split("://", 1)
        scheme = scheme.lower()
        if scheme not in ("tcp", "tls", "ws", "wss"):
            raise ValueError("unknown scheme %r (tcp, tls, ws or wss)" % scheme)
    path = ""
    if "/" in rest:
        rest, path = rest.split("/", 1)
        path = "/" + path
    host = rest
    if rest.startswith("["):  # [v6]:port
        end = rest.index("]")
        host, tail = rest[1:end], rest[end + 1:]
        if tail.startswith(":"):
            port = int(tail[1:]) if port is None else port
    elif rest.count(":") == 1:
        host, p = rest.split(":")
        port = int(p) if port is None else port
    if port is None:
        port = default_port[scheme]
    if scheme in ("ws", "wss") and not path:
        path = "/ws"
    return scheme, host or "127.0.0.1", int(port), path


def tls_context(ca=None, cert=None, key=None):
    """A client context: the server verified against ca (or the system's CAs)
    and its name checked; cert/key: a client certificate for a server with
    tls_client_ca."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


class StreamTransport:
    """Length-delimited frames over a TCP or TLS socket."""

    def __init__(self, sock, max_frame):
        self.sock = sock
        self.max_frame = max_frame
        self.buf = bytearray()
        self.bytes_sent = 0
        self.bytes_received = 0
        self.closed = False

    def send(self, data):
        frame = varint(len(data)) + data
        self.sock.sendall(frame)
        self.bytes_sent += len(frame)

    def _fill(self):
        try:
            chunk = self.sock.recv(262144)
        except (OSError, ValueError, AttributeError):  # closed under us by close()
            return False
        if not chunk:
            return False
        self.bytes_received += len(chunk)
        self.buf += chunk
        return True

    def recv(self):
        while True:
            n, shift, i = 0, 0, 0
            buf = self.buf
            while i < len(buf):
                b = buf[i]
                i += 1
                n |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
                if i >= MAX_VARINT:
                    raise ProtocolError("malformed frame length from the server")
            else:
                i = 0  # the varint is not complete yet
            if i:
                if n > self.max_frame:
                    raise ProtocolError("frame of %d bytes from the server exceeds max_frame (%d)" %
                                        (n, self.max_frame))
                if len(buf) - i >= n:
                    data = bytes(buf[i:i + n])
                    del buf[:i + n]
                    return data
            if not self._fill():
                return None

    def close(self):
        """Wakes a blocked recv (which then returns None); release() frees."""
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def release(self):
        self.close()
        self.sock.close()


class WebSocketTransport:
    """One message per binary WebSocket message (websocket-client)."""

    def __init__(self, ws, max_frame):
        self.ws = ws
        self.max_frame = max_frame
        self.bytes_sent = 0
        self.bytes_received = 0
        self.closed = False

    def send(self, data):
        import websocket
        try:
            self.ws.send_binary(data)
        except websocket.WebSocketException as e:
            raise ConnectionError(str(e)) from e
        self.bytes_sent += len(data)

    def recv(self):
        import websocket
        try:
            op, data = self.ws.recv_data()
        except (websocket.WebSocketException, OSError, ValueError, AttributeError):
            return None
        if op == websocket.ABNF.OPCODE_CLOSE:
            return None
        if op != websocket.ABNF.OPCODE_BINARY:
            raise ProtocolError("a WebSocket message that is not binary (opcode %d)" % op)
        if len(data) > self.max_frame:
            raise ProtocolError("message of %d bytes from the server exceeds max_frame (%d)" %
                                (len(data), self.max_frame))
        self.bytes_received += len(data)
        return data

    def close(self):
        if self.closed:
            return
        self.closed = True
        try:
            self.ws.send_close()
        except Exception:  # noqa: BLE001 - already broken: nothing to tell the server
            pass
        try:
            self.ws.sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass

    def release(self):
        self.close()
        try:
            self.ws.shutdown()
        except Exception:  # noqa: BLE001 - nothing left to do with a broken socket
            pass


def open_transport(scheme, host, port, path, timeout, max_frame, tls=None, server_name=None, rcvbuf=0):
    """Connects; tls: an ssl.SSLContext for tls:// and wss://."""
    if scheme in ("tcp", "tls"):
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise TransportError("cannot connect to %s:%d: %s" % (host, port, e.strerror or e)) from e
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if scheme == "tls":
            try:
                sock = tls.wrap_socket(sock, server_hostname=server_name or host)
            except (ssl.SSLError, OSError) as e:
                sock.close()
                raise TransportError("TLS handshake with %s:%d failed: %s" % (host, port, e)) from e
        sock.settimeout(None)
        return StreamTransport(sock, max_frame)
    try:
        import websocket
    except ImportError as e:
        raise TransportError("ws:// and wss:// need websocket-client (Debian: python3-websocket)") from e
    url = "%s://%s:%d%s" % (scheme, host if ":" not in host else "[%s]" % host, port, path)
    kw = {"timeout": timeout, "subprotocols": ["physd.v1"], "enable_multithread": True}
    if rcvbuf:
        kw["sockopt"] = ((socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf),)
    if scheme == "wss":
        kw["sslopt"] = {"context": tls, "server_hostname": server_name or host}
    try:
        ws = websocket.create_connection(url, **kw)
    except (websocket.WebSocketException, OSError, ssl.SSLError) as e:
        raise TransportError("cannot open %s: %s" % (url, e)) from e
    ws.settimeout(None)
    return WebSocketTransport(ws, max_frame)
