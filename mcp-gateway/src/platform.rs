//! The platform's own MCP tools, beside the per-app ones: the six app source
//! tools (`listAppFiles`, `readAppFile`, `writeAppFile`, `editAppFile`,
//! `deleteAppFile`, `checkApp`), `getDocs` and `suggestImprovement`.
//!
//! The source tools exist only for a connection holding both `apps:invoke` and
//! `apps:write` whose user is admin or staff; every call is decided again by
//! studio-core (`CoreService.SourceFiles`: `manage` on the app, read fresh), which
//! owns the package folders. `getDocs` serves the authoring documentation
//! embedded from `mcp-gateway/docs/`; `suggestImprovement` hands a suggestion to
//! studio-core, which checks its shape and stores it for admins.

pub use sasha_contract::tools::{GET_DOCS, SUGGEST};
use sasha_proto::pb::{self, SourceReplyKind};
use serde_json::{Map, Value, json};

use crate::auth::Caller;

/// The six source tools, in listing order.
pub const SOURCE_TOOLS: [&str; 6] = [
    "listAppFiles",
    "readAppFile",
    "writeAppFile",
    "editAppFile",
    "deleteAppFile",
    "checkApp",
];

/// The documentation sections `getDocs` serves: `(name, Markdown)`. The first is
/// the table of contents.
pub const DOCS: [(&str, &str); 9] = [
    ("contents", include_str!("../docs/README.md")),
    ("apps-authoring", include_str!("../docs/apps-authoring.md")),
    ("manifest", include_str!("../docs/manifest.md")),
    ("data", include_str!("../docs/data.md")),
    ("actions", include_str!("../docs/actions.md")),
    ("themes", include_str!("../docs/themes.md")),
    ("facade", include_str!("../docs/facade.md")),
    ("permissions", include_str!("../docs/permissions.md")),
    ("improvements", include_str!("../docs/improvements.md")),
];

/// Whether `name` is one of the platform tools (listed or not for this caller).
pub fn is_platform_tool(name: &str) -> bool {
    SOURCE_TOOLS.contains(&name) || name == GET_DOCS || name == SUGGEST
}

/// Whether the caller may edit app source at all (the per-app `manage` check
/// is core's, on every call).
pub fn writes_source(caller: &Caller) -> bool {
    caller.invokes()
        && caller.principal.scopes.iter().any(|s| s == "apps:write")
        && matches!(caller.principal.role.as_str(), "admin" | "staff")
}

fn app_property() -> Value {
    json!({"type": "string", "pattern": "^[a-z][a-z0-9]*(-[a-z0-9]+)*$", "maxLength": 60, "description": "The app id (lowercase kebab-case), as shown by open_app__<id> (with _ for -) or listAppFiles."})
}

fn path_property() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 1024, "description": "A package-relative POSIX path such as app.js or actions/log-hours.action.yaml."})
}

fn version_property(what: &str) -> Value {
    json!({"type": "string", "pattern": "^[0-9a-f]{64}$", "description": format!("The version {what} returned by listAppFiles or readAppFile; a mismatch means the file changed: read it again.")})
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

fn tool(
    name: &str,
    title: &str,
    description: &str,
    input: Value,
    read_only: bool,
    destructive: bool,
) -> Value {
    json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": input,
        "annotations": {"readOnlyHint": read_only, "destructiveHint": destructive, "openWorldHint": false},
        "_meta": {"ui": {"visibility": ["model"]}},
    })
}

