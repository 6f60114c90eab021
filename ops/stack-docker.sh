#!/usr/bin/env bash
# ops/stack-docker.sh: the stack's dockerd (found, started, checked, stopped),
# sourced by ops/stack.sh, whose settings and helpers (log, launch, the
# owned-pid records, status_line) it uses; not run on its own.
# shellcheck disable=SC2154,SC2034 # the settings are ops/stack.sh's, and it reads what this file sets

# ------------------------------------------------------------------ docker

docker_ping() {
  [[ -S $1 ]] || return 1
  [[ $(curl -s --max-time 3 --unix-socket "$1" http://docker/_ping 2>/dev/null) == OK ]]
}

# docker_info SOCK: the Engine API's /info as JSON.
docker_info() {
  curl -sf --max-time 10 --unix-socket "$1" http://docker/info
}

# Sockets where a dockerd may already answer, in order, without duplicates.
docker_candidates() {
  local -a c=()
  local s seen=" "
  if [[ -n ${DOCKER_HOST:-} ]]; then
    case $DOCKER_HOST in
      unix://*) c+=("${DOCKER_HOST#unix://}") ;;
      *) warn "docker: DOCKER_HOST=$DOCKER_HOST is not a unix socket; ignored" ;;
    esac
  fi
  c+=("$DOCKER_SOCK" /var/run/docker.sock)
  for s in "${c[@]}"; do
    [[ $seen == *" $s "* ]] && continue
    seen+="$s "
    echo "$s"
  done
}

# docker_find: prints the first answering socket, or nothing.
docker_find() {
  local s
  while read -r s; do
    if docker_ping "$s"; then echo "$s"; return 0; fi
  done < <(docker_candidates)
  return 0
}

# docker_pid SOCK: pid of the dockerd behind SOCK when its pidfile is known.
docker_pid() {
  local pf="" pid
  case $1 in
    "$DOCKER_SOCK") pf=$DOCKER_PIDFILE ;;
    /var/run/docker.sock|/run/docker.sock) pf=/var/run/docker.pid ;;
  esac
  [[ -n $pf ]] || return 0
  pid=$(read_pidfile "$pf")
  [[ -n $pid ]] && pid_matches "$pid" dockerd && echo "$pid"
  return 0
}

# other_dockerd: "PID CMDLINE" of a running dockerd process, or nothing.
other_dockerd() {
  local d pid comm
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    comm=$(cat "$d/comm" 2>/dev/null) || continue
    [[ $comm == dockerd ]] || continue
    pid_alive "$pid" || continue
    echo "$pid $(pid_cmdline "$pid")"
    return 0
  done
  return 0
}

# docker_runtimes SOCK: the daemon's runtimes, without containerd's aliases.
docker_runtimes() {
  docker_info "$1" | jq -r '.Runtimes // {} | keys | map(select(startswith("io.containerd") | not)) | join(",")'
}

# sandbox_runtimes LIST: the ones Kiwi's sandbox drivers use (runc, runsc),
# in that order, among LIST (runsc-net is Phase A's, under the gvisor driver).
sandbox_runtimes() {
  local r out=""
  for r in runc runsc; do
    [[ ,$1, == *,$r,* ]] && out+=${out:+,}$r
  done
  echo "$out"
}

