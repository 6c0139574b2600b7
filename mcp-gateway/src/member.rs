//! The member app tools (`listMyApps`, `readMyApp`, `checkMyApp`,
//! `deployMyApp`, `listMyAppRevisions`, `revertMyApp`, `shareMyApp`,
//! `deleteMyApp`): listed to a connection holding `apps:invoke` +
//! `apps:author`, whatever the role; the three that build or change an app
//! are left out while an admin has turned member apps off. Every call is
//! decided again by studio-core (`CoreService.MemberApps`), which owns the
//! member tier's rules; a deploy, revert, share or delete is sent approved
//! only after the person said yes (`crate::server`'s approval path, as for a
//! draft's publication). Files travel as the caller sent them: a base64
//! file's text goes to studio-core undecoded with its encoding, and core
//! decodes it by the source tools' one rule (base64 only for binary assets).
//!
//! What it must never do: list a catalogue source tool to anyone here (the
//! member tier's tools are separate, and `apps:write` is not needed), send a
//! deploy, share or delete as approved without the person's answer, or
//! decode a file itself (the person approves what core reads).

use std::collections::HashMap;
use std::sync::LazyLock;

use base64::Engine as _;
use rmcp::model::Tool;
use sasha_contract::caller::Scope;
use sasha_contract::tools::{MemberTool, app_id_property};
use sasha_proto::pb::{self, member_apps_reply, member_apps_request};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::platform::{object, tool};

/// Whether the caller authors member apps at all.
pub fn authors(caller: &Caller) -> bool {
    caller.invokes() && caller.holds(Scope::AppsAuthor)
}

/// Whether `caller` sees `member_tool`: the one rule a listing and a call
/// share. An author sees them all, except the tools that build an app while
/// an admin has turned member apps off.
pub fn visible(caller: &Caller, member_tool: MemberTool) -> bool {
    authors(caller) && !(caller.principal.member_apps_off && member_tool.builds())
}

/// The member app tools `caller` may list, in listing order.
pub fn tools_for(caller: &Caller) -> Vec<Tool> {
    MemberTool::ALL
        .iter()
        .filter(|member_tool| visible(caller, **member_tool))
        .map(|member_tool| definition(*member_tool).clone())
        .collect()
}

/// The definition of `member_tool`, built once per process.
pub fn definition(member_tool: MemberTool) -> &'static Tool {
    static DEFINITIONS: LazyLock<HashMap<MemberTool, Tool>> = LazyLock::new(|| {
        MemberTool::ALL
            .iter()
            .map(|member_tool| (*member_tool, build(*member_tool)))
            .collect()
    });
    &DEFINITIONS[&member_tool]
}

fn app_property() -> Value {
    app_id_property(
        "The id of one of your member apps, as listMyApps shows it (the platform names every member app and writes the id into its APP.md).",
    )
}

fn revision_property(what: &str) -> Value {
    json!({"type": "string", "pattern": "^[0-9a-f]{64}$", "description": what})
}

fn files_property() -> Value {
    json!({
        "type": "array",
        "minItems": 1,
        "maxItems": 200,
        "description": "Every file of the package (the whole package each time, changed or not).",
        "items": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "A package-relative path such as APP.md, index.html or migrations/001-initial.sql."},
                "content": {"type": "string", "maxLength": 1_398_104, "description": "The text, or for a binary asset its bytes in base64."},
                "encoding": {"type": "string", "enum": ["base64"], "description": "Only for binary assets (images and fonts); a text file given as base64 is refused: send its text."},
            },
            "required": ["path", "content"],
            "additionalProperties": false,
        },
    })
}

