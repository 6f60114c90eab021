#!/usr/bin/python3
"""tests/ops/egress/egress-proxy/resolver.py: a resolver of the test's own,
run inside a network namespace the test creates. It serves UDP and TCP 53 on
--addr, appends every question to --log as one line ("QTYPE NAME"), and
answers A for each --a NAME=ADDR, PTR for each --ptr ADDR=NAME, and
NXDOMAIN for everything else, so a test can tell which names a process
resolved."""
import argparse, socket, socketserver, struct, threading

ap = argparse.ArgumentParser()
ap.add_argument("--addr", required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--a", action="append", default=[])
ap.add_argument("--ptr", action="append", default=[])
args = ap.parse_args()
A = dict(x.split("=", 1) for x in args.a)
PTR = {}
for x in args.ptr:
    addr, name = x.split("=", 1)
    PTR[".".join(reversed(addr.split("."))) + ".in-addr.arpa"] = name
TYPES = {1: "A", 12: "PTR", 28: "AAAA"}
lock = threading.Lock()


def record(line):
    with lock, open(args.log, "a") as f:
        f.write(line + "\n")


def name_at(msg, off):
    labels = []
    while msg[off]:
        n = msg[off]
        labels.append(msg[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n
    return ".".join(labels), off + 1


def encode(name):
    return b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"


def answer(query):
    qid, _flags, qd = struct.unpack("!HHH", query[:6])
    if qd != 1:
        return None
    name, end = name_at(query, 12)
    qtype, _qclass = struct.unpack("!HH", query[end:end + 4])
    record("%s %s" % (TYPES.get(qtype, str(qtype)), name.lower()))
    question = query[12:end + 4]
    rdata = None
    if qtype == 1 and name.lower() in A:
        rdata = socket.inet_aton(A[name.lower()])
    elif qtype == 12 and name.lower() in PTR:
        rdata = encode(PTR[name.lower()])
    if rdata is None:
        rcode = 0 if qtype in (1, 28) and name.lower() in A else 3  # NODATA for AAAA of a known name
        return struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, 0, 0, 0) + question
    rr = b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, 5, len(rdata)) + rdata
    return struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0) + question + rr


class TCPHandler(socketserver.BaseRequestHandler):
    def handle(self):
        n = struct.unpack("!H", self.request.recv(2))[0]
        a = answer(self.request.recv(n))
        if a:
            self.request.sendall(struct.pack("!H", len(a)) + a)


tcp = socketserver.ThreadingTCPServer((args.addr, 53), TCPHandler)
threading.Thread(target=tcp.serve_forever, daemon=True).start()
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind((args.addr, 53))
record("ready")
while True:
    q, peer = udp.recvfrom(4096)
    try:
        a = answer(q)
    except Exception:
        a = None
    if a:
        udp.sendto(a, peer)
