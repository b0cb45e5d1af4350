#!/usr/bin/env python3
"""Issue 18's replication benchmarks, ours against Debian's redis-server, alternated rounds.

Masters run on CPU 0; replicas and the load on CPU 1 (run this script there too):
  1. SET -P 16 (redis-benchmark -t set -P 16 -c 50 -d 64 -r 100000) on a master with no replica,
     then with one replica attached: throughput, the master's CPU per request (utime+stime from
     /proc over the run), and the replica's lag: for every sample of the master's offset, the
     time until the replica's offset reached it (its worst over the run).
  2. Full sync of N small keys: time from REPLICAOF until the replica serves all N
     (link up and DBSIZE = N). Redis runs with repl-diskless-sync-delay 0 (its default waits
     5 s for more replicas); all else default.
  3. WAIT 1 0 after each SET, 10 client processes for T seconds: SET+WAIT pairs per second.
  4. (PARTS=tx) TXS transactions (MULTI, INCR, INCRBY, RPUSH on three keys, EXEC; keys on every
     shard of a multi-threaded replica) sent through redis-cli --pipe to a master with a
     replica attached: the time until the master has run them, and until the replica has
     applied them (its offset reaches the master's), as transactions per second. Our replica
     runs with REPLICA_THREADS (default 2) loops on CPUs 0 and 1, so that its transactions span
     shards.

Run from the project's root after `cargo build --release -p kvserver`:
  taskset -c 1 python3 scripts/repl-bench.py            (ROUNDS=3 N=10000000 T=5 by default;
                                                          PARTS="set sync wait" picks parts)
"""

import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Conn, fill, free_port  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
N = int(os.environ.get("N", "10000000"))
T = float(os.environ.get("T", "5"))
REQS = int(os.environ.get("REQS", "3000000"))
TXS = int(os.environ.get("TXS", "100000"))
REPLICA_THREADS = os.environ.get("REPLICA_THREADS", "2")
BIN = os.environ.get("BIN", "target/release")
PARTS = os.environ.get("PARTS", "set sync wait").split()
TICK = os.sysconf("SC_CLK_TCK")


def cpu_secs(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK


def start(kind, port, d, cpu, threads="1"):
    if kind == "ours":
        cmd = [f"{BIN}/kvserver", "--port", str(port), "--threads", threads, "--save", "",
               "--dir", d]
    else:
        cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
               "--dir", d, "--repl-diskless-sync-delay", "0"]
    p = subprocess.Popen(["taskset", "-c", str(cpu), *cmd],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            if Conn(port).call("PING") == "+PONG":
                return p
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"{kind} did not start")


class Pair:
    """A master on CPU 0 (started at once) and, on demand, its replica on CPU 1; both stopped
    and their directory removed at the end of the `with`."""

    def __init__(self, kind):
        self.kind, self.d = kind, tempfile.mkdtemp(prefix=f"repl-{kind}-")
        self.mp, self.rp, self.r = free_port(), free_port(), None

    def __enter__(self):
        os.makedirs(self.d + "/m")
        self.m = start(self.kind, self.mp, self.d + "/m", 0)
        return self

    def replica(self, cpu=1, threads="1"):
        os.makedirs(self.d + "/r")
        self.r = start(self.kind, self.rp, self.d + "/r", cpu, threads)
        return Conn(self.rp)

    def __exit__(self, *_):
        for p in (self.r, self.m):
            if p:
                p.terminate()
                p.wait()
        subprocess.run(["rm", "-rf", self.d])


def synced(m, r):
    while True:
        mi, ri = m.info("replication"), r.info("replication")
        if ri.get("master_link_status") == "up" and \
                ri.get("slave_repl_offset") == mi.get("master_repl_offset"):
            return
        time.sleep(0.01)


def bench_set(port):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", "set", "-P", "16", "-c", "50", "-d", "64",
         "-r", "100000", "-n", str(REQS), "-q"], capture_output=True, text=True).stdout
    # "SET: 812345.67 requests per second, p50=..."
    last = [line for line in out.replace("\r", "\n").splitlines() if "requests per second" in line][-1]
    return float(last.split(":")[1].split()[0])


