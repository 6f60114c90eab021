#!/usr/bin/env bash
# Kiwi's local stack: Kafka (KRaft, single node), Redis, dockerd with runsc,
# the snapshot store (an OCI registry).
# ops/stack.sh up|down|status|reset [kafka|redis|docker ...]   (see --help)
set -Eeuo pipefail

KIWI_LOG_NAME=stack
# shellcheck source=ops/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
install_err_trap

COMPONENTS=(redis kafka docker store)

KAFKA_DIR=$KIWI_STATE_DIR/kafka
KAFKA_DATA=$KAFKA_DIR/data
KAFKA_PROPS=$KAFKA_DIR/server.properties
KAFKA_LOG4J=$KAFKA_DIR/log4j2.xml
KAFKA_CLUSTER_ID_FILE=$KAFKA_DIR/cluster.id
KAFKA_LOGS=$KIWI_LOG_DIR/kafka
KAFKA_OUT=$KAFKA_LOGS/kafka.out
KAFKA_PIDFILE=$KIWI_RUN_DIR/kafka.pid
REDIS_DIR=$KIWI_STATE_DIR/redis
REDIS_LOG=$KIWI_LOG_DIR/redis.log
REDIS_PIDFILE=$KIWI_RUN_DIR/redis.pid
REDIS_PASSFILE=$KIWI_STATE_DIR/redis.password
REDIS_CONF=$KIWI_STATE_DIR/redis.conf
DOCKER_SOCK=$KIWI_RUN_DIR/docker.sock
DOCKER_CONFIG=$KIWI_RUN_DIR/daemon.json
DOCKER_PIDFILE=$KIWI_RUN_DIR/dockerd.pid
DOCKER_LAUNCH_PIDFILE=$KIWI_RUN_DIR/dockerd.launch.pid
DOCKER_LOG=$KIWI_LOG_DIR/dockerd.log
STORE_DIR=$KIWI_STATE_DIR/registry
STORE_CONF=$STORE_DIR/config.yml
STORE_PIDFILE=$KIWI_RUN_DIR/registry.pid
STORE_LOG=$KIWI_LOG_DIR/registry.log
STORE_REPO=kiwi/snapshots
OWNED=$KIWI_RUN_DIR/owned

KAFKA_TIMEOUT=${KIWI_KAFKA_TIMEOUT:-120}
REDIS_TIMEOUT=${KIWI_REDIS_TIMEOUT:-20}
DOCKER_TIMEOUT=${KIWI_DOCKER_TIMEOUT:-90}
STOP_TIMEOUT=${KIWI_STOP_TIMEOUT:-60}
KAFKA_HEAP=${KIWI_KAFKA_HEAP:--Xms256m -Xmx512m}
KAFKA_PARTITIONS=${KIWI_KAFKA_PARTITIONS:-4}
JAVA=${JAVA:-java}
[[ -n ${JAVA_HOME:-} && -x ${JAVA_HOME}/bin/java && $JAVA == java ]] && JAVA=$JAVA_HOME/bin/java

