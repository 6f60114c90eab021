"""registry_tls.py KIND ADDR PORT CERT KEY ROOT HTPASSWD LOG: a private
registry over TLS on ADDR:PORT, every request behind HTPASSWD's users, run
with the venv of ops/registries.sh (pypiserver, passlib):

  pypi   pypiserver serving the packages in ROOT (list, download and upload
         authenticated, no fallback to pypi.org); pypiserver has no TLS of
         its own, this is its WSGI app behind Python's ssl
  files  the files under ROOT as they are, for GET and HEAD: a Maven
         repository is such a layout, so is a Go module proxy. A file F
         with a sidecar F.redirect is answered 302 to the URL that sidecar
         holds (a registry sending a download to its storage). HTPASSWD
         "-": no user needed (a storage's signed URLs)

Each answered request is appended to LOG as one JSON line: method, path,
status and the Basic user it came with (never the password).
"""
import base64
import json
import mimetypes
import os
import pathlib
import socketserver
import ssl
import sys
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from passlib.apache import HtpasswdFile

kind, addr, port, cert, key, root, htpasswd, log_path = sys.argv[1:9]
log = open(log_path, "a", buffering=1)


def basic(header):
    """(user, password) of a Basic Authorization header, or None."""
    if not header or not header.startswith("Basic "):
        return None
    try:
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None
    return user, password


def files_app():
    users = HtpasswdFile(htpasswd) if htpasswd != "-" else None
    top = os.path.realpath(root)

    def app(environ, start_response):
        cred = basic(environ.get("HTTP_AUTHORIZATION"))
        if users is not None and (cred is None or not users.check_password(*cred)):
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="kiwi-test"'), ("Content-Length", "0")])
            return [b""]
        if environ["REQUEST_METHOD"] not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Content-Length", "0")])
            return [b""]
        path = os.path.realpath(os.path.join(top, environ.get("PATH_INFO", "/").lstrip("/")))
        if path.startswith(top + os.sep) and os.path.isfile(path + ".redirect"):
            start_response("302 Found", [("Location", open(path + ".redirect").read().strip()), ("Content-Length", "0")])
            return [b""]
        if not path.startswith(top + os.sep) or not os.path.isfile(path):
            start_response("404 Not Found", [("Content-Length", "0")])
            return [b""]
        body = open(path, "rb").read()
        start_response("200 OK", [("Content-Type", mimetypes.guess_type(path)[0] or "application/octet-stream"),
                                  ("Content-Length", str(len(body)))])
        return [b"" if environ["REQUEST_METHOD"] == "HEAD" else body]

    return app


if kind == "pypi":
    import pypiserver
    app = pypiserver.app(roots=[pathlib.Path(root)], authenticate=["download", "list", "update"],
                         password_file=htpasswd, disable_fallback=True)
elif kind == "files":
    app = files_app()
else:
    sys.exit("registry_tls.py: KIND is pypi or files, not %r" % kind)


class Handler(WSGIRequestHandler):
    def log_request(self, code="-", size="-"):
        cred = basic(self.headers.get("Authorization"))
        log.write(json.dumps({"method": self.command, "path": self.path,
                              "status": int(code) if str(code).isdigit() else code,
                              "user": cred[0] if cred else None}) + "\n")

    def log_message(self, fmt, *args):
        sys.stderr.write("registry_tls: " + (fmt % args) + "\n")


class Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


httpd = make_server(addr, int(port), app, server_class=Server, handler_class=Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
print("registry_tls: %s serving %s on https://%s:%s" % (kind, root, addr, port), flush=True)
httpd.serve_forever()
