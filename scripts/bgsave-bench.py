#!/usr/bin/env python3
"""Issue 16's snapshot benchmark: p99.9 latency and memory growth while BGSAVE runs.

For each server (ours, then Debian's redis-server, alternated over ROUNDS rounds), pinned to
CPU 0 with the load on CPU 1:
  1. fill N keys (`key:%012d`, 16-byte values) through redis-cli --pipe;
  2. baseline: kvbench SET/GET -P 16, 50 clients, T seconds per test, no save;
  3. during: the same load while BGSAVEs run back to back (a new one as soon as the last ends),
     sampling the server's RSS every 10 ms; for redis-server the forked child's copy-on-write
     pages (INFO current_cow_peak / rdb_last_cow_size) count as growth, since the machine must
     hold them.
Prints per round and the medians: p99.9 (ms) without and during saves, their ratio, RSS before,
growth during saves (MB and %), seconds per save.

Run from the project's root after `cargo build --release -p kvserver -p kvbench`, with this
script on the load's CPU (so that its polling never takes the servers' CPU):
  N=1000000 taskset -c 1 python3 scripts/bgsave-bench.py          (issue 16 asks for N=10000000)
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Conn, fill, free_port  # noqa: E402

N = int(os.environ.get("N", "1000000"))
T = int(os.environ.get("T", "5"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
BIN = os.environ.get("BIN", "target/release")


def cli(port, *args):
    out = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True)
    return out.stdout


def info(port, section="persistence"):
    d = {}
    for line in cli(port, "INFO", section).splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            d[k] = v.strip()
    return d


def rss(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * 4096


def start(kind, port, d):
    if kind == "ours":
        cmd = [f"{BIN}/kvserver", "--port", str(port), "--threads", "1", "--save", "", "--dir", d]
    else:
        cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", d]
    p = subprocess.Popen(["taskset", "-c", "0", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if cli(port, "PING").strip() == "PONG":
            return p
        time.sleep(0.05)
    raise SystemExit(f"{kind} did not start")


def load(port, out):
    subprocess.run(
        [f"{BIN}/kvbench", "run", "-p", str(port), "-t", "set,get", "-P", "16", "-c", "50",
         "--test-time", str(T), "-r", str(N), "-d", "16", "--load-cpus", "1", "--json", out],
        stdout=subprocess.DEVNULL, check=True)
    with open(out) as f:
        doc = json.load(f)
    # The worse of the SET and GET tests.
    return max(r["all"]["p999_ms"] for r in doc["results"])


def round_of(kind):
    d = tempfile.mkdtemp(prefix=f"bgsave-{kind}-")
    port = free_port()
    p = start(kind, port, d)
    try:
        fill(port, N)
        before = rss(p.pid)
        base = load(port, f"{d}/base.json")
        stop = threading.Event()
        peak = [before]
        cow = [0]
        saves = []

        def saver():
            c = Conn(port)
            while not stop.is_set():
                t0 = time.time()
                r = c.call("BGSAVE")
                if "started" not in r:
                    time.sleep(0.02)
                    continue
                while True:
                    i = c.info("persistence")
                    cow[0] = max(cow[0], int(i.get("current_cow_peak", "0")))
                    if i.get("rdb_bgsave_in_progress") == "0":
                        cow[0] = max(cow[0], int(i.get("rdb_last_cow_size", "0")))
                        break
                    time.sleep(0.02)
                saves.append(time.time() - t0)

        def sampler():
            while not stop.is_set():
                peak[0] = max(peak[0], rss(p.pid))
                time.sleep(0.01)

        th = [threading.Thread(target=saver), threading.Thread(target=sampler)]
        for t in th:
            t.start()
        during = load(port, f"{d}/during.json")
        stop.set()
        for t in th:
            t.join()
        growth = peak[0] - before + cow[0]
        return dict(kind=kind, base=base, during=during, ratio=during / base, rss=before,
                    growth=growth, pct=100.0 * growth / before, saves=len(saves),
                    secs=statistics.median(saves) if saves else float("nan"))
    finally:
        p.terminate()
        p.wait()
        subprocess.run(["rm", "-rf", d])


def main():
    results = {"ours": [], "redis": []}
    for r in range(ROUNDS):
        kinds = ("ours", "redis") if r % 2 == 0 else ("redis", "ours")
        for kind in [k for k in kinds if k in os.environ.get("ONLY", "ours redis").split()]:
            x = round_of(kind)
            results[kind].append(x)
            print(f"round {r} {kind:5}: p99.9 {x['base']:.3f} -> {x['during']:.3f} ms "
                  f"(x{x['ratio']:.2f}), RSS {x['rss'] / 1e6:.0f} MB, growth "
                  f"{x['growth'] / 1e6:.1f} MB ({x['pct']:.1f}%), {x['saves']} saves, "
                  f"{x['secs']:.2f} s each", flush=True)
    print(f"medians over {ROUNDS} rounds, N={N}, T={T}s per test:")
    for kind, xs in ((k, xs) for k, xs in results.items() if xs):
        m = lambda k: statistics.median(x[k] for x in xs)
        print(f"  {kind:5}: p99.9 without {m('base'):.3f} ms, during saves {m('during'):.3f} ms "
              f"(x{m('ratio'):.2f}); RSS {m('rss') / 1e6:.0f} MB, growth {m('growth') / 1e6:.1f} MB "
              f"({m('pct'):.1f}%); {m('secs'):.2f} s per save")


if __name__ == "__main__":
    sys.exit(main())