/// The platform tools `caller` may list.
pub fn tools_for(caller: &Caller) -> Vec<Value> {
    let mut tools = Vec::new();
    if writes_source(caller) {
        tools.push(tool(
            "listAppFiles",
            "List the source files of a Sasha App you manage",
            "List every source file in the app package with its byte size and version, plus the package status. When status.ok is false the app is NOT usable until the listed diagnostics are fixed; each names the package file, the line when known, the error code and a reason. Call it before you change an app.",
            object(json!({"app": app_property()}), &["app"]),
            true,
            false,
        ));
        tools.push(tool(
            "readAppFile",
            "Read one source file of a Sasha App you manage",
            "Read one text file of the app package with its version; pass that version as expectedVersion when you change the file.",
            object(json!({"app": app_property(), "path": path_property()}), &["app", "path"]),
            true,
            false,
        ));
        tools.push(tool(
            "writeAppFile",
            "Create or replace one source file of a Sasha App you manage",
            "Write a whole text file (at most 1 MiB). expectedVersion is required when the file exists. The change is live at once and is never refused for breaking validation: the result's status says whether the app validates, with diagnostics to fix.",
            object(json!({"app": app_property(), "path": path_property(), "content": {"type": "string", "maxLength": 1048576}, "expectedVersion": version_property("of the file you replace")}), &["app", "path", "content"]),
            false,
            true,
        ));
        tools.push(tool(
            "editAppFile",
            "Replace one exact piece of text in a source file of a Sasha App you manage",
            "Replace oldString with newString in one file; oldString must occur exactly once. The result's status says whether the app validates.",
            object(json!({"app": app_property(), "path": path_property(), "oldString": {"type": "string", "minLength": 1, "maxLength": 1048576}, "newString": {"type": "string", "maxLength": 1048576}, "expectedVersion": version_property("of the file")}), &["app", "path", "oldString", "newString", "expectedVersion"]),
            false,
            true,
        ));
        tools.push(tool(
            "deleteAppFile",
            "Delete one source file of a Sasha App you manage",
            "Delete one file of the package (APP.md cannot be deleted). The result's status says whether the app still validates.",
            object(json!({"app": app_property(), "path": path_property(), "expectedVersion": version_property("of the file")}), &["app", "path", "expectedVersion"]),
            false,
            true,
        ));
        tools.push(tool(
            "checkApp",
            "Validate a Sasha App you manage",
            "Validate the package again, including its migrations against the live database, and return its status.",
            object(json!({"app": app_property()}), &["app"]),
            true,
            false,
        ));
    }
    let sections: Vec<&str> = DOCS.iter().map(|(name, _)| *name).collect();
    tools.push(tool(
        GET_DOCS,
        "Read the Sasha Apps documentation",
        "Documentation for building and repairing Sasha Apps: call it without a section for the contents, then read apps-authoring before you write an app.",
        object(json!({"section": {"type": "string", "enum": sections}}), &[]),
        true,
        false,
    ));
    if caller.invokes() {
        tools.push(tool(
            SUGGEST,
            "Suggest an improvement to the Sasha platform",
            "File one short, safe suggestion when the platform gets in the way (a missing feature, unclear docs, friction). Describe the problem in words: never include records, source code, credentials or absolute paths. It never blocks your work: file it, then continue.",
            object(
                json!({
                    "kind": {"type": "string", "enum": ["bug", "docs", "feature", "friction"]},
                    "summary": {"type": "string", "minLength": 10, "maxLength": 300},
                    "detail": {"type": "string", "maxLength": 2048},
                    "severity": {"type": "string", "enum": ["low", "medium", "high"]},
                    "metadata": {
                        "type": "object",
                        "properties": {
                            "appId": {"type": "string", "maxLength": 60},
                            "tool": {"type": "string", "maxLength": 128},
                            "errorCode": {"type": "string", "maxLength": 44},
                            "diagnosticId": {"type": "string", "maxLength": 36},
                        },
                        "additionalProperties": false,
                    },
                }),
                &["kind", "summary", "severity"],
            ),
            false,
            false,
        ));
    }
    tools
}

/// The `getDocs` answer for `section` (the contents without one).
pub fn docs(section: Option<&str>) -> Option<Value> {
    let name = section.unwrap_or("contents");
    DOCS.iter()
        .find(|(candidate, _)| *candidate == name)
        .map(|(name, text)| json!({"section": name, "markdown": text}))
}

/// The `structuredContent` of a source tool's result: the JSON studio-core's
/// source tools have always answered, rebuilt from the typed reply.
/// `None` for a reply that names no kind (a peer's bug).
pub fn source_json(reply: &pb::SourceFilesReply) -> Option<Value> {
    let status = status_json(&reply.status.clone().unwrap_or_default());
    let mut out = Map::new();
    match reply.kind() {
        SourceReplyKind::List => {
            let files: Vec<Value> = reply
                .files
                .iter()
                .map(|file| {
                    json!({
                        "path": file.path,
                        "bytes": file.bytes,
                        "version": file.version,
                        "editable": file.editable,
                    })
                })
                .collect();
            out.insert("app".into(), json!(reply.app));
            out.insert("files".into(), Value::Array(files));
            out.insert("status".into(), status);
        }
        SourceReplyKind::Read => {
            out.insert("path".into(), json!(reply.path));
            out.insert(
                "content".into(),
                json!(reply.content.as_deref().unwrap_or_default()),
            );
            out.insert("bytes".into(), json!(reply.bytes));
            out.insert(
                "version".into(),
                json!(reply.version.as_deref().unwrap_or_default()),
            );
            out.insert("app".into(), json!(reply.app));
        }
        SourceReplyKind::Check => {
            out.insert("app".into(), json!(reply.app));
            out.insert("status".into(), status);
        }
        SourceReplyKind::Change => {
            out.insert("app".into(), json!(reply.app));
            out.insert("path".into(), json!(reply.path));
            out.insert("version".into(), json!(reply.version));
            out.insert("previousVersion".into(), json!(reply.previous_version));
            out.insert("status".into(), status);
        }
        SourceReplyKind::Unspecified => return None,
    }
    Some(Value::Object(out))
}

