//! `CoreService.Suggest` (the server side of the MCP tool
//! `suggestImprovement`) as the gateway calls it, over mTLS: what is
//! recorded, what is refused and why (shape, scope, the per-user daily cap),
//! and `sasha admin suggestions`, which admins read them with while the stack
//! runs.

use crate::common;

use std::ops::Deref;
use std::path::Path;
use std::process::Command;

use common::core::CoreWorld;
use sasha_proto::convert::ToWire;
use sasha_proto::pb;
use sasha_proto::{AppError, ErrorCode};
use sasha_service::grpc;
use serde_json::{Value, json};
use studio_store::{PrincipalKind, Scope, Store, TokenKind, UserRole};

const OR_CLAUSES: &str = "The data grammar has no way to express OR between two where clauses; \
                          I had to make two list calls and merge them.";

type Core = grpc::CoreClient;

/// data-worker and studio-core, with principals as `Authenticate` gives them
/// to the gateway: a member's and a staff member's apps:invoke access
/// tokens, the member's browser session, a chat-only token and an API key
/// carrying apps:invoke.
struct World {
    core: CoreWorld,
    member: pb::Principal,
    staff: pb::Principal,
    session: pb::Principal,
    chat_only: pb::Principal,
    api_key: pb::Principal,
}

impl World {
    async fn start() -> World {
        let core = CoreWorld::start().await;
        let mia = core.user("mia", UserRole::Member);
        let sam = core.user("sam", UserRole::Staff);
        let invoke = [Scope::ChatUse, Scope::AppsInvoke];
        let member = core.bearer(&mia, TokenKind::Access, &invoke).await;
        let staff = core.bearer(&sam, TokenKind::Access, &invoke).await;
        let chat_only = core
            .bearer(&mia, TokenKind::Access, &[Scope::ChatUse])
            .await;
        let api_key = core.bearer(&sam, TokenKind::ApiKey, &invoke).await;
        let session = core.store.create_session(&mia.id).unwrap();
        let session = core.principal("session", session).await;
        assert_eq!(api_key.kind, PrincipalKind::ApiKey.to_wire());
        assert_eq!(session.kind, PrincipalKind::Session.to_wire());
        World {
            core,
            member,
            staff,
            session,
            chat_only,
            api_key,
        }
    }

    fn rows(&self) -> i64 {
        self.database().count("SELECT count(*) FROM suggestions")
    }
}

impl Deref for World {
    type Target = CoreWorld;

    fn deref(&self) -> &CoreWorld {
        &self.core
    }
}

fn request(principal: &pb::Principal, suggestion: &Value) -> pb::SuggestRequest {
    pb::SuggestRequest {
        principal: Some(principal.clone()),
        suggestion_json: suggestion.to_string(),
    }
}

fn plain(summary: &str) -> Value {
    json!({"kind": "friction", "severity": "low", "summary": summary})
}

async fn suggest(client: &mut Core, principal: &pb::Principal, suggestion: &Value) -> String {
    client
        .suggest(request(principal, suggestion))
        .await
        .unwrap_or_else(|status| panic!("{suggestion} refused: {}", AppError::from_status(&status)))
        .into_inner()
        .id
}

async fn refused(client: &mut Core, request: pb::SuggestRequest) -> AppError {
    let status = client
        .suggest(request)
        .await
        .expect_err("the suggestion should be refused");
    AppError::from_status(&status)
}

/// A lowercase hyphenated UUID whose version nibble is 7.
fn is_uuid_v7(id: &str) -> bool {
    id.len() == 36
        && id.char_indices().all(|(index, c)| match index {
            8 | 13 | 18 | 23 => c == '-',
            14 => c == '7',
            _ => c.is_ascii_digit() || ('a'..='f').contains(&c),
        })
}