/// The definition of `member_tool` (see [`definition`]).
fn build(member_tool: MemberTool) -> Tool {
    let name = member_tool.name();
    match member_tool {
        MemberTool::ListMyApps => tool(
            name,
            "List your member apps",
            "The member apps you made (you are their author): id, name, current revision, size, who you share each with, and whether a moderator disabled it. Call it first when someone asks to fix or change \"my app\".",
            object(json!({}), &[]),
            true,
            false,
        ),
        MemberTool::ReadMyApp => tool(
            name,
            "Read one of your member apps",
            "Every file of one of your member apps with its current revision; pass that revision as expectedRevision when you deploy a change.",
            object(json!({"app": app_property()}), &["app"]),
            true,
            false,
        ),
        MemberTool::CheckMyApp => tool(
            name,
            "Check a member app package",
            "Validate files as a member app without storing anything (read getDocs section member-apps first): as one of your apps (app), or without app as a new one. Each diagnostic names the file, the line when known, a code and a reason: fix them all, then deploy.",
            object(
                json!({"app": app_property(), "files": files_property()}),
                &["files"],
            ),
            true,
            false,
        ),
        MemberTool::DraftMyApp => tool(
            name,
            "Save a draft of one of your member apps",
            "Save changed files as the draft of one of your member apps, without changing the live app: the person opens it in App Studio (Edit loads the draft), previews it in the sandbox on scratch data, and then you deploy the same files with deployMyApp. The answer says whether the draft validates.",
            object(
                json!({"app": app_property(), "files": files_property()}),
                &["app", "files"],
            ),
            false,
            false,
        ),
        MemberTool::DeployMyApp => tool(
            name,
            "Deploy a member app",
            "Deploy a new member app (omit app and expectedRevision: the platform names it, writes that id into its APP.md and answers it) or a new version of one of yours (app, and expectedRevision: the revision you read). The person is asked to approve it first; it then appears in their Apps list, and the previous version stays in its history.",
            object(
                json!({"app": app_property(), "name": {"type": "string", "minLength": 1, "maxLength": sasha_contract::tools::CREATE_APP_MAX_NAME_CHARS, "description": "The name shown in the Apps list."}, "files": files_property(), "expectedRevision": revision_property("The current revision of the app you change, as readMyApp or listMyApps shows it.")}),
                &["name", "files"],
            ),
            false,
            false,
        ),
        MemberTool::ListMyAppRevisions => tool(
            name,
            "List the history of one of your member apps",
            "Every revision of one of your member apps, newest first.",
            object(json!({"app": app_property()}), &["app"]),
            true,
            false,
        ),
        MemberTool::RevertMyApp => tool(
            name,
            "Revert one of your member apps",
            "Deploy an earlier revision of one of your member apps again (the person approves first). Data is never rewound.",
            object(
                json!({"app": app_property(), "revision": revision_property("The revision to go back to."), "expectedRevision": revision_property("The app's current revision.")}),
                &["app", "revision", "expectedRevision"],
            ),
            false,
            false,
        ),
        MemberTool::ShareMyApp => tool(
            name,
            "Share one of your member apps",
            "Let a person use one of your member apps, by their user name (remove: true stops sharing). The person you act for is asked to approve it first. The answer is the same whether or not someone here uses that name, so say the name back to the person to check it. Each person sees only their own rows.",
            object(
                json!({"app": app_property(), "username": {"type": "string", "minLength": 1, "maxLength": 64}, "remove": {"type": "boolean"}}),
                &["app", "username"],
            ),
            false,
            false,
        ),
        MemberTool::DeleteMyApp => tool(
            name,
            "Delete one of your member apps",
            "Delete one of your member apps and its data, every sharee's rows included (a backup is kept for the operator). The person is asked to approve it first. It leaves everyone's Apps list at once.",
            object(json!({"app": app_property()}), &["app"]),
            false,
            true,
        ),
    }
}

/// The files as sent: a base64 file's text stays base64, named by its
/// encoding, for studio-core to decode (or refuse).
fn files(args: &Value) -> Option<Vec<pb::MemberFile>> {
    args["files"]
        .as_array()?
        .iter()
        .map(|file| {
            Some(pb::MemberFile {
                path: file["path"].as_str()?.to_owned(),
                content: file["content"].as_str()?.as_bytes().to_vec(),
                encoding: file["encoding"].as_str().unwrap_or_default().to_owned(),
            })
        })
        .collect()
}

