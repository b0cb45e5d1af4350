#!/usr/bin/env bash
# ZRANK of the last member of a 1M-member set (redis-benchmark -c 50 -P 16), redis-server vs
# kvserver vs kvcore on a bare epoll loop (`kvbench null-server --execute`: one embedded Db, no
# shards or tasks) vs a no-op server (`kvbench null-server`, parses and answers +OK: the floor
# any server pays for the socket calls alone), alternated per round; prints each one's
# throughput and CPU time per request (utime+stime over the run / requests), and the medians of
# the per-round CPU efficiency against redis-server (its CPU per request / ours).
# Servers on CPU ${SERVER_CPU:-0}, load on ${LOAD_CPU:-1}. Run from the workspace root after
# `cargo build --release -p kvserver -p kvbench`:  bash scripts/zrank-floor.sh [ROUNDS]
set -eu
ROUNDS=${1:-7} N=2000000 SC=${SERVER_CPU:-0} LC=${LOAD_CPU:-1}
tmp=$(mktemp -d)
python3 - "$tmp/zfill" <<'PY'
import sys
def resp(*a):
    out = [b"*%d\r\n" % len(a)]
    for x in a:
        x = str(x).encode(); out.append(b"$%d\r\n%s\r\n" % (len(x), x))
    return b"".join(out)
with open(sys.argv[1], "wb") as f:
    for i in range(0, 1000000, 1000):
        args = ["ZADD", "bench:big"]
        for j in range(i, i + 1000):
            args += [str(j), f"m:{j}"]
        f.write(resp(*args))
PY
taskset -c "$SC" redis-server --port 7701 --save '' --appendonly no >/dev/null 2>&1 & R=$!
taskset -c "$SC" target/release/kvserver --port 7702 --threads 1 --save '' >/dev/null 2>&1 & K=$!
taskset -c "$SC" target/release/kvbench null-server --port 7703 >/dev/null 2>&1 & Z=$!
taskset -c "$SC" target/release/kvbench null-server --port 7704 --execute >/dev/null 2>&1 & E=$!
trap 'kill $R $K $Z $E 2>/dev/null; rm -rf $tmp' EXIT
sleep 1
for p in 7701 7702 7704; do taskset -c "$LC" redis-cli -p $p --pipe <"$tmp/zfill" >/dev/null; done
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
run() { # pid port -> "req/s us/req"
  local t0 t1 rps
  t0=$(cpu "$1")
  rps=$(taskset -c "$LC" redis-benchmark -p "$2" -c 50 -P 16 -n $N --csv ZRANK bench:big m:999999 2>/dev/null |
    tail -1 | cut -d, -f2 | tr -d '"')
  t1=$(cpu "$1")
  awk -v r="$rps" -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v n=$N 'BEGIN{printf "%.0f %.3f", r, t/hz/n*1e6}'
}
echo "round  redis(req/s us/req)  kvserver  exec  null  | eff: kvserver exec null"
for i in $(seq 1 "$ROUNDS"); do
  if (( i % 2 )); then r=$(run $R 7701); k=$(run $K 7702); e=$(run $E 7704); z=$(run $Z 7703)
  else z=$(run $Z 7703); e=$(run $E 7704); k=$(run $K 7702); r=$(run $R 7701); fi
  awk -v i="$i" -v r="$r" -v k="$k" -v e="$e" -v z="$z" 'BEGIN{split(r,a," "); split(k,b," ");
    split(e,x," "); split(z,c," ");
    printf "%5d  %s  %s  %s  %s  | %.2f %.2f %.2f\n", i, r, k, e, z, a[2]/b[2], a[2]/x[2], a[2]/c[2]}'
done | tee "$tmp/rounds"
for col in 11 12 13; do
  sort -g -k$col "$tmp/rounds" | awk -v c=$col '{v[NR]=$c} END{printf "%s ", v[int((NR+1)/2)]}'
done | awk '{printf "median eff: kvserver %s  exec %s  null %s\n", $1, $2, $3}'
