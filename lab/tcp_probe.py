#!/usr/bin/env python3
"""TCP throughput probe for the lab (run inside its namespaces by `lab/cluster.sh measure`).

  tcp_probe.py serve ADDR PORT        accept one connection, read until EOF, then close
  tcp_probe.py send ADDR PORT MIB     send MIB mebibytes, wait for the receiver to close,
                                      print "<Mbit/s>" (1 Mbit = 1e6 bits)
Both sides give up after 60 s.
"""
import socket
import sys
import time

TIMEOUT_S = 60
CHUNK = 1 << 20


def serve(addr, port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.settimeout(TIMEOUT_S)
        s.bind((addr, port))
        s.listen(1)
        conn, _ = s.accept()
        with conn:
            conn.settimeout(TIMEOUT_S)
            while conn.recv(CHUNK):
                pass


def send(addr, port, mib):
    deadline = time.time() + TIMEOUT_S
    while True:  # the server may not be listening yet
        try:
            s = socket.create_connection((addr, port), timeout=TIMEOUT_S)
            break
        except ConnectionRefusedError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    with s:
        buf = b"\0" * CHUNK
        start = time.time()
        for _ in range(mib):
            s.sendall(buf)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)  # returns when the receiver has read everything and closed
        elapsed = time.time() - start
    print(f"{mib * CHUNK * 8 / elapsed / 1e6:.0f}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 5 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)
