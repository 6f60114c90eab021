"""pypi_tls.py ADDR PORT CERT KEY PACKAGES HTPASSWD LOG: pypiserver (ops/registries.sh's,
run with its venv's python) serving PACKAGES over TLS on ADDR:PORT, every
action (list, download, upload) behind HTPASSWD's users, no fallback to
pypi.org. pypiserver has no TLS of its own; this is its WSGI app behind
Python's ssl. Each request is appended to LOG as one JSON line: method,
path, status and the Basic user it came with (never the password).
"""
import base64
import json
import pathlib
import socketserver
import ssl
import sys
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pypiserver

addr, port, cert, key, packages, htpasswd, log_path = sys.argv[1:8]
app = pypiserver.app(roots=[pathlib.Path(packages)], authenticate=["download", "list", "update"],
                     password_file=htpasswd, disable_fallback=True)
log = open(log_path, "a", buffering=1)


def basic_user(header):
    if not header or not header.startswith("Basic "):
        return None if not header else "(" + header.split(" ", 1)[0] + ")"
    try:
        return base64.b64decode(header[6:]).decode().split(":", 1)[0]
    except (ValueError, UnicodeDecodeError):
        return "(bad)"


class Handler(WSGIRequestHandler):
    def log_request(self, code="-", size="-"):
        log.write(json.dumps({"method": self.command, "path": self.path, "status": int(code) if str(code).isdigit() else code,
                              "user": basic_user(self.headers.get("Authorization"))}) + "\n")

    def log_message(self, fmt, *args):
        sys.stderr.write("pypi_tls: " + (fmt % args) + "\n")


class Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


httpd = make_server(addr, int(port), app, server_class=Server, handler_class=Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
print("pypi_tls: serving %s on https://%s:%s" % (packages, addr, port), flush=True)
httpd.serve_forever()