/// One finished `sasha admin suggestions` run.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn admin_suggestions(state: &Path, args: &[&str]) -> Run {
    let output = Command::new(common::sasha_bin())
        .args(["admin", "suggestions"])
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .env_clear()
        .envs(common::core_database::core_env(state))
        .output()
        .expect("run sasha admin suggestions");
    Run {
        code: output.status.code().expect("exit code"),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

fn json_lines(run: &Run) -> Vec<Value> {
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    run.stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn suggestions_are_recorded_and_admins_read_them_newest_first() {
    let world = World::start().await;
    let state = world.harness.path();
    let mut client = world.client();
    assert!(json_lines(&admin_suggestions(state, &[])).is_empty());

    let full = json!({
        "kind": "feature",
        "severity": "medium",
        "summary": format!("  {OR_CLAUSES}  "),
        "detail": "I wanted expenses over 100 or tagged travel.\n\
                   Every where clause is ANDed, so I listed twice and merged the rows by id.",
        "metadata": {
            "appId": "expense-log",
            "tool": "app__expense_log__expenses__list",
            "errorCode": "APP_INPUT_INVALID",
            "diagnosticId": "0193c5e2-7a4b-7c3d-9e8f-1a2b3c4d5e6f"
        }
    });
    let first = suggest(&mut client, &world.member, &full).await;
    assert!(is_uuid_v7(&first), "{first}");
    // A browser session and another user may suggest too.
    let second = suggest(
        &mut client,
        &world.session,
        &plain("The week-of action is not listed in the tool descriptions."),
    )
    .await;
    let third = suggest(
        &mut world.client(),
        &world.staff,
        &json!({"kind": "docs", "severity": "high", "detail": null, "metadata": {},
                "summary": "The README does not say that list cursors outlive a restart."}),
    )
    .await;

    // The admin CLI reads them from the database core writes, while it runs.
    let lines = json_lines(&admin_suggestions(state, &[]));
    assert_eq!(lines.len(), 3, "{lines:?}");
    let ids: Vec<&str> = lines
        .iter()
        .map(|line| line["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [third.as_str(), second.as_str(), first.as_str()]);
    let created_at = lines[2]["createdAt"].as_i64().unwrap();
    assert!(created_at > 1_700_000_000, "{created_at}");
    assert_eq!(
        lines[2],
        json!({
            "id": first,
            "createdAt": created_at,
            "userId": world.member.user_id,
            "username": "mia",
            "kind": "feature",
            "severity": "medium",
            "summary": OR_CLAUSES,
            "detail": "I wanted expenses over 100 or tagged travel.\n\
                       Every where clause is ANDed, so I listed twice and merged the rows by id.",
            "metadata": full["metadata"],
        })
    );
    assert_eq!(lines[1]["username"], "mia");
    // No detail and empty metadata are left out.
    let keys: Vec<&str> = lines[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "createdAt",
            "id",
            "kind",
            "severity",
            "summary",
            "userId",
            "username"
        ]
    );
    assert_eq!(lines[0]["username"], "sam");

    let newest = json_lines(&admin_suggestions(state, &["--limit", "1"]));
    assert_eq!(newest, lines[..1]);
    let two = json_lines(&admin_suggestions(state, &["--limit", "2"]));
    assert_eq!(two, lines[..2]);
}

#[tokio::test]
async fn suggestions_shaped_like_secrets_paths_code_or_records_are_refused() {
    let world = World::start().await;
    let mut client = world.client();
    for (field, content, suggestion) in [
        (
            "summary",
            "credential",
            plain("The token sasha_at_Zm9vYmFy stopped working after an hour."),
        ),
        (
            "summary",
            "absolute-path",
            plain("The log at /home/mia/sasha/core.log grows without bound."),
        ),
        (
            "detail",
            "source-code",
            json!({"kind": "bug", "severity": "high", "summary": OR_CLAUSES,
                   "detail": "This fails:\n```js\nrows.map(row => row.id)\n```"}),
        ),
        (
            "detail",
            "records",
            json!({"kind": "bug", "severity": "high", "summary": OR_CLAUSES,
                   "detail": "The rows were:\nid,name,amount\n1,Ann,12\n2,Bob,13"}),
        ),
        (
            "summary",
            "records",
            plain("Ask ann@example.com, she saw the failing export too."),
        ),
    ] {
        let error = refused(&mut client, request(&world.member, &suggestion)).await;
        assert_eq!(error.code, ErrorCode::InputInvalid, "{suggestion}");
        assert!(!error.retryable);
        assert_eq!(
            error.details,
            Some(json!({"field": field, "refused": content})),
            "{suggestion}"
        );
        assert!(
            error.message.starts_with(&format!("{field} contains ")),
            "{}",
            error.message
        );
        assert!(
            error.message.contains("describe the problem in words"),
            "{}",
            error.message
        );
    }

    // Unknown keys are refused by name, at the top and in metadata.
    let mut unknown = plain(OR_CLAUSES);
    unknown["userEmail"] = "x".into();
    let error = refused(&mut client, request(&world.member, &unknown)).await;
    assert_eq!(error.code, ErrorCode::InputInvalid);
    assert_eq!(error.details, Some(json!({"field": "userEmail"})));
    assert!(
        error.message.contains("unknown key \"userEmail\""),
        "{}",
        error.message
    );
    let mut nested = plain(OR_CLAUSES);
    nested["metadata"] = json!({"appId": "expense-log", "rows": 3});
    let error = refused(&mut client, request(&world.member, &nested)).await;
    assert_eq!(error.details, Some(json!({"field": "metadata.rows"})));

    // More than 8 KiB of JSON is a resource limit.
    let oversized = pb::SuggestRequest {
        principal: Some(world.member.clone()),
        suggestion_json: format!("{}{}", plain(OR_CLAUSES), " ".repeat(8 * 1024)),
    };
    let error = refused(&mut client, oversized).await;
    assert_eq!(error.code, ErrorCode::ResourceLimit);
    assert!(!error.retryable);

    assert_eq!(world.rows(), 0, "nothing refused was stored");
}

#[tokio::test]
async fn only_a_user_credential_with_apps_invoke_may_suggest() {
    let world = World::start().await;
    let mut client = world.client();
    let suggestion = plain(OR_CLAUSES);
    // Without apps:invoke, and as an API key even with it. The scope is
    // checked before the content: an oversized suggestion is refused alike.
    for (case, principal) in [("chat only", &world.chat_only), ("api key", &world.api_key)] {
        for suggestion_json in [suggestion.to_string(), "x".repeat(9000)] {
            let error = refused(
                &mut client,
                pb::SuggestRequest {
                    principal: Some(principal.clone()),
                    suggestion_json,
                },
            )
            .await;
            assert_eq!(error.code, ErrorCode::AccessDenied, "{case}");
        }
    }
    // No principal, or one without a user.
    let anonymous = pb::SuggestRequest {
        principal: None,
        ..request(&world.member, &suggestion)
    };
    let nobody = request(
        &pb::Principal {
            user_id: String::new(),
            ..world.member.clone()
        },
        &suggestion,
    );
    for request in [anonymous, nobody] {
        let error = refused(&mut client, request).await;
        assert_eq!(error.code, ErrorCode::Unauthenticated);
    }
    // A principal whose user has since been deleted.
    let gone = request(
        &pb::Principal {
            user_id: "0193c5e2-7a4b-7c3d-9e8f-1a2b3c4d5e6f".into(),
            ..world.member.clone()
        },
        &suggestion,
    );
    let error = refused(&mut client, gone).await;
    assert_eq!(error.code, ErrorCode::Unauthenticated);
    assert_eq!(world.rows(), 0);
}

#[tokio::test]
async fn a_user_records_at_most_fifty_suggestions_a_day() {
    let world = World::start().await;
    let mut client = world.client();
    for n in 0..50 {
        suggest(
            &mut client,
            &world.member,
            &plain(&format!("Suggestion number {n} about the list tool.")),
        )
        .await;
    }
    // The session is the same user: it shares the cap.
    for principal in [&world.member, &world.session] {
        let error = refused(&mut client, request(principal, &plain(OR_CLAUSES))).await;
        assert_eq!(error.code, ErrorCode::ResourceLimit);
        assert!(!error.retryable);
        assert_eq!(
            error.message,
            "too many suggestions: at most 50 per user in any 24 hours"
        );
    }
    // Another user is not affected.
    suggest(&mut client, &world.staff, &plain(OR_CLAUSES)).await;
    assert_eq!(world.rows(), 51);
}

#[test]
fn admin_suggestions_refuses_bad_limits_and_a_missing_database() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("typo");
    let run = admin_suggestions(&missing, &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.starts_with("sasha admin: no core database at"),
        "{run:?}"
    );
    assert!(!missing.exists(), "reading never creates a state folder");

    Store::open(&dir.path().join("core.sqlite")).unwrap();
    for limit in ["0", "10001", "-1", "many"] {
        let run = admin_suggestions(dir.path(), &["--limit", limit]);
        assert_eq!(run.code, 2, "{limit}: {run:?}");
        assert_eq!(run.stdout, "", "{limit}");
    }
    assert_eq!(admin_suggestions(dir.path(), &["--limit", "10000"]).code, 0);

    let help = Command::new(common::sasha_bin())
        .args(["admin", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(help.contains("suggestions"), "{help}");
    let help = Command::new(common::sasha_bin())
        .args(["admin", "suggestions", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for needle in ["--limit", "newest first", "--state-dir"] {
        assert!(help.contains(needle), "{help}");
    }
}
