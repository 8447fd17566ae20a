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
4. The JSON API (§12) over HTTPS with a token: `POST /api/v1/drinks` of one
   drink at 100 requests/s on a kept-alive connection, p99, beside the query
   endpoint's `add` at the same rate (alternated trials, one service); and
   100-drink POSTs at full speed (two client processes of four connections
   each, bodies made before the clock starts), drinks stored per second, beside the bus at full speed
   (the shared load generator, 100-event and 1-event messages).

    python3 bench/door.py [--binary .build/release/coffee-tracker] [--out bench/door.json]
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import zmq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from consumers import Service, build_sse_clients, drink, rss_mb  # noqa: E402


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


def write_token(folder):
    """A token of the service's format (docs/protocol.md §12), written before it starts."""
    import base64
    import hashlib
    token = "ct_" + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
    tokens = folder / "tokens"
    tokens.mkdir(mode=0o700, exist_ok=True)
    (tokens / "bench.token").write_text(json.dumps({"name": "bench", "sha256": hashlib.sha256(token.encode()).hexdigest(),
                                                   "roles": ["read", "write"]}))
    (tokens / "bench.token").chmod(0o600)
    return token


def one_drink(i):
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600 * 24 * (i % 300) - 60))
    return {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 64 + i % 50, "date": at}


