#!/usr/bin/env bash
# What a server on CPU 0 waits for: traces the scheduler on CPU 0 (perf, sched_switch and
# sched_wakeup; perf itself on CPU 1) while one open-loop kvbench workload runs, then prints the
# server's longest waits for the CPU (from waking or being preempted until it runs again), each
# with the tasks that ran on CPU 0 meanwhile, and the totals by task. Needs root and perf.
# usage: scripts/cpu-waits.sh ours|redis [kvbench run args]   (default: issue 19's GET workload;
# REDIS_SERVER=PATH and KVSERVER=PATH pick the binaries, as in scripts/latency-table.sh)
# Run from the project's root after `cargo build --release -p kvserver -p kvbench`.
set -euo pipefail
cd "$(dirname "$0")/.."
server=${1:?usage: scripts/cpu-waits.sh ours|redis [kvbench run args]}; shift
args=("$@"); [ ${#args[@]} = 0 ] && args=(-t get -r 1000 -c 50 -P 1 --rate 50000 -n 500000)
tmp=$(mktemp -d)
trap 'kill $(cat $tmp/pids 2>/dev/null) 2>/dev/null || true; wait 2>/dev/null; rm -rf $tmp' EXIT
port=7483
if [ "$server" = ours ]; then
  taskset -c 0 "${KVSERVER:-target/release/kvserver}" --port $port --threads 1 --save '' >/dev/null 2>&1 &
else
  taskset -c 0 "${REDIS_SERVER:-redis-server}" --port $port --save '' --appendonly no >/dev/null 2>&1 &
fi
echo $! >>"$tmp/pids"; pid=$!
for _ in $(seq 50); do redis-cli -p $port ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
taskset -c 1 perf record -q -e sched:sched_switch -e sched:sched_wakeup -C 0 -o "$tmp/perf.data" \
  >/dev/null 2>&1 &
echo $! >>"$tmp/pids"; perf=$!
sleep 1
target/release/kvbench run -p $port "${args[@]}" --load-cpus 1 2>&1 | grep -A1 'ops/s'
kill -INT $perf; wait $perf 2>/dev/null || true; [ -n "${KEEP:-}" ] && cp "$tmp/perf.data" "$KEEP"
perf script -i "$tmp/perf.data" -F time,event,trace 2>/dev/null >"$tmp/trace"
python3 - "$tmp/trace" "$pid" <<'PY'
import collections, re, sys
lines, pid = open(sys.argv[1]), sys.argv[2]
tids = {int(t) for t in __import__('os').listdir(f"/proc/{pid}/task")}
waiting = {}            # thread -> (when it became ready to run and did not, what ran since)
waits, by_task = [], collections.Counter()
last, lost = None, 0
for l in lines:
    m = re.match(r'\s*([\d.]+):\s+sched:(\w+):\s+(.*)', l)
    if not m:
        continue
    t, ev, tr = float(m.group(1)), m.group(2), m.group(3)
    if ev == 'sched_wakeup':
        w = int(re.search(r' pid=(\d+)', tr).group(1))
        if w in tids and w not in waiting:
            waiting[w] = (t, collections.Counter())
        continue
    s = re.search(r'prev_comm=(.*?) prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)', tr)
    prev, prev_pid, state, nxt_pid = s.group(1), int(s.group(2)), s.group(3), int(s.group(5))
    if prev_pid in waiting:
        # It ran, but perf lost the switch to it (its buffer filled): the wait's end is unknown.
        waiting.pop(prev_pid)
        lost += 1
    for tid, (since, spent) in waiting.items():
        if tid != prev_pid and last is not None:
            spent[prev] += t - max(last, since)
    if prev_pid in tids and state.startswith('R'):
        waiting[prev_pid] = (t, collections.Counter())
    if nxt_pid in waiting:
        since, spent = waiting.pop(nxt_pid)
        waits.append((t - since, spent))
        by_task.update(spent)
    last = t
waits.sort(key=lambda w: -w[0])
print(f"{len(waits)} waits for CPU 0, {sum(w for w, _ in waits) * 1e3:.1f} ms in all; "
      f"over 0.5 ms: {sum(w > 5e-4 for w, _ in waits)}, over 1 ms: {sum(w > 1e-3 for w, _ in waits)} "
      f"({lost} left out: perf lost the event that ended them)")
print("longest (ms), with what ran meanwhile (swapper: CPU 0 was idle, i.e. waking it took that long):")
for w, s in waits[:12]:
    print(f"  {w * 1e3:7.3f}  " + ", ".join(f"{k} {v * 1e3:.3f}" for k, v in s.most_common(3)))
print("CPU 0 time taken while the server waited, by task (ms): "
      + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in by_task.most_common(8)))
PY
