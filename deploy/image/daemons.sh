#!/usr/bin/env bash
# containerd and dockerd, started by hand: for machines without systemd (CI containers, VMs
# like the test bed's) where `apt-get install docker.io` installs the daemons but nothing
# starts them. Debian's packages alone; no registry is needed to start them.
#
#   deploy/image/daemons.sh install   apt-get install docker.io containerd runc debootstrap (if missing)
#   deploy/image/daemons.sh start     reuse the running daemons or start them; returns once
#                                     `docker info` answers (bounded: KFED_DAEMON_TIMEOUT, 60 s)
#   deploy/image/daemons.sh status    what runs, and on which sockets
#   deploy/image/daemons.sh stop      stop only the daemons this script started
#
# One containerd serves both dockerd (namespace moby) and a kubelet (namespace k8s.io), so
# `ctr -n k8s.io images import` puts images where a kubelet on this machine finds them.
# Logs and pid files: $KFED_CACHE_DIR/daemons (default ~/.cache/kfed/daemons).
# Environment: CONTAINERD_CONFIG (default /etc/containerd/config.toml, if present),
# CONTAINERD_ADDRESS (default /run/containerd/containerd.sock), DOCKERD_ARGS (extra flags).
set -euo pipefail

state_dir="${KFED_CACHE_DIR:-$HOME/.cache/kfed}/daemons"
containerd_sock="${CONTAINERD_ADDRESS:-/run/containerd/containerd.sock}"
containerd_config="${CONTAINERD_CONFIG:-/etc/containerd/config.toml}"
timeout_s="${KFED_DAEMON_TIMEOUT:-60}"

say() { printf '[daemons %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

docker_answers() { timeout 10 docker info >/dev/null 2>&1; }
containerd_answers() { timeout 10 ctr --address "$containerd_sock" version >/dev/null 2>&1; }

# The pid recorded by this script, if that process still runs.
our_pid() {  # name
  local pid
  pid=$(cat "$state_dir/$1.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && printf '%s\n' "$pid"
}

last_errors() {  # log file: the lines that say why a daemon stopped
  grep -iE 'level=(fatal|error)|failed|error' "$1" 2>/dev/null | tail -n 5 || true
}

check_prerequisites() {
  [ "$(id -u)" = 0 ] || die "containerd and dockerd must run as root (this is uid $(id -u)). Run this as root, or use a Docker engine someone else runs (DOCKER_HOST)."
  local missing=()
  for bin in containerd ctr dockerd runc docker; do
    command -v "$bin" >/dev/null 2>&1 || missing+=("$bin")
  done
  [ ${#missing[@]} = 0 ] || die "not installed: ${missing[*]}. Install them with: $0 install   (apt-get install -y docker.io containerd runc)"
  grep -qw overlay /proc/filesystems || say "warning: the kernel has no overlay filesystem; dockerd falls back to the slow vfs storage driver"
}

# Polls until `probe` succeeds, the daemon's process dies, or the deadline passes.
wait_for() {  # name pid probe
  local name=$1 pid=$2 probe=$3 deadline=$((SECONDS + timeout_s))
  until "$probe"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      die "$name exited while starting. Its log ($state_dir/$name.log) says:
$(last_errors "$state_dir/$name.log")"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      die "$name (pid $pid) did not answer within ${timeout_s}s (KFED_DAEMON_TIMEOUT). Its log ($state_dir/$name.log) ends with:
$(tail -n 5 "$state_dir/$name.log")"
    fi
    sleep 0.5
  done
}

# Starts a daemon in its own session, so it outlives the shell (and the make) that started it.
launch() {  # name command...
  local name=$1
  shift
  mkdir -p "$state_dir"
  printf '\n--- %s started by %s\n' "$(date -u +%FT%TZ)" "$0" >>"$state_dir/$name.log"
  nohup setsid "$@" </dev/null >>"$state_dir/$name.log" 2>&1 &
  printf '%s\n' "$!" >"$state_dir/$name.pid"
  printf '%s\n' "$!"
}

start_containerd() {
  if containerd_answers; then
    say "containerd: already running on $containerd_sock"
    return
  fi
  local args=(containerd --address "$containerd_sock") pid
  [ -f "$containerd_config" ] && args+=(--config "$containerd_config")
  pid=$(our_pid containerd) || pid=$(launch containerd "${args[@]}")
  say "containerd: starting (pid $pid, log $state_dir/containerd.log)"
  wait_for containerd "$pid" containerd_answers
}

start_dockerd() {
  local pid
  # shellcheck disable=SC2086  # DOCKERD_ARGS is a list of flags
  pid=$(our_pid dockerd) || pid=$(launch dockerd dockerd --containerd="$containerd_sock" ${DOCKERD_ARGS:-})
  say "dockerd: starting (pid $pid, log $state_dir/dockerd.log)"
  wait_for dockerd "$pid" docker_answers
}

cmd_start() {
  if docker_answers; then
    say "docker: already answering ($(docker info --format '{{.ServerVersion}}, storage {{.Driver}}, cgroup {{.CgroupVersion}}' 2>/dev/null))"
    return
  fi
  check_prerequisites
  start_containerd
  start_dockerd
  say "docker: ready ($(docker info --format '{{.ServerVersion}}, storage {{.Driver}}, cgroup {{.CgroupVersion}}'))"
}

cmd_install() {
  local missing=()
  command -v containerd >/dev/null 2>&1 || missing+=(containerd)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  # docker.io also when only its CLI is wanted (build.sh: a CLI elsewhere cannot build).
  if ! command -v dockerd >/dev/null 2>&1 \
    || { [ -n "${KFED_NEED_DEBIAN_DOCKER_CLI:-}" ] && [ ! -x /usr/bin/docker ]; }; then
    missing+=(docker.io)
  fi
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  if [ ${#missing[@]} = 0 ]; then
    say "installed: containerd, runc, dockerd, debootstrap"
    return
  fi
  [ "$(id -u)" = 0 ] || die "installing ${missing[*]} needs root (apt-get)"
  say "installing ${missing[*]} (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

cmd_status() {
  local pid
  for name in containerd dockerd; do
    if pid=$(our_pid "$name"); then echo "$name: started by this script, pid $pid"; fi
  done
  if containerd_answers; then echo "containerd: answering on $containerd_sock"; else echo "containerd: not answering on $containerd_sock"; fi
  if docker_answers; then echo "docker: answering"; else echo "docker: not answering"; fi
}

stop_one() {  # name
  local pid deadline=$((SECONDS + timeout_s))
  pid=$(our_pid "$1") || { say "$1: not started by this script, left alone"; return; }
  say "$1: stopping pid $pid"
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || die "$1 (pid $pid) still runs ${timeout_s}s after SIGTERM"
    sleep 0.5
  done
  rm -f "$state_dir/$1.pid"
}

cmd_stop() {
  stop_one dockerd
  stop_one containerd
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  status) cmd_status ;;
  stop) cmd_stop ;;
  *) die "usage: $0 install|start|status|stop" ;;
esac
