#!/usr/bin/env python3
"""Memory per key with and without a TTL, ours against redis-server, same data: N keys
`key:%012d` (16 bytes) holding a 64-byte value, SET through redis-cli --pipe, with `EX 86400`
or without. Prints each server's RSS gained per key and INFO used_memory per key. Servers on
CPU 0 (ours with --threads 1), alternated over ROUNDS.

Run from the project's root after `cargo build --release -p kvserver`:
  python3 scripts/ttl-memory.py            (N=1000000 ROUNDS=1; BIN=dir of another kvserver)
"""

import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Conn, free_port  # noqa: E402

N = int(os.environ.get("N", "1000000"))
ROUNDS = int(os.environ.get("ROUNDS", "1"))
BIN = os.environ.get("BIN", "target/release")


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def used_memory(c):
    return int(c.info("memory")["used_memory"])


def one(kind, ttl):
    port, d = free_port(), tempfile.mkdtemp(prefix="ttl-mem-")
    if kind == "ours":
        cmd = [f"{BIN}/kvserver", "--port", str(port), "--threads", "1", "--save", "",
               "--dir", d]
    else:
        cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
               "--dir", d]
    p = subprocess.Popen(["taskset", "-c", "0", *cmd], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                c = Conn(port)
                break
            except OSError:
                time.sleep(0.05)
        rss0, used0 = rss_bytes(p.pid), used_memory(c)
        value = b"v" * 64
        tail = b"$2\r\nEX\r\n$5\r\n86400\r\n" if ttl else b""
        head = b"*5\r\n" if ttl else b"*3\r\n"
        data = b"".join(head + b"$3\r\nSET\r\n$16\r\nkey:%012d\r\n$64\r\n%s\r\n" % (i, value) + tail
                        for i in range(N))
        subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=data,
                       stdout=subprocess.DEVNULL, check=True)
        assert int(c.call("DBSIZE")[1:]) == N
        time.sleep(2)
        return ((rss_bytes(p.pid) - rss0) / N, (used_memory(c) - used0) / N)
    finally:
        p.terminate()
        p.wait()
        subprocess.run(["rm", "-rf", d])


def main():
    for ttl in (False, True):
        for rnd in range(ROUNDS):
            kinds = ("ours", "redis") if rnd % 2 == 0 else ("redis", "ours")
            for kind in kinds:
                rss, used = one(kind, ttl)
                print(f"{'with' if ttl else 'without'} TTL, {kind:5}: RSS {rss:.1f} B/key, "
                      f"used_memory {used:.1f} B/key", flush=True)


if __name__ == "__main__":
    main()