# docker_check_runsc SOCK PID: fail clearly when runsc is not registered.
docker_check_runsc() {
  local sock=$1 pid=$2 info args
  info=$(docker_info "$sock") || die "docker: $sock answers _ping but not /info"
  if ! jq -e '.Runtimes.runsc' >/dev/null <<<"$info"; then
    cat >&2 <<EOF
$KIWI_LOG_NAME: error: docker: the dockerd at $sock${pid:+ (pid $pid)} has no "runsc" runtime.
  Kiwi's gvisor sandbox needs it. Either register it in that daemon's config
  (/etc/docker/daemon.json, or the file given by its --config-file):
      {"runtimes": {"runsc": {"path": "$(runsc_path)", "runtimeArgs": ["--network=none"]},
                    "runsc-verify": {"path": "$(runsc_path)",
                                     "runtimeArgs": ["--network=none", "--file-access-mounts=exclusive"]},
                    "runsc-net": {"path": "$(runsc_path)", "runtimeArgs": ["--network=sandbox"]}}}
  and reload it (kill -HUP ${pid:-<dockerd pid>}, or: systemctl reload docker),
  or stop that dockerd (systemctl disable --now docker.service docker.socket)
  so that ops/stack.sh starts its own, with runsc registered, on $DOCKER_SOCK.
EOF
    exit 1
  fi
  args=$(jq -c '.Runtimes.runsc.runtimeArgs // []' <<<"$info")
  [[ $args == *--network=none* ]] ||
    warn "docker: runsc at $sock runs without --network=none ($args): Phase B and the session rely on it"
  if ! jq -e '.Runtimes["runsc-verify"]' >/dev/null <<<"$info"; then
    warn "docker: the dockerd at $sock has no \"runsc-verify\" runtime, which Phase B's verify under gVisor uses (it then runs under runsc, reading the dependencies slower); add it like runsc above, with runtimeArgs [\"--network=none\", \"--file-access-mounts=exclusive\"]"
  else
    args=$(jq -c '.Runtimes["runsc-verify"].runtimeArgs // []' <<<"$info")
    [[ $args == *--network=none* ]] ||
      warn "docker: runsc-verify at $sock runs without --network=none ($args): Phase B's verify relies on it"
  fi
  if ! jq -e '.Runtimes["runsc-net"]' >/dev/null <<<"$info"; then
    warn "docker: the dockerd at $sock has no \"runsc-net\" runtime, which Phase A under gVisor uses; add it like runsc above, with runtimeArgs [\"--network=sandbox\"]"
  else
    args=$(jq -c '.Runtimes["runsc-net"].runtimeArgs // []' <<<"$info")
    [[ $args == *--network=none* ]] &&
      warn "docker: runsc-net at $sock runs with --network=none ($args): Phase A under gVisor has no network"
    [[ $args == *--network=host* ]] &&
      warn "docker: runsc-net at $sock is hostinet ($args), not gVisor's own network stack (Debian's runsc; ops/setup.sh builds a current one)"
  fi
  local path
  path=$(jq -r '.Runtimes.runsc.path // ""' <<<"$info")
  [[ $path == "$KIWI_RUNSC_DEBIAN" ]] &&
    warn "docker: runsc at $sock is Debian's $path (0.0~20221219), not the one ops/setup.sh builds ($KIWI_RUNSC_BUILT)"
  return 0
}

docker_fail() {
  log_tail "$DOCKER_LOG" 40
  die "docker: $*"
}

# The config of a dockerd that stack.sh starts, for the runsc of runsc_path
# (ops/lib.sh: the one ops/setup.sh built from ops/gvisor, else Debian's).
# runsc: gVisor with no network (the Implementer's sandbox).
# runsc-verify: the same, with the sandbox's /kiwi cached inside
# (--file-access-mounts=exclusive): Phase B's verify, whose files are all put
# before anything in it runs (sandbox.h: files_sealed).
# runsc-net: Phase A, with NetworkMode set to Kiwi's install bridge: gVisor's
# own network stack (netstack) in the container's network namespace. Debian's
# runsc (2022-12) refuses netstack on this kernel ("cannot run with network
# enabled in root network namespace"), so with it runsc-net is hostinet
# (--network=host) inside that same namespace, which is weaker (the sandbox's
# socket calls reach the host kernel). See docs/gvisor-phase-a.md.
daemon_json() {
  local bin net=sandbox
  bin=$(runsc_path)
  [[ $bin == "$KIWI_RUNSC_DEBIAN" ]] && net=host
  jq -cn --arg bin "$bin" --arg net "--network=$net" \
    '{runtimes: {runsc: {path: $bin, runtimeArgs: ["--network=none"]},
                 "runsc-verify": {path: $bin, runtimeArgs: ["--network=none", "--file-access-mounts=exclusive"]},
                 "runsc-net": {path: $bin, runtimeArgs: [$net]}},
      "storage-driver": "overlay2"}'
}

