"""What a user might write instead of a store in PostgreSQL: the shared
Python peer (../shared/bench/peer_worker.py: drink.add on SUB, batched,
'changes' on PUB) with psycopg and PostgreSQL in place of sqlite3, anchors
from a counter row updated in the commit's own transaction, as
docs/protocol.md §11 asks of the service.

    python3 peer_psycopg.py INGEST UPDATES CONNINFO
"""
import json
import sys
import uuid as uuidlib

import psycopg
import zmq


def main(ingest, updates, conninfo):
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"drink.")
    sub.bind(ingest)
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.SNDHWM, 0)
    pub.bind(updates)
    db = psycopg.connect(conninfo, autocommit=False)
    with db.cursor() as c:
        c.execute("CREATE TABLE IF NOT EXISTS s(uuid uuid PRIMARY KEY, mg float8, date text, version int, anchor bigint)")
        c.execute("CREATE TABLE IF NOT EXISTS counter(anchor bigint NOT NULL)")
        c.execute("INSERT INTO counter SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM counter)")
    db.commit()
    poller = zmq.Poller()
    poller.register(sub, zmq.POLLIN)
    while True:
        if not poller.poll(1000):
            continue
        batch = []
        while len(batch) < 1000:
            try:
                frames = sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            body = frames[1] if len(frames) > 1 else frames[0].split(b" ", 1)[1]
            try:
                items = json.loads(body)
                items = items if isinstance(items, list) else [items]
                for d in items:
                    u = str(uuidlib.UUID(d["uuid"])).upper()
                    mg = float(d["mgCaffeine"])
                    assert mg > 0
                    batch.append((u, mg, d["date"], int(d.get("version", 1))))
            except Exception:
                pass
        if not batch:
            continue
        added = []
        with db.cursor() as c:
            c.execute("SELECT anchor FROM counter FOR UPDATE")
            prev = c.fetchone()[0]
            anchor = prev + 1
            for u, mg, date, v in batch:
                c.execute("INSERT INTO s VALUES(%s,%s,%s,%s,%s) ON CONFLICT(uuid) DO UPDATE SET mg=excluded.mg, "
                          "date=excluded.date, version=excluded.version, anchor=excluded.anchor "
                          "WHERE excluded.version > s.version", (u, mg, date, v, anchor))
                if c.rowcount:
                    added.append({"uuid": u, "mgCaffeine": mg, "date": date, "version": v})
            c.execute("UPDATE counter SET anchor = %s", (anchor,))
        db.commit()
        pub.send_multipart([b"changes", json.dumps(
            {"anchor": anchor, "previousAnchor": prev, "added": added, "deleted": []}).encode()])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