def api_latency(port, cert, token, seconds, rate=100):
    import http.client
    import ssl
    context = ssl.create_default_context(cafile=str(cert))
    c = http.client.HTTPSConnection("localhost", port, context=context, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    times = []
    end = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < end:
        body = json.dumps(one_drink(i)).encode()
        started = time.perf_counter()
        c.request("POST", "/api/v1/drinks", body=body, headers=headers)
        reply = c.getresponse().read()
        times.append((time.perf_counter() - started) * 1000)
        assert b'"added":1' in reply, reply
        i += 1
        time.sleep(max(0.0, 1 / rate - (time.perf_counter() - started)))
    c.close()
    return {"p50_ms": percentile(times, 0.5), "p99_ms": percentile(times, 0.99), "requests": len(times)}


def query_latency(endpoint, seconds, rate=100):
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.connect(endpoint)
    times = []
    end = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < end:
        body = json.dumps({"op": "add", "drinks": [one_drink(i)]}).encode()
        started = time.perf_counter()
        sock.send(body)
        reply = sock.recv()
        times.append((time.perf_counter() - started) * 1000)
        assert b'"added":1' in reply, reply
        i += 1
        time.sleep(max(0.0, 1 / rate - (time.perf_counter() - started)))
    sock.close(0)
    return {"p50_ms": percentile(times, 0.5), "p99_ms": percentile(times, 0.99), "requests": len(times)}


# A light client: each request's bytes made before the clock starts, sent on
# kept-alive TLS connections (several per process, a thread each, so that more
# requests are in flight than processes compete for the two cores), each reply
# read to its length and its added count read by a pattern.
POSTER = r"""
import json, re, socket, ssl, sys, threading
port, cert, token, bodies, connections = int(sys.argv[1]), sys.argv[2], sys.argv[3], json.load(open(sys.argv[4])), int(sys.argv[5])
requests = []
for b in bodies:
    body = json.dumps(b, separators=(",", ":")).encode()
    requests.append(b"POST /api/v1/drinks HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + token.encode()
                    + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
context = ssl.create_default_context(cafile=cert)
sockets = [context.wrap_socket(socket.create_connection(("localhost", port)), server_hostname="localhost")
           for _ in range(connections)]
length = re.compile(rb"Content-Length: (\d+)", re.I)
added = [0] * connections

def post(k):
    tls, buffer = sockets[k], b""
    for r in requests[k::connections]:
        tls.sendall(r)
        while True:
            head, sep, rest = buffer.partition(b"\r\n\r\n")
            if sep:
                n = int(length.search(head).group(1))
                if len(rest) >= n:
                    added[k] += int(re.search(rb'"added":(\d+)', rest[:n]).group(1))
                    buffer = rest[n:]
                    break
            buffer += tls.recv(65536)

threads = [threading.Thread(target=post, args=(k,)) for k in range(connections)]
sys.stdout.write("ready\n"); sys.stdout.flush(); sys.stdin.readline()
for t in threads: t.start()
for t in threads: t.join()
print(sum(added))
"""


def loadgen_drink(run, i, date):
    """A drink as the shared load generator makes one (its uuid a run's prefix and a counter, dated a minute
    ago), so that the POSTs and the bus store the same drinks."""
    return {"uuid": f"4C6F6164-{run[:4]}-4{run[4:7]}-8{run[7:10]}-{i:012X}", "mgCaffeine": 95.0, "type": "smallCoffee",
            "date": date}


def api_full_speed(port, cert, token, folder, posts=2000, per_post=100, clients=2, connections=4):
    procs = []
    date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
    for k in range(clients):
        run = os.urandom(5).hex().upper()
        bodies = [[loadgen_drink(run, j * per_post + i, date) for i in range(per_post)] for j in range(posts // clients)]
        path = folder / f"bodies-{k}.json"
        path.write_text(json.dumps(bodies))
        p = subprocess.Popen([sys.executable, "-c", POSTER, str(port), str(cert), token, str(path), str(connections)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        procs.append(p)
    started = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    added = sum(int(p.stdout.readline()) for p in procs)
    elapsed = time.perf_counter() - started
    for p in procs:
        p.wait(30)
    return {"drinks": added, "seconds": elapsed, "drinks_per_s": added / elapsed}


def api(binary, loadgen, trials=3, seconds=10):
    from peers import run_loadgen
    with tempfile.TemporaryDirectory(prefix="ct-api-") as d:
        folder = Path(d)
        key, cert = folder / "key.pem", folder / "cert.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                        "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost"], check=True, capture_output=True)
        key.chmod(0o600)
        token = write_token(folder)
        service = Service(binary, folder, {
            "http": {"bind": "127.0.0.1:0", "tls": {"certificateFile": str(cert), "keyFile": str(key)}},
            "security": {"tokensDirectory": str(folder / "tokens")}})
        try:
            port = int(service.endpoints["http"].rsplit(":", 1)[1])
            rows = []
            for _ in range(trials):
                http_row = api_latency(port, cert, token, seconds)
                query_row = query_latency(f"ipc://{d}/q", seconds)
                rows.append({"http": http_row, "query": query_row, "p99_ratio": http_row["p99_ms"] / query_row["p99_ms"]})
            full = api_full_speed(port, cert, token, folder)
            bus_100 = run_loadgen(loadgen, f"ipc://{d}/in", f"ipc://{d}/up", 100_000, batch=100)
            bus_1 = run_loadgen(loadgen, f"ipc://{d}/in", f"ipc://{d}/up", 100_000, batch=1)
            return {
                "latency_trials": rows, "median_p99_ratio": statistics.median(r["p99_ratio"] for r in rows),
                "full_speed_100_drink_posts": full,
                "bus_full_speed_100_event_messages": bus_100, "bus_full_speed_single_event": bus_1,
                "ratio_to_bus_100": full["drinks_per_s"] / bus_100["events_per_s"],
                "ratio_to_bus_1": full["drinks_per_s"] / bus_1["events_per_s"],
            }
        finally:
            service.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--out", default=str(ROOT / "bench/door.json"))
    parser.add_argument("--seconds", type=int, default=30, help="how long the crowd stays")
    args = parser.parse_args()
    sse_clients = build_sse_clients()
    results = {}
    print("http: /healthz alone, then beside 1,000 idle keep-alive connections and 100 event streams", flush=True)
    results["crowd"] = crowd(args.binary, sse_clients, seconds=args.seconds)
    print(json.dumps(results["crowd"]), flush=True)
    print("http: TLS handshakes per second, the service against openssl s_server", flush=True)
    results["tls_handshakes"] = handshakes(args.binary)
    print(json.dumps(results["tls_handshakes"]), flush=True)
    print("http: the JSON API over HTTPS against the query endpoint and the bus", flush=True)
    from peers import build
    loadgen, _ = build(ROOT / ".build/peers")
    results["api"] = api(args.binary, loadgen)
    print(json.dumps(results["api"]), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
