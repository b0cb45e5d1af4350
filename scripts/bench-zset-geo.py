#!/usr/bin/env python3
"""Sorted-set and geo workloads, kvserver vs redis-server, alternated in one run.

Each server is pinned to one CPU (--server-cpu, default 0), the load to another (--load-cpu,
default 1). Per workload and server it reports throughput and the server's CPU time per
request (utime+stime from /proc/PID/stat over the workload / requests), median over rounds,
and the ratios ours/theirs.

Workloads:
  zadd      redis-benchmark -c 50 -P 16: ZADD bench:z __rand_int__ m:__rand_int__ (-r 1000000)
  zrank     redis-benchmark -c 50 -P 16: ZRANK of the last member of a 1M-member set
  geoadd    1M GEOADD of random points (Europe-sized box lon -10..30, lat 35..60), one
            member per command, streamed by `redis-cli --pipe`
  geosearch GEOSEARCH FROMLONLAT <random point in the box> BYRADIUS 5 km over those 1M
            points (about 10 hits each), streamed by `redis-cli --pipe`

redis-benchmark cannot produce valid random coordinates (its __rand_int__ is a zero-padded
integer), so the geo commands are generated here. Run from the workspace root after
`cargo build --release`:  python3 scripts/bench-zset-geo.py [--rounds 3]
"""

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Server:
    def __init__(self, name, cmd, cpu):
        self.name = name
        self.port = free_port()
        argv = ["taskset", "-c", str(cpu)] + [a.replace("{PORT}", str(self.port)) for a in cmd]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.cli("PING").strip() == "PONG":
                return
            time.sleep(0.05)
        sys.exit(f"FAIL: {name} did not start")

    def cli(self, *args, stdin=None):
        r = subprocess.run(
            ["redis-cli", "-p", str(self.port)] + list(args),
            input=stdin,
            capture_output=True,
        )
        return r.stdout.decode(errors="replace")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def measure(server, load_cpu, run):
    """Runs `run(port)` (returns the number of requests) and reports (req/s, us CPU/request)."""
    c0 = cpu_seconds(server.proc.pid)
    t0 = time.time()
    n = run(server.port, load_cpu)
    wall = time.time() - t0
    cpu = cpu_seconds(server.proc.pid) - c0
    return n / wall, cpu / n * 1e6


def bench(port, cpu, *args, n):
    out = subprocess.run(
        ["taskset", "-c", str(cpu), "redis-benchmark", "-p", str(port), "-q", "--csv"] + list(args),
        capture_output=True,
        text=True,
    )
    if out.returncode != 0 or "ERR" in out.stdout:
        sys.exit(f"FAIL: redis-benchmark {args}: {out.stdout} {out.stderr}")
    return n


def pipe(port, cpu, path, n):
    with open(path, "rb") as f:
        out = subprocess.run(
            ["taskset", "-c", str(cpu), "redis-cli", "-p", str(port), "--pipe"],
            stdin=f,
            capture_output=True,
            text=True,
        )
    if "errors: 0" not in out.stdout:
        sys.exit(f"FAIL: redis-cli --pipe: {out.stdout} {out.stderr}")
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--searches", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--ours", default="target/release/kvserver --port {PORT} --threads 1")
    ap.add_argument("--ref", default="redis-server --port {PORT} --save '' --appendonly no")
    ap.add_argument("--only", default="zadd,zrank,geoadd,geosearch")
    a = ap.parse_args()
    only = a.only.split(",")

    rng = random.Random(7)
    tmp = tempfile.mkdtemp()
    geoadd, geosearch, zfill = (os.path.join(tmp, f) for f in ("geoadd", "geosearch", "zfill"))
    with open(geoadd, "wb") as f:
        for i in range(a.points):
            f.write(resp("GEOADD", "bench:geo", "%.6f" % rng.uniform(-10, 30), "%.6f" % rng.uniform(35, 60), f"p:{i}"))
    with open(geosearch, "wb") as f:
        for _ in range(a.searches):
            f.write(resp("GEOSEARCH", "bench:geo", "FROMLONLAT", "%.6f" % rng.uniform(-10, 30),
                         "%.6f" % rng.uniform(35, 60), "BYRADIUS", "5", "km"))
    with open(zfill, "wb") as f:
        for i in range(0, 1_000_000, 1000):
            args = ["ZADD", "bench:big"]
            for j in range(i, i + 1000):
                args += [str(j), f"m:{j}"]
            f.write(resp(*args))

    import shlex
    servers = [("ours", shlex.split(a.ours)), ("redis", shlex.split(a.ref))]
    workloads = {
        "zadd": (None, lambda p, c: bench(p, c, "-c", "50", "-P", "16", "-r", "1000000", "-n", str(a.requests),
                                          "ZADD", "bench:z", "__rand_int__", "m:__rand_int__", n=a.requests)),
        "zrank": (lambda s: pipe(s.port, a.load_cpu, zfill, 1000),
                  lambda p, c: bench(p, c, "-c", "50", "-P", "16", "-n", str(a.requests),
                                     "ZRANK", "bench:big", "m:999999", n=a.requests)),
        "geoadd": (None, lambda p, c: pipe(p, c, geoadd, a.points)),
        "geosearch": (lambda s: pipe(s.port, a.load_cpu, geoadd, a.points) if s.cli("EXISTS", "bench:geo").strip() == "0" else None,
                      lambda p, c: pipe(p, c, geosearch, a.searches)),
    }
    results = {w: {s: [] for s, _ in servers} for w in only}
    rss = {}
    for r in range(a.rounds):
        order = servers if r % 2 == 0 else servers[::-1]
        for name, cmd in order:
            srv = Server(name, cmd, a.server_cpu)
            try:
                for w in only:
                    prep, run = workloads[w]
                    if w == "geoadd":
                        srv.cli("DEL", "bench:geo")
                    if prep:
                        prep(srv)
                    results[w][name].append(measure(srv, a.load_cpu, run))
                if name not in rss:
                    rss[name] = rss_kib(srv.proc.pid)
                    mem = srv.cli("INFO", "memory")
                    used = [l for l in mem.splitlines() if l.startswith("used_memory:")]
                    rss[name] = (rss[name], used[0].split(":")[1] if used else "?")
            finally:
                srv.stop()
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)

    print(f"{'workload':10} {'ours req/s':>12} {'redis req/s':>12} {'thr ratio':>9} "
          f"{'ours us/req':>11} {'redis us/req':>12} {'redis/ours cpu':>14}")
    for w in only:
        o, rr = results[w]["ours"], results[w]["redis"]
        thr = statistics.median(x[0] / y[0] for x, y in zip(o, rr))
        eff = statistics.median(y[1] / x[1] for x, y in zip(o, rr))
        print(f"{w:10} {statistics.median(x[0] for x in o):12.0f} {statistics.median(x[0] for x in rr):12.0f} "
              f"{thr:9.2f} {statistics.median(x[1] for x in o):11.3f} {statistics.median(x[1] for x in rr):12.3f} "
              f"{eff:14.2f}")
    for name, (k, used) in rss.items():
        print(f"{name}: RSS after the run {k} KiB, used_memory {used}")


if __name__ == "__main__":
    main()
