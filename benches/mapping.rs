//! The HTTP source's own work per page: strict parse and map of a 100-item response
//! (`Mapping::map_body`), which must stay far below any network round trip.
//!
//! Run:   cargo bench --bench mapping
//! One:   cargo bench --bench mapping -- 'mapping/map_body/list_100'
//!
//! Target: at most 50 µs per page for a recorded 100-item response.
//!
//! Datasets (fixed seed; item shapes recorded from the APIs' documented responses):
//! - `list_100`: a list endpoint answering 100 records of five fields (`id`, `name`,
//!   `schema_version`, `status`, `updated_at`), ~12 KB, mapped with a `needs_v3` label
//!   (`ne 3`) as in the migration example: the target's case;
//! - `notion_100`: 100 Notion page objects with their parent, user and property objects,
//!   ~60 KB, mapped with the `notion` preset and a label;
//! - `github_search_100`: 100 GitHub search issues with the full user object, labels and
//!   URLs, ~330 KB, mapped with the `github_rest` preset: parse-bound, for scale.
//!
//! Each is also timed as `parse` alone (`json::parse_slice`, strict), `serde_json` (the
//! non-strict floor, in the same run) and `map_value` (the mapping alone, on a parsed value).
//!
//! Back of the envelope: strict parsing builds a `Value` at roughly 300-500 MB/s, so ~30 µs
//! for 12 KB; mapping walks 100 pre-split pointers and tests one label per item, ~5 µs.

use std::hint::black_box;

mod common;
use common::{SplitMix64, SEED};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use scanledger::json::{self, Numbers};
use scanledger::mapping::{Mapping, Position};
use serde_json::{json, Value};

const ITEMS: u64 = 100;

fn list_item(rng: &mut SplitMix64, i: u64) -> Value {
    json!({
        "id": 4100 + i,
        "name": format!("customer-{}", 4100 + i),
        "schema_version": if rng.below(10) == 0 { 2 } else { 3 },
        "status": if rng.below(4) == 0 { "archived" } else { "active" },
        "updated_at": format!("2026-08-{:02}T09:{:02}:00Z", 1 + rng.below(28), rng.below(60)),
    })
}

fn notion_item(rng: &mut SplitMix64, i: u64) -> Value {
    let id = format!("59833787-2cf9-4fdf-8782-{:012x}", rng.next_u64() >> 16);
    json!({
        "object": "page", "id": id,
        "created_time": "2022-03-01T19:05:00.000Z", "last_edited_time": "2022-07-06T20:25:00.000Z",
        "created_by": {"object": "user", "id": "ee5f0f84-409a-440f-983a-a5315961c6e4"},
        "last_edited_by": {"object": "user", "id": "0c3e9826-b8f7-4f73-927d-2caaf86f1103"},
        "cover": null, "icon": {"type": "emoji", "emoji": "🐞"},
        "parent": {"type": "database_id", "database_id": "d9824bdc-8445-4327-be8b-5b47500af6ce"},
        "archived": rng.below(8) == 0, "in_trash": false,
        "properties": {
            "Name": {"id": "title", "type": "title", "title": [{"type": "text", "text": {"content": format!("Task {i}"), "link": null}, "plain_text": format!("Task {i}"), "href": null}]},
            "Status": {"id": "Z%3ClH", "type": "status", "status": {"id": "86ddb6ec-0627-47f8-800d-b65afd28be13", "name": "Not started", "color": "default"}},
            "Due": {"id": "M%3BBw", "type": "date", "date": {"start": "2023-02-23", "end": null, "time_zone": null}}
        },
        "url": format!("https://www.notion.so/Task-{i}-{}", id.replace('-', "")),
        "public_url": null
    })
}

fn github_user(login: &str, id: u64) -> Value {
    let base = format!("https://api.github.com/users/{login}");
    json!({
        "login": login, "id": id, "node_id": "MDQ6VXNlcjE=", "avatar_url": "https://github.com/images/error/octocat_happy.gif",
        "gravatar_id": "", "url": base, "html_url": format!("https://github.com/{login}"),
        "followers_url": format!("{base}/followers"), "following_url": format!("{base}/following{{/other_user}}"),
        "gists_url": format!("{base}/gists{{/gist_id}}"), "starred_url": format!("{base}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{base}/subscriptions"), "organizations_url": format!("{base}/orgs"),
        "repos_url": format!("{base}/repos"), "events_url": format!("{base}/events{{/privacy}}"),
        "received_events_url": format!("{base}/received_events"), "type": "User", "site_admin": false
    })
}

