#!/usr/bin/python3
"""tests/ops/egress/egress-proxy/outside.py: the "outside" of the egress proxy
test, run inside a network namespace the test creates. On each --addr it
serves HTTP on 80, TLS (self-signed) on 443, a TCP listener on 8080, and UDP
on 9999 and 53 (a resolver that answers nothing). Every connection,
request and datagram is appended to --log as one line
("http ADDR HOST", "tls ADDR", "tcp ADDR 8080", "udp ADDR 9999", "dns ADDR"),
so the test counts what arrived. With --headers FILE, each HTTP request's
header lines are appended to FILE too ("ADDR Name: value"), for a test
that looks at what a proxy added; with --requests FILE, each HTTP request
(any method) is one JSON line there: address, method, path and headers in
order; a path holding "kiwi-bad" gets an invalid response (two lengths),
one holding "kiwi-redirect-to-HOST-P" a 302 to https://HOST/blob/P?sig=kiwi
(a registry sending a download to its storage).
--tls ADDR=CERT:KEY serves ADDR's TLS with a certificate of its own
(the others get --cert/--key)."""
import argparse, json, socket, socketserver, ssl, threading, http.server

ap = argparse.ArgumentParser()
ap.add_argument("--addr", action="append", required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--cert", required=True)
ap.add_argument("--key", required=True)
ap.add_argument("--headers")
ap.add_argument("--requests")
ap.add_argument("--tls", action="append", default=[])
args = ap.parse_args()
TLS = {a: tuple(ck.split(":", 1)) for a, ck in (x.split("=", 1) for x in args.tls)}
lock = threading.Lock()


def record(line):
    with lock, open(args.log, "a") as f:
        f.write(line + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        addr = self.server.server_address[0]
        record("http %s %s %s %s" % (addr, self.headers.get("Host", "-"), self.command, self.path))
        if args.headers:
            with lock, open(args.headers, "a") as f:
                for k, v in self.headers.items():
                    f.write("%s %s: %s\n" % (addr, k, v))
        if args.requests:
            with lock, open(args.requests, "a") as f:
                f.write(json.dumps({"addr": addr, "method": self.command, "path": self.path,
                                    "headers": list(self.headers.items())}) + "\n")
        if "kiwi-redirect-to-" in self.path:
            host, _, rest = self.path.split("kiwi-redirect-to-", 1)[1].partition("-")
            self.send_response(302)
            self.send_header("Location", "https://%s/blob/%s?sig=kiwi" % (host, rest))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if "kiwi-bad" in self.path:  # a response no proxy may pass on
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello")
            self.close_connection = True
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = b"hello from the outside\n" * 64
        if "kiwi-big-3m" in self.path:  # more than any buffer on the way
            body = bytes(range(256)) * 12288
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = do_GET

    def log_message(self, *a):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


class TLSServer(Server):
    def get_request(self):
        sock, peer = self.socket.accept()
        record("tls %s" % self.server_address[0])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*TLS.get(self.server_address[0], (args.cert, args.key)))
        return ctx.wrap_socket(sock, server_side=True), peer


class TCPCount(socketserver.ThreadingTCPServer):
    daemon_threads = True


class TCPHandler(socketserver.BaseRequestHandler):
    def handle(self):
        record("tcp %s %d" % self.server.server_address)


def udp(addr, port, kind):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    while True:
        s.recvfrom(4096)
        record("%s %s%s" % (kind, addr, "" if kind == "dns" else " %d" % port))


servers = []
for a in args.addr:
    servers += [Server((a, 80), Handler), TLSServer((a, 443), Handler), TCPCount((a, 8080), TCPHandler)]
    threading.Thread(target=udp, args=(a, 9999, "udp"), daemon=True).start()
    threading.Thread(target=udp, args=(a, 53, "dns"), daemon=True).start()
for s in servers[1:]:
    threading.Thread(target=s.serve_forever, daemon=True).start()
record("ready")
servers[0].serve_forever()
