#!/usr/bin/env python3
"""Writes the digest test vectors of docs/FORMAT.md, computed from the document alone.

This is a second implementation of the algorithms, in Python with the standard library only;
it shares no code with scanledger. `cargo test --test vectors` checks the Rust implementation
against the files this writes, so the document, this script and the code cannot drift apart.

    python3 tests/vectors/generate.py      # rewrites tests/vectors/*.json
"""

import hashlib
import hmac
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def sha256(b):
    return hashlib.sha256(b).digest()


def display(h):
    return "sha256:" + h.hex()


# --- canonical JSON and query_digest -----------------------------------------------------

def canonical_json(v):
    # Keys sorted by code point (= by UTF-8 bytes), no white space, non-ASCII kept as is,
    # only '"', '\\' and control characters escaped (\b \f \n \r \t short, others \u00XX).
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def scope_json(source, tenant, query, order, key_range=None, shard=None):
    # A shard's scope adds key_range and shard; an unsharded scope has neither key.
    v = {"source": source, "tenant": tenant, "query": query, "order": order}
    if key_range is not None:
        v["key_range"] = key_range
    if shard is not None:
        v["shard"] = shard
    return canonical_json(v)


def query_digest(source, tenant, query, order, key_range=None, shard=None):
    return display(sha256(scope_json(source, tenant, query, order, key_range, shard).encode("utf-8")))


# --- cursor chain ------------------------------------------------------------------------

CHAIN_DOMAIN = b"scanledger:cursor-chain:v1"


def put_str(s):
    b = s.encode("utf-8")
    return struct.pack("<I", len(b)) + b


def cursor_hash(cursor):
    return sha256(b"\x00") if cursor is None else sha256(b"\x01" + cursor.encode("utf-8"))


def chain_start(qd, snapshot_id):
    snap = b"\x00" if snapshot_id is None else b"\x01" + put_str(snapshot_id)
    return sha256(CHAIN_DOMAIN + put_str(qd) + snap)


def chain_next(prev, ch):
    return sha256(prev + ch)


# --- Merkle tree -------------------------------------------------------------------------

def leaf(partition, lows):
    if len(lows) <= 4096:
        body, form = struct.pack(f"<{len(lows)}H", *lows), "array"
    else:
        bm = bytearray(8192)
        for v in lows:
            bm[v >> 3] |= 1 << (v & 7)
        body, form = bytes(bm), "bitmap"
    return sha256(b"\x00" + struct.pack("<QI", partition, len(lows)) + body), form


def mth(leaves):
    if not leaves:
        return sha256(b"")
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:]))


def expand(spec):
    ids = set(spec.get("ids", []))
    for lo, hi in spec.get("ranges", []):
        ids.update(range(lo, hi + 1))
    return sorted(ids)


# --- string IDs --------------------------------------------------------------------------

STRING_ID_DOMAIN = b"scanledger:string-id:v1"


def string_tree(strings):
    """The leaves of a string-codec set: bucket = first two digest bytes (big-endian)."""
    buckets = {}
    for s in set(strings):
        d = sha256(STRING_ID_DOMAIN + s.encode("utf-8"))
        buckets.setdefault((d[0] << 8) | d[1], []).append(d)
    leaves = []
    for b in sorted(buckets):
        ds = sorted(buckets[b])
        leaves.append((b, len(ds), sha256(b"\x00" + struct.pack("<QQ", b, len(ds)) + b"".join(ds))))
    return leaves


# --- content digests -----------------------------------------------------------------------

CONTENT_DOMAIN = b"scanledger:content:v1"


def canonical_decimal(text):
    from decimal import Decimal
    d = Decimal(text)
    if d == 0:
        return "0"
    t = format(d.normalize(), "f")
    return t


def content_value(v):
    kind, x = v
    if kind == "null":
        return b"\x00"
    if kind in ("int", "decimal", "bool"):
        text = {"int": lambda: str(x), "decimal": lambda: canonical_decimal(x),
                "bool": lambda: "1" if x else "0"}[kind]().encode()
        return b"\x01" + struct.pack("<I", len(text)) + text
    if kind == "text":
        b = x.encode("utf-8")
        return b"\x02" + struct.pack("<I", len(b)) + b
    if kind == "bytes_hex":
        b = bytes.fromhex(x)
        return b"\x03" + struct.pack("<I", len(b)) + b
    if kind == "timestamp_micros":
        return b"\x04" + struct.pack("<q", x)
    if kind == "date":
        return b"\x05" + x.encode("ascii")
    raise ValueError(kind)


