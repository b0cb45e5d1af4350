#!/usr/bin/env bash
# Pub/sub fan-out and MULTI/EXEC, kvserver against redis-server in one run: servers pinned to
# CPU 0, load (kvbench fanout / kvbench tx) on CPU 1, servers alternated over ROUNDS, medians.
# Prints each server's rate and its CPU time per delivered message / per transaction.
#
# usage: scripts/pubsub-tx-bench.sh [ROUNDS]   (after cargo build --release)
# env: OURS_CPUS (0) SUBS (100) PUBS (2) MSGS (20000 per publisher) TX_CLIENTS (50) TX_N (4000 per client)
#      OURS_THREADS (1) TX_KEYS ({t}1,{t}2,{t}3,{t}4)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SUBS=${SUBS:-100} PUBS=${PUBS:-2} MSGS=${MSGS:-20000}
TX_CLIENTS=${TX_CLIENTS:-50} TX_N=${TX_N:-4000} TX_KEYS=${TX_KEYS:-'{t}1,{t}2,{t}3,{t}4'}
OURS_THREADS=${OURS_THREADS:-1}
BENCH=target/release/kvbench
tmp=$(mktemp -d)
trap 'kill $(cat $tmp/pids 2>/dev/null) 2>/dev/null || true; wait; rm -rf $tmp' EXIT
start() { # name port -> pid
  if [ "$1" = ours ]; then
    taskset -c "${OURS_CPUS:-0}" target/release/kvserver --port "$2" --threads "$OURS_THREADS" --save '' >"$tmp/$1.log" 2>&1 &
  else
    taskset -c 0 redis-server --port "$2" --save '' --appendonly no >"$tmp/$1.log" 2>&1 &
  fi
  echo $! >>"$tmp/pids"
  echo $! >"$tmp/$1.pid"
  for _ in $(seq 100); do redis-cli -p "$2" ping 2>/dev/null | grep -q PONG && return; sleep 0.1; done
  echo "$1 did not start" >&2; exit 1
}
start ours 7421
start ref 7422
for r in $(seq "$ROUNDS"); do
  for s in ours ref; do
    port=7421; [ $s = ref ] && port=7422
    pid=$(cat "$tmp/$s.pid")
    taskset -c 1 "$BENCH" fanout -p $port --subscribers "$SUBS" --publishers "$PUBS" -n "$MSGS" -P 16 \
      --server-pid "$pid" --cpu 1 | awk -v s=$s '/^published/ {split($2,a,"="); d=a[2]} /server_cpu/ {split($1,b,"="); c=b[2]} END {print "fanout", s, d, c}' >>"$tmp/results"
    taskset -c 1 "$BENCH" tx -p $port -c "$TX_CLIENTS" -n "$TX_N" --keys "$TX_KEYS" \
      --server-pid "$pid" --cpu 1 | awk -v s=$s '/tx\/s/ {split($1,a,"="); d=a[2]} /server_cpu/ {split($1,b,"="); c=b[2]} END {print "tx", s, d, c}' >>"$tmp/results"
  done
done
python3 - "$tmp/results" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
for test, unit in (("fanout", "delivered msg"), ("tx", "transaction")):
    rate = {s: st.median(float(r[2]) for r in rows if r[0] == test and r[1] == s) for s in ("ours", "ref")}
    cpu = {s: st.median(float(r[3]) for r in rows if r[0] == test and r[1] == s) for s in ("ours", "ref")}
    print(f"{test}: ours {rate['ours']:.0f}/s, redis {rate['ref']:.0f}/s, ratio {rate['ours']/rate['ref']:.2f}; "
          f"CPU ns per {unit}: ours {cpu['ours']:.0f}, redis {cpu['ref']:.0f}, redis/ours {cpu['ref']/cpu['ours']:.2f}")
PY