usage() {
  cat <<EOF
Usage: ops/stack.sh COMMAND [kafka|redis|docker|store ...]  (no component = all)

Commands:
  up      start what is not running (running components are left alone), wait
          until each answers, write the env file and print its path
  down    stop what "up" started (by pid, SIGTERM then SIGKILL); data is kept;
          a dockerd that stack.sh did not start is never stopped
  status  one line per component: running/stopped, pid, address, owned or
          adopted; exit 0 only if every requested component is up
  reset   down, then delete the data of kafka and/or redis (default: both;
          docker's data root is never deleted)

Components:
  kafka   Apache Kafka $( [[ -d $KIWI_KAFKA_LIB ]] && echo "(jars in $KIWI_KAFKA_LIB)" || echo "(run ops/setup.sh first)"), KRaft broker+controller
          on 127.0.0.1:19092 (controller 19093)
  redis   redis-server on 127.0.0.1:16379, dir \$KIWI_STATE_DIR/redis, with a
          password (requirepass) made once and kept in
          \$KIWI_STATE_DIR/redis.password (mode 0600); a running Redis that
          has none is given it (CONFIG SET requirepass)
  docker  an answering dockerd (\$DOCKER_HOST, \$KIWI_STATE_DIR/run/docker.sock,
          /var/run/docker.sock) with runsc registered is adopted; otherwise
          stack.sh starts its own on \$KIWI_STATE_DIR/run/docker.sock
  store   the install-snapshot store: docker-registry (CNCF Distribution, an
          OCI registry) on 127.0.0.1:15000, storage under
          \$KIWI_STATE_DIR/registry; KIWI_STORE_URL in the env file names it
          with the repository (docs/store.md)
A port taken by something else moves to the next free one; the choice is
recorded in the env file and kept on later runs.

Env file: \$KIWI_STATE_DIR/stack.env (now $KIWI_ENV_FILE), KEY=VALUE lines,
mode 0600 (it holds KIWI_REDIS_PASSWORD and REDISCLI_AUTH, which redis-cli
reads):
  set -a; . $KIWI_ENV_FILE; set +a

Environment:
  KIWI_STATE_DIR                 state root (default /var/lib/kiwi)
  KIWI_STACK_KAFKA_PORT          preferred broker port (default 19092)
  KIWI_STACK_KAFKA_CONTROLLER_PORT  preferred controller port (default 19093)
  KIWI_STACK_REDIS_PORT          preferred redis port (default 16379)
  KIWI_STACK_STORE_PORT          preferred store port (default 15000)
  KIWI_KAFKA_HEAP                JVM heap flags (default "-Xms256m -Xmx512m")
  KIWI_KAFKA_PARTITIONS          partitions of auto-created topics (default 4)
  KIWI_KAFKA_TIMEOUT / KIWI_REDIS_TIMEOUT / KIWI_DOCKER_TIMEOUT
                                 start-up waits in seconds (120 / 20 / 90)
  KIWI_STOP_TIMEOUT              SIGTERM grace before SIGKILL (default 60)
EOF
}

# ------------------------------------------------------------ recorded state

# Settings recorded by earlier runs live in the env file itself.
rec_kafka_port=$(env_get "$KIWI_ENV_FILE" KIWI_KAFKA_BROKERS); rec_kafka_port=${rec_kafka_port##*:}
rec_kafka_ctrl=$(env_get "$KIWI_ENV_FILE" KIWI_KAFKA_CONTROLLER); rec_kafka_ctrl=${rec_kafka_ctrl##*:}
rec_redis_port=$(env_get "$KIWI_ENV_FILE" KIWI_REDIS_PORT)
rec_docker_sock=$(env_get "$KIWI_ENV_FILE" KIWI_DOCKER_SOCKET)
rec_runtimes=$(env_get "$KIWI_ENV_FILE" KIWI_SANDBOX_RUNTIMES)
rec_store_url=$(env_get "$KIWI_ENV_FILE" KIWI_STORE_URL)
rec_store_port=${rec_store_url#http://127.0.0.1:}; rec_store_port=${rec_store_port%%/*}
[[ $rec_store_port =~ ^[0-9]+$ ]] || rec_store_port=""

KAFKA_PORT=${rec_kafka_port:-19092}
KAFKA_CTRL_PORT=${rec_kafka_ctrl:-19093}
REDIS_PORT=${rec_redis_port:-16379}
DOCKER_SOCKET=${rec_docker_sock:-$DOCKER_SOCK}
SANDBOX_RUNTIMES=${rec_runtimes:-}
STORE_PORT=${rec_store_port:-15000}

write_env() {
  local tmp=$KIWI_ENV_FILE.tmp.$$ pw
  mkdir -p "$KIWI_STATE_DIR"
  pw=$(redis_password_if_any)
  (umask 077; : >"$tmp")
  {
    echo "KIWI_STATE_DIR=$KIWI_STATE_DIR"
    echo "KIWI_KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT"
    echo "KIWI_KAFKA_CONTROLLER=127.0.0.1:$KAFKA_CTRL_PORT"
    echo "KIWI_REDIS_HOST=127.0.0.1"
    echo "KIWI_REDIS_PORT=$REDIS_PORT"
    echo "KIWI_REDIS_URL=redis://127.0.0.1:$REDIS_PORT"
    if [[ -n $pw ]]; then
      echo "KIWI_REDIS_PASSWORD=$pw"
      echo "REDISCLI_AUTH=$pw"
    fi
    echo "KIWI_DOCKER_SOCKET=$DOCKER_SOCKET"
    echo "DOCKER_HOST=unix://$DOCKER_SOCKET"
    [[ -n $SANDBOX_RUNTIMES ]] && echo "KIWI_SANDBOX_RUNTIMES=$SANDBOX_RUNTIMES"
    [[ -n $(store_pid) ]] && echo "KIWI_STORE_URL=http://127.0.0.1:$STORE_PORT/$STORE_REPO"
    echo "KIWI_LOG_DIR=$KIWI_LOG_DIR"
  } >"$tmp"
  mv -f "$tmp" "$KIWI_ENV_FILE"
}

# Ownership: lines "<component> <pid>" for what this script started.
owned_pid() {
  [[ -r $OWNED ]] || return 0
  awk -v c="$1" '$1 == c { p = $2 } END { if (p != "") print p }' "$OWNED"
}
set_owned() {
  local tmp=$OWNED.tmp.$$
  { [[ -r $OWNED ]] && awk -v c="$1" '$1 != c' "$OWNED"; echo "$1 $2"; } >"$tmp"
  mv -f "$tmp" "$OWNED"
}
clear_owned() {
  [[ -r $OWNED ]] || return 0
  local tmp=$OWNED.tmp.$$
  awk -v c="$1" '$1 != c' "$OWNED" >"$tmp"
  mv -f "$tmp" "$OWNED"
}

# launch PIDFILE LOGFILE CMD...: start CMD in its own session, in the
# background, stdin from /dev/null, output appended to LOGFILE; the pid of CMD
# (a shell that execs it) is written to PIDFILE and printed.
launch() {
  local pidfile=$1 logfile=$2 pid="" i; shift 2
  rm -f "$pidfile"
  # 9>&-: the child must not inherit (and so hold) stack.sh's lock.
  # shellcheck disable=SC2016
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" >>"$logfile" 2>&1 </dev/null 9>&- &
  for ((i = 0; i < 50; i++)); do
    pid=$(read_pidfile "$pidfile")
    [[ -n $pid ]] && break
    sleep 0.1
  done
  [[ -n $pid ]] || return 1
  echo "$pid"
}

ensure_dirs() {
  mkdir -p "$KIWI_RUN_DIR" "$KIWI_LOG_DIR"
}

# ------------------------------------------------- kafka, redis and store

# The pid in pid file $1 when it is a live process whose command line
# matches $2; nothing otherwise.
pidfile_pid() {
  local pid
  pid=$(read_pidfile "$1")
  [[ -n $pid ]] && pid_matches "$pid" "$2" && echo "$pid"
  return 0
}

# Stops component $1 (kafka, redis, store: its pid from ${1}_pid) when
# stack.sh started it, and removes its pid file $2; one that stack.sh did
# not start is left running.
service_down() {
  local name=$1 pidfile=$2 pid own
  pid=$("${name}_pid")
  own=$(owned_pid "$name")
  if [[ -z $pid ]]; then
    log "$name: not running"
    clear_owned "$name"
    return 0
  fi
  if [[ $own != "$pid" ]]; then
    log "$name: pid $pid was not started by stack.sh; left running"
    return 0
  fi
  log "$name: stopping pid $pid"
  stop_pid "$pid" "$name" "$STOP_TIMEOUT" || die "$name: pid $pid did not exit"
  clear_owned "$name"
  rm -f "$pidfile"
  log "$name: stopped"
}

# The status line of component $1 (kafka, redis) on 127.0.0.1:$2, asked
# with ${1}_answers: 0 when it runs and answers.
service_status() {
  local name=$1 port=$2 pid own how=owned
  pid=$("${name}_pid")
  own=$(owned_pid "$name")
  [[ -n $pid && $own != "$pid" ]] && how=adopted
  if [[ -n $pid ]] && "${name}_answers" "$port"; then
    status_line "$name" running "$pid" "127.0.0.1:$port" "$how"
    return 0
  fi
  if [[ -n $pid ]]; then
    status_line "$name" starting "$pid" "127.0.0.1:$port" "$how (not answering)"
  else
    status_line "$name" stopped - "127.0.0.1:$port" -
  fi
  return 1
}

# ------------------------------------------------------------------- kafka

kafka_pid() { pidfile_pid "$KAFKA_PIDFILE" kafka.Kafka; }

kafka_answers() {
  kcat -b "127.0.0.1:$1" -L -m 3 2>/dev/null | grep >/dev/null ' brokers:'
}

kafka_fail() {
  log_tail "$KAFKA_LOGS/server.log" 40
  log_tail "$KAFKA_OUT" 20
  die "kafka: $*"
}

new_cluster_id() {
  # A Kafka Uuid: 16 random bytes, URL-safe base64 without padding, not
  # starting with '-' (what kafka-storage random-uuid prints).
  local id
  while :; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    [[ $id != -* && ${#id} == 22 ]] && break
  done
  echo "$id"
}

kafka_java_opts() {
  # shellcheck disable=SC2206
  local -a heap=($KAFKA_HEAP)
  printf '%s\n' "${heap[@]}" \
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true \
    "-Dlog4j2.configurationFile=$KAFKA_LOG4J" \
    "-Dkafka.logs.dir=$KAFKA_LOGS"
}

kafka_up() {
  local pid t0 rc=0 want_port want_ctrl id
  t0=$(now_ms)
  pid=$(kafka_pid)
  if [[ -n $pid ]]; then
    if kafka_answers "$KAFKA_PORT"; then
      log "kafka: already running (pid $pid, 127.0.0.1:$KAFKA_PORT)"
      return 0
    fi
    log "kafka: pid $pid is running but not answering yet; waiting up to ${KAFKA_TIMEOUT}s"
    wait_for "$KAFKA_TIMEOUT" "$pid" kafka_answers "$KAFKA_PORT" || rc=$?
    ((rc == 0)) || kafka_fail "pid $pid does not answer on 127.0.0.1:$KAFKA_PORT (wait result $rc)"
    log "kafka: up (pid $pid, 127.0.0.1:$KAFKA_PORT)"
    return 0
  fi

  compgen -G "$KIWI_KAFKA_LIB/kafka_2.13-*.jar" >/dev/null ||
    die "kafka: no broker jars in $KIWI_KAFKA_LIB: run ops/setup.sh first"
  (($(java_major "$JAVA") >= 17)) || die "kafka: needs java >= 17 ($JAVA is $(java_major "$JAVA"))"
  command -v kcat >/dev/null || die "kafka: kcat not found (ops/setup.sh installs it)"

  want_port=${KIWI_STACK_KAFKA_PORT:-$KAFKA_PORT}
  want_ctrl=${KIWI_STACK_KAFKA_CONTROLLER_PORT:-$KAFKA_CTRL_PORT}
  KAFKA_PORT=$(pick_port "$want_port" "$REDIS_PORT") || die "kafka: no free port from $want_port"
  KAFKA_CTRL_PORT=$(pick_port "$want_ctrl" "$KAFKA_PORT" "$REDIS_PORT") || die "kafka: no free port from $want_ctrl"
  [[ $KAFKA_PORT == "$want_port" ]] || log "kafka: port $want_port is taken; using $KAFKA_PORT"
  [[ $KAFKA_CTRL_PORT == "$want_ctrl" ]] || log "kafka: controller port $want_ctrl is taken; using $KAFKA_CTRL_PORT"

  mkdir -p "$KAFKA_DATA" "$KAFKA_LOGS"
  sed -e "s|@BROKER_PORT@|$KAFKA_PORT|g" -e "s|@CONTROLLER_PORT@|$KAFKA_CTRL_PORT|g" \
      -e "s|@DATA_DIR@|$KAFKA_DATA|g" -e "s|@PARTITIONS@|$KAFKA_PARTITIONS|g" \
      "$KIWI_OPS_DIR/kafka/server.properties.in" >"$KAFKA_PROPS.tmp"
  mv -f "$KAFKA_PROPS.tmp" "$KAFKA_PROPS"
  cp -f "$KIWI_OPS_DIR/kafka/log4j2.xml" "$KAFKA_LOG4J"

  local -a opts
  mapfile -t opts < <(kafka_java_opts)

  if [[ ! -s $KAFKA_DATA/meta.properties ]]; then
    [[ -s $KAFKA_CLUSTER_ID_FILE ]] || new_cluster_id >"$KAFKA_CLUSTER_ID_FILE"
    id=$(<"$KAFKA_CLUSTER_ID_FILE")
    log "kafka: formatting $KAFKA_DATA (cluster id $id)"
    "$JAVA" "${opts[@]}" -cp "$KIWI_KAFKA_LIB/*" kafka.tools.StorageTool format \
      -t "$id" -c "$KAFKA_PROPS" --ignore-formatted >>"$KAFKA_LOGS/format.log" 2>&1 </dev/null ||
      { log_tail "$KAFKA_LOGS/format.log" 30; die "kafka: storage format failed"; }
  fi

  pid=$(launch "$KAFKA_PIDFILE" "$KAFKA_OUT" "$JAVA" "${opts[@]}" -cp "$KIWI_KAFKA_LIB/*" \
        kafka.Kafka "$KAFKA_PROPS") || kafka_fail "could not launch java"
  set_owned kafka "$pid"
  write_env
  wait_for "$KAFKA_TIMEOUT" "$pid" kafka_answers "$KAFKA_PORT" || rc=$?
  if ((rc != 0)); then
    if ((rc == 2)); then
      clear_owned kafka
      kafka_fail "exited during start-up (pid $pid)"
    fi
    stop_pid "$pid" kafka 10 || true
    clear_owned kafka
    kafka_fail "no answer on 127.0.0.1:$KAFKA_PORT within ${KAFKA_TIMEOUT}s (stopped pid $pid)"
  fi
  log "kafka: started (pid $pid, 127.0.0.1:$KAFKA_PORT, controller 127.0.0.1:$KAFKA_CTRL_PORT) in $(fmt_ms $(($(now_ms) - t0)))"
}

kafka_down() { service_down kafka "$KAFKA_PIDFILE"; }

kafka_status() { service_status kafka "$KAFKA_PORT"; }

# ------------------------------------------------------------------- redis

redis_pid() { pidfile_pid "$REDIS_PIDFILE" redis-server; }

# The password: made once (48 hex digits from /dev/urandom), kept in
# $REDIS_PASSFILE (0600), never printed. Hex only: no quoting needed in the
# env file or in redis.conf.
redis_password_if_any() {
  [[ -s $REDIS_PASSFILE ]] && tr -d '\n' <"$REDIS_PASSFILE"
  return 0
}
redis_password() {
  if [[ ! -s $REDIS_PASSFILE ]]; then
    local tmp=$REDIS_PASSFILE.tmp.$$
    (umask 077; od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$tmp")
    [[ $(wc -c <"$tmp") == 48 ]] || { rm -f "$tmp"; die "redis: could not make a password"; }
    mv -f "$tmp" "$REDIS_PASSFILE"
    log "redis: password made ($REDIS_PASSFILE, mode 0600)"
  fi
  chmod 600 "$REDIS_PASSFILE"
  tr -d '\n' <"$REDIS_PASSFILE"
}

# redis.conf: what must not be on a command line (ps shows it to everyone).
write_redis_conf() {
  local tmp=$REDIS_CONF.tmp.$$
  (umask 077; printf '# written by ops/stack.sh\nrequirepass %s\n' "$1" >"$tmp")
  mv -f "$tmp" "$REDIS_CONF"
}

# redis-cli with the password from the environment (REDISCLI_AUTH), never
# on its command line.
rcli() {
  local pw
  pw=$(redis_password_if_any)
  if [[ -n $pw ]]; then REDISCLI_AUTH=$pw redis-cli --no-auth-warning -h 127.0.0.1 "$@"
  else env -u REDISCLI_AUTH redis-cli -h 127.0.0.1 "$@"; fi
}

redis_answers() {
  [[ $(rcli -p "$1" ping 2>/dev/null) == PONG ]]
}

# A Redis started by an older stack.sh has no password: it gets one now,
# live, and keeps it on its next start (redis.conf).
redis_require_password() {
  local port=$1 pw
  pw=$(redis_password)
  write_redis_conf "$pw"
  if [[ $(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]; then
    printf 'CONFIG SET requirepass %s\n' "$pw" | redis-cli -h 127.0.0.1 -p "$port" >/dev/null ||
      die "redis: could not set a password on the running server (CONFIG SET requirepass)"
    log "redis: the running server had no password; requirepass set (CONFIG SET)"
  fi
  [[ $(rcli -p "$port" ping 2>/dev/null) == PONG ]] ||
    die "redis: 127.0.0.1:$port does not accept the password in $REDIS_PASSFILE"
}

redis_fail() {
  log_tail "$REDIS_LOG" 30
  [[ -s $KIWI_LOG_DIR/redis.out ]] && log_tail "$KIWI_LOG_DIR/redis.out" 10
  die "redis: $*"
}

redis_up() {
  local pid t0 rc=0 want
  t0=$(now_ms)
  pid=$(redis_pid)
  if [[ -n $pid ]]; then
    wait_for "$REDIS_TIMEOUT" "$pid" redis_answers "$REDIS_PORT" || rc=$?
    ((rc == 0)) || redis_fail "pid $pid does not answer on 127.0.0.1:$REDIS_PORT"
    redis_require_password "$REDIS_PORT"
    log "redis: already running (pid $pid, 127.0.0.1:$REDIS_PORT)"
    return 0
  fi
  command -v redis-server >/dev/null || die "redis: redis-server not found (ops/setup.sh installs it)"
  command -v redis-cli >/dev/null || die "redis: redis-cli not found (ops/setup.sh installs it)"

  want=${KIWI_STACK_REDIS_PORT:-$REDIS_PORT}
  REDIS_PORT=$(pick_port "$want" "$KAFKA_PORT" "$KAFKA_CTRL_PORT") || die "redis: no free port from $want"
  [[ $REDIS_PORT == "$want" ]] || log "redis: port $want is taken; using $REDIS_PORT"

  mkdir -p "$REDIS_DIR"
  rm -f "$REDIS_PIDFILE"
  write_redis_conf "$(redis_password)"
  # --save '': no RDB snapshots (no fork of a large cache); the append-only
  # file in $REDIS_DIR keeps the data across restarts. The password is in
  # $REDIS_CONF (0600), not on the command line.
  redis-server "$REDIS_CONF" --bind 127.0.0.1 --port "$REDIS_PORT" --protected-mode yes \
    --dir "$REDIS_DIR" --save '' --appendonly yes \
    --daemonize yes --supervised no --pidfile "$REDIS_PIDFILE" \
    --logfile "$REDIS_LOG" </dev/null >>"$KIWI_LOG_DIR/redis.out" 2>&1 9>&- ||
    redis_fail "redis-server did not start"
  wait_for "$REDIS_TIMEOUT" "" redis_answers "$REDIS_PORT" || rc=$?
  pid=$(redis_pid)
  ((rc == 0)) || {
    if [[ -n $pid ]]; then stop_pid "$pid" redis 10 || true; fi
    redis_fail "no answer on 127.0.0.1:$REDIS_PORT within ${REDIS_TIMEOUT}s"
  }
  [[ -n $pid ]] || redis_fail "answers on $REDIS_PORT but wrote no pid to $REDIS_PIDFILE"
  set_owned redis "$pid"
  write_env
  log "redis: started (pid $pid, 127.0.0.1:$REDIS_PORT) in $(fmt_ms $(($(now_ms) - t0)))"
}

redis_down() { service_down redis "$REDIS_PIDFILE"; }

redis_status() { service_status redis "$REDIS_PORT"; }

# ------------------------------------------------------------------ docker

# shellcheck source=ops/stack-docker.sh
. "$(dirname "${BASH_SOURCE[0]}")/stack-docker.sh"

# ------------------------------------------------------------------- store

store_pid() { pidfile_pid "$STORE_PIDFILE" docker-registry; }

store_answers() {
  curl -fsS -o /dev/null "http://127.0.0.1:$1/v2/"
}

# The registry's configuration: loopback only, filesystem storage under
# $STORE_DIR/data, deletes allowed (the clean-up of old snapshots), no
# authentication (loopback; a production store sets KIWI_STORE_USER and
# KIWI_STORE_PASSWORD for its own).
write_store_conf() {
  local tmp=$STORE_CONF.tmp.$$
  cat >"$tmp" <<CONF
# written by ops/stack.sh
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $STORE_DIR/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$1
CONF
  mv -f "$tmp" "$STORE_CONF"
}

store_up() {
  local pid t0 rc=0 want
  t0=$(now_ms)
  pid=$(store_pid)
  if [[ -n $pid ]]; then
    wait_for "$REDIS_TIMEOUT" "$pid" store_answers "$STORE_PORT" || rc=$?
    ((rc == 0)) || { log_tail "$STORE_LOG" 30; die "store: pid $pid does not answer on 127.0.0.1:$STORE_PORT"; }
    log "store: already running (pid $pid, 127.0.0.1:$STORE_PORT)"
    return 0
  fi
  command -v docker-registry >/dev/null || die "store: docker-registry not found (ops/setup.sh installs it)"
  want=${KIWI_STACK_STORE_PORT:-$STORE_PORT}
  STORE_PORT=$(pick_port "$want" "$KAFKA_PORT" "$KAFKA_CTRL_PORT" "$REDIS_PORT") || die "store: no free port from $want"
  [[ $STORE_PORT == "$want" ]] || log "store: port $want is taken; using $STORE_PORT"
  mkdir -p "$STORE_DIR/data"
  chmod 700 "$STORE_DIR"
  write_store_conf "$STORE_PORT"
  pid=$(launch "$STORE_PIDFILE" "$STORE_LOG" docker-registry serve "$STORE_CONF") || die "store: did not start"
  wait_for "$REDIS_TIMEOUT" "$pid" store_answers "$STORE_PORT" || rc=$?
  ((rc == 0)) || {
    stop_pid "$pid" store 10 || true
    log_tail "$STORE_LOG" 30
    die "store: no answer on 127.0.0.1:$STORE_PORT within ${REDIS_TIMEOUT}s"
  }
  set_owned store "$pid"
  write_env
  log "store: started (pid $pid, 127.0.0.1:$STORE_PORT) in $(fmt_ms $(($(now_ms) - t0)))"
}

store_down() { service_down store "$STORE_PIDFILE"; }

store_status() {
  local pid
  pid=$(store_pid)
  if [[ -n $pid ]] && store_answers "$STORE_PORT"; then
    status_line store running "$pid" "http://127.0.0.1:$STORE_PORT/$STORE_REPO" owned
    return 0
  fi
  status_line store stopped - "127.0.0.1:$STORE_PORT" -
  return 1
}

# ------------------------------------------------------------------ driver

status_line() {
  printf '%-7s %-9s pid %-8s %-45s %s\n' "$1" "$2" "$3" "$4" "$5"
}

cmd=${1:-}
[[ -n $cmd ]] || { usage >&2; exit 2; }
shift
case $cmd in
  -h|--help|help) usage; exit 0 ;;
  up|down|status|reset) ;;
  *) usage >&2; die "unknown command: $cmd" ;;
esac

want=()
for c in "$@"; do
  case $c in
    kafka|redis|docker|store) want+=("$c") ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown component: $c (kafka, redis, docker, store)" ;;
  esac
done
if ((${#want[@]} == 0)); then
  if [[ $cmd == reset ]]; then want=(redis kafka); else want=("${COMPONENTS[@]}"); fi
fi
# Fixed order: up starts redis, kafka, docker; down stops them in reverse.
ordered=()
for c in "${COMPONENTS[@]}"; do
  [[ " ${want[*]} " == *" $c "* ]] && ordered+=("$c")
done

lock() {
  ensure_dirs
  exec 9>"$KIWI_RUN_DIR/stack.lock"
  if ! flock -n 9; then
    log "waiting for another ops/stack.sh (lock $KIWI_RUN_DIR/stack.lock)..."
    flock -w "${KIWI_STACK_LOCK_TIMEOUT:-300}" 9 ||
      die "another ops/stack.sh still holds $KIWI_RUN_DIR/stack.lock after ${KIWI_STACK_LOCK_TIMEOUT:-300}s"
  fi
}

case $cmd in
  up)
    lock
    t_all=$(now_ms)
    for c in "${ordered[@]}"; do "${c}_up"; done
    write_env
    log "up in $(fmt_ms $(($(now_ms) - t_all))); env file:"
    echo "$KIWI_ENV_FILE"
    ;;
  down)
    lock
    for ((i = ${#ordered[@]} - 1; i >= 0; i--)); do "${ordered[i]}_down"; done
    ;;
  status)
    rc=0
    for c in "${ordered[@]}"; do "${c}_status" || rc=1; done
    [[ -r $KIWI_ENV_FILE ]] && echo "env file: $KIWI_ENV_FILE" || echo "env file: (none yet) $KIWI_ENV_FILE"
    exit "$rc"
    ;;
  reset)
    lock
    for ((i = ${#ordered[@]} - 1; i >= 0; i--)); do "${ordered[i]}_down"; done
    for c in "${ordered[@]}"; do
      case $c in
        kafka) rm -rf "$KAFKA_DATA" "$KAFKA_CLUSTER_ID_FILE"; log "kafka: data deleted ($KAFKA_DATA)" ;;
        redis) rm -rf "$REDIS_DIR"; log "redis: data deleted ($REDIS_DIR)" ;;
        docker) log "docker: its data root is never deleted by reset" ;;
        store) rm -rf "$STORE_DIR/data"; log "store: data deleted ($STORE_DIR/data)" ;;
      esac
    done
    ;;
esac
