#!/usr/bin/env bash
# Issue 14's CPU bars: the issue's `redis-benchmark -t lpush,rpush,lpop,rpop,sadd,hset,spop,
# lrange_100,lrange_300,lrange_600,mset -c 50 -P 16 -d 64 -r 100000`, each test measured alone
# (scripts/side-by-side.sh: ours and redis-server alternated, pinned, CPU per request) on what
# the issue's single sequential run leaves it:
# - pushes, SADD, HSET, MSET on an empty server;
# - LPOP and RPOP on a list of 1M 64-byte elements (the single run pops 2M pushed ones);
# - SPOP on the set `sadd -r 100000` leaves (about 100k members, then misses, as in the single run);
# - LRANGE alone (redis-benchmark's lrange_* tests first LPUSH n elements themselves), on a list
#   of 10000 64-byte elements;
# - the no-op server's floor (kvbench null-server as the reference) for LPUSH and SPOP.
# usage: scripts/collection-bench.sh [ROUNDS]   (default 5; run after cargo build --release)
set -u
R=${1:-5}
cd "$(dirname "$0")/.."
S=(bash scripts/side-by-side.sh -r "$R" -n 1000000 -c 50 -P 16 -d 64 -x '-r 100000')
echo "### pushes, sadd, hset, mset (empty server)"
"${S[@]}" -t lpush,rpush,sadd,hset,mset 2>&1 | tail -7
echo "### lpop, rpop on a list of 1M 64-byte elements"
"${S[@]}" -t lpop,rpop --prefill '-n 1000000 -d 64 -t rpush' 2>&1 | tail -4
echo "### spop on the set sadd -r 100000 leaves (then misses)"
"${S[@]}" -t spop --prefill '-n 1000000 -d 64 -r 100000 -t sadd' 2>&1 | tail -3
echo "### LRANGE alone on a list of 10000 64-byte elements"
bash scripts/side-by-side.sh -r "$R" -n 200000 -c 50 -P 16 -d 64 -e 'lrange_100:LRANGE mylist 0 99' \
  -e 'lrange_300:LRANGE mylist 0 299' -e 'lrange_600:LRANGE mylist 0 599' \
  --prefill '-n 10000 -d 64 -t lpush' 2>&1 | tail -5
echo "### no-op floor (kvbench null-server as the reference)"
"${S[@]}" -t lpush,spop --ref "target/release/kvbench null-server --port {PORT}" 2>&1 | tail -4