write_daemon_json() {
  local tmp=$DOCKER_CONFIG.tmp.$$
  daemon_json >"$tmp"
  mv -f "$tmp" "$DOCKER_CONFIG"
}

# daemon_json_current: true when $DOCKER_CONFIG says what daemon_json says.
daemon_json_current() {
  [[ -r $DOCKER_CONFIG ]] || return 1
  [[ $(jq -cS . "$DOCKER_CONFIG" 2>/dev/null) == "$(daemon_json | jq -cS .)" ]]
}

# containerd_pidfile_clear FILE: removes the pidfile of the containerd that
# dockerd starts under its exec-root unless it names that containerd (alive,
# run with the containerd.toml beside FILE).
# dockerd takes any pid alive in it for its containerd (kill -0, which a
# thread id passes too) and waits for a socket nobody serves, then exits:
# after a restart the old pid may be another process's, or one of its
# threads (a Kafka thread, on a machine brought back from a snapshot).
containerd_pidfile_clear() {
  local pid
  pid=$(read_pidfile "$1")
  [[ -n $pid ]] || return 0
  pid_matches "$pid" "$(dirname "$1")/containerd.toml" && return 0
  log "docker: removing $1: pid $pid is not its containerd (left from before a restart)"
  rm -f "$1"
}

docker_up() {
  local sock pid own t0 rc=0 rt
  t0=$(now_ms)
  sock=$(docker_find)
  if [[ -n $sock ]]; then
    pid=$(docker_pid "$sock")
    own=$(owned_pid docker)
    if [[ -n $pid && $own == "$pid" && $sock == "$DOCKER_SOCK" ]] && ! daemon_json_current; then
      # Our own dockerd, started with an older config: runtimes reload on SIGHUP.
      log "docker: updating $DOCKER_CONFIG and reloading dockerd (pid $pid)"
      write_daemon_json
      kill -HUP "$pid"
      sleep 1
    fi
    docker_check_runsc "$sock" "$pid"
    DOCKER_SOCKET=$sock
    rt=$(docker_runtimes "$sock")
    SANDBOX_RUNTIMES=$(sandbox_runtimes "$rt")
    write_env
    if [[ -n $pid && $own == "$pid" ]]; then
      log "docker: already running (pid $pid, $sock, owned; runtimes $rt)"
    else
      log "docker: using the running dockerd at $sock (pid ${pid:-unknown}, adopted: not started by stack.sh; runtimes $rt)"
    fi
    return 0
  fi

  # Our dockerd may be running but not answering yet (still starting).
  pid=$(read_pidfile "$DOCKER_PIDFILE")
  if [[ -n $pid ]] && pid_matches "$pid" dockerd; then
    log "docker: dockerd pid $pid is running but $DOCKER_SOCK does not answer; waiting up to ${DOCKER_TIMEOUT}s"
    wait_for "$DOCKER_TIMEOUT" "$pid" docker_ping "$DOCKER_SOCK" || rc=$?
    ((rc == 0)) || docker_fail "dockerd pid $pid does not answer on $DOCKER_SOCK"
    docker_up
    return 0
  fi

  # Two dockerds cannot share the docker0 bridge (nor iptables chains): never
  # start a second one next to a dockerd that answers somewhere we don't look.
  local other
  other=$(other_dockerd)
  if [[ -n $other ]]; then
    die "docker: another dockerd is running (pid ${other%% *}: ${other#* }) but answers on none of: $(docker_candidates | tr '\n' ' ')- point DOCKER_HOST at its socket (unix://PATH) to use it; stack.sh will not start a second dockerd next to it"
  fi
  ((EUID == 0)) || die "docker: no dockerd answers and starting one needs root"
  command -v dockerd >/dev/null || die "docker: dockerd not found (ops/setup.sh installs docker.io)"
  local runsc
  runsc=$(runsc_path)
  if [[ $runsc == "$KIWI_RUNSC_DEBIAN" ]]; then
    warn "docker: no runsc $(gvisor_pinned_version) at $KIWI_RUNSC_BUILT (ops/setup.sh builds it): registering Debian's $KIWI_RUNSC_DEBIAN, with hostinet for Phase A (docs/gvisor-phase-a.md)"
  fi
  [[ -x $runsc ]] || warn "docker: $runsc is missing; the runsc runtime will not work (ops/setup.sh installs runsc)"

  mkdir -p "$KIWI_STATE_DIR/docker" "$KIWI_RUN_DIR/docker-exec"
  containerd_pidfile_clear "$KIWI_RUN_DIR/docker-exec/containerd/containerd.pid"
  write_daemon_json
  rm -f "$DOCKER_PIDFILE"   # stale (its process is gone): dockerd refuses a live one
  pid=$(launch "$DOCKER_LAUNCH_PIDFILE" "$DOCKER_LOG" dockerd \
        --config-file "$DOCKER_CONFIG" \
        -H "unix://$DOCKER_SOCK" \
        --data-root "$KIWI_STATE_DIR/docker" \
        --exec-root "$KIWI_RUN_DIR/docker-exec" \
        --pidfile "$DOCKER_PIDFILE") || docker_fail "could not launch dockerd"
  set_owned docker "$pid"
  wait_for "$DOCKER_TIMEOUT" "$pid" docker_ping "$DOCKER_SOCK" || rc=$?
  if ((rc != 0)); then
    clear_owned docker
    ((rc == 2)) && docker_fail "dockerd (pid $pid) exited during start-up"
    stop_pid "$pid" dockerd 30 || true
    docker_fail "dockerd (pid $pid) did not answer on $DOCKER_SOCK within ${DOCKER_TIMEOUT}s (stopped it)"
  fi
  docker_check_runsc "$DOCKER_SOCK" "$pid"
  DOCKER_SOCKET=$DOCKER_SOCK
  rt=$(docker_runtimes "$DOCKER_SOCK")
  SANDBOX_RUNTIMES=$(sandbox_runtimes "$rt")
  write_env
  log "docker: started (pid $pid, $DOCKER_SOCK; runtimes $rt) in $(fmt_ms $(($(now_ms) - t0)))"
}

