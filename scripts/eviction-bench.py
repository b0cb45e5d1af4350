#!/usr/bin/env python3
"""maxmemory under a zipf cache workload: kvserver against redis-server in one run.

Each round starts both servers fresh (pinned to CPU 0, `--threads 1` for ours) with
`maxmemory 100mb` and the policy, then drives them with kvbench on CPU 1: SET:GET 1:1 over
1M keys drawn from a zipf distribution, 1000-byte values, 2M requests, so 1 GB is written,
ten times the limit. Reported per server, medians over the rounds (servers alternated):
throughput, server CPU µs per request (kvbench reads /proc), hit ratio (INFO keyspace_hits
over hits + misses), evicted keys, and peak RSS (VmHWM) above the empty server's RSS, as a
multiple of maxmemory.

usage: scripts/eviction-bench.py [ROUNDS] [POLICY ...]   (defaults: 3, allkeys-lru allkeys-lfu)
env: REQUESTS (2000000), KEYS (1000000), SIZE (1000), MAXMEMORY_MB (100)
"""
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = os.path.join(ROOT, "target/release/kvserver")
KVBENCH = os.path.join(ROOT, "target/release/kvbench")
REQUESTS = int(os.environ.get("REQUESTS", 2_000_000))
KEYS = int(os.environ.get("KEYS", 1_000_000))
SIZE = int(os.environ.get("SIZE", 1000))
LIMIT_MB = int(os.environ.get("MAXMEMORY_MB", 100))


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def command(port, *args):
    """One command through redis-cli; its output."""
    return subprocess.run(["redis-cli", "-p", str(port)] + [str(a) for a in args],
                          capture_output=True, text=True).stdout


def start(kind, port, policy):
    if kind == "ours":
        cmd = [OURS, "--port", str(port), "--threads", "1", "--maxmemory", f"{LIMIT_MB}mb",
               "--maxmemory-policy", policy]
    else:
        cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
               "--maxmemory", f"{LIMIT_MB}mb", "--maxmemory-policy", policy]
    p = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            if "PONG" in command(port, "PING"):
                return p
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{kind} did not start")


def info(port, field):
    text = command(port, "INFO", "all")
    m = re.search(rf"^{field}:(\S+)", text, re.M)
    return float(m.group(1)) if m else 0.0


def run(kind, port, policy):
    p = start(kind, port, policy)
    try:
        time.sleep(0.3)
        empty = rss_kib(p.pid)
        out = subprocess.run(
            ["taskset", "-c", "1", KVBENCH, "run", "-p", str(port), "--ratio", "1:1",
             "--key-dist", "zipf", "-r", str(KEYS), "-d", str(SIZE), "-n", str(REQUESTS),
             "-c", "50"],
            capture_output=True, text=True, check=True).stdout
        ops = float(re.search(r"^\s+all\s+(\d+)", out, re.M).group(1))
        cpu = float(re.search(r"server ([\d.]+)", out).group(1))
        hits, misses = info(port, "keyspace_hits"), info(port, "keyspace_misses")
        return {
            "ops": ops,
            "cpu_us": cpu,
            "hit": hits / max(hits + misses, 1),
            "evicted": info(port, "evicted_keys"),
            "rss_over": (rss_kib(p.pid, "VmHWM") - empty) * 1024 / (LIMIT_MB << 20),
            "used_over": info(port, "used_memory") / (LIMIT_MB << 20),
        }
    finally:
        p.kill()
        p.wait()


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    policies = sys.argv[2:] or ["allkeys-lru", "allkeys-lfu"]
    print(f"maxmemory {LIMIT_MB}mb, SET:GET 1:1, zipf over {KEYS} keys, {SIZE} B values, "
          f"{REQUESTS} requests ({REQUESTS // 2 * SIZE / 1e9:.1f} GB written), {rounds} rounds")
    for policy in policies:
        res = {"ours": [], "redis": []}
        for r in range(rounds):
            order = ["ours", "redis"] if r % 2 == 0 else ["redis", "ours"]
            for kind in order:
                x = run(kind, 7495 if kind == "ours" else 7496, policy)
                res[kind].append(x)
                print(f"  {policy} round {r + 1} {kind:5}: {x['ops']:.0f} ops/s, "
                      f"{x['cpu_us']:.2f} µs/req, hits {x['hit'] * 100:.2f}%, "
                      f"evicted {x['evicted']:.0f}, peak RSS - empty {x['rss_over']:.3f}x maxmemory, "
                      f"used_memory {x['used_over']:.3f}x", flush=True)
        med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in res.items()}
        o, r = med["ours"], med["redis"]
        print(f"{policy}: ops/s ours {o['ops']:.0f} redis {r['ops']:.0f} (ratio {o['ops'] / r['ops']:.2f}); "
              f"CPU µs/req ours {o['cpu_us']:.2f} redis {r['cpu_us']:.2f} (redis/ours {r['cpu_us'] / o['cpu_us']:.2f}); "
              f"hit ratio ours {o['hit'] * 100:.2f}% redis {r['hit'] * 100:.2f}%; "
              f"peak RSS above empty ours {o['rss_over']:.3f}x redis {r['rss_over']:.3f}x maxmemory")


if __name__ == "__main__":
    main()