/// The request of `member_tool`; `None` when an argument is unusable (a
/// file without its path or content).
pub fn request(
    member_tool: MemberTool,
    principal: &pb::Principal,
    args: &Value,
    approved: bool,
) -> Option<pb::MemberAppsRequest> {
    use member_apps_request::Operation;
    let app = || args["app"].as_str().unwrap_or_default().to_owned();
    let approval = if approved {
        pb::DraftApproval::Elicitation
    } else {
        pb::DraftApproval::Unspecified
    } as i32;
    use MemberTool as T;
    let operation = match member_tool {
        T::ListMyApps => Operation::List(pb::MemberListRequest {}),
        T::ReadMyApp => Operation::Read(pb::MemberReadRequest { app_id: app() }),
        T::CheckMyApp => Operation::Check(pb::MemberCheckRequest {
            app_id: app(),
            files: files(args)?,
        }),
        T::DraftMyApp => Operation::Draft(pb::MemberDraftRequest {
            app_id: app(),
            files: files(args)?,
        }),
        T::DeployMyApp => Operation::Deploy(pb::MemberDeployRequest {
            app_id: app(),
            name: args["name"].as_str().unwrap_or_default().to_owned(),
            files: files(args)?,
            expected_revision: args["expectedRevision"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            approval,
            from_revision: String::new(),
        }),
        T::RevertMyApp => Operation::Deploy(pb::MemberDeployRequest {
            app_id: app(),
            name: String::new(),
            files: Vec::new(),
            expected_revision: args["expectedRevision"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            approval,
            from_revision: args["revision"].as_str().unwrap_or_default().to_owned(),
        }),
        T::ListMyAppRevisions => Operation::Revisions(pb::MemberRevisionsRequest { app_id: app() }),
        T::ShareMyApp => Operation::Share(pb::MemberShareRequest {
            app_id: app(),
            username: args["username"].as_str().unwrap_or_default().to_owned(),
            remove: args["remove"].as_bool().unwrap_or(false),
            approval,
        }),
        T::DeleteMyApp => Operation::Delete(pb::MemberDeleteRequest {
            app_id: app(),
            approval,
        }),
    };
    Some(pb::MemberAppsRequest {
        principal: Some(principal.clone()),
        operation: Some(operation),
    })
}

fn app_json(app: &pb::MemberAppInfo) -> Value {
    json!({
        "id": app.id,
        "name": app.name,
        "author": app.author_name,
        "revision": app.revision,
        "size": app.size,
        "createdAt": app.created_at,
        "updatedAt": app.updated_at,
        "status": if app.disabled { "disabled" } else { "active" },
        "shares": app.shares,
        "resourceUri": app.resource_uri,
    })
}

/// A file as text when its bytes are UTF-8 (so writing the text back gives
/// the same bytes), otherwise base64: lossless either way, without a second
/// copy of the package's list of binary extensions.
fn file_json(file: &pb::MemberFile) -> Value {
    match std::str::from_utf8(&file.content) {
        Ok(text) => json!({"path": file.path, "content": text}),
        Err(_) => json!({
            "path": file.path,
            "content": base64::engine::general_purpose::STANDARD.encode(&file.content),
            "encoding": "base64",
        }),
    }
}

/// One line per diagnostic: `file:line CODE reason`.
fn problems(status: &pb::PackageStatus) -> String {
    status
        .diagnostics
        .iter()
        .map(|d| match d.line {
            Some(line) => format!("{}:{line} {} {}", d.file, d.code, d.reason),
            None => format!("{} {} {}", d.file, d.code, d.reason),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn status_json(status: &pb::PackageStatus) -> Value {
    let diagnostics: Vec<Value> = status
        .diagnostics
        .iter()
        .map(|d| json!({"file": d.file, "line": d.line, "code": d.code, "reason": d.reason}))
        .collect();
    json!({"ok": status.ok, "revision": status.revision, "diagnostics": diagnostics})
}

/// The text part and `structuredContent` of a member tool's result.
pub fn result(member_tool: MemberTool, reply: &pb::MemberAppsReply) -> Option<(String, Value)> {
    use member_apps_reply::Result as R;
    Some(match reply.result.as_ref()? {
        R::Apps(list) => {
            let lines: Vec<String> = list
                .apps
                .iter()
                .map(|app| {
                    format!(
                        "{} \"{}\" at {} ({} bytes){}{}",
                        app.id,
                        app.name,
                        app.revision,
                        app.size,
                        if app.shares.is_empty() {
                            String::new()
                        } else {
                            format!(", shared with {}", app.shares.join(", "))
                        },
                        if app.disabled {
                            ", disabled by a moderator"
                        } else {
                            ""
                        }
                    )
                })
                .collect();
            let text = if lines.is_empty() {
                "You have no member apps yet.".to_owned()
            } else {
                lines.join("\n")
            };
            (
                text,
                json!({"enabled": reply.enabled, "apps": list.apps.iter().map(app_json).collect::<Vec<_>>()}),
            )
        }
        R::Source(source) => {
            let app = source.app.as_ref()?;
            let files: Vec<Value> = source.files.iter().map(file_json).collect();
            // The model reads the text part: every file goes in it, each
            // under a `=== path` line (a binary asset as base64).
            let listing: Vec<String> = files
                .iter()
                .map(|file| {
                    let binary = if file.get("encoding").is_some() {
                        " (binary asset, base64)"
                    } else {
                        ""
                    };
                    format!(
                        "=== {}{binary}\n{}",
                        file["path"].as_str().unwrap_or_default(),
                        file["content"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            (
                format!(
                    "{} files of {} at revision {} (pass it as expectedRevision to deploy a change):\n\n{}",
                    files.len(),
                    app.id,
                    app.revision,
                    listing.join("\n")
                ),
                json!({"app": app_json(app), "files": files}),
            )
        }
        R::Status(status) => {
            let text = if status.ok {
                "The package validates as a member app: deploy it with deployMyApp.".to_owned()
            } else {
                format!("The package does not validate:\n{}", problems(status))
            };
            (text, status_json(status))
        }
        R::Drafted(drafted) => {
            let status = drafted.status.clone().unwrap_or_default();
            let text = if status.ok {
                format!(
                    "Saved the draft of {}; it validates. Ask the person to preview it in App Studio \
                     (Edit loads the draft, then Preview); deploy the same files with deployMyApp when \
                     they are happy.",
                    drafted.app_id
                )
            } else {
                format!(
                    "Saved the draft of {}, but it does not validate, so it cannot be previewed yet:\n{}",
                    drafted.app_id,
                    problems(&status)
                )
            };
            let mut value = status_json(&status);
            value["app"] = json!(drafted.app_id);
            value["previewId"] = json!(drafted.preview_id);
            (text, value)
        }
        R::App(app) => {
            let text = match member_tool {
                MemberTool::ShareMyApp if app.shares.is_empty() => {
                    format!("{} is shared with nobody.", app.id)
                }
                MemberTool::ShareMyApp => format!(
                    "{} is shared with {}. Whoever uses one of these names here has it in their \
                     Apps list and sees only their own rows; sharing never says whether someone \
                     uses a name.",
                    app.id,
                    app.shares.join(", ")
                ),
                _ => format!(
                    "Deployed {} (\"{}\") at revision {}: it is in the person's Apps list now.",
                    app.id, app.name, app.revision
                ),
            };
            (text, json!({"app": app_json(app)}))
        }
        R::Deleted(deleted) => (
            format!("Deleted {} and its data.", deleted.app_id),
            json!({"deleted": deleted.app_id}),
        ),
        R::Revisions(revisions) => {
            let history = pb::HistoryReply {
                app: String::new(),
                result: Some(pb::history_reply::Result::Revisions(revisions.clone())),
            };
            let value = sasha_proto::client_json::history(&history)?;
            (
                format!("{} revisions, newest first.", revisions.revisions.len()),
                value,
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use sasha_contract::caller::{PrincipalKind, Role as UserRole};
    use sasha_proto::convert::ToWire;

    use super::*;

    fn caller(role: &str, scopes: &[&str], off: bool) -> Caller {
        Caller::new(pb::Principal {
            user_id: "u".into(),
            role: UserRole::parse(role).unwrap().to_wire(),
            scopes: scopes
                .iter()
                .map(|scope| Scope::parse(scope).unwrap().to_wire())
                .collect(),
            kind: PrincipalKind::Access.to_wire(),
            username: "u".into(),
            member_apps_off: off,
            origin: None,
        })
        .unwrap()
    }

    fn names(caller: &Caller) -> Vec<String> {
        tools_for(caller)
            .iter()
            .map(|tool| tool.name.to_string())
            .collect()
    }

    fn all(filter: impl Fn(MemberTool) -> bool) -> Vec<&'static str> {
        MemberTool::ALL
            .iter()
            .filter(|tool| filter(**tool))
            .map(|tool| tool.name())
            .collect()
    }

    #[test]
    fn every_role_with_apps_author_gets_the_member_tools_and_nothing_more() {
        for role in ["member", "staff", "admin"] {
            let author = caller(role, &["apps:invoke", "apps:author"], false);
            assert_eq!(names(&author), all(|_| true), "{role}");
            // A member's connection never sees the catalogue's source tools.
            let platform: Vec<String> = crate::platform::tools_for(&author)
                .iter()
                .map(|tool| tool.name.to_string())
                .collect();
            assert!(
                sasha_contract::tools::PlatformTool::ALL
                    .iter()
                    .filter(|tool| tool.family() == sasha_contract::tools::PlatformFamily::Source)
                    .all(|tool| !platform.iter().any(|listed| listed == tool.name())),
                "{role}: {platform:?}"
            );
        }
        for scopes in [
            &["apps:author"][..],
            &["apps:invoke"],
            &["apps:invoke", "apps:write"],
        ] {
            assert!(
                names(&caller("member", scopes, false)).is_empty(),
                "{scopes:?}"
            );
        }
    }

    #[test]
    fn turned_off_the_building_tools_go_and_the_rest_stay() {
        let listed = names(&caller("member", &["apps:invoke", "apps:author"], true));
        assert_eq!(listed, all(|tool| !tool.builds()));
        assert!(
            listed
                .iter()
                .any(|tool| tool == MemberTool::DeleteMyApp.name())
        );
    }

    #[test]
    fn every_change_of_an_app_or_its_audience_asks_the_person() {
        assert_eq!(
            all(MemberTool::needs_approval),
            ["deployMyApp", "revertMyApp", "shareMyApp", "deleteMyApp"]
        );
        let principal = caller("member", &[], false).principal;
        for (name, args) in [
            (
                MemberTool::ShareMyApp,
                json!({"app": "habits", "username": "bea"}),
            ),
            (MemberTool::DeleteMyApp, json!({"app": "habits"})),
        ] {
            let approval = |yes| match request(name, &principal, &args, yes)
                .and_then(|request| request.operation)
            {
                Some(member_apps_request::Operation::Share(share)) => share.approval,
                Some(member_apps_request::Operation::Delete(delete)) => delete.approval,
                other => panic!("{name:?}: {other:?}"),
            };
            assert_eq!(approval(false), pb::DraftApproval::Unspecified as i32);
            assert_eq!(approval(true), pb::DraftApproval::Elicitation as i32);
        }
        // A base64 file goes to studio-core as it was sent, for core's one
        // rule to decode or refuse: the gateway decodes nothing.
        let args = json!({"app": "habits", "name": "Habits", "files": [{"path": "app.js", "content": "YWxlcnQoMSk=", "encoding": "base64"}]});
        let Some(pb::MemberAppsRequest {
            operation: Some(member_apps_request::Operation::Deploy(deploy)),
            ..
        }) = request(MemberTool::DeployMyApp, &principal, &args, true)
        else {
            panic!("no deploy");
        };
        assert_eq!(deploy.files[0].content, b"YWxlcnQoMSk=");
        assert_eq!(deploy.files[0].encoding, "base64");
        let args = json!({"app": "habits", "name": "Habits", "files": [{"path": "APP.md", "content": "---"}]});
        let Some(pb::MemberAppsRequest {
            operation: Some(member_apps_request::Operation::Deploy(deploy)),
            ..
        }) = request(MemberTool::DeployMyApp, &principal, &args, false)
        else {
            panic!("no deploy");
        };
        assert_eq!(deploy.approval, pb::DraftApproval::Unspecified as i32);
        assert_eq!(deploy.files[0].content, b"---");
        assert_eq!(deploy.files[0].encoding, "");
    }
}
