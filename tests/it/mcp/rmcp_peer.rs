//! The `mcp:` source against an `rmcp` server in the test process, over streamable HTTP on
//! loopback: a paginated tool whose access is revoked after page 1 (an HTTP 403 below the
//! protocol), a result over the configured bound, and `resources/list` in pages.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Resource, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};

use super::{bin, kinds, scan};
use crate::util;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A server with one paginated tool (`things`: cursor `t<N>`, three pages of two) and five
/// resources in pages of two. After the first page of `things`, `revoke` is set.
#[derive(Clone)]
struct Pages {
    revoke: Arc<AtomicBool>,
    /// The `Authorization` headers the server received.
    auth_seen: Arc<std::sync::Mutex<Vec<String>>>,
    revoke_after_first: bool,
    padding_bytes: usize,
}

impl ServerHandler for Pages {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("rmcp-peer", "0.3.0"))
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {"cursor": {"type": "string"}}});
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "things",
            "pages of things",
            schema,
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let at: u64 = match args.get("cursor").and_then(Value::as_str) {
            None => 0,
            Some(c) => c
                .trim_start_matches('t')
                .parse()
                .map_err(|_| ErrorData::invalid_params("bad cursor", None))?,
        };
        if at == 0 && self.revoke_after_first {
            self.revoke.store(true, Ordering::SeqCst);
        }
        let next = (at < 4).then(|| format!("t{}", at + 2));
        let body = json!({
            "things": [{"id": at + 1}, {"id": at + 2}],
            "next": next,
            "padding": "x".repeat(self.padding_bytes),
        });
        let mut result = CallToolResult::success(vec![ContentBlock::text(body.to_string())]);
        result.structured_content = Some(body);
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let all: Vec<Resource> = (1..=5)
            .map(|i| Resource::new(format!("mem://r/{i}"), format!("r{i}")))
            .collect();
        let at: usize = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => c
                .parse()
                .map_err(|_| ErrorData::invalid_params("bad cursor", None))?,
        };
        let end = (at + 2).min(all.len());
        let mut r = ListResourcesResult::with_all_items(all[at..end].to_vec());
        r.next_cursor = (end < all.len()).then(|| end.to_string());
        Ok(r)
    }
}

/// Serves `pages` at `http://127.0.0.1:PORT/mcp` from a thread of its own; POSTs get a 403
/// once `pages.revoke` is set. The thread ends with the test process.
fn serve(pages: Pages) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let revoke = Arc::clone(&pages.revoke);
            let seen = Arc::clone(&pages.auth_seen);
            let factory = pages.clone();
            let service: StreamableHttpService<Pages, LocalSessionManager> =
                StreamableHttpService::new(
                    move || Ok(factory.clone()),
                    Arc::default(),
                    StreamableHttpServerConfig::default(),
                );
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let service = service.clone();
                let revoke = Arc::clone(&revoke);
                let seen = Arc::clone(&seen);
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let service = service.clone();
                            let revoke = Arc::clone(&revoke);
                            let seen = Arc::clone(&seen);
                            async move {
                                if let Some(a) = req
                                    .headers()
                                    .get("authorization")
                                    .and_then(|v| v.to_str().ok())
                                {
                                    seen.lock().unwrap().push(a.to_owned());
                                }
                                if revoke.load(Ordering::SeqCst)
                                    && req.method() == hyper::Method::POST
                                {
                                    let body = Full::new(Bytes::from_static(b"revoked"))
                                        .map_err(|e: Infallible| match e {})
                                        .boxed();
                                    let mut resp = hyper::Response::new(body);
                                    *resp.status_mut() = hyper::StatusCode::FORBIDDEN;
                                    resp.headers_mut().insert(
                                        "www-authenticate",
                                        hyper::header::HeaderValue::from_static(
                                            "Bearer error=\"insufficient_scope\"",
                                        ),
                                    );
                                    return Ok::<_, Infallible>(resp);
                                }
                                Ok(service.handle(req).await)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
    });
    let addr = rx.recv().unwrap();
    format!("http://{addr}/mcp")
}

fn things_config(dir: &std::path::Path, url: &str, extra: Value) -> String {
    let cfg = super::with(
        json!({"url": url, "tool": "things", "cursor_arg": "cursor", "items": "/things", "next": "/next"}),
        extra,
    );
    util::write(dir, "things.json", &cfg.to_string());
    "mcp:things.json".into()
}

