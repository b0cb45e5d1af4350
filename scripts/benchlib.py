"""What the Python benchmark scripts share: a free port, one persistent RESP connection, and
filling a server with N small keys."""

import socket
import subprocess


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Conn:
    """One persistent connection (polling without a redis-cli process per call)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def call(self, *args):
        """Sends a command; returns a bulk reply's text, or a status/error/integer line."""
        self.s.sendall(b"".join([b"*%d\r\n" % len(args)] +
                                [b"$%d\r\n%s\r\n" % (len(a), a.encode()) for a in args]))
        line = self.f.readline()
        if line[:1] == b"$":
            n = int(line[1:])
            return self.f.read(n + 2)[:-2].decode()
        return line.decode().strip()

    def info(self, section):
        """INFO `section` as a dict."""
        d = {}
        for line in self.call("INFO", section).splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                d[k] = v.strip()
        return d


def fill(port, n):
    """SETs `key:%012d` = `value-%010d` for i in 0..n through redis-cli --pipe; checks DBSIZE."""
    gen = subprocess.Popen(["redis-cli", "-p", str(port), "--pipe"], stdin=subprocess.PIPE,
                           stdout=subprocess.DEVNULL)
    batch = []
    for i in range(n):
        batch.append(b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$16\r\nvalue-%010d\r\n" % (i, i))
        if len(batch) == 10000:
            gen.stdin.write(b"".join(batch))
            batch = []
    gen.stdin.write(b"".join(batch))
    gen.stdin.close()
    gen.wait()
    got = int(Conn(port).call("DBSIZE")[1:])
    assert got == n, f"filled {got} of {n}"
