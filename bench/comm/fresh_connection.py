#!/usr/bin/python3
"""A first transfer over a new TCP connection beside the same transfer over a warm one.

An in-place regroup builds a new process group, so the training state it sends to a newcomer
always crosses fresh connections. This measures what that costs on the host, with no Gloo and
no chexscale: a sender process and a receiver, over loopback (or --host), each round on a new
connection: one transfer of --bytes, then --warm more over the same connection. Prints each
transfer's seconds and the medians of first and warm transfers.
Usage: bench/comm/fresh_connection.py [--bytes 134217728] [--rounds 5] [--warm 2]
"""
import argparse
import os
import socket
import statistics
import time

import numpy as np


def send_rounds(port, a):
    payload = np.full(a.bytes, 7, np.uint8)
    for _ in range(a.rounds):
        with socket.create_connection((a.host, port)) as c:
            for _ in range(1 + a.warm):
                c.sendall(memoryview(payload))
                c.recv(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bytes", type=int, default=134_217_728)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warm", type=int, default=2)
    p.add_argument("--host", default="127.0.0.1")
    a = p.parse_args()
    server = socket.socket()
    server.bind((a.host, 0))
    server.listen(1)
    port = server.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        send_rounds(port, a)
        os._exit(0)
    buffer = np.zeros(a.bytes, np.uint8)
    view = memoryview(buffer)
    first, warm = [], []
    for r in range(a.rounds):
        conn, _ = server.accept()
        with conn:
            for t in range(1 + a.warm):
                got, start = 0, time.perf_counter()
                while got < a.bytes:
                    n = conn.recv_into(view[got:], a.bytes - got)
                    if n == 0:
                        raise SystemExit("fresh_connection.py: the sender closed early")
                    got += n
                seconds = time.perf_counter() - start
                (first if t == 0 else warm).append(seconds)
                print(f"round {r} transfer {t} ({'new connection' if t == 0 else 'warm'}): "
                      f"{seconds:.3f} s, {a.bytes / seconds / 1e9:.2f} GB/s", flush=True)
                conn.send(b"k")
    os.waitpid(pid, 0)
    print(f"median: first transfer {statistics.median(first):.3f} s, "
          f"warm {statistics.median(warm):.3f} s ({a.bytes} bytes)")


if __name__ == "__main__":
    main()
