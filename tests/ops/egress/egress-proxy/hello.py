#!/usr/bin/python3
"""tests/ops/egress/egress-proxy/hello.py: sends TLS ClientHellos whose SNI
is whatever bytes the test chooses (a newline, an escape byte, 8 KiB),
which no TLS library would send: --count connections to --to ADDR:PORT
from --procs processes, each a ClientHello with the server name
--sni-hex (hex bytes) repeated --repeat times, then read until the peer
closes. Prints the number of connections made."""
import argparse, os, socket, struct

ap = argparse.ArgumentParser()
ap.add_argument("--to", required=True)
ap.add_argument("--sni-hex", required=True)
ap.add_argument("--repeat", type=int, default=1)
ap.add_argument("--count", type=int, default=1)
ap.add_argument("--procs", type=int, default=1)
args = ap.parse_args()
host, port = args.to.rsplit(":", 1)
sni = bytes.fromhex(args.sni_hex) * args.repeat


def ext(kind, body):
    return struct.pack("!HH", kind, len(body)) + body


def hello():
    server_name = ext(0, struct.pack("!HBH", len(sni) + 3, 0, len(sni)) + sni)
    groups = ext(10, struct.pack("!HH", 2, 0x001D))
    sigalgs = ext(13, struct.pack("!HHH", 4, 0x0804, 0x0403))
    body = (b"\x03\x03" + os.urandom(32) + b"\x00" + struct.pack("!H", 4) + b"\x13\x01\xc0\x2f" + b"\x01\x00")
    exts = server_name + groups + sigalgs
    body += struct.pack("!H", len(exts)) + exts
    hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
    out = b""
    while hs:  # records of at most 16 KiB
        chunk, hs = hs[:16384], hs[16384:]
        out += b"\x16\x03\x01" + struct.pack("!H", len(chunk)) + chunk
    return out


def run(count):
    made = 0
    for _ in range(count):
        try:
            s = socket.create_connection((host, int(port)), timeout=5)
            s.sendall(hello())
            while s.recv(65536):
                pass
            made += 1
        except OSError:
            pass
        finally:
            try:
                s.close()
            except Exception:
                pass
    return made


per = args.count // args.procs
r, w = os.pipe()
kids = []
for i in range(args.procs):
    k = os.fork()
    if k == 0:
        os.close(r)
        os.write(w, b"%d\n" % run(per))
        os._exit(0)
    kids.append(k)
os.close(w)
for k in kids:
    os.waitpid(k, 0)
print(sum(int(x) for x in os.fdopen(r).read().split()))
