//! What a confirmation card shows of the change it asks about, made from
//! read-only calls of the same user's tools: a file write's unified diff
//! against the file as it is now (in the draft when the call names it), a
//! row's values before and after, what publishing a draft changes.
//! Anything else shows its arguments.
//!
//! What it must never do: call a tool that changes anything. It only reads
//! (`readAppFile`, a table's `get`, `checkApp`), through [`SelfMcp::call`],
//! which declines any confirmation.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::mcp_client::SelfMcp;

/// Lines of context around each change of a file's diff.
const DIFF_CONTEXT: usize = 3;
/// Most characters of a diff the card shows.
const MAX_DIFF_CHARS: usize = 12_000;

/// The app a call is about: its `app` argument, or the app of an app tool
/// (`app__<app>__…`, `_` read back as `-`).
pub(crate) fn app_of(tool: &str, arguments: &Map<String, Value>) -> Option<String> {
    if let Some(app) = arguments.get("app").and_then(Value::as_str) {
        return Some(app.to_owned());
    }
    sasha_contract::tools::app_of_tool(tool).map(sasha_contract::AppId::into_string)
}

fn structured(result: &Value) -> Option<&Value> {
    (result["isError"] != true)
        .then(|| result.get("structuredContent"))
        .flatten()
        .filter(|value| !value.is_null())
}

fn unified(path: &str, before: &str, after: &str) -> String {
    let diff = similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(DIFF_CONTEXT)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    if diff.chars().count() > MAX_DIFF_CHARS {
        let cut: String = diff.chars().take(MAX_DIFF_CHARS).collect();
        format!("{cut}\n… (cut)")
    } else {
        diff
    }
}

