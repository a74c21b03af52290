#!/usr/bin/env python3
"""Independent check of a scanledger receipt against an exported ID list.

Recomputes, from the IDs alone and with the Python standard library only, what a receipt
claims about its ID set: `unique_ids_observed`, `partitions` (non-empty partitions), the
per-partition counts, and `merkle_root`, following docs/FORMAT.md ("Merkle tree"). It shares
no code with scanledger, so an agreement is evidence that the documented algorithm is the
one the program runs.

    scanledger --json receipt run-1 > receipt.json
    scanledger export run-1 > ids.txt                    # or: --format roaring > ids.bin
    python3 contrib/verify_receipt.py receipt.json ids.txt [--format text|roaring]
                                      [--prefix PREFIX] [--json]

Text exports: one ID per line; `int` IDs are decimal numbers, `signed` IDs decimal numbers
with an optional minus (the ID of n is (n mod 2^64) XOR 2^63, docs/FORMAT.md "ID codecs"),
`prefixed` IDs are a prefix and
decimal digits without leading zeros (the prefix is taken as everything before the trailing
digits unless --prefix says otherwise), `string` IDs are the inside of a JSON string literal.
`--format jsonl` reads one JSON value per line. The receipt's `id_codec` says which tree to
build: for the `string` codec the tree is over the digests of the strings themselves
(docs/FORMAT.md "String IDs"), so a roaring export (of interned numbers) cannot check it.

A merged run's receipt (`scanledger merge`) also has `plan_digest` and `shards`, one entry per
shard of its plan. Their shape is checked (both keys or neither, each entry's keys, the index
its position, the key ranges a plan's cover of the ID space: from 0, contiguous, every bound but
the last a multiple of 2^16, the last one 2^64 - 1), and each shard's unique count and Merkle
root are recomputed from the exported IDs in its range. When the merged run is `verified`,
every shard must be `merged` and `verified` with those very values, which are also what the
shard's own receipt shows; otherwise the per-shard values are printed, not compared.

Exit status: 0 every recomputed value matches the receipt, 4 a value differs, 2 unusable input.
"""

import argparse
import bisect
import hashlib
import json
import re
import struct
import sys

PARTITION_BITS = 16  # partition p holds the IDs p * 2^16 ..= p * 2^16 + 65535
LEAF_ARRAY_MAX = 4096  # up to this many IDs a leaf body is a sorted u16 list
EXIT_MISMATCH = 4
EXIT_USAGE = 2
ID_TOP = (1 << 64) - 1  # the last shard's hi: its range runs to the end, this ID included
SHARD_KEYS = {"index", "key_range", "finding", "store", "run_id", "coverage_status",
              "unique_ids_observed", "merkle_root"}
FINDINGS = {"merged", "unfinished", "missing", "conflict"}
STATUSES = {"verified", "unknown", "failed"}


class Unusable(Exception):
    """Input that cannot be used (exit 2)."""


def sha256(data):
    return hashlib.sha256(data).digest()


# --- reading IDs -------------------------------------------------------------------------

DIGITS = re.compile(r"0|[1-9][0-9]*")


def read_text(path, prefix=None):
    """IDs of a text export, in file order. Without `prefix`, the prefix is learned from the
    first line as everything before its trailing digits (the codec's own rule)."""
    with open(path, "r", encoding="utf-8") as f:
        return read_text_lines((line.rstrip("\n") for line in f), prefix, path)


def read_text_lines(lines, prefix, path):
    """Numbers of int or prefixed IDs given as text lines."""
    ids = []
    for line_no, line in enumerate(lines, 1):
        if prefix is None:
            prefix = line.rstrip("0123456789")
        if not line.startswith(prefix):
            raise Unusable(f"{path}:{line_no}: {line[:40]!r} lacks the prefix {prefix!r}")
        digits = line[len(prefix):]
        if not DIGITS.fullmatch(digits):
            raise Unusable(
                f"{path}:{line_no}: {line[:40]!r} is not an int or prefixed ID without "
                "leading zeros"
            )
        value = int(digits)
        if value >= 1 << 64:
            raise Unusable(f"{path}:{line_no}: {line[:40]!r} does not fit 64 bits")
        ids.append(value)
    return ids


SIGNED = re.compile(r"0|-?[1-9][0-9]*")
SIGN_BIT = 1 << 63


def signed_id(n):
    """The `signed` codec's ID of the integer n (-2^63 <= n < 2^63): order-preserving."""
    return (n & ID_TOP) ^ SIGN_BIT