#[test]
fn rmcp_over_http_is_verified_and_records_the_server() -> TestResult {
    let dir = tempfile::tempdir()?;
    let url = serve(Pages {
        revoke: Arc::default(),
        auth_seen: Arc::default(),
        revoke_after_first: false,
        padding_bytes: 0,
    });
    let src = things_config(dir.path(), &url, json!({}));
    let r = scan(dir.path(), "ok", &json!({"source": "things"}), &src, &[]);
    let receipt = r.receipt();
    assert_eq!(
        (
            r.exit,
            receipt["unique_ids_observed"].as_u64(),
            receipt["pages_observed"].as_u64()
        ),
        (0, Some(6), Some(3)),
        "{receipt:#}\n{}",
        r.stderr
    );
    let store = scanledger::Store::open_read(&dir.path().join("s.redb"))?;
    let spec = store
        .read()?
        .header(scanledger::RunId(1))?
        .source_spec
        .unwrap_or_default();
    assert!(spec.ends_with("#server=rmcp-peer 0.3.0"), "{spec}");
    Ok(())
}

#[test]
fn access_revoked_after_page_one_is_access_denied() -> TestResult {
    let dir = tempfile::tempdir()?;
    let url = serve(Pages {
        revoke: Arc::default(),
        auth_seen: Arc::default(),
        revoke_after_first: true,
        padding_bytes: 0,
    });
    let src = things_config(dir.path(), &url, json!({}));
    let r = scan(
        dir.path(),
        "revoked",
        &json!({"source": "things"}),
        &src,
        &[],
    );
    let receipt = r.receipt();
    assert_eq!(
        (r.exit, kinds(&receipt)),
        (3, vec!["access_denied".to_owned()]),
        "{receipt:#}\n{}",
        r.stderr
    );
    assert_eq!(receipt["unique_ids_observed"], 2);
    Ok(())
}

#[test]
fn a_result_over_the_bound_is_an_invalid_page() -> TestResult {
    let dir = tempfile::tempdir()?;
    let url = serve(Pages {
        revoke: Arc::default(),
        auth_seen: Arc::default(),
        revoke_after_first: false,
        padding_bytes: 20_000,
    });
    let src = things_config(dir.path(), &url, json!({"max_result_bytes": 10_000}));
    let r = scan(dir.path(), "big", &json!({"source": "things"}), &src, &[]);
    let receipt = r.receipt();
    assert_eq!(
        (r.exit, kinds(&receipt)),
        (4, vec!["invalid_page".to_owned()]),
        "{receipt:#}"
    );
    assert!(
        receipt["violations"][0]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("10000 bytes"),
        "{receipt:#}"
    );
    Ok(())
}

#[test]
fn resources_list_is_followed_by_its_opaque_cursors() -> TestResult {
    let dir = tempfile::tempdir()?;
    let url = serve(Pages {
        revoke: Arc::default(),
        auth_seen: Arc::default(),
        revoke_after_first: false,
        padding_bytes: 0,
    });
    util::write(
        dir.path(),
        "res.json",
        &json!({"url": url, "list": "resources"}).to_string(),
    );
    let r = scan(
        dir.path(),
        "res",
        &json!({"source": "resources", "id_codec": "string"}),
        "mcp:res.json",
        &[],
    );
    let receipt = r.receipt();
    assert_eq!(
        (
            r.exit,
            receipt["pages_observed"].as_u64(),
            receipt["unique_ids_observed"].as_u64()
        ),
        (0, Some(3), Some(5)),
        "{receipt:#}"
    );
    let out = bin(dir.path(), &["export", "latest"], &[]);
    assert_eq!(out.stdout.lines().next(), Some("mem://r/1"));
    Ok(())
}

#[test]
fn the_bearer_token_goes_only_into_the_authorization_header() -> TestResult {
    let dir = tempfile::tempdir()?;
    let pages = Pages {
        revoke: Arc::default(),
        auth_seen: Arc::default(),
        revoke_after_first: false,
        padding_bytes: 0,
    };
    let seen = Arc::clone(&pages.auth_seen);
    let url = serve(pages);
    let canary = "canary-mcp-bearer-3e8a";
    let src = things_config(dir.path(), &url, json!({"auth_env": "SL_MCP_TEST_TOKEN"}));
    util::write(
        dir.path(),
        "c.json",
        &json!({"source": "things"}).to_string(),
    );
    let r = bin(
        dir.path(),
        &[
            "-vv",
            "--json",
            "scan",
            "--contract",
            "c.json",
            "--source",
            &src,
        ],
        &[("SL_MCP_TEST_TOKEN", canary)],
    );
    assert_eq!(r.exit, 0, "{}", r.stderr);
    let headers = seen.lock().unwrap().clone();
    assert!(
        !headers.is_empty() && headers.iter().all(|a| *a == format!("Bearer {canary}")),
        "{headers:?}"
    );
    for text in [&r.stdout, &r.stderr] {
        assert!(!text.contains(canary), "the token leaked:\n{text}");
    }
    let file = std::fs::read(dir.path().join("s.redb"))?;
    assert!(
        !file.windows(canary.len()).any(|w| w == canary.as_bytes()),
        "the token is in the store"
    );
    Ok(())
}