/// The card's summary of calling `tool` with `arguments`.
pub(crate) async fn of(client: &SelfMcp, tool: &str, arguments: &Map<String, Value>) -> Value {
    let text = |name: &str| {
        arguments
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let draft = arguments.get("draft") == Some(&Value::Bool(true));
    match tool {
        "writeAppFile" | "editAppFile" | "deleteAppFile" => {
            let path = text("path");
            let mut read = Map::new();
            read.insert("app".into(), json!(text("app")));
            read.insert("path".into(), json!(path));
            if draft {
                read.insert("draft".into(), json!(true));
            }
            let text_of = |result: Result<Value, _>| {
                result
                    .ok()
                    .as_ref()
                    .and_then(structured)
                    .filter(|file| file.get("encoding").is_none())
                    .and_then(|file| file["content"].as_str().map(str::to_owned))
            };
            let mut current = text_of(client.call("readAppFile", read.clone()).await);
            // The first draft write starts the draft from the live app: it
            // changes the live file's content.
            if current.is_none() && draft {
                read.remove("draft");
                current = text_of(client.call("readAppFile", read).await);
            }
            let (before, after) = match tool {
                "writeAppFile" => (current.clone().unwrap_or_default(), Some(text("content"))),
                "editAppFile" => {
                    let before = current.clone().unwrap_or_default();
                    let after = before.replacen(&text("oldString"), &text("newString"), 1);
                    (before, Some(after))
                }
                _ => (current.clone().unwrap_or_default(), None),
            };
            let binary = arguments.get("encoding").is_some();
            json!({
                "kind": "file",
                "path": path,
                "draft": draft,
                "change": match (&current, &after) {
                    (_, None) => "delete",
                    (None, Some(_)) => "create",
                    (Some(_), Some(_)) => "change",
                },
                "diff": (!binary).then(|| unified(&path, &before, after.as_deref().unwrap_or(""))),
            })
        }
        "publishAppDraft" => {
            let mut check = Map::new();
            check.insert("app".into(), json!(text("app")));
            check.insert("draft".into(), json!(true));
            let draft = client
                .call("checkApp", check)
                .await
                .ok()
                .as_ref()
                .and_then(structured)
                .map(|answer| answer["draft"].clone())
                .unwrap_or(Value::Null);
            json!({
                "kind": "publish",
                "changes": draft["changes"].as_array().map(|changes| changes.iter().map(|c| json!({"path": c["path"], "change": c["change"], "unified": c["unified"]})).collect::<Vec<_>>()),
                "migrations": draft["review"]["migrations"],
                "tables": draft["review"]["tables"],
                "readWidened": draft["review"]["readWidened"],
                // The exact draft this card shows: the approved call
                // publishes this one or nothing (see [`bind`]).
                "contentHash": draft["contentHash"],
            })
        }
        sasha_contract::tools::DEPLOY_MY_APP => deploy_summary(client, arguments, false).await,
        sasha_contract::tools::DRAFT_MY_APP => deploy_summary(client, arguments, true).await,
        table
            if table.starts_with("app__")
                && (table.ends_with("__update") || table.ends_with("__delete")) =>
        {
            let get = format!(
                "{}__get",
                &table[..table.rfind("__").unwrap_or(table.len())]
            );
            let mut read = Map::new();
            if let Some(id) = arguments.get("id") {
                read.insert("id".into(), id.clone());
            }
            let before = client
                .call(&get, read)
                .await
                .ok()
                .as_ref()
                .and_then(structured)
                .cloned();
            json!({
                "kind": "row",
                "change": if table.ends_with("__delete") { "delete" } else { "update" },
                "before": before,
                "after": arguments.get("changes"),
            })
        }
        table if table.starts_with("app__") && table.ends_with("__create") => json!({
            "kind": "row",
            "change": "create",
            "before": Value::Null,
            "after": arguments.get("values"),
        }),
        _ => json!({"kind": "arguments", "arguments": arguments}),
    }
}

/// The arguments an approved call runs with: the model's, except what the
/// card itself reviewed. A publication carries the content hash of the draft
/// the card showed, whatever hash the model sent, so a draft changed after
/// the card was drawn (or one the model never showed) is refused by
/// studio-core instead of published unseen; a card that could not read the
/// draft carries none, and the call is refused.
pub(crate) fn bind(
    tool: &str,
    mut arguments: Map<String, Value>,
    summary: &Value,
) -> Map<String, Value> {
    if tool == sasha_contract::tools::PUBLISH_APP_DRAFT {
        match summary["contentHash"].as_str() {
            Some(hash) => arguments.insert("contentHash".into(), json!(hash)),
            None => arguments.remove("contentHash"),
        };
    }
    arguments
}

/// A package file's text as it would be stored, for the card: its content,
/// or a base64 content decoded, so an encoding never hides code from the
/// person (studio-core refuses a text file sent as base64 anyway, and the
/// card shows that refusal with it); `None` for a binary asset.
fn stored_text(path: &str, file: &Value) -> Option<String> {
    let content = file["content"].as_str().unwrap_or_default();
    if file.get("encoding").is_none_or(Value::is_null) {
        return Some(content.to_owned());
    }
    if sasha_package::source::is_binary_path(path) {
        return None;
    }
    Some(match sasha_package::source::base64_bytes(content) {
        Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        None => content.to_owned(),
    })
}

/// What a member app deploy (or, with `draft`, a saved draft) changes: each
/// file against the app's current files (`readMyApp`; every file is new for
/// a new app), shown as the text that would be stored, and whether the
/// package validates (`checkMyApp`, whose refusal is shown as a problem), so
/// the person sees the code they approve.
async fn deploy_summary(client: &SelfMcp, arguments: &Map<String, Value>, draft: bool) -> Value {
    let app = arguments.get("app").cloned().unwrap_or(Value::Null);
    let mut read = Map::new();
    read.insert("app".into(), app.clone());
    let existing = draft || arguments.contains_key("expectedRevision");
    let by_path = |files: Vec<Value>| -> Vec<(String, Value)> {
        files
            .into_iter()
            .filter_map(|file| Some((file["path"].as_str()?.to_owned(), file)))
            .collect()
    };
    let current: BTreeMap<String, Value> = match existing {
        true => by_path(
            client
                .call(sasha_contract::tools::READ_MY_APP, read)
                .await
                .ok()
                .as_ref()
                .and_then(structured)
                .and_then(|answer| answer["files"].as_array().cloned())
                .unwrap_or_default(),
        )
        .into_iter()
        .collect(),
        false => BTreeMap::new(),
    };
    let given = by_path(
        arguments
            .get("files")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    );
    let same =
        |a: &Value, b: &Value| a["content"] == b["content"] && a["encoding"] == b["encoding"];
    let mut files: Vec<Value> = given
        .iter()
        .filter(|(path, file)| !current.get(path).is_some_and(|now| same(now, file)))
        .map(|(path, file)| {
            let before = current
                .get(path)
                .and_then(|now| stored_text(path, now))
                .unwrap_or_default();
            json!({
                "path": path,
                "change": if current.contains_key(path) { "change" } else { "create" },
                "diff": stored_text(path, file).map(|after| unified(path, &before, &after)),
            })
        })
        .collect();
    files.extend(
        current
            .keys()
            .filter(|path| !given.iter().any(|(given, _)| given == *path))
            .map(|path| json!({"path": path, "change": "delete"})),
    );
    let mut check = Map::new();
    // A new member app has no id yet (the platform names it when it lands).
    if !app.is_null() {
        check.insert("app".into(), app.clone());
    }
    check.insert(
        "files".into(),
        arguments.get("files").cloned().unwrap_or(Value::Null),
    );
    let checked = client
        .call(sasha_contract::tools::CHECK_MY_APP, check)
        .await
        .ok();
    let status = match &checked {
        Some(result) if result["isError"] == true => {
            let error = &result["structuredContent"]["error"];
            json!({"ok": false, "diagnostics": [{"file": error["details"]["path"], "reason": error["message"]}]})
        }
        Some(result) => structured(result).cloned().unwrap_or(Value::Null),
        None => Value::Null,
    };
    json!({
        "kind": "deploy",
        "app": app,
        "name": arguments.get("name"),
        "change": if draft { "draft" } else if existing { "update" } else { "create" },
        "files": files,
        "ok": status["ok"],
        "diagnostics": status["diagnostics"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_names_its_app() {
        let args = |value: Value| value.as_object().cloned().unwrap();
        assert_eq!(
            app_of("writeAppFile", &args(json!({"app": "notes"}))).as_deref(),
            Some("notes")
        );
        assert_eq!(
            app_of("app__time_sheet_entry__entries__create", &args(json!({}))).as_deref(),
            Some("time-sheet-entry")
        );
        assert_eq!(app_of("getDocs", &args(json!({}))), None);
        let diff = unified("a.txt", "one\ntwo\n", "one\nthree\n");
        assert!(diff.contains("-two") && diff.contains("+three"), "{diff}");
    }

    #[test]
    fn a_card_shows_a_text_file_as_text_whatever_its_encoding() {
        // `fetch("/steal")` in base64: the card shows the script, not the code.
        let hidden = json!({"content": "ZmV0Y2goIi9zdGVhbCIp", "encoding": "base64"});
        assert_eq!(
            stored_text("app.js", &hidden).as_deref(),
            Some("fetch(\"/steal\")")
        );
        let plain = json!({"content": "x = 1;\n"});
        assert_eq!(stored_text("app.js", &plain).as_deref(), Some("x = 1;\n"));
        // A binary asset has no text to show.
        assert_eq!(stored_text("logo.png", &hidden), None);
    }
}