def round_set(kind):
    with Pair(kind) as pr:
        m, mp, rp = pr.m, pr.mp, pr.rp
        c0 = cpu_secs(m.pid)
        alone = bench_set(mp)
        cpu_alone = (cpu_secs(m.pid) - c0) / REQS
        mc, rc = Conn(mp), pr.replica()
        rc.call("REPLICAOF", "127.0.0.1", str(mp))
        synced(mc, rc)
        samples_m, samples_r, stop = [], [], threading.Event()

        def sampler():
            a, b = Conn(mp), Conn(rp)
            while not stop.is_set():
                t = time.time()
                samples_m.append((t, int(a.info("replication")["master_repl_offset"])))
                samples_r.append((time.time(), int(b.info("replication")["slave_repl_offset"])))
                time.sleep(0.02)

        th = threading.Thread(target=sampler)
        th.start()
        c0 = cpu_secs(m.pid)
        with_r = bench_set(mp)
        cpu_with = (cpu_secs(m.pid) - c0) / REQS
        synced(mc, rc)
        stop.set()
        th.join()
        end = (time.time(), int(mc.info("replication")["master_repl_offset"]))
        samples_r.append(end)
        lag, j = 0.0, 0
        for t, off in samples_m:
            while j < len(samples_r) and samples_r[j][1] < off:
                j += 1
            lag = max(lag, (samples_r[j][0] if j < len(samples_r) else end[0]) - t)
        return dict(alone=alone, with_r=with_r, ratio=with_r / alone,
                    cpu_alone=cpu_alone * 1e6, cpu_with=cpu_with * 1e6, lag=lag)


def round_sync(kind):
    with Pair(kind) as pr:
        fill(pr.mp, N)
        rc = pr.replica()
        t0 = time.time()
        rc.call("REPLICAOF", "127.0.0.1", str(pr.mp))
        while True:
            try:
                if rc.info("replication").get("master_link_status") == "up" and \
                        int(rc.call("DBSIZE")[1:]) == N:
                    break
            except (ValueError, IndexError):
                pass  # -LOADING while Redis loads
            time.sleep(0.01)
        return dict(secs=time.time() - t0)


def waiter(port, secs, i, q):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = s.makefile("rb")
    key = b"w%d" % i
    req = b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$1\r\n0\r\n" % (
        len(key), key)
    n, end = 0, time.time() + secs
    while time.time() < end:
        s.sendall(req)
        f.readline()
        r = f.readline()
        assert r == b":1\r\n", r
        n += 1
    q.put(n)


def round_wait(kind):
    with Pair(kind) as pr:
        mc, rc = Conn(pr.mp), pr.replica()
        rc.call("REPLICAOF", "127.0.0.1", str(pr.mp))
        synced(mc, rc)
        q = multiprocessing.Queue()
        ps = [multiprocessing.Process(target=waiter, args=(pr.mp, T, i, q)) for i in range(10)]
        for p in ps:
            p.start()
        total = sum(q.get() for _ in ps)
        for p in ps:
            p.join()
        return dict(rps=total / T)


def round_tx(kind):
    with Pair(kind) as pr:
        mc, rc = Conn(pr.mp), pr.replica("0,1", REPLICA_THREADS)
        rc.call("REPLICAOF", "127.0.0.1", str(pr.mp))
        synced(mc, rc)
        cmds = []
        for i in range(TXS):
            k = i % 1000
            cmds.append(b"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$6\r\nc:%04d\r\n"
                        b"*3\r\n$6\r\nINCRBY\r\n$6\r\nb:%04d\r\n$1\r\n3\r\n"
                        b"*3\r\n$5\r\nRPUSH\r\n$6\r\nl:%04d\r\n$1\r\nx\r\n"
                        b"*1\r\n$4\r\nEXEC\r\n" % (k, (k * 7 + 3) % 1000, (k * 13 + 5) % 1000))
        data = b"".join(cmds)
        t0 = time.time()
        subprocess.run(["redis-cli", "-p", str(pr.mp), "--pipe"], input=data,
                       stdout=subprocess.DEVNULL, check=True)
        master = time.time() - t0
        synced(mc, rc)
        replica = time.time() - t0
        assert rc.call("GET", "c:0007") == str(TXS // 1000), rc.call("GET", "c:0007")
        return dict(master_tx_s=TXS / master, replica_tx_s=TXS / replica)


def main():
    parts = {"set": round_set, "sync": round_sync, "wait": round_wait, "tx": round_tx}
    for part in PARTS:
        res = {"ours": [], "redis": []}
        for rnd in range(ROUNDS):
            kinds = ("ours", "redis") if rnd % 2 == 0 else ("redis", "ours")
            for kind in kinds:
                x = parts[part](kind)
                res[kind].append(x)
                print(f"{part} round {rnd} {kind:5}: " +
                      ", ".join(f"{k}={v:.3f}" for k, v in x.items()), flush=True)
        print(f"{part} medians over {ROUNDS} rounds:")
        for kind, xs in res.items():
            print(f"  {kind:5}: " + ", ".join(
                f"{k}={statistics.median(x[k] for x in xs):.3f}" for k in xs[0]), flush=True)


if __name__ == "__main__":
    main()
