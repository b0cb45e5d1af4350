#!/usr/bin/env bash
# What writing RDB costs, ours against a reference server, alternated over ROUNDS:
#  - BGSAVE of about KEYS keys holding 64-byte values (redis-benchmark's compressible "xxx..."),
#    idle server: wall time until rdb_bgsave_in_progress clears, and the server process's CPU
#    (ours saves in its own threads; Redis's fork child is not counted in its parent's CPU);
#  - DUMP of one 100-byte compressible string at -P 16: throughput and server CPU per request.
# Servers on CPU 0, redis-benchmark on CPU 1.
# usage: scripts/rdb-cost.sh [ROUNDS]   (KEYS=2000000; OURS='kvserver command line' and
#        REF='reference command line' replace the defaults below; a port is appended)
# Run from the project's root after `cargo build --release -p kvserver`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
KEYS=${KEYS:-2000000}
PORT=7530
OURS=${OURS:-target/release/kvserver --threads 1}
REF=${REF:-redis-server --appendonly no}
tmp=$(mktemp -d)
trap 'kill $(cat $tmp/pid 2>/dev/null) 2>/dev/null || true; rm -rf $tmp' EXIT

start() { # dir, command words... -> pid in $tmp/pid
  local dir=$1; shift
  (exec taskset -c 0 "$@" --dir "$dir" --save '' --port $PORT) >/dev/null 2>&1 &
  echo $! >"$tmp/pid"
  for _ in $(seq 50); do redis-cli -p $PORT ping 2>/dev/null | grep -q PONG && return; sleep 0.1; done
  echo "server did not start: $*" >&2; exit 1
}
stop() { kill "$(cat $tmp/pid)" 2>/dev/null || true; wait "$(cat $tmp/pid)" 2>/dev/null || true; }
cpu() { awk '{print $14 + $15}' /proc/"$(cat $tmp/pid)"/stat; } # clock ticks

save() { # name command... -> one line
  local name=$1; shift
  rm -rf "$tmp/d"; mkdir -p "$tmp/d"
  start "$tmp/d" "$@"
  taskset -c 1 redis-benchmark -p $PORT -t set -n $((KEYS * 3)) -r "$KEYS" -d 64 -P 16 -c 50 -q >/dev/null 2>&1
  local keys c0 t0 t1 c1
  keys=$(redis-cli -p $PORT dbsize)
  c0=$(cpu); t0=$(date +%s.%N)
  redis-cli -p $PORT bgsave >/dev/null
  sleep 0.05
  while redis-cli -p $PORT info persistence | grep -q 'rdb_bgsave_in_progress:1'; do sleep 0.02; done
  t1=$(date +%s.%N); c1=$(cpu)
  local status; status=$(redis-cli -p $PORT info persistence | tr -d '\r' | awk -F: '$1=="rdb_last_bgsave_status"{print $2}')
  awk -v n="$name" -v k="$keys" -v t="$(echo "$t1 - $t0" | bc)" -v c=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" \
    -v s="$(stat -c %s "$tmp/d/dump.rdb")" -v st="$status" \
    'BEGIN{printf "bgsave %-6s %d keys: %.2f s, server process CPU %.2f s, file %d B (%s)\n", n, k, t, c/hz, s, st}'
  stop
}

dump() { # name command...
  local name=$1; shift
  local n=400000 x
  x=$(printf 'x%.0s' $(seq 100))
  mkdir -p "$tmp/e"; start "$tmp/e" "$@"
  redis-cli -p $PORT set dkey "$x" >/dev/null
  local c0 c1 rps
  c0=$(cpu)
  rps=$(taskset -c 1 redis-benchmark -p $PORT -n $n -P 16 -c 50 -q DUMP dkey | tr '\r' '\n' | tail -1 | awk '{print $3}')
  c1=$(cpu)
  awk -v nm="$name" -v r="$rps" -v c=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v n=$n \
    'BEGIN{printf "dump   %-6s %10.0f requests/s, server CPU %.3f us/request\n", nm, r, c / hz * 1e6 / n}'
  stop
}

read -ra ours <<<"$OURS"
read -ra ref <<<"$REF"
for r in $(seq "$ROUNDS"); do
  echo "round $r"
  if [ $((r % 2)) = 1 ]; then
    save ours "${ours[@]}"; save ref "${ref[@]}"; dump ours "${ours[@]}"; dump ref "${ref[@]}"
  else
    save ref "${ref[@]}"; save ours "${ours[@]}"; dump ref "${ref[@]}"; dump ours "${ours[@]}"
  fi
done