fn github_item(rng: &mut SplitMix64, i: u64) -> Value {
    let number = 1347 + i;
    let repo = "https://api.github.com/repos/batterseapower/pinyin-toolkit";
    json!({
        "url": format!("{repo}/issues/{number}"), "repository_url": repo,
        "labels_url": format!("{repo}/issues/{number}/labels{{/name}}"),
        "comments_url": format!("{repo}/issues/{number}/comments"),
        "events_url": format!("{repo}/issues/{number}/events"),
        "html_url": format!("https://github.com/batterseapower/pinyin-toolkit/issues/{number}"),
        "id": 35_802 + i, "node_id": "MDU6SXNzdWUzNTgwMg==", "number": number,
        "title": "Line Number Indexes Beyond 20 Not Displayed",
        "user": github_user("Nick3C", 90_254 + rng.below(1000)),
        "labels": [{"id": 4, "node_id": "MDU6TGFiZWw0", "url": format!("{repo}/labels/bug"), "name": "bug", "color": "ff0000", "default": true, "description": null}],
        "state": if rng.below(3) == 0 { "closed" } else { "open" },
        "locked": false, "assignee": null, "assignees": [], "milestone": null, "comments": 15,
        "created_at": "2009-07-12T20:10:41Z", "updated_at": "2009-07-19T09:23:43Z", "closed_at": null,
        "author_association": "NONE", "active_lock_reason": null,
        "pull_request": {"url": format!("{repo}/pulls/{number}"), "html_url": format!("https://github.com/batterseapower/pinyin-toolkit/pull/{number}"),
            "diff_url": format!("https://github.com/batterseapower/pinyin-toolkit/pull/{number}.diff"),
            "patch_url": format!("https://github.com/batterseapower/pinyin-toolkit/pull/{number}.patch")},
        "body": "Current behaviour: line numbers beyond 20 are not displayed in the index column of the toolkit's export.",
        "score": 1, "timeline_url": format!("{repo}/issues/{number}/timeline"), "performed_via_github_app": null,
        "reactions": {"url": format!("{repo}/issues/{number}/reactions"), "total_count": 0, "+1": 0, "-1": 0, "laugh": 0, "hooray": 0, "confused": 0, "heart": 0, "rocket": 0, "eyes": 0}
    })
}

/// (name, response body, mapping, position asked).
fn datasets() -> Vec<(&'static str, Vec<u8>, Mapping, Position)> {
    let mut rng = SplitMix64(SEED);
    let mapping =
        |cfg: Value| Mapping::from_config(cfg.as_object().expect("object")).expect("mapping");
    let list: Vec<Value> = (0..ITEMS).map(|i| list_item(&mut rng, i)).collect();
    let notion: Vec<Value> = (0..ITEMS).map(|i| notion_item(&mut rng, i)).collect();
    let github: Vec<Value> = (0..ITEMS).map(|i| github_item(&mut rng, i)).collect();
    vec![
        (
            "list_100",
            json!({"items": list, "next_page_token": "CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA", "total": 8742}).to_string().into_bytes(),
            mapping(json!({"total": "/total", "labels": {"needs_v3": {"pointer": "/schema_version", "ne": 3}}})),
            Position::First,
        ),
        (
            "notion_100",
            json!({"object": "list", "results": notion, "next_cursor": "fe2cc560-036c-44cd-90e8-294d5a74cebc", "has_more": true, "type": "page_or_database", "page_or_database": {}}).to_string().into_bytes(),
            mapping(json!({"preset": "notion", "labels": {"archived": {"pointer": "/archived", "truthy": true}}})),
            Position::First,
        ),
        (
            "github_search_100",
            json!({"total_count": 40_000, "incomplete_results": false, "items": github}).to_string().into_bytes(),
            mapping(json!({"preset": "github_rest", "labels": {"open": {"pointer": "/state", "eq": "open"}}})),
            Position::Page(1),
        ),
    ]
}

fn map_body(c: &mut Criterion) {
    let mut group = c.benchmark_group("mapping");
    group.sample_size(50);
    group.warm_up_time(std::time::Duration::from_secs(1));
    group.measurement_time(std::time::Duration::from_secs(3));
    for (name, body, mapping, at) in datasets() {
        // The dataset must map cleanly, or the bench times an error path.
        let page = mapping
            .map_body(&body, u64::MAX, &at)
            .expect("the dataset maps");
        assert_eq!(page.items.len() as u64, ITEMS);
        assert!(page.next.is_some());
        eprintln!("mapping/{name}: {} bytes", body.len());
        group.throughput(Throughput::Elements(ITEMS));
        group.bench_with_input(BenchmarkId::new("map_body", name), &body, |b, body| {
            b.iter(|| {
                mapping
                    .map_body(black_box(body), u64::MAX, &at)
                    .map(|p| p.items.len())
            });
        });
        group.bench_with_input(BenchmarkId::new("parse", name), &body, |b, body| {
            b.iter(|| json::parse_slice(black_box(body), Numbers::Any).is_ok());
        });
        // The floor: serde_json's own (non-strict) parse into a `Value`, timed in the same run.
        group.bench_with_input(BenchmarkId::new("serde_json", name), &body, |b, body| {
            b.iter(|| serde_json::from_slice::<Value>(black_box(body)).is_ok());
        });
        let value = json::parse_slice(&body, Numbers::Any).expect("the dataset parses");
        let len = body.len() as u64;
        group.bench_with_input(BenchmarkId::new("map_value", name), &value, |b, value| {
            b.iter(|| {
                mapping
                    .map_value(black_box(value), len, &at)
                    .map(|p| p.items.len())
            });
        });
    }
    group.finish();
}

criterion_group!(benches, map_body);
criterion_main!(benches);