/// `{ok, revision, diagnostics: [{file, line?, code, reason}]}`; a
/// diagnostic without a line has no `line`.
fn status_json(status: &pb::PackageStatus) -> Value {
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

/// The text part of a source tool's result: files one per line (or what
/// changed), ending with a sentence on whether the app validates.
pub fn source_text(operation: &str, reply: &pb::SourceFilesReply) -> String {
    let mut lines = Vec::new();
    let version = reply.version.as_deref().unwrap_or("");
    match operation {
        "listAppFiles" => {
            for file in &reply.files {
                lines.push(format!(
                    "{} ({} bytes, version {}{})",
                    file.path,
                    file.bytes,
                    file.version.as_deref().unwrap_or("none"),
                    if file.editable { "" } else { ", not editable" }
                ));
            }
        }
        "readAppFile" => {
            return format!(
                "{} ({} bytes, version {version})\n\n{}",
                reply.path,
                reply.bytes,
                reply.content.as_deref().unwrap_or("")
            );
        }
        "writeAppFile" | "editAppFile" => {
            lines.push(format!("Wrote {}: version {version}.", reply.path));
        }
        "deleteAppFile" => lines.push(format!("Deleted {}.", reply.path)),
        _ => {}
    }
    let status = reply.status.clone().unwrap_or_default();
    if status.ok {
        lines.push(format!(
            "The app validates; its live revision is {}.",
            status.revision.as_deref().unwrap_or("")
        ));
    } else {
        for diagnostic in &status.diagnostics {
            let at = match diagnostic.line {
                Some(line) => format!("{}:{line}", diagnostic.file),
                None => diagnostic.file.clone(),
            };
            lines.push(format!("- {at} {}: {}", diagnostic.code, diagnostic.reason));
        }
        let count = status.diagnostics.len();
        lines.push(format!(
            "The app does not validate ({count} problem{}): it is not usable until you fix them and call checkApp.",
            if count == 1 { "" } else { "s" }
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sasha_proto::pb;

    fn caller(role: &str, scopes: &[&str]) -> Caller {
        Caller {
            principal: pb::Principal {
                user_id: "u".into(),
                role: role.into(),
                scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
                kind: "access".into(),
                username: "u".into(),
            },
            bound_app: None,
        }
    }

    fn names(caller: &Caller) -> Vec<String> {
        tools_for(caller)
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn source_tools_need_both_scopes_and_a_privileged_role() {
        let writer = names(&caller("staff", &["apps:invoke", "apps:write"]));
        for name in SOURCE_TOOLS {
            assert!(writer.contains(&name.to_owned()), "{name}");
        }
        for (role, scopes) in [
            ("staff", &["apps:invoke"][..]),
            ("staff", &["apps:write"][..]),
            ("member", &["apps:invoke", "apps:write"][..]),
        ] {
            let listed = names(&caller(role, scopes));
            assert!(
                !listed
                    .iter()
                    .any(|name| SOURCE_TOOLS.contains(&name.as_str())),
                "{role} {scopes:?}"
            );
            assert!(listed.contains(&GET_DOCS.to_owned()));
        }
        assert!(!names(&caller("staff", &["chat:use"])).contains(&SUGGEST.to_owned()));
    }

    #[test]
    fn every_docs_section_is_served_and_the_contents_name_them() {
        let contents = docs(None).unwrap();
        for (name, text) in DOCS {
            assert!(text.starts_with("# "), "{name} starts with a title");
            assert_eq!(docs(Some(name)).unwrap()["markdown"], text);
            if name != "contents" {
                assert!(
                    contents["markdown"].as_str().unwrap().contains(name),
                    "the contents list {name}"
                );
            }
        }
        assert!(docs(Some("secrets")).is_none());
    }

    fn file(path: &str, bytes: u64, version: Option<&str>, editable: bool) -> pb::SourceFileEntry {
        pb::SourceFileEntry {
            path: path.into(),
            bytes,
            version: version.map(str::to_owned),
            editable,
        }
    }

    fn diagnostic(file: &str, line: Option<u32>, code: &str, reason: &str) -> pb::Diagnostic {
        pb::Diagnostic {
            file: file.into(),
            line,
            code: code.into(),
            reason: reason.into(),
        }
    }

    fn valid(revision: &str) -> pb::PackageStatus {
        pb::PackageStatus {
            ok: true,
            revision: Some(revision.into()),
            diagnostics: Vec::new(),
        }
    }

    fn broken() -> pb::PackageStatus {
        pb::PackageStatus {
            ok: false,
            revision: None,
            diagnostics: vec![diagnostic(
                "app.js",
                Some(3),
                "JS_SYNTAX",
                "unexpected token",
            )],
        }
    }

    #[test]
    fn the_text_part_ends_with_whether_the_app_validates() {
        let ok = pb::SourceFilesReply {
            app: "notes".into(),
            status: Some(valid("r1")),
            files: vec![file("APP.md", 10, Some("ab"), true)],
            kind: SourceReplyKind::List as i32,
            ..Default::default()
        };
        let text = source_text("listAppFiles", &ok);
        assert!(text.starts_with("APP.md (10 bytes, version ab)"), "{text}");
        assert!(
            text.ends_with("The app validates; its live revision is r1."),
            "{text}"
        );
        let broken = pb::SourceFilesReply {
            app: "notes".into(),
            status: Some(broken()),
            kind: SourceReplyKind::Check as i32,
            ..Default::default()
        };
        let text = source_text("checkApp", &broken);
        assert!(
            text.contains("- app.js:3 JS_SYNTAX: unexpected token"),
            "{text}"
        );
        assert!(text.ends_with("call checkApp."), "{text}");
    }

    #[test]
    fn the_structured_content_is_the_json_core_always_sent() {
        let list = pb::SourceFilesReply {
            app: "notes".into(),
            status: Some(valid("r1")),
            files: vec![
                file("APP.md", 10, Some("ab"), true),
                file("logo.png", 2_000_000, None, false),
            ],
            kind: SourceReplyKind::List as i32,
            ..Default::default()
        };
        assert_eq!(
            source_json(&list).unwrap().to_string(),
            json!({
                "app": "notes",
                "files": [
                    {"path": "APP.md", "bytes": 10, "version": "ab", "editable": true},
                    {"path": "logo.png", "bytes": 2_000_000, "version": null, "editable": false}
                ],
                "status": {"ok": true, "revision": "r1", "diagnostics": []}
            })
            .to_string()
        );
        let read = pb::SourceFilesReply {
            app: "notes".into(),
            path: "app.js".into(),
            content: Some("let x;".into()),
            bytes: 6,
            version: Some("cd".into()),
            kind: SourceReplyKind::Read as i32,
            ..Default::default()
        };
        assert_eq!(
            source_json(&read).unwrap().to_string(),
            json!({"app": "notes", "path": "app.js", "content": "let x;", "bytes": 6, "version": "cd"})
                .to_string()
        );
        let mut status = broken();
        status.diagnostics.push(diagnostic(
            "migrations/001-a.sql",
            None,
            "APP_MIGRATION_DRIFT",
            "restore it",
        ));
        let check = pb::SourceFilesReply {
            app: "notes".into(),
            status: Some(status.clone()),
            kind: SourceReplyKind::Check as i32,
            ..Default::default()
        };
        assert_eq!(
            source_json(&check).unwrap().to_string(),
            json!({"app": "notes", "status": {"ok": false, "revision": null, "diagnostics": [
                {"file": "app.js", "line": 3, "code": "JS_SYNTAX", "reason": "unexpected token"},
                {"file": "migrations/001-a.sql", "code": "APP_MIGRATION_DRIFT", "reason": "restore it"}
            ]}})
            .to_string()
        );
        let created = pb::SourceFilesReply {
            app: "notes".into(),
            status: Some(valid("r2")),
            path: "app.js".into(),
            version: Some("ef".into()),
            kind: SourceReplyKind::Change as i32,
            ..Default::default()
        };
        assert_eq!(
            source_json(&created).unwrap().to_string(),
            json!({"app": "notes", "path": "app.js", "version": "ef", "previousVersion": null, "status": {"ok": true, "revision": "r2", "diagnostics": []}})
                .to_string()
        );
        let deleted = pb::SourceFilesReply {
            version: None,
            previous_version: Some("ef".into()),
            ..created
        };
        assert_eq!(
            source_json(&deleted).unwrap().to_string(),
            json!({"app": "notes", "path": "app.js", "version": null, "previousVersion": "ef", "status": {"ok": true, "revision": "r2", "diagnostics": []}})
                .to_string()
        );
        assert_eq!(
            source_text("deleteAppFile", &deleted).lines().next(),
            Some("Deleted app.js.")
        );
        assert!(source_json(&pb::SourceFilesReply::default()).is_none());
    }
}
