#!/usr/bin/env bash
# Issue 16's load benchmark: seconds from start to serving for a dump.rdb of N small keys
# (`key:%012d` -> 16-byte value), ours vs Debian's redis-server on the same file, each pinned
# to CPU 0, alternated over ROUNDS rounds; prints each round and the medians.
# Run from the project's root after `cargo build --release -p kvserver`:
#   N=10000000 scripts/load-bench.sh
set -eu
N=${N:-1000000} ROUNDS=${ROUNDS:-3}
dir=$(mktemp -d); trap 'pkill -f "port 749[01]" 2>/dev/null; rm -rf "$dir"' EXIT
taskset -c 0 target/release/kvserver --port 7490 --threads 1 --save '' --dir "$dir" >/dev/null 2>&1 &
for _ in $(seq 100); do redis-cli -p 7490 ping >/dev/null 2>&1 && break; sleep 0.1; done
python3 - "$N" <<'PY' | redis-cli -p 7490 --pipe >/dev/null
import sys
n = int(sys.argv[1]); out = sys.stdout.buffer; batch = []
for i in range(n):
    batch.append(b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$16\r\nvalue-%010d\r\n" % (i, i))
    if len(batch) == 10000:
        out.write(b"".join(batch)); batch = []
out.write(b"".join(batch))
PY
[ "$(redis-cli -p 7490 dbsize)" = "$N" ] || { echo "fill failed" >&2; exit 1; }
redis-cli -p 7490 save >/dev/null
redis-cli -p 7490 shutdown nosave >/dev/null 2>&1 || true
sleep 0.5
echo "file: $(du -h "$dir/dump.rdb" | cut -f1), $N keys"
time_to_serve() { # name cmd...
  local t0 t1
  t0=$(date +%s.%N)
  "${@:2}" >/dev/null 2>&1 &
  local pid=$!
  until [ "$(redis-cli -p "$PORT" dbsize 2>/dev/null)" = "$N" ]; do sleep 0.02; done
  t1=$(date +%s.%N)
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$1 $(echo "$t1 - $t0" | bc)"
}
for r in $(seq "$ROUNDS"); do
  PORT=7490 time_to_serve ours taskset -c 0 target/release/kvserver --port 7490 --threads 1 --save '' --dir "$dir"
  PORT=7491 time_to_serve redis taskset -c 0 redis-server --port 7491 --save '' --appendonly no --dir "$dir"
done | tee "$dir/times"
for k in ours redis; do
  echo "$k median $(grep "^$k " "$dir/times" | cut -d' ' -f2 | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}') s"
done
