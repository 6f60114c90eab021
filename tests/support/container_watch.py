#!/usr/bin/env python3
"""container_watch.py: an independent watcher of every sandbox container.

Kiwi's own code decides what a sandbox may have (sandbox/docker/driver.c,
locked by tests/sandbox/test_sandbox_netlock.c). This watcher checks the
outcome from outside, through dockerd's own API, for every container the
suite's workers create, whatever code path made it:

  watch   follow dockerd's event stream; for each container created, record
          Docker's inspect of it (one JSON line per container) until stopped
          (SIGTERM/SIGINT) or --seconds pass
  check   read the records and fail if any Kiwi container (label
          org.kiwi.sandbox=1) breaks a rule:
            - a network mode other than `none` outside Phase A (labels
              org.kiwi.network=install and org.kiwi.phase=install), and in
              Phase A anything but Kiwi's install network (never `host`,
              `bridge`, `container:...`);
            - privileged, added capabilities, not all capabilities dropped,
              no `no-new-privileges`, a writable root filesystem;
            - the Docker socket (or /var/run, /run) mounted, any bind mount
              other than the sandbox's disk (at /kiwi, and its .volumes
              directories over the image's volume paths, outside /kiwi);
              any mount of a dockerd volume (an image's VOLUME, unmasked);
            - a HostConfig key outside the allow-list set to a non-default
              value (PidMode host, Devices, ...); a sysctl but the one that
              gives the loopback ::1;
            - the runtime runsc-verify (a cached /kiwi) on anything but
              Phase B's verify;
            - a secret-looking variable in a networked container (but one
              whose value is Kiwi's registry placeholder, exactly: no
              credential, KIWI_PRIVATE_REGISTRY_PLACEHOLDERS);
            - more than 2% of the sandboxes gone before they could be
              inspected (each such miss is reported).
  selftest  the rules against synthetic records (each rule must fire)

Only the Python standard library: the Engine API over the unix socket.
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import sys
import urllib.parse


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def api_get(sock, path, timeout=30):
    c = UnixHTTPConnection(sock, timeout=timeout)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def default_socket():
    h = os.environ.get("DOCKER_HOST", "")
    if h.startswith("unix://"):
        return h[len("unix://"):]
    return os.environ.get("KIWI_DOCKER_SOCKET", "/var/run/docker.sock")


# ------------------------------------------------------------------ watch

class Stop(Exception):
    pass


def _stop(*_):
    raise Stop()


def watch(args):
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGALRM, _stop)
    out = open(args.out, "a", buffering=1)
    filters = json.dumps({"type": ["container"], "event": ["create"]})
    if args.seconds:
        signal.setitimer(signal.ITIMER_REAL, args.seconds)
    c = UnixHTTPConnection(args.socket, timeout=None)
    c.request("GET", "/events?filters=" + urllib.parse.quote(filters))
    r = c.getresponse()
    if r.status != 200:
        print(f"container_watch: dockerd answered {r.status} to /events", file=sys.stderr)
        return 2
    if args.ready:
        with open(args.ready, "w") as f:
            f.write(str(os.getpid()))
    try:
        follow(args, r, out)
    except Stop:
        pass
    out.close()
    return 0


def follow(args, r, out):
    """Records each create event of the stream until it ends."""
    buf = b""
    while True:
        try:
            chunk = r.read1(65536)
        except OSError:
            return
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            cid = ev.get("id") or ev.get("Actor", {}).get("ID")
            attrs = ev.get("Actor", {}).get("Attributes", {})
            rec = {"id": cid, "time": ev.get("time"), "labels": attrs}
            try:
                st, body = api_get(args.socket, f"/containers/{cid}/json")
                if st == 200:
                    rec["inspect"] = json.loads(body)
                else:
                    rec["missed"] = f"inspect answered {st}"
            except OSError as e:
                rec["missed"] = str(e)
            out.write(json.dumps(rec) + "\n")


# ------------------------------------------------------------------ rules

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|SESSION|COOKIE|PRIVATE)", re.I)
# variable names Phase A may carry although they match the pattern above
SECRET_NAME_OK = {"NPM_CONFIG_STRICT_SSL"}
# the value KIWI_PRIVATE_REGISTRY_PLACEHOLDERS gives a token variable in every
# phase (worker/egress/private-registry.h): public by design, never a secret
REGISTRY_PLACEHOLDER = "kiwi-placeholder-the-egress-proxy-adds-the-credential"
PROXY_WITH_CREDS = re.compile(r"^[a-z][a-z0-9+.-]*://[^/@]*:[^/@]*@", re.I)

# HostConfig keys Kiwi sets, or that Docker fills with a default: each with
# a predicate over its value. Any other key must be "empty" (None, False, 0,
# "", [], {}).
def _zero(v):
    return v in (None, False, 0, "", [], {})


def allowed_hostconfig(install, cgroupns_default):
    return {
        "NetworkMode": lambda v: (v == "none") if not install else (isinstance(v, str) and v.startswith("kiwi-install")),
        "Runtime": lambda v: v in ("runc", "runsc", "runsc-host", "runsc-net", "runsc-verify",
                                   "io.containerd.runc.v2"),
        "Privileged": lambda v: v is False,
        "CapDrop": lambda v: isinstance(v, list) and any(x.upper() in ("ALL", "CAP_ALL") for x in v),
        "SecurityOpt": lambda v: isinstance(v, list) and "no-new-privileges" in v
        and all(x == "no-new-privileges" for x in v),
        "ReadonlyRootfs": lambda v: v is True,
        "Memory": lambda v: isinstance(v, int) and v > 0,
        "MemorySwap": lambda v: isinstance(v, int) and v > 0,
        "NanoCpus": lambda v: isinstance(v, int) and v > 0,
        "PidsLimit": lambda v: isinstance(v, int) and v > 0,
        "Ulimits": lambda v: isinstance(v, list),
        # ::1 on the loopback, nothing else: eth0 keeps IPv6 off
        "Sysctls": lambda v: v in (None, {}, {"net.ipv6.conf.lo.disable_ipv6": "0"}),
        "Tmpfs": lambda v: isinstance(v, dict) and set(v) <= {"/tmp"},
        "LogConfig": lambda v: isinstance(v, dict) and v.get("Type") in ("none", "json-file"),
        "AutoRemove": lambda v: v is False,
        "Mounts": lambda v: True,  # checked by the mount rule
        "IpcMode": lambda v: v in ("", "private", "shareable", "none"),
        "CgroupnsMode": lambda v: v in ("", cgroupns_default),
        "ShmSize": lambda v: isinstance(v, int),
        "ConsoleSize": lambda v: True,
        "MaskedPaths": lambda v: isinstance(v, list) and len(v) > 0,
        "ReadonlyPaths": lambda v: isinstance(v, list) and len(v) > 0,
        "RestartPolicy": lambda v: isinstance(v, dict) and v.get("Name") in ("", "no"),
        "Isolation": lambda v: v in ("", "default"),
        "OomKillDisable": lambda v: v in (False, None),
        "BlkioWeight": lambda v: v == 0,
        "CpuShares": lambda v: v == 0,
        "MemoryReservation": lambda v: v == 0,
        "MemorySwappiness": lambda v: v is None,
        "Init": lambda v: v in (None, False),
        "PidMode": lambda v: v == "",
        "UTSMode": lambda v: v == "",
        "UsernsMode": lambda v: v == "",
        "CgroupParent": lambda v: v == "",
        "VolumeDriver": lambda v: v == "",
        "DnsOptions": lambda v: v in (None, []),
        "DnsSearch": lambda v: v in (None, []),
        "Dns": lambda v: v in (None, []),
        "Links": lambda v: v in (None, []),
        "KernelMemory": lambda v: v == 0,
        "KernelMemoryTCP": lambda v: v == 0,
    }


# the one bind mount a sandbox has: its own disk, <state>/sandboxes/<name>/mnt,
# at /kiwi (tests run workers on state directories of their own)
SANDBOX_DISK = re.compile(r"^/[^\0]*/sandboxes/kiwi-[A-Za-z0-9._-]+/mnt$")
# and, in Phase A under gVisor only, the host's upstream resolvers read-only at
# /etc/resolv.conf (sandbox/docker/resolv.h: netstack cannot reach Docker's own)
GVISOR_RESOLV = re.compile(r"^/[^\0]*/gvisor-resolv\.conf$")
# an image's volume path masked by a directory of the same sandbox's disk
# (sandbox/docker/volumes.h): <disk>/{mnt,fs}/.volumes/<n>
SANDBOX_VOLUME = re.compile(r"^(/[^\0]*/sandboxes/kiwi-[A-Za-z0-9._-]+)/(mnt|fs)/\.volumes/[0-9]+$")
SOCKET_PATHS = re.compile(r"(docker\.sock|containerd\.sock|^/var/run/?$|^/run/?$|^/$)")


def resolv_read_only(m, insp):
    """A resolver bind mount is read-only, as asked (HostConfig) and as made (inspect's RW)."""
    if "ReadOnly" in m:
        return m.get("ReadOnly") is True
    made = [x for x in insp.get("Mounts") or [] if x.get("Destination") == "/etc/resolv.conf"]
    return all(x.get("RW") is False for x in made)


def violations(rec, state_dir, cgroupns_default):
    """The rules broken by one record, as strings."""
    labels = rec.get("labels") or {}
    insp = rec.get("inspect")
    if insp is not None:
        labels = (insp.get("Config") or {}).get("Labels") or labels
    if labels.get("org.kiwi.sandbox") != "1":
        return []
    name = f"{rec.get('id', '?')[:12]} (task {labels.get('org.kiwi.task', '?')}, phase {labels.get('org.kiwi.phase', '?')})"
    if insp is None:
        return []  # counted by check(): nothing of it could be seen
    bad = []
    hc = insp.get("HostConfig") or {}
    install = labels.get("org.kiwi.network") == "install" and labels.get("org.kiwi.phase") == "install"
    if labels.get("org.kiwi.network") == "install" and not install:
        bad.append(f"{name}: network label install outside Phase A")
    allow = allowed_hostconfig(install, cgroupns_default)
    for k, v in sorted(hc.items()):
        pred = allow.get(k)
        if pred is None:
            if not _zero(v):
                bad.append(f"{name}: HostConfig.{k} = {json.dumps(v)[:120]} (not in the allow-list)")
        elif not pred(v):
            bad.append(f"{name}: HostConfig.{k} = {json.dumps(v)[:120]}")
    # runsc-verify caches /kiwi inside the sandbox: only for Phase B's verify,
    # whose files are all in before it runs (never the Implementer's session)
    if hc.get("Runtime") == "runsc-verify" and (install or labels.get("org.kiwi.phase") != "verify"):
        bad.append(f"{name}: runtime runsc-verify outside Phase B's verify (phase {labels.get('org.kiwi.phase')!r})")
    for k in ("NetworkMode", "Privileged", "CapDrop", "SecurityOpt", "ReadonlyRootfs", "PidsLimit", "Memory"):
        if k not in hc:
            bad.append(f"{name}: HostConfig.{k} missing")
    for key in ("CapAdd", "Devices", "DeviceRequests", "DeviceCgroupRules", "Binds", "VolumesFrom",
                "ExtraHosts", "GroupAdd", "PortBindings"):
        if not _zero(hc.get(key)):
            bad.append(f"{name}: HostConfig.{key} = {json.dumps(hc.get(key))[:120]}")
    mounts = (hc.get("Mounts") or []) + [
        {"Source": m.get("Source"), "Type": m.get("Type"), "Target": m.get("Destination")}
        for m in insp.get("Mounts") or [] if m.get("Type") == "bind"]
    for m in insp.get("Mounts") or []:
        if m.get("Type") not in ("bind", "tmpfs"):
            bad.append(f"{name}: a {m.get('Type')} mount at {m.get('Destination')} ({m.get('Source')}): "
                       "outside the sandbox's disk ceiling")
    disks = {m["Source"][:-len("/mnt")] for m in mounts
             if m.get("Target") == "/kiwi" and SANDBOX_DISK.search(m.get("Source") or "")}
    for m in mounts:
        src = m.get("Source") or ""
        vol = SANDBOX_VOLUME.search(src) if m.get("Type") == "bind" else None
        target = m.get("Target") or ""
        if SOCKET_PATHS.search(src):
            bad.append(f"{name}: mounts {src}")
        elif vol:
            if vol.group(1) not in disks or target == "/kiwi" or target.startswith("/kiwi/"):
                bad.append(f"{name}: {src} at {target}: not this sandbox's disk, or inside /kiwi")
        elif m.get("Type") == "bind" and GVISOR_RESOLV.search(src) and m.get("Target") == "/etc/resolv.conf":
            if not (install and hc.get("Runtime") == "runsc-net" and resolv_read_only(m, insp)):
                bad.append(f"{name}: {src} at /etc/resolv.conf outside Phase A under runsc-net, or writable")
        elif m.get("Type") == "bind" and not (SANDBOX_DISK.search(src) and m.get("Target") == "/kiwi"):
            bad.append(f"{name}: bind mount of {src} at {m.get('Target')}: not the sandbox's own disk at /kiwi")
    cfg = insp.get("Config") or {}
    if cfg.get("User") in (None, "", "0", "root", "0:0"):
        bad.append(f"{name}: runs as root (User {cfg.get('User')!r})")
    networked = hc.get("NetworkMode") not in ("none",)
    for e in cfg.get("Env") or []:
        k, _, v = e.partition("=")
        if networked and SECRET_NAME.search(k) and k.upper() not in SECRET_NAME_OK and v != REGISTRY_PLACEHOLDER:
            bad.append(f"{name}: secret-looking variable {k} in a networked container")
        if networked and PROXY_WITH_CREDS.search(v):
            bad.append(f"{name}: {k} carries credentials in a networked container")
    return bad


def load(path):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
    return recs


def cgroupns_of(sock):
    try:
        st, body = api_get(sock, "/info")
        if st == 200 and json.loads(body).get("CgroupVersion") == "2":
            return "private"
    except OSError:
        pass
    return "host"


def check(args):
    recs = load(args.records)
    cg = args.cgroupns or cgroupns_of(args.socket)
    kiwi = [r for r in recs if ((r.get("inspect") or {}).get("Config") or {}).get("Labels", r.get("labels", {}))
            .get("org.kiwi.sandbox") == "1" or (r.get("labels") or {}).get("org.kiwi.sandbox") == "1"]
    networked = sum(1 for r in kiwi if ((r.get("inspect") or {}).get("HostConfig") or {}).get("NetworkMode") != "none")
    bad = []
    for r in recs:
        bad.extend(violations(r, args.state_dir, cg))
    # a one-shot run can be created, run and removed before its inspect
    # arrives: a few such misses are reported; more than 2% of the
    # sandboxes means the watcher did not see the suite, a failure
    missed = [r for r in kiwi if r.get("inspect") is None]
    for r in missed:
        print(f"container_watch: not inspected (gone first): {r.get('id', '?')[:12]} "
              f"(phase {(r.get('labels') or {}).get('org.kiwi.phase', '?')}, {r.get('missed', '')})")
    if len(missed) > max(1, len(kiwi) // 50):
        bad.append(f"{len(missed)} of {len(kiwi)} sandboxes gone before they could be inspected")
    phases = {}
    for r in kiwi:
        p = (r.get("labels") or {}).get("org.kiwi.phase", "?")
        phases[p] = phases.get(p, 0) + 1
    print(f"container_watch: {len(recs)} container(s) created, {len(kiwi)} Kiwi sandbox(es) "
          f"({', '.join(f'{k} {v}' for k, v in sorted(phases.items()))}), {networked} networked, "
          f"{len(bad)} violation(s)")
    for b in bad[:200]:
        print(f"container_watch: VIOLATION {b}")
    if args.min and len(kiwi) < args.min:
        print(f"container_watch: only {len(kiwi)} Kiwi sandbox(es) seen, expected at least {args.min}: "
              "the watcher did not see the suite")
        return 1
    return 1 if bad else 0


# ------------------------------------------------------------------ selftest

def _good(phase="verify", network="none"):
    install = phase == "install"
    return {
        "id": "0123456789abcdef",
        "labels": {"org.kiwi.sandbox": "1", "org.kiwi.phase": phase, "org.kiwi.network": "install" if install else "none",
                   "org.kiwi.task": "t1"},
        "inspect": {
            "Config": {"User": "1000:1000", "Env": ["HOME=/kiwi/home", "PATH=/usr/bin"],
                       "Labels": {"org.kiwi.sandbox": "1", "org.kiwi.phase": phase,
                                  "org.kiwi.network": "install" if install else "none", "org.kiwi.task": "t1"}},
            "HostConfig": {"NetworkMode": "kiwi-install" if install else network, "Runtime": "runc", "Privileged": False,
                           "CapDrop": ["ALL"], "CapAdd": None, "SecurityOpt": ["no-new-privileges"],
                           "ReadonlyRootfs": True, "Memory": 1 << 30, "MemorySwap": 1 << 30, "NanoCpus": 10 ** 9,
                           "PidsLimit": 256, "Ulimits": [], "Tmpfs": {"/tmp": "rw"}, "PidMode": "", "IpcMode": "private",
                           "CgroupnsMode": "host", "LogConfig": {"Type": "none"}, "AutoRemove": False,
                           "Mounts": [{"Type": "bind", "Source": "/var/lib/kiwi/sandboxes/kiwi-w-x/mnt", "Target": "/kiwi"}],
                           "MaskedPaths": ["/proc/kcore"], "ReadonlyPaths": ["/proc/sys"], "ShmSize": 67108864},
            "Mounts": [{"Type": "bind", "Source": "/var/lib/kiwi/sandboxes/kiwi-w-x/mnt", "Destination": "/kiwi"}],
        },
    }


def selftest(_args):
    cases = []

    def case(name, mutate, expect, phase="verify"):
        r = _good(phase)
        mutate(r)
        got = violations(r, "/var/lib/kiwi", "host")
        ok = bool(got) == expect
        cases.append((name, ok, got))

    hc = lambda r: r["inspect"]["HostConfig"]  # noqa: E731
    case("a good verify sandbox passes", lambda r: None, False)
    case("a good Phase A sandbox passes", lambda r: None, False, phase="install")
    case("network bridge outside Phase A", lambda r: hc(r).update(NetworkMode="bridge"), True)
    case("network host in Phase A", lambda r: hc(r).update(NetworkMode="host"), True, phase="install")
    case("install network on a session sandbox", lambda r: hc(r).update(NetworkMode="kiwi-install"), True)
    case("privileged", lambda r: hc(r).update(Privileged=True), True)
    case("CapAdd", lambda r: hc(r).update(CapAdd=["NET_ADMIN"]), True)
    case("capabilities not dropped", lambda r: hc(r).update(CapDrop=[]), True)
    case("no no-new-privileges", lambda r: hc(r).update(SecurityOpt=[]), True)
    case("seccomp unconfined", lambda r: hc(r).update(SecurityOpt=["no-new-privileges", "seccomp=unconfined"]), True)
    case("writable root", lambda r: hc(r).update(ReadonlyRootfs=False), True)
    case("PidMode host", lambda r: hc(r).update(PidMode="host"), True)
    case("IpcMode host", lambda r: hc(r).update(IpcMode="host"), True)
    case("UsernsMode host", lambda r: hc(r).update(UsernsMode="host"), True)
    case("devices", lambda r: hc(r).update(Devices=[{"PathOnHost": "/dev/kvm"}]), True)
    case("sysctls", lambda r: hc(r).update(Sysctls={"net.ipv4.ip_forward": "1"}), True)
    case("IPv6 on every interface",
         lambda r: hc(r).update(Sysctls={"net.ipv6.conf.all.disable_ipv6": "0"}), True)
    case("a sysctl beside ::1 on the loopback",
         lambda r: hc(r).update(Sysctls={"net.ipv6.conf.lo.disable_ipv6": "0", "kernel.shmmax": "1"}), True)
    case("::1 on the loopback passes", lambda r: hc(r).update(Sysctls={"net.ipv6.conf.lo.disable_ipv6": "0"}),
         False)
    case("an unknown key set", lambda r: hc(r).update(OomScoreAdj=-1000), True)
    case("Docker socket bound",
         lambda r: r["inspect"]["Mounts"].append({"Type": "bind", "Source": "/var/run/docker.sock",
                                                  "Destination": "/var/run/docker.sock"}), True)
    case("Binds set", lambda r: hc(r).update(Binds=["/etc:/etc"]), True)
    case("a bind mount other than the sandbox's disk",
         lambda r: hc(r)["Mounts"].append({"Type": "bind", "Source": "/root", "Target": "/r"}), True)
    case("the disk of a worker on another state dir",
         lambda r: (hc(r).update(Mounts=[{"Type": "bind", "Source": "/tmp/t/state/sandboxes/kiwi-w-1/mnt",
                                          "Target": "/kiwi"}]),
                    r["inspect"].update(Mounts=[{"Type": "bind", "Source": "/tmp/t/state/sandboxes/kiwi-w-1/mnt",
                                                 "Destination": "/kiwi"}])), False)
    case("a sandbox disk at another target",
         lambda r: r["inspect"]["Mounts"].append({"Type": "bind", "Source": "/var/lib/kiwi/sandboxes/kiwi-w-2/mnt",
                                                  "Destination": "/etc"}), True)
    def volume(src, target):
        def m(r):
            hc(r)["Mounts"].append({"Type": "bind", "Source": src, "Target": target})
            r["inspect"]["Mounts"].append({"Type": "bind", "Source": src, "Destination": target})
        return m
    case("an image volume masked by the sandbox's disk",
         volume("/var/lib/kiwi/sandboxes/kiwi-w-x/mnt/.volumes/0", "/var/lib/postgresql/data"), False)
    case("an image volume masked by the disk under an overlay",
         volume("/var/lib/kiwi/sandboxes/kiwi-w-x/fs/.volumes/3", "/data"), False)
    case("an image volume masked by another sandbox's disk",
         volume("/var/lib/kiwi/sandboxes/kiwi-w-y/mnt/.volumes/0", "/data"), True)
    case("a disk's volume directory inside /kiwi", volume("/var/lib/kiwi/sandboxes/kiwi-w-x/mnt/.volumes/0",
                                                          "/kiwi/src"), True)
    case("a dockerd volume (an image's VOLUME unmasked)",
         lambda r: r["inspect"]["Mounts"].append({"Type": "volume", "Name": "abc", "Destination": "/data",
                                                  "Source": "/var/lib/docker/volumes/abc/_data", "RW": True}), True)

    def resolv(runtime, ro=True, phase_mount=True):
        def m(r):
            hc(r).update(Runtime=runtime)
            hc(r)["Mounts"].append({"Type": "bind", "Source": "/var/lib/kiwi/gvisor-resolv.conf",
                                    "Target": "/etc/resolv.conf", "ReadOnly": ro})
            r["inspect"]["Mounts"].append({"Type": "bind", "Source": "/var/lib/kiwi/gvisor-resolv.conf",
                                           "Destination": "/etc/resolv.conf", "RW": not ro})
        return m
    case("Phase A under runsc-net with the upstream resolvers read-only", resolv("runsc-net"), False, phase="install")
    case("the upstream resolvers writable", resolv("runsc-net", ro=False), True, phase="install")
    case("the upstream resolvers under runc", resolv("runc"), True, phase="install")
    case("the upstream resolvers outside Phase A", resolv("runsc"), True)
    case("a verify under runsc-verify", lambda r: hc(r).update(Runtime="runsc-verify"), False)
    case("a session under runsc-verify",
         lambda r: (hc(r).update(Runtime="runsc-verify"), r["labels"].update({"org.kiwi.phase": "session"}),
                    r["inspect"]["Config"]["Labels"].update({"org.kiwi.phase": "session"})), True)
    case("Phase A under runsc-verify", lambda r: hc(r).update(Runtime="runsc-verify"), True, phase="install")
    case("root user", lambda r: r["inspect"]["Config"].update(User="0"), True)
    case("a secret in a networked container",
         lambda r: r["inspect"]["Config"]["Env"].append("ANTHROPIC_API_KEY=x"), True, phase="install")
    case("a proxy with credentials in a networked container",
         lambda r: r["inspect"]["Config"]["Env"].append("HTTPS_PROXY=http://u:p@proxy:3128"), True, phase="install")
    case("a token variable holding Kiwi's registry placeholder, in Phase A",
         lambda r: r["inspect"]["Config"]["Env"].append("NPM_TOKEN=" + REGISTRY_PLACEHOLDER), False, phase="install")
    case("... holding anything else",
         lambda r: r["inspect"]["Config"]["Env"].append("NPM_TOKEN=" + REGISTRY_PLACEHOLDER + "x"), True, phase="install")
    case("a credential in Phase B is allowed",
         lambda r: r["inspect"]["Config"]["Env"].append("APP_TEST_TOKEN=x"), False)
    case("not Kiwi's: ignored", lambda r: (r["labels"].clear(), r["inspect"]["Config"]["Labels"].clear(),
                                           hc(r).update(Privileged=True)), False)
    failed = 0
    for name, ok, got in cases:
        print(f"{'ok' if ok else 'not ok'} - {name}{'' if ok else ': ' + repr(got)}")
        failed += not ok
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--socket", default=default_socket(), help="dockerd's unix socket")
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("watch")
    w.add_argument("--out", required=True)
    w.add_argument("--ready", help="file written once the event stream is open")
    w.add_argument("--seconds", type=float, default=0)
    c = sub.add_parser("check")
    c.add_argument("records")
    c.add_argument("--state-dir", default=os.environ.get("KIWI_STATE_DIR", "/var/lib/kiwi"))
    c.add_argument("--cgroupns", help="dockerd's default cgroup namespace mode (default: from /info)")
    c.add_argument("--min", type=int, default=0, help="fail when fewer Kiwi sandboxes were seen")
    sub.add_parser("selftest")
    args = ap.parse_args()
    return {"watch": watch, "check": check, "selftest": selftest}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
