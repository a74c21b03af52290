//! How the wire shows up in receipts: statuses, `Retry-After`, invalid bodies, the body
//! bound, the per-page timeout.

#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use std::time::Duration;

use serde_json::json;

use super::server::{Reply, Server};
use super::{expect, page, routes, scan, TestResult};

#[test]
fn http_server_errors_after_retries_are_page_failed() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![page(&[1], Some("c2"))]),
            (Some("c2"), vec![Reply::status(502, "bad gateway")]),
        ],
    ));
    let r = expect(
        &scan(
            dir.path(),
            &server,
            json!({}),
            json!({"limits": {"retries": 2}}),
            &[],
        ),
        3,
        "unknown",
        &["page_failed"],
    );
    assert!(r["violations"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("server error after 3 attempt(s)"));
    assert_eq!(server.requests().len(), 4);
    Ok(())
}

#[test]
fn http_403_on_page_3_is_access_denied_without_retries() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![page(&[1, 2], Some("c2"))]),
            (Some("c2"), vec![page(&[3, 4], Some("c3"))]),
            (
                Some("c3"),
                vec![Reply::status(
                    403,
                    r#"{"message": "Resource not accessible by integration"}"#,
                )],
            ),
        ],
    ));
    let r = expect(
        &scan(dir.path(), &server, json!({}), json!({}), &[]),
        3,
        "unknown",
        &["access_denied"],
    );
    assert_eq!(
        (
            r["pages_observed"].as_u64(),
            r["violations"][0]["page"].as_u64()
        ),
        (Some(2), Some(3))
    );
    assert_eq!(server.requests().len(), 3);
    Ok(())
}

#[test]
fn http_410_expired_token_blocks() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![page(&[1, 2], Some("c2"))]),
            (Some("c2"), vec![Reply::status(410, r#"{"error": "gone"}"#)]),
        ],
    ));
    expect(
        &scan(dir.path(), &server, json!({}), json!({}), &[]),
        3,
        "unknown",
        &["expired_cursor"],
    );
    Ok(())
}

#[test]
fn http_expired_marker_restarts_under_a_fresh_snapshot() -> TestResult {
    let dir = tempfile::tempdir()?;
    let snap = |ids: &[u64], next: Option<&str>, s: &str| {
        Reply::json(
            &json!({"items": ids.iter().map(|i| json!({"id": i})).collect::<Vec<_>>(),
            "next_page_token": next, "snapshot": s}),
        )
    };
    let server = Server::start(routes(
        "page_token",
        vec![
            (
                None,
                vec![
                    snap(&[1, 2], Some("c2"), "s1"),
                    snap(&[1, 2], Some("d2"), "s2"),
                ],
            ),
            (
                Some("c2"),
                vec![Reply::status(
                    400,
                    r#"{"error": {"code": "INVALID_CURSOR", "message": "the page token expired"}}"#,
                )],
            ),
            (Some("d2"), vec![snap(&[3], None, "s2")]),
        ],
    ));
    let cfg = json!({"snapshot": "/snapshot", "expired_marker": "INVALID_CURSOR"});
    let contract = json!({"on_expired_cursor": "restart"});
    let r = expect(
        &scan(dir.path(), &server, cfg, contract, &[]),
        0,
        "verified",
        &[],
    );
    assert_eq!(
        (r["restarts"].as_u64(), r["snapshot_id"].as_str()),
        (Some(1), Some("s2"))
    );
    assert_eq!(r["restarted_from"], "run-1");
    assert_eq!(r["unique_ids_observed"], json!(3));
    // The same 400 without the marker is an invalid page, not an expiry.
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![page(&[1, 2], Some("c2"))]),
            (
                Some("c2"),
                vec![Reply::status(400, r#"{"error": "bad filter"}"#)],
            ),
        ],
    ));
    let r = expect(
        &scan(
            dir.path(),
            &server,
            json!({"expired_marker": "INVALID_CURSOR"}),
            json!({}),
            &[],
        ),
        4,
        "failed",
        &["invalid_page"],
    );
    assert!(r["violations"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("HTTP status 400"));
    Ok(())
}

