#!/usr/bin/env bash
# BITCOUNT and BITPOS over a 64 MB string: kvserver against redis-server in one run, servers
# pinned to CPU 0, redis-benchmark on CPU 1, alternated over ROUNDS; each server's CPU time per
# call (utime+stime from /proc over the run / calls). usage: scripts/bitmap-bench.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3} N=${N:-200}
tmp=$(mktemp -d)
trap 'kill $(cat $tmp/pids 2>/dev/null) 2>/dev/null || true; wait; rm -rf $tmp' EXIT
taskset -c 0 target/release/kvserver --port 7491 --threads 1 --save '' >/dev/null 2>&1 & echo $! >>"$tmp/pids"; echo $! >"$tmp/ours"
taskset -c 0 redis-server --port 7492 --save '' --appendonly no >/dev/null 2>&1 & echo $! >>"$tmp/pids"; echo $! >"$tmp/ref"
for p in 7491 7492; do
  for _ in $(seq 50); do redis-cli -p $p ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
  # 64 MB: the last bit of byte 64M-1 set, a pattern of set bits every 4 KB, the rest zero.
  redis-cli -p $p setbit bm $((64 * 1024 * 1024 * 8 - 1)) 1 >/dev/null
  for i in $(seq 0 4096 $((64 * 1024 * 1024 - 1)) | head -2000); do echo "SETBIT bm $((i * 8 + 3)) 1"; done | redis-cli -p $p >/dev/null
  # For BITPOS: only the very last bit set; and 64 MB of ones (NOT of zeros).
  redis-cli -p $p setbit last $((64 * 1024 * 1024 * 8 - 1)) 1 >/dev/null
  redis-cli -p $p setbit zeros $((64 * 1024 * 1024 * 8 - 1)) 0 >/dev/null
  redis-cli -p $p bitop not ones zeros >/dev/null
  # The same as `last`, in memory that was written (NOT of the ones): a string made by one
  # SETBIT far out can sit in pages never touched, which read faster than any real memory.
  redis-cli -p $p bitop not lastw ones >/dev/null
  redis-cli -p $p setbit lastw $((64 * 1024 * 1024 * 8 - 1)) 1 >/dev/null
done
ticks() { awk '{print $14+$15}' /proc/"$1"/stat; }
for r in $(seq "$ROUNDS"); do
  for s in ours ref; do
    port=7491; [ $s = ref ] && port=7492
    pid=$(cat "$tmp/$s")
    for t in "bitcount:BITCOUNT bm" "bitpos1:BITPOS last 1" "bitpos1_written:BITPOS lastw 1" "bitpos0:BITPOS ones 0" "bitpos_range:BITPOS last 1 3 -1 BIT" "bitcount_bit:BITCOUNT bm 5 -5 BIT"; do
      name=${t%%:*}; read -ra cmd <<<"${t#*:}"
      t0=$(ticks "$pid")
      taskset -c 1 redis-benchmark -p $port -n "$N" -c 1 -q "${cmd[@]}" >/dev/null 2>&1
      t1=$(ticks "$pid")
      echo "$name $s $(( (t1 - t0) * 10000 / N ))" >>"$tmp/res"   # microseconds per call
    done
  done
done
python3 - "$tmp/res" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
for name in dict.fromkeys(r[0] for r in rows):
    v = {s: st.median(float(r[2]) for r in rows if r[0] == name and r[1] == s) for s in ("ours", "ref")}
    print(f"{name}: CPU us per call ours {v['ours']:.0f}, redis {v['ref']:.0f}, redis/ours {v['ref']/max(v['ours'],1e-9):.2f}")
PY
