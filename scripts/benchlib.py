"""What the Python benchmark scripts share: a free port and one persistent RESP connection."""

import socket


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
