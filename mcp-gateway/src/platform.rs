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

use serde_json::{Value, json};

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
pub const GET_DOCS: &str = "getDocs";
pub const SUGGEST: &str = "suggestImprovement";

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

/// The text part of a source tool's result: files one per line (or what
/// changed), ending with a sentence on whether the app validates.
pub fn source_text(operation: &str, result: &Value) -> String {
    let mut lines = Vec::new();
    match operation {
        "listAppFiles" => {
            for file in result["files"].as_array().into_iter().flatten() {
                let version = file["version"].as_str().unwrap_or("none");
                lines.push(format!(
                    "{} ({} bytes, version {}{})",
                    file["path"].as_str().unwrap_or(""),
                    file["bytes"],
                    version,
                    if file["editable"] == false {
                        ", not editable"
                    } else {
                        ""
                    }
                ));
            }
        }
        "readAppFile" => {
            return format!(
                "{} ({} bytes, version {})\n\n{}",
                result["path"].as_str().unwrap_or(""),
                result["bytes"],
                result["version"].as_str().unwrap_or(""),
                result["content"].as_str().unwrap_or("")
            );
        }
        "writeAppFile" | "editAppFile" => lines.push(format!(
            "Wrote {}: version {}.",
            result["path"].as_str().unwrap_or(""),
            result["version"].as_str().unwrap_or("")
        )),
        "deleteAppFile" => lines.push(format!(
            "Deleted {}.",
            result["path"].as_str().unwrap_or("")
        )),
        _ => {}
    }
    let status = &result["status"];
    if status["ok"] == true {
        lines.push(format!(
            "The app validates; its live revision is {}.",
            status["revision"].as_str().unwrap_or("")
        ));
    } else {
        let diagnostics = status["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for diagnostic in &diagnostics {
            let at = match diagnostic["line"].as_u64() {
                Some(line) => format!("{}:{line}", diagnostic["file"].as_str().unwrap_or("")),
                None => diagnostic["file"].as_str().unwrap_or("").to_owned(),
            };
            lines.push(format!(
                "- {at} {}: {}",
                diagnostic["code"].as_str().unwrap_or(""),
                diagnostic["reason"].as_str().unwrap_or("")
            ));
        }
        lines.push(format!(
            "The app does not validate ({} problem{}): it is not usable until you fix them and call checkApp.",
            diagnostics.len(),
            if diagnostics.len() == 1 { "" } else { "s" }
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

    #[test]
    fn the_text_part_ends_with_whether_the_app_validates() {
        let ok = json!({"files": [{"path": "APP.md", "bytes": 10, "version": "ab", "editable": true}], "status": {"ok": true, "revision": "r1", "diagnostics": []}});
        let text = source_text("listAppFiles", &ok);
        assert!(text.starts_with("APP.md (10 bytes, version ab)"), "{text}");
        assert!(
            text.ends_with("The app validates; its live revision is r1."),
            "{text}"
        );
        let broken = json!({"files": [], "status": {"ok": false, "revision": null, "diagnostics": [{"file": "app.js", "line": 3, "code": "JS_SYNTAX", "reason": "unexpected token"}]}});
        let text = source_text("checkApp", &broken);
        assert!(
            text.contains("- app.js:3 JS_SYNTAX: unexpected token"),
            "{text}"
        );
        assert!(text.ends_with("call checkApp."), "{text}");
    }
}
