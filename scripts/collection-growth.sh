#!/usr/bin/env bash
# The slowest write while one collection grows from empty to N elements, ours against
# redis-server in one run (alternated when ROUNDS > 1): a big hash or set must never pay for a
# whole-table resize in one command.
#
# usage: scripts/collection-growth.sh [-n N] [-r ROUNDS] [-c CLIENTS] [--command 'HSET growhash f:__rand_int__ v']
# Run from the project's root after `cargo build --release -p kvserver -p kvbench`.
# Servers on SERVER_CPUS (default 0), kvbench on LOAD_CPUS (default 1). Prints kvbench's summary
# line for each server and round: p50 ... p99.9 and max (the slowest command, queueing included).
set -euo pipefail
N=10000000 ROUNDS=1 C=50 CMD='HSET growhash f:__rand_int__ v'
while [[ $# -gt 0 ]]; do
  case $1 in
    -n) N=$2; shift 2;; -r) ROUNDS=$2; shift 2;; -c) C=$2; shift 2;;
    --command) CMD=$2; shift 2;;
    *) echo "unknown arg $1" >&2; exit 2;;
  esac
done
SCPU=${SERVER_CPUS:-0} LCPU=${LOAD_CPUS:-1}
BIN=${CARGO_TARGET_DIR:-target}/release
KVB=$BIN/kvbench
tmp=$(mktemp -d); trap 'kill $(cat $tmp/pids 2>/dev/null) 2>/dev/null; wait 2>/dev/null; rm -rf $tmp' EXIT
serve() { # name port cmd...
  local name=$1 port=$2; shift 2
  taskset -c "$SCPU" "$@" >"$tmp/$name.log" 2>&1 & echo $! >"$tmp/pid"; echo $! >>"$tmp/pids"
  for _ in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return; sleep 0.1; done
  echo "$name did not start: $(tail -3 "$tmp/$name.log")" >&2; exit 1
}
for r in $(seq "$ROUNDS"); do
  for who in ours redis; do
    port=$((7520 + r * 2)); [[ $who == redis ]] && port=$((port + 1))
    if [[ $who == ours ]]; then
      serve ours "$port" "$BIN/kvserver" --port "$port" --threads 1 --save "" --dir "$tmp"
    else
      serve redis "$port" redis-server --port "$port" --save '' --appendonly no --dir "$tmp"
    fi
    line=$("$KVB" run -p "$port" -c "$C" -P 1 -n "$N" -r 1000000000000 --load-cpus "$LCPU" \
      --command "$CMD" 2>&1 | awk '/^  all/')
    echo "round $r $who, $N x '$CMD': ops/s p50 p95 p99 p99.9 max(ms) errors =${line#  all}"
    kill "$(cat "$tmp/pid")"; wait "$(cat "$tmp/pid")" 2>/dev/null || true
  done
done