#[test]
fn http_invalid_pages_fail_naming_the_pointer() -> TestResult {
    for (reply, words) in [
        (
            Reply::status(200, "<html>Sign in</html>"),
            "not strict JSON",
        ),
        (
            Reply::status(200, r#"{"items": [], "items": [{"id": 1}]}"#),
            "duplicate key \"items\"",
        ),
        (
            Reply::json(&json!({"data": []})),
            "items pointer \"/items\" names nothing",
        ),
        (
            Reply::json(&json!({"items": [{"id": 1}, {"uuid": 2}]})),
            "item 1: id pointer \"/id\"",
        ),
        (Reply::json(&json!({"items": [{"id": "x-1"}]})), "item 0"),
        (Reply::status(404, "{}"), "HTTP status 404 (Not Found)"),
        (
            Reply::status(302, "").with_header("Location", "http://127.0.0.1:9/elsewhere"),
            "redirects are not followed",
        ),
    ] {
        let dir = tempfile::tempdir()?;
        let server = Server::start(routes("page_token", vec![(None, vec![reply])]));
        let r = expect(
            &scan(dir.path(), &server, json!({}), json!({}), &[]),
            4,
            "failed",
            &["invalid_page"],
        );
        let detail = r["violations"][0]["detail"].as_str().unwrap().to_owned();
        assert!(detail.contains(words), "{detail} lacks {words}");
        assert_eq!(
            server.requests().len(),
            1,
            "{words}: an invalid page is not retried"
        );
    }
    Ok(())
}

#[test]
fn http_429_and_503_with_retry_after_are_retried_after_the_wait() -> TestResult {
    let dir = tempfile::tempdir()?;
    let inner = routes(
        "page_token",
        vec![
            (
                None,
                vec![
                    Reply::status(429, "{}").with_header("Retry-After", "1"),
                    page(&[1], Some("c2")),
                ],
            ),
            (Some("c2"), vec![Reply::status(503, "{}"), page(&[2], None)]),
        ],
    );
    // The date is written when the 503 is sent, two seconds ahead (HTTP-dates have whole
    // seconds, so at least one second of wait is left).
    let server = Server::start(move |req| {
        let reply = inner(req);
        if reply.status == 503 {
            let at = std::time::SystemTime::now() + Duration::from_secs(2);
            return reply.with_header("Retry-After", &httpdate::fmt_http_date(at));
        }
        reply
    });
    expect(
        &scan(dir.path(), &server, json!({}), json!({}), &[]),
        0,
        "verified",
        &[],
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    assert!(
        reqs[1].at.duration_since(reqs[0].at) >= Duration::from_secs(1),
        "Retry-After: 1 not honoured"
    );
    assert!(
        reqs[3].at.duration_since(reqs[2].at) >= Duration::from_millis(900),
        "the HTTP-date not honoured"
    );
    Ok(())
}

#[test]
fn http_body_over_the_bound_is_invalid_with_or_without_a_length() -> TestResult {
    for unframed in [false, true] {
        let dir = tempfile::tempdir()?;
        let mut big = Reply::json(&json!({"items": [{"id": 1}], "pad": "x".repeat(5000)}));
        big.unframed = unframed;
        let server = Server::start(routes("page_token", vec![(None, vec![big])]));
        let r = expect(
            &scan(
                dir.path(),
                &server,
                json!({"max_body_bytes": 1000}),
                json!({}),
                &[],
            ),
            4,
            "failed",
            &["invalid_page"],
        );
        assert!(r["violations"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("over the bound of 1000 bytes"));
    }
    Ok(())
}

#[test]
fn http_slow_page_hits_the_per_page_timeout() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![page(&[1], Some("c2"))]),
            (
                Some("c2"),
                vec![page(&[2], None).after(Duration::from_millis(1500))],
            ),
        ],
    ));
    let contract = json!({"limits": {"page_timeout_ms": 200, "retries": 1}});
    let r = expect(
        &scan(dir.path(), &server, json!({}), contract, &[]),
        3,
        "unknown",
        &["page_failed"],
    );
    assert!(r["violations"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("timeout"));
    assert_eq!(server.requests().len(), 3);
    Ok(())
}

/// CRC-32 (IEEE) of `bytes`, for the gzip trailer below.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for b in bytes {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// `text` as a gzip member (one stored deflate block): what a server sends with
/// `Content-Encoding: gzip`.
fn gzip_stored(text: &str) -> Vec<u8> {
    let data = text.as_bytes();
    let len = u16::try_from(data.len()).unwrap();
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    out.push(1); // the last block, stored
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&u32::from(len).to_le_bytes());
    out
}

/// The HTTP source ignored `Content-Encoding`: a gzip body (a server that compresses whatever
/// the client asked) failed as "not strict JSON at line 1, column 1", and a plain JSON body
/// labelled `br` was read as JSON and verified. It now asks for `identity` and refuses any
/// other encoding by name (an invalid page, so the run fails and never verifies). This serves
/// both from the loopback server and checks the request's `Accept-Encoding`.
#[test]
fn http_encoded_bodies_are_refused_by_name_never_misread() -> TestResult {
    let body = json!({"items": [{"id": 1}], "next_page_token": null}).to_string();
    for (reply, encoding) in [
        (
            Reply {
                body: gzip_stored(&body),
                ..Reply::status(200, "")
            }
            .with_header("Content-Encoding", "gzip"),
            "gzip",
        ),
        (
            Reply::status(200, &body).with_header("Content-Encoding", "br"),
            "br",
        ),
    ] {
        let dir = tempfile::tempdir()?;
        let server = Server::start(routes("page_token", vec![(None, vec![reply])]));
        let r = expect(
            &scan(dir.path(), &server, json!({}), json!({}), &[]),
            4,
            "failed",
            &["invalid_page"],
        );
        let detail = r["violations"][0]["detail"].as_str().unwrap_or("");
        assert!(
            detail.contains(&format!("{encoding:?}")) && detail.contains("Content-Encoding"),
            "{encoding}: {detail}"
        );
        let asked = server.requests();
        assert_eq!(
            asked[0].header("Accept-Encoding"),
            Some("identity"),
            "{asked:?}"
        );
    }
    // `identity` (the one encoding asked for) is read as any plain body.
    let dir = tempfile::tempdir()?;
    let reply = Reply::status(200, &body).with_header("Content-Encoding", "identity");
    let server = Server::start(routes("page_token", vec![(None, vec![reply])]));
    expect(
        &scan(dir.path(), &server, json!({}), json!({}), &[]),
        0,
        "verified",
        &[],
    );
    Ok(())
}