def content_hash(values):
    return sha256(CONTENT_DOMAIN + struct.pack("<I", len(values)) + b"".join(content_value(v) for v in values))


# --- page tokens -------------------------------------------------------------------------

TOKEN_DOMAIN = b"scanledger:page-token:v1"


def b64url(b):
    import base64
    return base64.urlsafe_b64encode(b).decode("ascii").rstrip("=")


def page_token(key, run, position, stamp, expires_at_ms, tenant, qd):
    body = struct.pack("<BQQIQ", 1, run, position, stamp, expires_at_ms)
    bind = b"\x00" if tenant is None else b"\x01" + put_str(tenant)
    mac = hmac.new(key, TOKEN_DOMAIN + body + bind + put_str(qd), hashlib.sha256).digest()
    return "slpt1_" + b64url(body + mac), mac


def main():
    scopes = [
        ("defaults", "customers", None, None, None),
        ("example contract", "customer-registry", "acme", {"schema_version": {"ne": 3}}, None),
        ("nested, escapes, unicode and key order", "orders", "t\u00e9nant",
         {"b": [1, "x", {"z": None, "a": True}], "a": "\u00e9\"\\\n\t\u0001\u007f\u2028",
          "A": -9223372036854775808, "B": 18446744073709551615, "\ufb01": 1, "\U0001F600": 2,
          "": -3},
         ["created_at", {"desc": False}, "id"]),
        ("empty object and array", "s", "", {}, []),
        ("negative and zero integers", "s", None, {"gt": -1, "eq": 0, "in": [-42, 42]}, None),
    ]
    qd_vectors = []
    for name, source, tenant, query, order in scopes:
        qd_vectors.append({
            "name": name,
            "scope": {"source": source, "tenant": tenant, "query": query, "order": order},
            "canonical_json": scope_json(source, tenant, query, order),
            "query_digest": query_digest(source, tenant, query, order),
        })
    # A shard of a plan: the key range and the plan's reference are part of the scope.
    key_range = {"lo": 131072, "hi": 18446744073709551615}
    shard = {"plan": "sha256:" + "ab" * 32, "index": 3, "count": 8}
    qd_vectors.append({
        "name": "shard with key range",
        "scope": {"source": "customers", "tenant": "acme", "query": None, "order": None,
                  "key_range": key_range, "shard": shard},
        "canonical_json": scope_json("customers", "acme", None, None, key_range, shard),
        "query_digest": query_digest("customers", "acme", None, None, key_range, shard),
    })

    chains = [
        ("no pages, no snapshot", qd_vectors[0]["query_digest"], None, []),
        ("two pages, pinned", qd_vectors[1]["query_digest"], "customers:2026-08-29T09:18:00Z", ["cur_01", None]),
        ("empty snapshot and unicode cursor", qd_vectors[2]["query_digest"], "", ["\u00e9t\u00e9", "c2", "c3", None]),
    ]
    chain_vectors = []
    for name, qd, snap, cursors in chains:
        c = chain_start(qd, snap)
        start = c
        hashes = []
        for cur in cursors:
            h = cursor_hash(cur)
            hashes.append(h.hex())
            c = chain_next(c, h)
        chain_vectors.append({
            "name": name,
            "query_digest": qd,
            "snapshot_id": snap,
            "next_cursors": cursors,
            "cursor_hashes": hashes,
            "chain_start": display(start),
            "cursor_chain_digest": display(c),
        })

    sets = [
        ("empty set", {}),
        ("one ID", {"ids": [0]}),
        ("two partitions", {"ids": [1, 2, 3, 70000]}),
        ("three partitions (unbalanced tree)", {"ids": [5, 65536 + 5, 131072 + 5]}),
        ("4096 IDs: the largest array-form leaf", {"ranges": [[0, 4095]]}),
        ("4097 IDs: the smallest bitmap-form leaf", {"ranges": [[0, 4096]]}),
        ("a full partition", {"ranges": [[3 * 65536, 4 * 65536 - 1]]}),
        ("seven partitions, sparse and dense, up to the top of the ID space",
         {"ids": [7, 65535, 65536, 10 ** 12, 2 ** 63, 2 ** 64 - 1],
          "ranges": [[200000, 205000], [2 ** 64 - 70000, 2 ** 64 - 65537]]}),
    ]
    merkle_vectors = []
    for name, spec in sets:
        ids = expand(spec)
        parts = {}
        for i in ids:
            parts.setdefault(i >> 16, []).append(i & 0xFFFF)
        leaves = []
        described = []
        for p in sorted(parts):
            h, form = leaf(p, parts[p])
            leaves.append(h)
            described.append({"partition": p, "count": len(parts[p]), "body_form": form, "leaf_hash": h.hex()})
        merkle_vectors.append({
            "name": name,
            "ids": spec,
            "unique_ids": len(ids),
            "leaves": described,
            "merkle_root": display(mth(leaves)),
        })

    key = bytes(range(32))
    tokens = []
    for name, run, pos, stamp, exp, tenant, qd in [
        ("with tenant", 7, 4100, 2, 1788081480000, "acme", qd_vectors[1]["query_digest"]),
        ("without tenant", 1, 2 ** 64 - 1, 0, 0, None, qd_vectors[0]["query_digest"]),
    ]:
        tok, mac = page_token(key, run, pos, stamp, exp, tenant, qd)
        tokens.append({
            "name": name,
            "key_hex": key.hex(),
            "run": run,
            "position": pos,
            "stamp": stamp,
            "expires_at_ms": exp,
            "tenant": tenant,
            "query_digest": qd,
            "mac_hex": mac.hex(),
            "token": tok,
        })

    string_sets = [
        ("empty set", []),
        ("one string", ["customer-1"]),
        ("order and repeats do not matter", ["b", "a", "c", "a"]),
        ("unicode, escapes, a line break", ["\u00e9t\u00e9", "two\nlines", "say \"hi\"", "\U0001F980"]),
        ("three hundred e-mails", [f"user-{i:04}@example.org" for i in range(300)]),
    ]
    string_vectors = []
    for name, strings in string_sets:
        leaves = string_tree(strings)
        string_vectors.append({
            "name": name,
            "strings": strings,
            "unique_ids": len(set(strings)),
            "leaves": [{"bucket": b, "count": n, "leaf_hash": h.hex()} for b, n, h in leaves],
            "partitions": len(leaves),
            "merkle_root": display(mth([h for _, _, h in leaves])),
        })

    content_sets = [
        ("nothing", []),
        ("decimals compare by value", [["decimal", "001.500"], ["decimal", "-0.00"], ["decimal", "1.5E+3"]]),
        ("a migrated customer", [["text", "a@example.com"], ["int", 3], ["bool", True], ["null", None],
                                 ["timestamp_micros", 1788081480000000], ["date", "2026-08-30"],
                                 ["bytes_hex", "00ff10"]]),
    ]
    content_vectors = []
    for name, values in content_sets:
        content_vectors.append({
            "name": name,
            "values": values,
            "canonical_decimals": [canonical_decimal(x) for k, x in values if k == "decimal"],
            "record_hash": content_hash([tuple(v) for v in values]).hex(),
        })

    # ID codecs: an integer's u64 under `int` and `signed`, and the root of a signed set.
    def signed_id(n):
        return (n & ((1 << 64) - 1)) ^ (1 << 63)
    codec_vectors = []
    for n in [-(1 << 63), -(1 << 63) + 1, -65537, -5, -1, 0, 1, 65535, (1 << 63) - 1]:
        codec_vectors.append({"codec": "signed", "id": n, "text": str(n), "u64": signed_id(n)})
    for n in [0, 7, (1 << 63), (1 << 64) - 1]:
        codec_vectors.append({"codec": "int", "id": n, "text": str(n), "u64": n})
    signed_set = [-(1 << 63), -70000, -5, -1, 0, 3, 65536, (1 << 63) - 1]
    parts = {}
    for u in sorted({signed_id(n) for n in signed_set}):
        parts.setdefault(u >> 16, []).append(u & 0xFFFF)
    codec_vectors.append({
        "codec": "signed",
        "name": "the Merkle root of a signed set",
        "ids": signed_set,
        "partitions": len(parts),
        "merkle_root": display(mth([leaf(p, parts[p])[0] for p in sorted(parts)])),
    })

    for fname, data in [
        ("id_codec.json", codec_vectors),
        ("string_root.json", string_vectors),
        ("content.json", content_vectors),
        ("query_digest.json", qd_vectors),
        ("cursor_chain.json", chain_vectors),
        ("merkle.json", merkle_vectors),
        ("page_token.json", tokens),
    ]:
        with open(os.path.join(HERE, fname), "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")


if __name__ == "__main__":
    main()
