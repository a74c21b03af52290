//! The digest test vectors of docs/FORMAT.md, checked against the Rust implementation.
//!
//! The JSON files beside this one are written by `generate.py`, a second implementation of
//! the documented algorithms in Python that shares no code with the crate. A failure here
//! means the code, the document or the generator changed the format: all three must agree.

use std::path::Path;

use roaring::RoaringBitmap;
use scanledger::digest;
use scanledger::token::{self, Binding, Claims};
use scanledger::{IdSet, RunId};
use scanledger::{KeyRange, Scope, ShardRef};
use serde_json::Value;

fn load(name: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    match serde_json::from_str(&text) {
        Ok(Value::Array(a)) => a,
        other => panic!("{}: not a JSON array: {other:?}", path.display()),
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string in {v}"))
}

fn u64_of(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not a u64 in {v}"))
}

fn opt_str(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

#[test]
fn query_digest_vectors() {
    let vectors = load("query_digest.json");
    assert!(!vectors.is_empty());
    for v in &vectors {
        let name = str_of(v, "name");
        let s = &v["scope"];
        let scope = {
            let mut scope = Scope::new(str_of(s, "source"));
            scope.tenant = opt_str(&s["tenant"]);
            scope.query = s["query"].clone();
            scope.order = s["order"].clone();
            scope.key_range = s
                .get("key_range")
                .and_then(|r| KeyRange::new(r["lo"].as_u64()?, r["hi"].as_u64()?));
            scope.shard = s.get("shard").map(|r| ShardRef {
                plan: str_of(r, "plan").to_owned(),
                index: u32::try_from(r["index"].as_u64().unwrap_or(0)).unwrap_or(0),
                count: u32::try_from(r["count"].as_u64().unwrap_or(0)).unwrap_or(0),
            });
            scope
        };
        assert_eq!(
            digest::scope_json(&scope),
            str_of(v, "canonical_json"),
            "{name}"
        );
        assert_eq!(
            digest::query_digest(&scope),
            str_of(v, "query_digest"),
            "{name}"
        );
    }
}

#[test]
fn cursor_chain_vectors() {
    for v in &load("cursor_chain.json") {
        let name = str_of(v, "name");
        let qd = str_of(v, "query_digest");
        let snapshot = opt_str(&v["snapshot_id"]);
        let mut chain = digest::chain_start(qd, snapshot.as_deref());
        assert_eq!(digest::display(&chain), str_of(v, "chain_start"), "{name}");
        let cursors = v["next_cursors"].as_array().expect("next_cursors");
        let hashes = v["cursor_hashes"].as_array().expect("cursor_hashes");
        assert_eq!(cursors.len(), hashes.len(), "{name}");
        let mut pages = Vec::new();
        for (c, h) in cursors.iter().zip(hashes) {
            let ch = digest::cursor_hash(c.as_str());
            assert_eq!(Some(digest::hex(&ch).as_str()), h.as_str(), "{name}");
            chain = digest::chain_next(&chain, &ch);
            pages.push(scanledger::verify::PageEvidence {
                cursor_hash: ch,
                n_items: 0,
            });
        }
        let expected = str_of(v, "cursor_chain_digest");
        assert_eq!(digest::display(&chain), expected, "{name}");
        assert_eq!(
            digest::display(&digest::chain_of(
                qd,
                snapshot.as_deref(),
                pages.iter().map(|p| &p.cursor_hash)
            )),
            expected,
            "{name}: verify's recomputation"
        );
    }
}

fn ids_of(spec: &Value) -> IdSet {
    let mut set = IdSet::new();
    for id in spec["ids"].as_array().into_iter().flatten() {
        set.insert(id.as_u64().expect("an ID is a u64"));
    }
    for r in spec["ranges"].as_array().into_iter().flatten() {
        let (lo, hi) = (
            r[0].as_u64().expect("range start"),
            r[1].as_u64().expect("range end"),
        );
        for id in lo..=hi {
            set.insert(id);
        }
    }
    set
}

#[test]
fn merkle_vectors() {
    for v in &load("merkle.json") {
        let name = str_of(v, "name");
        let set = ids_of(&v["ids"]);
        assert_eq!(set.len(), u64_of(v, "unique_ids"), "{name}");
        let leaves = digest::leaves(&set);
        let expected = v["leaves"].as_array().expect("leaves");
        assert_eq!(leaves.len(), expected.len(), "{name}");
        let mut body = Vec::new();
        for ((p, h), e) in leaves.iter().zip(expected) {
            assert_eq!(*p, u64_of(e, "partition"), "{name}");
            assert_eq!(digest::hex(h), str_of(e, "leaf_hash"), "{name}: leaf {p}");
            let bitmap = set.partition(*p).expect("a leaf has a partition");
            assert_eq!(bitmap.len(), u64_of(e, "count"), "{name}");
            digest::leaf_body(bitmap, &mut body);
            let form = if body.len() == 8192 && bitmap.len() > digest::LEAF_ARRAY_MAX {
                "bitmap"
            } else {
                assert_eq!(body.len() as u64, 2 * bitmap.len(), "{name}");
                "array"
            };
            assert_eq!(form, str_of(e, "body_form"), "{name}: leaf {p}");
        }
        let root = str_of(v, "merkle_root");
        assert_eq!(digest::display(&digest::merkle_root(&set)), root, "{name}");

        // The leaf body is canonical whatever containers roaring chose: run-compress every
        // partition and the root is the same.
        let mut compressed = IdSet::new();
        for (p, b) in set.partitions() {
            let mut b: RoaringBitmap = b.clone();
            b.optimize();
            compressed.set_partition(p, b);
        }
        assert_eq!(
            digest::display(&digest::merkle_root(&compressed)),
            root,
            "{name}: run containers"
        );
    }
}

#[test]
fn page_token_vectors() {
    for v in &load("page_token.json") {
        let name = str_of(v, "name");
        let key_hex = str_of(v, "key_hex");
        let key: Vec<u8> = (0..key_hex.len() / 2)
            .map(|i| u8::from_str_radix(&key_hex[2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        let claims = Claims {
            run: RunId(u64_of(v, "run")),
            position: u64_of(v, "position"),
            stamp: u32::try_from(u64_of(v, "stamp")).expect("stamp fits u32"),
            expires_at_ms: u64_of(v, "expires_at_ms"),
        };
        let tenant = opt_str(&v["tenant"]);
        let binding = Binding {
            tenant: tenant.as_deref(),
            query_digest: str_of(v, "query_digest"),
        };
        assert_eq!(
            digest::hex(&token::mac(&key, &claims, &binding)),
            str_of(v, "mac_hex"),
            "{name}"
        );
        let text = token::issue(&key, &claims, &binding);
        assert_eq!(text, str_of(v, "token"), "{name}");
        let (decoded, _) = token::decode(&text).expect("a token decodes");
        assert_eq!(decoded, claims, "{name}");
    }
}

#[test]
fn string_root_vectors() {
    let vectors = load("string_root.json");
    assert!(!vectors.is_empty());
    for v in &vectors {
        let name = str_of(v, "name");
        let mut digests: Vec<digest::Hash> = v["strings"]
            .as_array()
            .expect("strings")
            .iter()
            .map(|s| digest::string_id_digest(s.as_str().expect("a string")))
            .collect();
        digests.sort_unstable();
        digests.dedup();
        assert_eq!(digests.len() as u64, u64_of(v, "unique_ids"), "{name}");
        let leaves = digest::string_leaves(&mut digests.clone());
        let want = v["leaves"].as_array().expect("leaves");
        assert_eq!(leaves.len(), want.len(), "{name}");
        for ((bucket, hash), w) in leaves.iter().zip(want) {
            assert_eq!(*bucket, u64_of(w, "bucket"), "{name}");
            assert_eq!(hex(hash), str_of(w, "leaf_hash"), "{name} bucket {bucket}");
        }
        let (root, partitions) = digest::string_root(&mut digests);
        assert_eq!(partitions, u64_of(v, "partitions"), "{name}");
        assert_eq!(digest::display(&root), str_of(v, "merkle_root"), "{name}");
    }
}

#[test]
fn content_vectors() {
    use scanledger::content::{canonical_decimal, record_hash, ContentValue as C};
    for v in &load("content.json") {
        let name = str_of(v, "name");
        let values = v["values"].as_array().expect("values");
        let mut owned_bytes = Vec::new();
        for pair in values {
            if pair[0] == "bytes_hex" {
                let text = pair[1].as_str().expect("hex");
                owned_bytes.push(
                    (0..text.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
                        .collect::<Vec<u8>>(),
                );
            }
        }
        let mut bytes = owned_bytes.iter();
        let typed: Vec<C<'_>> = values
            .iter()
            .map(|pair| match pair[0].as_str().expect("kind") {
                "null" => C::Null,
                "int" => C::Int(i128::from(pair[1].as_i64().expect("int"))),
                "bool" => C::Bool(pair[1].as_bool().expect("bool")),
                "decimal" => C::Decimal(pair[1].as_str().expect("decimal")),
                "text" => C::Text(pair[1].as_str().expect("text")),
                "bytes_hex" => C::Bytes(bytes.next().expect("bytes")),
                "timestamp_micros" => C::TimestampMicros(pair[1].as_i64().expect("micros")),
                "date" => {
                    let d = pair[1].as_str().expect("date");
                    C::Date {
                        year: d[..4].parse().expect("year"),
                        month: d[5..7].parse().expect("month"),
                        day: d[8..].parse().expect("day"),
                    }
                }
                other => panic!("{name}: unknown kind {other}"),
            })
            .collect();
        let decimals: Vec<String> = values
            .iter()
            .filter(|p| p[0] == "decimal")
            .map(|p| canonical_decimal(p[1].as_str().expect("decimal")).expect("canonical"))
            .collect();
        let want: Vec<String> = v["canonical_decimals"]
            .as_array()
            .expect("decimals")
            .iter()
            .map(|s| s.as_str().expect("a string").to_owned())
            .collect();
        assert_eq!(decimals, want, "{name}");
        assert_eq!(
            hex(&record_hash(&typed).expect("hash")),
            str_of(v, "record_hash"),
            "{name}"
        );
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn id_codec_vectors() {
    use scanledger::{IdCodec, IdCodecKind, RawId};
    for v in &load("id_codec.json") {
        let kind = match str_of(v, "codec") {
            "signed" => IdCodecKind::Signed,
            "int" => IdCodecKind::Int,
            other => panic!("codec {other}"),
        };
        let mut codec = IdCodec::new(kind, None);
        let raw = |n: &Value| match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => RawId::Int(u),
            (None, Some(i)) => RawId::Neg(i),
            _ => panic!("an ID is an integer: {n}"),
        };
        if let Some(ids) = v["ids"].as_array() {
            let mut set = IdSet::new();
            for n in ids {
                set.insert(codec.encode(&raw(n)).expect("a signed ID"));
            }
            assert_eq!(set.partitions().count() as u64, u64_of(v, "partitions"));
            assert_eq!(
                digest::display(&digest::merkle_root(&set)),
                str_of(v, "merkle_root")
            );
            continue;
        }
        let id = codec.encode(&raw(&v["id"])).expect("an ID of its codec");
        assert_eq!(id, u64_of(v, "u64"), "{v}");
        assert_eq!(codec.render(id), str_of(v, "text"), "{v}");
        assert_eq!(codec.parse_existing(str_of(v, "text")), Some(id), "{v}");
    }
}
