//! The JSON clients see of typed replies that two surfaces serve: the MCP
//! tools' `structuredContent` (mcp-gateway) and Studio's `/api` (studio-core)
//! answer the same shapes from the same messages, so the shape is written
//! once, here.
//!
//! This module must never decide anything: it renders fields.

use serde_json::{Map, Value, json};

use crate::pb;

/// A package's status `{ok, revision, diagnostics}`: `revision` is `null`
/// when it does not validate, a diagnostic's `line` is left out when absent.
pub fn status(status: &pb::PackageStatus) -> Value {
    let diagnostics: Vec<Value> = status
        .diagnostics
        .iter()
        .map(|diagnostic| {
            let mut out = Map::new();
            out.insert("file".into(), json!(diagnostic.file));
            if let Some(line) = diagnostic.line {
                out.insert("line".into(), json!(line));
            }
            out.insert("code".into(), json!(diagnostic.code));
            out.insert("reason".into(), json!(diagnostic.reason));
            Value::Object(out)
        })
        .collect();
    json!({
        "ok": status.ok,
        "revision": status.revision,
        "diagnostics": diagnostics,
    })
}

/// A history reply (`listAppRevisions`, `readAppRevisionFile`,
/// `diffAppRevisions`, `revertApp`); `None` for a reply without a result.
pub fn history(reply: &pb::HistoryReply) -> Option<Value> {
    use pb::history_reply::Result as R;
    Some(match reply.result.as_ref()? {
        R::Revisions(list) => {
            let revisions: Vec<Value> = list
                .revisions
                .iter()
                .map(|r| {
                    json!({
                        "revision": r.revision,
                        "uri": r.uri,
                        "recordedAt": r.recorded_at,
                        "user": r.username.as_ref().or(r.user_id.as_ref()),
                        "surface": r.surface,
                        "summary": r.summary,
                        "files": r.files,
                        "bytes": r.bytes,
                        "current": r.current,
                    })
                })
                .collect();
            json!({"app": reply.app, "revisions": revisions})
        }
        R::File(file) => {
            let mut out = Map::new();
            out.insert("app".into(), json!(reply.app));
            out.insert("revision".into(), json!(file.revision));
            out.insert("path".into(), json!(file.path));
            out.insert("content".into(), json!(file.content));
            out.insert("bytes".into(), json!(file.bytes));
            out.insert("version".into(), json!(file.version));
            if let Some(encoding) = &file.encoding {
                out.insert("encoding".into(), json!(encoding));
            }
            Value::Object(out)
        }
        R::Diff(diff) => {
            let files: Vec<Value> = diff
                .files
                .iter()
                .map(|f| {
                    let mut out = Map::new();
                    out.insert("path".into(), json!(f.path));
                    out.insert("change".into(), json!(f.change));
                    out.insert("fromVersion".into(), json!(f.from_version));
                    out.insert("toVersion".into(), json!(f.to_version));
                    if let Some(unified) = &f.unified {
                        out.insert("diff".into(), json!(unified));
                    }
                    if f.binary {
                        out.insert("binary".into(), json!(true));
                    }
                    if f.truncated {
                        out.insert("truncated".into(), json!(true));
                    }
                    Value::Object(out)
                })
                .collect();
            json!({"app": reply.app, "from": diff.from, "to": diff.to, "files": files, "truncated": diff.truncated})
        }
        R::Reverted(reverted) => json!({
            "app": reply.app,
            "revision": reverted.revision,
            "previousRevision": reverted.previous_revision,
            "status": status(&reverted.status.clone().unwrap_or_default()),
        }),
    })
}

/// A diagnostic list as [`status`] renders it.
fn diagnostics(list: &[pb::Diagnostic]) -> Value {
    status(&pb::PackageStatus {
        ok: false,
        revision: None,
        diagnostics: list.to_vec(),
    })["diagnostics"]
        .take()
}

/// One app's draft: where it began, whether it validates, which files differ
/// from the live app (with unified diffs when asked for), what publishing
/// would change besides files, and the content hash that names this exact
/// state (publishing carries it back).
pub fn draft(info: &pb::DraftInfo) -> Value {
    let changes: Vec<Value> = info
        .changes
        .iter()
        .map(|f| {
            let mut out = Map::new();
            out.insert("path".into(), json!(f.path));
            out.insert("change".into(), json!(f.change));
            out.insert("fromVersion".into(), json!(f.from_version));
            out.insert("toVersion".into(), json!(f.to_version));
            if let Some(unified) = &f.unified {
                out.insert("unified".into(), json!(unified));
            }
            out.insert("binary".into(), json!(f.binary));
            out.insert("truncated".into(), json!(f.truncated));
            Value::Object(out)
        })
        .collect();
    let review = info.review.as_ref().map(|review| {
        let tables: Vec<Value> = review
            .tables
            .iter()
            .map(|table| {
                let columns: Vec<Value> = table
                    .columns
                    .iter()
                    .map(|c| json!({"column": c.column, "change": c.change, "before": c.before, "after": c.after}))
                    .collect();
                json!({"table": table.table, "change": table.change, "columns": columns, "declaration": table.declaration})
            })
            .collect();
        json!({
            "migrations": review.migrations.iter().map(|m| json!({"file": m.file, "sql": m.sql})).collect::<Vec<_>>(),
            "drift": diagnostics(&review.drift),
            "tables": tables,
            "readWidened": review.read_widened,
            "needsAdmin": review.needs_admin,
        })
    });
    json!({
        "previewId": info.preview_id,
        "baseRevision": info.base_revision,
        "liveRevision": info.live_revision,
        "contentHash": info.content_hash,
        "stale": info.base_revision != info.live_revision,
        "status": status(&info.status.clone().unwrap_or_default()),
        "createdBy": info.created_by,
        "createdAt": info.created_at,
        "updatedAt": info.updated_at,
        "changes": changes,
        "review": review,
    })
}

/// A draft reply (`checkApp` with draft, `publishAppDraft`,
/// `discardAppDraft`); `None` for a reply without a result.
pub fn draft_reply(reply: &pb::DraftReply) -> Option<Value> {
    use pb::draft_reply::Result as R;
    Some(match reply.result.as_ref()? {
        R::Draft(info) => json!({"app": reply.app, "draft": draft(info)}),
        R::Published(published) => json!({
            "app": reply.app,
            "published": {
                "revision": published.revision,
                "previousRevision": published.previous_revision,
                "migrationsApplied": published.migrations_applied,
                "status": status(&published.status.clone().unwrap_or_default()),
            },
        }),
        R::Discarded(discarded) => json!({"app": reply.app, "discarded": discarded.discarded}),
    })
}

/// A lifecycle reply (`withdrawApp`, `restoreApp`, `deleteApp`): where the
/// app stands after the call, and whether the call changed it.
pub fn lifecycle(reply: &pb::AppLifecycleReply) -> Value {
    let mut out = Map::new();
    out.insert("app".into(), json!(reply.app));
    out.insert("changed".into(), json!(reply.changed));
    out.insert("withdrawn".into(), json!(reply.withdrawn));
    out.insert("packageDeleted".into(), json!(reply.package_deleted));
    out.insert("dataDeleted".into(), json!(reply.data_deleted));
    if let Some(backup) = &reply.data_backup {
        out.insert("dataBackup".into(), json!(backup));
    }
    Value::Object(out)
}