docker_down() {
  local own sock pid
  own=$(owned_pid docker)
  if [[ -n $own ]] && pid_matches "$own" dockerd; then
    log "docker: stopping dockerd pid $own"
    stop_pid "$own" dockerd "$STOP_TIMEOUT" || die "docker: dockerd pid $own did not exit"
    clear_owned docker
    rm -f "$DOCKER_LAUNCH_PIDFILE"
    log "docker: stopped"
    return 0
  fi
  [[ -n $own ]] && clear_owned docker
  sock=$(docker_find)
  if [[ -n $sock ]]; then
    pid=$(docker_pid "$sock")
    log "docker: the dockerd at $sock (pid ${pid:-unknown}) was not started by stack.sh; left running"
  else
    log "docker: not running"
  fi
}

docker_status() {
  local sock pid own how=adopted rt
  sock=$(docker_find)
  if [[ -z $sock ]]; then
    status_line docker stopped - "unix://$DOCKER_SOCKET" -
    return 1
  fi
  pid=$(docker_pid "$sock")
  own=$(owned_pid docker)
  [[ -n $pid && $own == "$pid" ]] && how=owned
  rt=$(docker_runtimes "$sock" 2>/dev/null || true)
  if [[ ,$rt, != *,runsc,* ]]; then
    status_line docker running "${pid:--}" "unix://$sock" "$how, NO runsc runtime (runtimes: ${rt:-?})"
    return 1
  fi
  status_line docker running "${pid:--}" "unix://$sock" "$how, runtimes $rt"
}
