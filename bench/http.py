#!/usr/bin/env python3
"""The HTTP endpoint's benchmarks (docs/protocol.md §12), each beside a
baseline from the same invocation, against the release service on loopback:

1. GET /healthz on a kept-alive connection, p50 and p99, with nothing else
   open (the baseline) and then with 1,000 idle keep-alive connections and
   100 /events streams open (read by bench/tools/sse_clients.c at 10
   models/s); the service's RSS before the crowd and with it.
2. The 100 streams' delay: a model's arrival at a ZeroMQ SUB to its arrival
   at each stream, p99 (bench/consumers.py's row, here with the crowd).
3. TLS handshakes per second, each a full handshake on a new connection
   (`openssl s_time -new`), against the service under `http.tls` and
   against `openssl s_server` with the same certificate, alternated.

    python3 bench/http.py [--binary .build/release/coffee-tracker] [--out bench/http.json]
"""
import argparse
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zmq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from consumers import Service, drink, rss_mb  # noqa: E402


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def healthz_latencies(host, port, count=2000, rate=200):
    """`count` GET /healthz on one kept-alive connection, `rate` a second; milliseconds each."""
    s = socket.create_connection((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n"
    times = []
    buffer = b""
    for _ in range(count):
        started = time.perf_counter()
        s.sendall(request)
        while not (b"\r\n\r\n" in buffer and buffer.endswith(b"ok\n")):
            buffer += s.recv(4096)
        times.append((time.perf_counter() - started) * 1000)
        buffer = b""
        time.sleep(max(0.0, 1 / rate - (time.perf_counter() - started)))
    s.close()
    return {"p50_ms": percentile(times, 0.5), "p99_ms": percentile(times, 0.99), "requests": count}


def crowd(binary, sse_clients, idle=1000, streams=100, seconds=30):
    with tempfile.TemporaryDirectory(prefix="ct-http-") as d:
        service = Service(binary, Path(d), {"publish": {"modelIntervalMs": 100, "heartbeatIntervalS": 1},
                                            "http": {"bind": "127.0.0.1:0", "maxConnections": 2048}})
        try:
            host, port = service.endpoints["http"].rsplit(":", 1)
            port = int(port)
            time.sleep(0.5)
            alone = healthz_latencies(host, port)
            rss_before = rss_mb(service.process.pid)
            held = []
            for _ in range(idle):
                c = socket.create_connection((host, port))
                c.sendall(b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n")
                held.append(c)
            for c in held:  # each answered, then idle, kept alive
                got = b""
                while not got.endswith(b"ok\n"):
                    got += c.recv(4096)
            pub = zmq.Context.instance().socket(zmq.PUB)
            pub.connect(f"ipc://{d}/in")
            reader = subprocess.Popen([str(sse_clients), host, str(port), f"ipc://{d}/up", str(streams), str(seconds)],
                                      stdout=subprocess.PIPE, text=True)
            time.sleep(1.0)

            import threading
            stop = threading.Event()

            def publish():
                i = 0
                while not stop.is_set():
                    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
                    pub.send_multipart([b"drink.add", json.dumps(drink(20_000_000 + i, at)).encode()])
                    i += 1
                    time.sleep(0.1)
            publisher = threading.Thread(target=publish)
            publisher.start()
            crowded = healthz_latencies(host, port, count=min(2000, int((seconds - 4) * 200)))
            rss_crowd = rss_mb(service.process.pid)
            reader.wait(seconds + 30)
            stop.set()
            publisher.join()
            events = json.loads(reader.stdout.read().strip().splitlines()[-1])
            open_now = len(held)
            for c in held:
                c.close()
            pub.close(0)
            return {
                "healthz_alone": alone, "healthz_with_crowd": crowded,
                "p99_ratio": crowded["p99_ms"] / alone["p99_ms"],
                "idle_keepalive_connections": open_now, "event_streams": streams,
                "rss_before_mb": rss_before, "rss_with_crowd_mb": rss_crowd, "rss_growth_mb": rss_crowd - rss_before,
                "events": events,
            }
        finally:
            service.stop()


def s_time(port, seconds):
    out = subprocess.run(["openssl", "s_time", "-connect", f"127.0.0.1:{port}", "-new", "-time", str(seconds)],
                         capture_output=True, text=True, timeout=seconds + 60).stdout
    match = re.search(r"([\d.]+) connections/user sec", out)
    count = re.search(r"(\d+) connections in ([\d.]+)s", out)
    return {"connections_per_user_s": float(match.group(1)) if match else None,
            "connections_per_s": int(count.group(1)) / float(count.group(2)) if count else None}


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def handshakes(binary, trials=3, seconds=8):
    with tempfile.TemporaryDirectory(prefix="ct-tls-") as d:
        folder = Path(d)
        key, cert = folder / "key.pem", folder / "cert.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                        "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost"],
                       check=True, capture_output=True)
        key.chmod(0o600)
        (folder / "tokens").mkdir(mode=0o700)
        service = Service(binary, folder, {"http": {"bind": "127.0.0.1:0", "tls": {"certificateFile": str(cert),
                                                                                   "keyFile": str(key)}},
                                           "security": {"tokensDirectory": str(folder / "tokens")}})
        baseline_port = free_port()
        server = subprocess.Popen(["openssl", "s_server", "-accept", str(baseline_port), "-cert", str(cert), "-key",
                                   str(key), "-naccept", "1000000", "-quiet"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1)
            ours_port = int(service.endpoints["http"].rsplit(":", 1)[1])
            rows = []
            for _ in range(trials):
                theirs = s_time(baseline_port, seconds)
                ours = s_time(ours_port, seconds)
                rows.append({"service_per_s": ours["connections_per_s"], "s_server_per_s": theirs["connections_per_s"],
                             "ratio": ours["connections_per_s"] / theirs["connections_per_s"]})
            return {"trials": rows, "median_ratio": statistics.median(r["ratio"] for r in rows)}
        finally:
            server.terminate()
            server.wait(10)
            service.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--out", default=str(ROOT / "bench/http.json"))
    parser.add_argument("--seconds", type=int, default=30, help="how long the crowd stays")
    args = parser.parse_args()
    sse_clients = ROOT / ".build/peers/sse_clients"
    sse_clients.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-O2", "-o", str(sse_clients), str(ROOT / "bench/tools/sse_clients.c"), "-lzmq"], check=True)
    results = {}
    print("http: /healthz alone, then beside 1,000 idle keep-alive connections and 100 event streams", flush=True)
    results["crowd"] = crowd(args.binary, sse_clients, seconds=args.seconds)
    print(json.dumps(results["crowd"]), flush=True)
    print("http: TLS handshakes per second, the service against openssl s_server", flush=True)
    results["tls_handshakes"] = handshakes(args.binary)
    print(json.dumps(results["tls_handshakes"]), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
