#!/usr/bin/env bash
# ops/doctor.sh: can this host run Kiwi's tasks? Each check on a line, and
# for each that fails the command that fixes it, to run as printed (as root,
# from anywhere):
#
#   stack      Kafka, Redis, dockerd and the snapshot store of ops/stack.sh
#              are running, and its env file is there
#   runtimes   dockerd has gVisor's runtimes (runsc, runsc-net)
#   images     every image of the catalogue (KIWI_IMAGE_CATALOG, default
#              ops/images/catalog.local.tsv) is in dockerd
#   proxy      Squid, Phase A's egress proxy, is installed
#   worker     kiwi-worker is built (KIWI_BUILD_DIR, default build/)
#   egress     kiwi-worker --egress-check, with this environment and the
#              stack's: the host's egress rules in place (the ones a worker
#              of this configuration checks), Phase B with no network, Phase
#              A kept from the fleet's services; the checks through Phase
#              A's proxy need a worker's own proxy, and each running worker
#              makes them (its heartbeat, kiwi fleet)
#
# Usage: ops/doctor.sh [--no-egress] [--help]
#   --no-egress  leave out the egress checks (they start sandboxes: ~20 s)
# Exit status: 0 when every check passes, 1 otherwise.
set -uo pipefail
KIWI_LOG_NAME=doctor
# shellcheck source=ops/lib.sh
. "$(dirname "$0")/lib.sh"

egress=1
case "${1:-}" in
  -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --no-egress) egress=0 ;;
  "") ;;
  *) echo "ops/doctor.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac

root=$KIWI_REPO_DIR
build=${KIWI_BUILD_DIR:-$root/build}
failed=0
ok() { printf 'ok    %-9s %s\n' "$1" "$2"; }
bad() { # bad NAME WHAT FIX
  printf 'FAIL  %-9s %s\n' "$1" "$2"
  [ -n "${3:-}" ] && printf '      fix: %s\n' "$3"
  failed=$((failed + 1))
}

# ---- stack
status=$(bash "$KIWI_OPS_DIR/stack.sh" status 2>&1)
for svc in kafka redis docker store; do
  line=$(grep -E "^$svc +" <<<"$status" | head -n 1)
  if [[ $line =~ ^$svc\ +running ]]; then ok stack "$svc: $(tr -s ' ' <<<"${line#"$svc"}" | sed 's/^ //')"
  else bad stack "$svc is not running${line:+: $(tr -s ' ' <<<"$line")}" "bash $KIWI_OPS_DIR/stack.sh up $svc"
  fi
done
if [ -r "$KIWI_ENV_FILE" ]; then
  ok stack "env file $KIWI_ENV_FILE"
  set -a
  # shellcheck disable=SC1090 # written by ops/stack.sh
  . "$KIWI_ENV_FILE"
  set +a
else
  bad stack "no env file at $KIWI_ENV_FILE" "bash $KIWI_OPS_DIR/stack.sh up"
fi
docker_cmd=(docker -H "${DOCKER_HOST:-unix://$KIWI_RUN_DIR/docker.sock}")

# ---- runtimes
runtimes=$("${docker_cmd[@]}" info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}' 2>/dev/null)
for rt in runsc runsc-net; do
  if [[ " $runtimes " == *" $rt "* ]]; then ok runtimes "$rt registered in dockerd"
  else bad runtimes "dockerd has no runtime $rt${runtimes:+ (it has: $runtimes)}" "bash $KIWI_OPS_DIR/stack.sh up docker"
  fi
done

# ---- images
catalog=${KIWI_IMAGE_CATALOG:-$KIWI_OPS_DIR/images/catalog.local.tsv}
if [ ! -r "$catalog" ]; then
  bad images "cannot read the catalogue $catalog" "unset KIWI_IMAGE_CATALOG (the default is $KIWI_OPS_DIR/images/catalog.local.tsv)"
else
  missing=()
  n=0
  while read -r ref; do
    n=$((n + 1))
    "${docker_cmd[@]}" image inspect "$ref" >/dev/null 2>&1 || missing+=("$ref")
  done < <(awk -F '\t' '!/^#/ && NF >= 3 { print $3 }' "$catalog" | sort -u)
  if [ "${#missing[@]}" = 0 ]; then ok images "all $n images of $(basename "$catalog") present"
  else bad images "${#missing[@]} of $n images missing: ${missing[*]}" "bash $KIWI_OPS_DIR/images/build.sh ${missing[*]}"
  fi
fi

# ---- proxy
if command -v squid >/dev/null 2>&1; then ok proxy "squid: $(command -v squid)"
else bad proxy "squid (Phase A's egress proxy) is not installed" "bash $KIWI_OPS_DIR/setup.sh --no-images"
fi

# ---- worker
worker=$build/worker/kiwi-worker
if [ -x "$worker" ]; then ok worker "$worker"
else bad worker "no kiwi-worker at $worker" "cmake -S $root -B $build -G Ninja && ninja -C $build"
fi

# ---- egress
if [ "$egress" = 1 ] && [ -x "$worker" ]; then
  out=$("$worker" --egress-check 2>/dev/null)
  [ -n "$out" ] || bad egress "kiwi-worker --egress-check printed nothing (its log: $worker --egress-check)" ""
  while IFS=$'\t' read -r name pass detail; do
    [ -n "$name" ] || continue
    case $name in
      phase_a_https | install_denied_host | install_dns_closed)
        # through the worker's own proxy, which only a running worker has
        printf 'info  %-9s %s: checked by each running worker (kiwi fleet shows it)\n' egress "$name"
        continue ;;
    esac
    if [ "$pass" = true ]; then ok egress "$name"
    else
      fix=$(sed -nE 's/.*fix: as root, run `([^`]*)`.*/\1/p' <<<"$detail" | head -n 1)
      bad egress "$name: ${detail:0:300}" "$fix"
    fi
  done < <(python3 -c '
import json, sys
for line in sys.stdin:
    try:
        c = json.loads(line)
    except ValueError:
        continue
    d = " ".join(str(c.get("detail", "")).split())
    print("\t".join([str(c.get("name", "?")), "true" if c.get("ok") is True else "false", d]))
' <<<"$out")
fi

if [ "$failed" = 0 ]; then echo "doctor: this host can run tasks"; exit 0; fi
echo "doctor: $failed check(s) failed; run each fix as printed, then ops/doctor.sh again"
exit 1
