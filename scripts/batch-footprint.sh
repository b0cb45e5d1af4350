#!/usr/bin/env bash
# How many distinct 64-byte cache lines of code and of data a server touches per read batch, and
# how many instructions it runs per batch: the server runs under valgrind's lackey (which traces
# every instruction and memory access), redis-benchmark warms it up and then sends REQUESTS
# requests from 50 clients at pipeline P; the measured part of the trace is cut into
# REQUESTS / P equal runs of instructions (one per batch of P commands) and the lines each run
# touches are counted. (Between batches the thread sleeps in epoll_wait and the kernel runs, so
# these lines come back from L2 or further every batch: on the 2-vCPU VM this was measured on,
# ~2.6 ns of user time a line against ~0.9 ns warm.)
#
# usage: scripts/batch-footprint.sh ['SERVER CMD with {PORT}']
#   default: target/release/kvserver --port {PORT} --threads 1 --save ''
#   env: REQUESTS (32000), P (16), TEST (set), PORT (7488)
# e.g. scripts/batch-footprint.sh "target/release/kvbench null-server --port {PORT}"
# (The cut assumes the batches are nearly all the process does. For redis-server it is not so:
# its runs came out at ~105,000 instructions per 16 SETs, far beyond what the commands take,
# likely its timers, which weigh more under valgrind's slowdown; its figures are not per batch.
# Our server's 10 Hz timers land in some of the runs too: the lower quartile shows runs without.)
# Needs valgrind, redis-cli and redis-benchmark; a run takes a minute or two and ~1 GB of /tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
SERVER=${1:-"target/release/kvserver --port {PORT} --threads 1 --save ''"}
REQUESTS=${REQUESTS:-32000}
P=${P:-16}
TEST=${TEST:-set}
PORT=${PORT:-7488}
tmp=$(mktemp -d)
trap 'kill $(cat $tmp/pid 2>/dev/null) 2>/dev/null || true; rm -rf $tmp' EXIT
cmd=${SERVER//\{PORT\}/$PORT}
eval "exec valgrind --tool=lackey --trace-mem=yes --log-file=$tmp/trace $cmd" >/dev/null 2>&1 &
echo $! >"$tmp/pid"
for _ in $(seq 200); do redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.3; done
redis-cli -p "$PORT" ping | grep -q PONG || { echo "server did not start" >&2; exit 1; }
# Under valgrind a batch can take longer than the slow log's 10 ms, and the entries it would write
# are not the path measured.
redis-cli -p "$PORT" config set slowlog-log-slower-than 10000000 >/dev/null
redis-benchmark -p "$PORT" -c 50 -n 16000 -P "$P" -t "$TEST" -q >/dev/null 2>&1
from=$(wc -l <"$tmp/trace")
redis-benchmark -p "$PORT" -c 50 -n "$REQUESTS" -P "$P" -t "$TEST" -q >/dev/null 2>&1
to=$(wc -l <"$tmp/trace")
kill "$(cat "$tmp/pid")"
sed -n "${from},${to}p" "$tmp/trace" >"$tmp/part"
rm "$tmp/trace"
python3 - "$tmp/part" "$((REQUESTS / P))" "$P" "$(grep -c '^I ' "$tmp/part")" <<'PY'
import sys, statistics as st
path, batches, p, instrs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
per = max(instrs // batches, 1)
code, data, k = set(), set(), 0
cl, dl = [], []
with open(path) as f:
    for l in f:
        if l.startswith("I "):
            code.add(int(l[3:].split(",")[0], 16) >> 6)
            k += 1
            if k % per == 0:
                cl.append(len(code))
                dl.append(len(data))
                code, data = set(), set()
        elif l[:2] in (" L", " S", " M"):
            data.add(int(l[3:].split(",")[0], 16) >> 6)
q = lambda xs: st.quantiles(xs, n=4)
print(f"{batches} batches of {p}: {per} instructions, "
      f"{st.median(cl):.0f} code lines, {st.median(dl):.0f} data lines a batch (medians; "
      f"quartiles {q(cl)[0]:.0f}-{q(cl)[2]:.0f} and {q(dl)[0]:.0f}-{q(dl)[2]:.0f})")
PY
