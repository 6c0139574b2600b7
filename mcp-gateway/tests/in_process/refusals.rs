//! The refusal matrix: every tool family × every kind of caller, each cell
//! the outcome the rules give (a transport refusal, a tool the caller does
//! not have, a refusal with its code, or a run), and every listing held to
//! the calls: a tool is listed exactly when calling it finds it.

use std::fmt;

use serde_json::{Value, json};
use studio_store::{AppAccess, Scope, TokenKind, UserRole};

use crate::mcp::{Exchange, Mcp, SESSIONLESS, STUDIO_ORIGIN, tool_names};
use crate::world::{PASSWORD, World, summariser};

/// What a call came to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Refused before rmcp, with this status and envelope code.
    Http(u16, &'static str),
    /// JSON-RPC `-32602`: no such tool for this caller.
    Unknown,
    /// `APP_ACTION_UNAVAILABLE`, naming the tool in its details.
    Unavailable,
    /// A tool error with this code.
    Refused(&'static str),
    /// A result.
    Ran,
}

use Outcome::{Http, Ran, Refused, Unavailable, Unknown};

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

fn outcome_of(exchange: &Exchange) -> Result<Outcome, String> {
    if exchange.status != 200 {
        let code = exchange.body["code"].as_str().unwrap_or_default();
        for key in ["code", "message", "retryable", "diagnosticId"] {
            if exchange.body.get(key).is_none() {
                return Err(format!("no envelope {key}: {}", exchange.body));
            }
        }
        return Ok(Http(
            exchange.status,
            match code {
                "APP_UNAUTHENTICATED" => "APP_UNAUTHENTICATED",
                "APP_ACCESS_DENIED" => "APP_ACCESS_DENIED",
                "APP_INPUT_INVALID" => "APP_INPUT_INVALID",
                other => return Err(format!("{} {other}", exchange.status)),
            },
        ));
    }
    if let Some(error) = exchange.body.get("error") {
        return if error["code"] == -32602 {
            Ok(Unknown)
        } else {
            Err(format!("JSON-RPC error {error}"))
        };
    }
    let result = &exchange.body["result"];
    if result["isError"] != true {
        return Ok(Ran);
    }
    let envelope = &result["structuredContent"]["error"];
    let code = envelope["code"].as_str().unwrap_or_default();
    Ok(match code {
        "APP_ACTION_UNAVAILABLE" => {
            if envelope["details"]["tool"].as_str().is_none() {
                return Err(format!("no details.tool: {envelope}"));
            }
            Unavailable
        }
        "APP_CONFIRMATION_REQUIRED" => Refused("APP_CONFIRMATION_REQUIRED"),
        "APP_ACCESS_DENIED" => Refused("APP_ACCESS_DENIED"),
        "APP_INPUT_INVALID" => Refused("APP_INPUT_INVALID"),
        "APP_CHAT_UNAVAILABLE" => Refused("APP_CHAT_UNAVAILABLE"),
        other => return Err(format!("tool error {other}: {envelope}")),
    })
}

/// The tool families, one representative call each, in this order.
const FAMILIES: [&str; 13] = [
    "open_app",
    "table read",
    "table write",
    "model action",
    "app-only action",
    "source",
    "history",
    "lifecycle",
    "member",
    "app chat",
    "app upload",
    "getDocs",
    "suggest",
];

fn call_of(family: &str, row: usize) -> (&'static str, Value) {
    match family {
        "open_app" => ("open_app__expense_log", json!({})),
        "table read" => ("app__expense_log__categories__list", json!({})),
        "table write" => (
            "app__expense_log__categories__create",
            json!({"values": {"name": format!("Row {row}")}, "idempotencyKey": format!("matrix-{row}")}),
        ),
        "model action" => (
            "app__expense_log__week_totals",
            json!({"weekStart": "2026-09-07"}),
        ),
        "app-only action" => (
            "app__expense_log__add_expense",
            json!({"spent_on": "2026-09-08", "amount": 1, "category_id": 1}),
        ),
        "source" => ("listAppFiles", json!({"app": "expense-log"})),
        "history" => ("listAppRevisions", json!({"app": "expense-log"})),
        "lifecycle" => ("restoreApp", json!({"app": "hello"})),
        "member" => ("listMyApps", json!({})),
        "app chat" => ("sasha__chat_execute", json!({"prompt": "hello"})),
        "app upload" => (
            "sasha__files_upload",
            json!({"files": [{"name": "a.txt", "dataBase64": "!!"}]}),
        ),
        "getDocs" => ("getDocs", json!({})),
        "suggest" => (
            "suggestImprovement",
            json!({"kind": "docs", "summary": "a summary of the problem", "severity": "low"}),
        ),
        other => panic!("no family {other}"),
    }
}

/// A caller: its name and the headers every request of it carries.
struct Caller {
    name: &'static str,
    headers: Vec<(String, String)>,
    /// The outcome per family, in [`FAMILIES`] order.
    expected: [Outcome; 13],
}

fn bearer(token: &str) -> Vec<(String, String)> {
    vec![("authorization".to_owned(), format!("Bearer {token}"))]
}

fn cookie(session: &str, origin: Option<&str>, app: Option<&str>) -> Vec<(String, String)> {
    let mut headers = vec![("cookie".to_owned(), format!("sasha_session={session}"))];
    if let Some(origin) = origin {
        headers.push(("origin".to_owned(), origin.to_owned()));
    }
    if let Some(app) = app {
        headers.push(("sasha-app".to_owned(), app.to_owned()));
    }
    headers
}

#[tokio::test]
async fn every_tool_family_for_every_kind_of_caller() {
    let world = World::with_packages(&[&summariser()]).await;
    let sam = &world.staff;
    let (ada, mia) = (&world.admin, &world.member);
    // A member holding `use` on expense-log, and one holding nothing.
    let max = world
        .store
        .create_user("max", UserRole::Member, PASSWORD)
        .unwrap();
    world
        .store
        .grant("expense-log", &mia.id, AppAccess::Use, Some(&sam.id))
        .unwrap();
    let staff_session = world.session(sam);
    let invoke = [Scope::ChatUse, Scope::AppsInvoke];
    let writer = [Scope::AppsInvoke, Scope::AppsWrite];

    // Families: open_app, table read, table write, model action, app-only
    // action, source, history, lifecycle, member, app chat, app upload,
    // getDocs, suggest.
    let callers = vec![
        Caller {
            name: "anonymous",
            headers: Vec::new(),
            expected: std::array::from_fn(|_| Http(401, "APP_UNAUTHENTICATED")),
        },
        Caller {
            name: "a token nobody minted",
            headers: bearer("sasha_at_forged"),
            expected: std::array::from_fn(|_| Http(401, "APP_UNAUTHENTICATED")),
        },
        Caller {
            name: "a session cookie without Origin",
            headers: cookie(&staff_session, None, Some("expense-log")),
            expected: std::array::from_fn(|_| Http(403, "APP_ACCESS_DENIED")),
        },
        Caller {
            name: "a session cookie from another origin",
            headers: cookie(&staff_session, Some("https://evil.example"), None),
            expected: std::array::from_fn(|_| Http(403, "APP_ACCESS_DENIED")),
        },
        Caller {
            name: "a token naming an open app",
            headers: {
                let mut headers = bearer(&world.token(sam, &invoke));
                headers.push(("sasha-app".to_owned(), "expense-log".to_owned()));
                headers
            },
            expected: std::array::from_fn(|_| Http(400, "APP_INPUT_INVALID")),
        },
        Caller {
            name: "staff's Studio page with expense-log open",
            headers: cookie(&staff_session, Some(STUDIO_ORIGIN), Some("expense-log")),
            expected: [
                Ran,
                Ran,
                // The app's own UI writes without asking.
                Ran,
                Ran,
                Ran,
                Ran,
                Ran,
                Refused("APP_ACCESS_DENIED"),
                Ran,
                Unknown,
                Unknown,
                Ran,
                Ran,
            ],
        },
        Caller {
            name: "staff's Studio page with the summariser open",
            headers: cookie(
                &staff_session,
                Some(STUDIO_ORIGIN),
                Some("document-summariser"),
            ),
            expected: [
                Ran,
                Ran,
                // Another app's page is no UI of expense-log: it is asked,
                // and cannot be.
                Refused("APP_CONFIRMATION_REQUIRED"),
                Ran,
                Unavailable,
                Ran,
                Ran,
                Refused("APP_ACCESS_DENIED"),
                Ran,
                // No chat provider is configured; the upload's file is no
                // base64: each reached its tool.
                Refused("APP_CHAT_UNAVAILABLE"),
                Refused("APP_INPUT_INVALID"),
                Ran,
                Ran,
            ],
        },
        Caller {
            name: "staff's chat:use token",
            headers: bearer(&world.token(sam, &[Scope::ChatUse])),
            expected: [
                Unknown,
                Unknown,
                Unknown,
                Unavailable,
                Unavailable,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Ran,
                Unknown,
            ],
        },
        Caller {
            name: "staff's apps:invoke token",
            headers: bearer(&world.token(sam, &invoke)),
            expected: [
                Ran,
                Ran,
                Refused("APP_CONFIRMATION_REQUIRED"),
                Ran,
                Unavailable,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Ran,
                Ran,
            ],
        },
        Caller {
            name: "staff's apps:invoke apps:write token",
            headers: bearer(&world.token(sam, &writer)),
            expected: [
                Ran,
                Ran,
                Refused("APP_CONFIRMATION_REQUIRED"),
                Ran,
                Unavailable,
                Ran,
                Ran,
                // Listed to the source tools' callers; an admin's only.
                Refused("APP_ACCESS_DENIED"),
                Unknown,
                Unknown,
                Unknown,
                Ran,
                Ran,
            ],
        },
        Caller {
            name: "the admin's apps:invoke apps:write token",
            headers: bearer(&world.token(ada, &writer)),
            expected: [
                Ran,
                Ran,
                Refused("APP_CONFIRMATION_REQUIRED"),
                Ran,
                Unavailable,
                Ran,
                Ran,
                Ran,
                Unknown,
                Unknown,
                Unknown,
                Ran,
                Ran,
            ],
        },
        Caller {
            name: "a member's apps:invoke apps:author token, without a grant",
            headers: bearer(&world.token(&max, &[Scope::AppsInvoke, Scope::AppsAuthor])),
            expected: [
                Unknown,
                Unknown,
                Unknown,
                Unavailable,
                Unavailable,
                Unknown,
                Unknown,
                Unknown,
                Ran,
                Unknown,
                Unknown,
                Ran,
                Ran,
            ],
        },
        Caller {
            name: "a member's apps:invoke token, with use",
            headers: bearer(&world.token(mia, &invoke)),
            expected: [
                Ran,
                Ran,
                Refused("APP_CONFIRMATION_REQUIRED"),
                Ran,
                Unavailable,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Ran,
                Ran,
            ],
        },
        Caller {
            name: "staff's API key with apps:invoke",
            headers: bearer(&world.token_of(sam, TokenKind::ApiKey, &invoke)),
            // API keys never invoke apps.
            expected: [
                Unknown,
                Unknown,
                Unknown,
                Unavailable,
                Unavailable,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Ran,
                Unknown,
            ],
        },
        Caller {
            name: "staff's chat-session token",
            headers: bearer(&world.token_of(sam, TokenKind::ChatSession, &invoke)),
            expected: [
                Ran,
                Ran,
                Refused("APP_CONFIRMATION_REQUIRED"),
                Ran,
                Unavailable,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Unknown,
                Ran,
                Ran,
            ],
        },
    ];

    let mut wrong = Vec::new();
    for (row, caller) in callers.iter().enumerate() {
        let mut client = Mcp::new(world.router(), caller.headers.clone(), SESSIONLESS);
        let listing = client.request("tools/list", json!({})).await;
        let listed = (listing.status == 200).then(|| tool_names(&listing));
        for (family, expected) in FAMILIES.iter().zip(&caller.expected) {
            let (tool, arguments) = call_of(family, row);
            let exchange = client.call(tool, arguments).await;
            match outcome_of(&exchange) {
                Ok(outcome) if outcome == *expected => {}
                Ok(outcome) => wrong.push(format!(
                    "{} × {family}: {outcome}, expected {expected}",
                    caller.name
                )),
                Err(unexpected) => wrong.push(format!(
                    "{} × {family}: {unexpected}, expected {expected}",
                    caller.name
                )),
            }
            // Listed exactly when a call finds the tool.
            if let Some(listed) = &listed {
                let found = !matches!(expected, Unknown | Unavailable);
                if listed.iter().any(|name| name == tool) != found {
                    wrong.push(format!(
                        "{} × {family}: listed {}, found {found}",
                        caller.name, !found
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}
