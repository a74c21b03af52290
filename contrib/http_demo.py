#!/usr/bin/env python3
"""A small paginated JSON API on 127.0.0.1 for docs/guide-http.md (standard library only).

GET /v1/customers?page_size=N&page_token=T[&status=S]
  -> {"customers": [{"id", "name", "status", "schema_version"}...],
      "next_page_token": "..." | "", "snapshot": "...", "total": N, "query": {...}}

The collection is fixed (seeded); 1 in 8 customers is still on schema version 2. The page
token is opaque (base64 of the offset and the snapshot). With --token-env VAR the API wants
"Authorization: Bearer $VAR". --fault picks a failure to show: `forbidden-page-3` answers
403 to the third page request, `expire-page-2` answers 410 to the first request for page 2.

Usage: python3 contrib/http_demo.py [--port 8765] [--records 250] [--token-env VAR]
                                   [--fault forbidden-page-3|expire-page-2]
"""

import argparse
import base64
import json
import os
import random
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

SNAPSHOT = "snap-2026-11-29T12:00:00Z"


def customers(n):
    rng = random.Random(42)
    out = []
    for i in range(n):
        out.append({
            "id": 4100 + i,
            "name": f"customer-{4100 + i}",
            "status": "active" if rng.random() < 0.9 else "archived",
            "schema_version": 2 if rng.random() < 0.125 else 3,
        })
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--records", type=int, default=250)
    ap.add_argument("--token-env")
    ap.add_argument("--fault", choices=["forbidden-page-3", "expire-page-2"])
    args = ap.parse_args()
    data = customers(args.records)
    token = os.environ.get(args.token_env) if args.token_env else None
    state = {"requests": 0, "expired": False}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *a):  # quiet: the guide shows scanledger's output
            pass

        def reply(self, status, body):
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self):
            url = urlparse(self.path)
            q = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if url.path != "/v1/customers":
                return self.reply(404, {"error": "not found"})
            if token is not None and self.headers.get("Authorization") != f"Bearer {token}":
                return self.reply(401, {"error": "unauthorized"})
            state["requests"] += 1
            if args.fault == "forbidden-page-3" and state["requests"] == 3:
                return self.reply(403, {"error": "forbidden"})
            offset = 0
            if q.get("page_token"):
                try:
                    offset = int(base64.urlsafe_b64decode(q["page_token"]).decode().split(":")[0])
                except Exception:
                    return self.reply(400, {"error": "INVALID_PAGE_TOKEN"})
                if args.fault == "expire-page-2" and offset > 0 and not state["expired"]:
                    state["expired"] = True
                    return self.reply(410, {"error": "page token expired"})
            size = max(1, min(int(q.get("page_size", "100")), 1000))
            rows = [c for c in data if q.get("status") in (None, c["status"])]
            page = rows[offset:offset + size]
            nxt = offset + len(page)
            token_out = base64.urlsafe_b64encode(f"{nxt}:{SNAPSHOT}".encode()).decode() if nxt < len(rows) else ""
            echo = {k: v for k, v in q.items() if k not in ("page_size", "page_token")}
            self.reply(200, {"customers": page, "next_page_token": token_out,
                             "snapshot": SNAPSHOT, "total": len(rows), "query": echo})

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