def read_signed(values, path):
    """IDs of a `signed` run, from its text lines or JSON values, in file order."""
    ids = []
    for line_no, value in enumerate(values, 1):
        if isinstance(value, str):
            if not SIGNED.fullmatch(value):
                raise Unusable(f"{path}:{line_no}: {value[:40]!r} is not a signed ID as the codec writes it")
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not -SIGN_BIT <= value < SIGN_BIT:
            raise Unusable(f"{path}:{line_no}: not a signed ID (an integer from -2^63 to 2^63-1)")
        ids.append(signed_id(value))
    return ids


def read_jsonl_values(path):
    """The JSON values of a JSON Lines export."""
    with open(path, "r", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def read_strings(path, jsonl):
    """String IDs of a text (JSON-literal insides) or JSON Lines export, in file order."""
    out = []
    with open(path, "r", encoding="utf-8", newline="\n") as f:
        for line_no, line in enumerate(f, 1):
            line = line[:-1] if line.endswith("\n") else line
            try:
                value = json.loads(line if jsonl else '"' + line + '"')
            except ValueError as e:
                raise Unusable(f"{path}:{line_no}: not a string ID: {e}") from None
            if not isinstance(value, str):
                raise Unusable(f"{path}:{line_no}: not a string ID")
            out.append(value)
    return out


def read_jsonl_numbers(path):
    """IDs of a JSON Lines export of an `int` run."""
    out = []
    with open(path, "r", encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            value = json.loads(line)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 64:
                raise Unusable(f"{path}:{line_no}: not an int ID")
            out.append(value)
    return out


def read_roaring(path):
    """IDs of a portable 64-bit roaring bitmap (RoaringTreemap format), ascending."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(data):
            raise Unusable(f"{path}: truncated roaring bitmap at byte {pos}")
        values = struct.unpack_from(fmt, data, pos)
        pos += size
        return values

    (buckets,) = take("<Q")
    if buckets > len(data):
        raise Unusable(f"{path}: bucket count {buckets} exceeds the file")
    ids = []
    for _ in range(buckets):
        (high,) = take("<I")
        (cookie,) = take("<I")
        if cookie == 12346:  # no run containers; offsets present
            (size,) = take("<I")
            run_flags = b""
            has_offsets = True
        elif cookie & 0xFFFF == 12347:  # run containers possible
            size = (cookie >> 16) + 1
            nbytes = (size + 7) // 8
            run_flags = bytes(take(f"<{nbytes}B"))
            has_offsets = size >= 4
        else:
            raise Unusable(f"{path}: not a portable roaring bitmap (cookie {cookie})")
        if size > 65536:
            raise Unusable(f"{path}: {size} containers is more than a 32-bit bitmap holds")
        headers = [take("<HH") for _ in range(size)]
        if has_offsets:
            take(f"<{size}I")
        base_high = high << 32
        for i, (key, card_minus_one) in enumerate(headers):
            card = card_minus_one + 1
            base = base_high | (key << 16)
            if run_flags and (run_flags[i // 8] >> (i % 8)) & 1:
                (n_runs,) = take("<H")
                for _ in range(n_runs):
                    start, length_minus_one = take("<HH")
                    ids.extend(range(base | start, (base | start) + length_minus_one + 1))
            elif card <= LEAF_ARRAY_MAX:
                ids.extend(base | v for v in take(f"<{card}H"))
            else:
                words = take("<1024Q")
                for w_idx, word in enumerate(words):
                    while word:
                        low_bit = word & -word
                        ids.append(base | (w_idx * 64 + low_bit.bit_length() - 1))
                        word ^= low_bit
    if pos != len(data):
        raise Unusable(f"{path}: {len(data) - pos} bytes after the bitmap")
    return ids


# --- the Merkle tree (docs/FORMAT.md) ----------------------------------------------------

def partitions_of(ids):
    """{partition index: sorted low 16 bits}."""
    parts = {}
    for i in ids:
        parts.setdefault(i >> PARTITION_BITS, set()).add(i & 0xFFFF)
    return {p: sorted(lows) for p, lows in sorted(parts.items())}


def leaf_body(lows):
    if len(lows) <= LEAF_ARRAY_MAX:
        return struct.pack(f"<{len(lows)}H", *lows)
    bitmap = bytearray(8192)
    for v in lows:
        bitmap[v >> 3] |= 1 << (v & 7)
    return bytes(bitmap)


def leaf_hash(partition, lows):
    return sha256(b"\x00" + struct.pack("<QI", partition, len(lows)) + leaf_body(lows))


def merkle_root(leaves):
    """RFC 6962 Merkle tree hash; SHA-256 of the empty string for no leaves."""
    if not leaves:
        return sha256(b"")
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return sha256(b"\x01" + merkle_root(leaves[:k]) + merkle_root(leaves[k:]))


STRING_ID_DOMAIN = b"scanledger:string-id:v1"


def string_tree(strings):
    """{bucket: sorted digests} of a set of string IDs: digest = SHA-256(domain || UTF-8),
    bucket = its first two bytes, big-endian."""
    buckets = {}
    for s in strings:
        d = sha256(STRING_ID_DOMAIN + s.encode("utf-8"))
        buckets.setdefault((d[0] << 8) | d[1], set()).add(d)
    return {b: sorted(ds) for b, ds in sorted(buckets.items())}


def string_leaf_hash(bucket, digests):
    return sha256(b"\x00" + struct.pack("<QQ", bucket, len(digests)) + b"".join(digests))


def display(h):
    return "sha256:" + h.hex()


# --- a merged run's shards ---------------------------------------------------------------

def is_u64(v):
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= ID_TOP


def read_shards(receipt, path):
    """The shard list of a merged run's receipt, its shape checked; None for another run."""
    has_plan, has_shards = "plan_digest" in receipt, "shards" in receipt
    if not has_plan and not has_shards:
        return None
    if has_plan != has_shards:
        raise Unusable(f"{path}: a merged receipt has both plan_digest and shards")
    if not isinstance(receipt["plan_digest"], str):
        raise Unusable(f"{path}: plan_digest is not a digest")
    shards = receipt["shards"]
    if not isinstance(shards, list) or not shards:
        raise Unusable(f"{path}: shards is not a non-empty list")
    for k, s in enumerate(shards):
        where = f"{path}: shards[{k}]"
        if not isinstance(s, dict) or set(s) != SHARD_KEYS:
            raise Unusable(f"{where} does not have exactly the keys {sorted(SHARD_KEYS)}")
        r = s["key_range"]
        if not isinstance(r, dict) or set(r) != {"lo", "hi"} or not (is_u64(r["lo"]) and is_u64(r["hi"])):
            raise Unusable(f"{where}.key_range is not {{\"lo\", \"hi\"}}")
        if s["index"] != k or isinstance(s["index"], bool):
            raise Unusable(f"{where}.index is not {k}")
        if s["finding"] not in FINDINGS or s["coverage_status"] not in STATUSES | {None}:
            raise Unusable(f"{where}: finding or coverage_status is not one the format has")
        if not is_u64(s["unique_ids_observed"]):
            raise Unusable(f"{where}.unique_ids_observed is not a count")
    return shards


def cover_problem(shards):
    """Why the ranges are not a plan's cover of the ID space, or None. A sub-plan's (one shard
    of another plan divided, format scanledger-plan/3) covers that shard's key range instead:
    from a partition boundary, contiguous (its run's contract holds the range; this script
    does not see the contract, `scanledger verify` checks the two agree)."""
    whole = shards[0]["key_range"]["lo"] == 0 and shards[-1]["key_range"]["hi"] == ID_TOP
    for k, s in enumerate(shards):
        lo, hi = s["key_range"]["lo"], s["key_range"]["hi"]
        if lo >= hi:
            return f"shard {k}'s range is empty"
        if (k > 0 or not whole) and lo % (1 << PARTITION_BITS):
            return f"shard {k} begins at {lo}, not at a partition boundary"
        if k + 1 < len(shards) and shards[k + 1]["key_range"]["lo"] != hi:
            return f"shard {k} ends at {hi} but shard {k + 1} does not begin there"
    return None


def per_shard(parts, shards):
    """[{index, unique_ids_observed, merkle_root}] of the IDs in each shard's range; the ranges
    are a cover on partition boundaries, so each partition falls in one shard."""
    los = [s["key_range"]["lo"] for s in shards]
    leaves = [[] for _ in shards]
    counts = [0] * len(shards)
    for p, lows in parts.items():
        if not lows:
            continue
        k = bisect.bisect_right(los, p << PARTITION_BITS) - 1
        leaves[k].append(leaf_hash(p, lows))
        counts[k] += len(lows)
    return [
        {"index": k, "unique_ids_observed": counts[k], "merkle_root": display(merkle_root(leaves[k]))}
        for k in range(len(shards))
    ]


def shard_mismatches(receipt, shards, recomputed):
    """Per-shard differences of a verified merged run (docs/FORMAT.md §6)."""
    out = []
    problem = cover_problem(shards)
    if problem:
        return [{"field": "shards", "receipt": f"{len(shards)} shards", "recomputed": problem}]
    if receipt.get("coverage_status") != "verified":
        return out
    for s, r in zip(shards, recomputed):
        k = s["index"]
        want = {"finding": "merged", "coverage_status": "verified",
                "unique_ids_observed": r["unique_ids_observed"], "merkle_root": r["merkle_root"]}
        for field, v in want.items():
            if s[field] != v:
                out.append({"field": f"shards[{k}].{field}", "receipt": s[field], "recomputed": v})
    return out


# --- main --------------------------------------------------------------------------------

def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("receipt", help="the receipt, as `scanledger --json receipt RUN` prints it")
    ap.add_argument("ids", help="the run's IDs, as `scanledger export RUN` writes them")
    ap.add_argument("--format", choices=["text", "jsonl", "roaring"], default="text")
    ap.add_argument("--prefix", help="the prefixed codec's prefix (when it ends in a digit)")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    args = ap.parse_args(argv)
    try:
        with open(args.receipt, "r", encoding="utf-8") as f:
            receipt = json.load(f)
        if not isinstance(receipt, dict):
            raise Unusable(f"{args.receipt}: not a receipt (a JSON object)")
        for key in ("run_id", "unique_ids_observed", "partitions", "merkle_root", "id_codec"):
            if key not in receipt:
                raise Unusable(f"{args.receipt}: not a receipt: no {key!r}")
        strings = receipt["id_codec"] == "string"
        shards = read_shards(receipt, args.receipt)
        if strings and shards is not None:
            raise Unusable(f"{args.receipt}: a string-codec run cannot be merged from shards")
        if strings and args.format == "roaring":
            raise Unusable("a string-codec run's root is over its strings: export with --format text or jsonl")
        if strings:
            ids = read_strings(args.ids, args.format == "jsonl")
        elif args.format == "roaring":
            ids = read_roaring(args.ids)
        elif receipt["id_codec"] == "signed" and args.format == "jsonl":
            ids = read_signed(read_jsonl_values(args.ids), args.ids)
        elif receipt["id_codec"] == "signed":
            with open(args.ids, "r", encoding="utf-8") as f:
                ids = read_signed([line.rstrip("\n") for line in f], args.ids)
        elif args.format == "jsonl" and receipt["id_codec"] == "int":
            ids = read_jsonl_numbers(args.ids)
        elif args.format == "jsonl":
            ids = read_text_lines(read_strings(args.ids, True), args.prefix, args.ids)
        else:
            ids = read_text(args.ids, args.prefix)
    except (OSError, ValueError, Unusable) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE

    if strings:
        parts = string_tree(ids)
        leaves = [string_leaf_hash(b, ds) for b, ds in parts.items()]
    else:
        parts = partitions_of(ids)
        leaves = [leaf_hash(p, lows) for p, lows in parts.items()]
    unique = sum(len(members) for members in parts.values())
    duplicates = len(ids) - unique
    root = display(merkle_root(leaves))
    recomputed = {
        "unique_ids_observed": unique,
        "partitions": len(parts),
        "merkle_root": root,
    }
    mismatches = [
        {"field": k, "receipt": receipt.get(k), "recomputed": v}
        for k, v in recomputed.items()
        if receipt.get(k) != v
    ]
    if duplicates:
        mismatches.append({"field": "export", "receipt": "unique IDs", "recomputed": f"{duplicates} repeated lines"})
    shard_values = None
    if shards is not None:
        shard_values = per_shard(parts, shards) if cover_problem(shards) is None else []
        mismatches.extend(shard_mismatches(receipt, shards, shard_values))
    if args.json:
        out = {
            "run_id": receipt.get("run_id"),
            "verified": not mismatches,
            "recomputed": recomputed,
            "partition_counts": {str(p): len(lows) for p, lows in parts.items()},
            "mismatches": mismatches,
        }
        if shard_values is not None:
            out["shards"] = shard_values
        print(json.dumps(out, indent=2))
    else:
        for k, v in recomputed.items():
            mark = "ok  " if receipt.get(k) == v else "DIFF"
            print(f"{mark} {k:<20} receipt {receipt.get(k)}  recomputed {v}")
        shown = list(parts.items())[:16]
        counts = ", ".join(f"{p}: {len(lows)}" for p, lows in shown)
        more = f" and {len(parts) - len(shown)} more" if len(parts) > len(shown) else ""
        print(f"     partition counts     {counts}{more}")
        if shards is not None:
            compared = receipt.get("coverage_status") == "verified"
            note = "" if compared else " (not compared: the merged run is not verified)"
            print(f"     shards of plan       {receipt['plan_digest']}: {len(shards)}{note}")
            wrong = {m["field"].split(".")[0] for m in mismatches}
            for s, r in zip(shards, shard_values):
                mark = "DIFF" if f"shards[{s['index']}]" in wrong else ("ok  " if compared else "    ")
                print(f"{mark} shard {s['index']:<14} receipt {s['unique_ids_observed']} {s['merkle_root']}"
                      f"  recomputed {r['unique_ids_observed']} {r['merkle_root']}")
            for m in mismatches:
                if m["field"] == "shards":
                    print(f"DIFF shards               {m['recomputed']}")
        verdict = "matches" if not mismatches else "DOES NOT match"
        print(f"{receipt.get('run_id')}: the export {verdict} the receipt")
    return EXIT_MISMATCH if mismatches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
