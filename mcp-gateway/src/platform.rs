//! The platform's own MCP tools, beside the per-app ones: the six app source
//! tools (`listAppFiles`, `readAppFile`, `writeAppFile`, `editAppFile`,
//! `deleteAppFile`, `checkApp`), `createApp`, the four history tools
//! (`listAppRevisions`, `readAppRevisionFile`, `diffAppRevisions`,
//! `revertApp`; `CoreService.History`), the three lifecycle tools
//! (`withdrawApp`, `restoreApp`, `deleteApp`; `CoreService.AppLifecycle`,
//! admins only), the three undo tools (`listAppActivity`, `previewAppUndo`,
//! `undoAppChanges`; the app's data-worker, like a table tool), `getDocs` and
//! `suggestImprovement`.
//!
//! The source tools exist only for a connection holding both `apps:invoke` and
//! `apps:write` whose user is admin or staff; every call is decided again by
//! studio-core (`CoreService.SourceFiles`: `manage` on the app, read fresh), which
//! owns the package folders. `getDocs` serves the authoring documentation
//! embedded from `mcp-gateway/docs/`; `suggestImprovement` hands a suggestion to
//! studio-core, which checks its shape and stores it for admins.

use std::collections::HashMap;
use std::sync::LazyLock;

use rmcp::model::{Tool, ToolAnnotations};
use sasha_contract::caller::Scope;
use sasha_contract::tools::{
    CREATE_APP_MAX_DESCRIPTION_CHARS, CREATE_APP_MAX_NAME_CHARS, DELETE_APP, PlatformFamily,
    PlatformTool, RESTORE_APP, WITHDRAW_APP, app_id_property, opener_name,
};
use sasha_proto::pb::{self, SourceReplyKind};
use serde_json::{Map, Value, json};

use crate::auth::Caller;
use crate::tools::{json_object, meta};

/// The documentation sections `getDocs` serves: `(name, Markdown)`. The first is
/// the table of contents.
pub const DOCS: [(&str, &str); 10] = [
    ("contents", include_str!("../docs/README.md")),
    ("apps-authoring", include_str!("../docs/apps-authoring.md")),
    ("manifest", include_str!("../docs/manifest.md")),
    ("data", include_str!("../docs/data.md")),
    ("actions", include_str!("../docs/actions.md")),
    ("themes", include_str!("../docs/themes.md")),
    ("facade", include_str!("../docs/facade.md")),
    ("permissions", include_str!("../docs/permissions.md")),
    ("improvements", include_str!("../docs/improvements.md")),
    ("member-apps", sasha_contract::tools::MEMBER_APPS_GUIDE),
];

/// Whether the caller may edit app source at all (the per-app `manage` check
/// is core's, on every call).
pub fn writes_source(caller: &Caller) -> bool {
    caller.invokes() && caller.holds(Scope::AppsWrite) && caller.role.is_privileged()
}

/// Whether `caller` sees `tool`: the one rule a listing and a call share.
/// The source, creation, draft, history and lifecycle tools go to the
/// callers who write source; `getDocs` to everyone; `suggestImprovement` and
/// the undo tools to callers with `apps:invoke`.
pub fn visible(caller: &Caller, tool: PlatformTool) -> bool {
    match tool.family() {
        PlatformFamily::Source
        | PlatformFamily::Create
        | PlatformFamily::Draft
        | PlatformFamily::History
        | PlatformFamily::Lifecycle => writes_source(caller),
        PlatformFamily::Docs => true,
        PlatformFamily::Suggest | PlatformFamily::Undo => caller.invokes(),
    }
}

/// The platform tools `tools/list` shows `caller`: [`tools_for`], without
/// the undo tools unless the caller manages an app (they would refuse every
/// call); a call is decided by [`visible`] and the app's grant.
pub fn listed_for(caller: &Caller, manages_an_app: bool) -> Vec<Tool> {
    tools_for(caller)
        .into_iter()
        .filter(|tool| {
            manages_an_app
                || PlatformTool::from_name(&tool.name)
                    .is_none_or(|tool| tool.family() != PlatformFamily::Undo)
        })
        .collect()
}

/// The platform tools `caller` may call, in listing order.
pub fn tools_for(caller: &Caller) -> Vec<Tool> {
    PlatformTool::ALL
        .iter()
        .filter(|tool| visible(caller, **tool))
        .map(|tool| definition(*tool).clone())
        .collect()
}

/// The definition of `tool`, built once per process (they are the same for
/// every caller).
pub fn definition(tool: PlatformTool) -> &'static Tool {
    static DEFINITIONS: LazyLock<HashMap<PlatformTool, Tool>> = LazyLock::new(|| {
        PlatformTool::ALL
            .iter()
            .map(|tool| (*tool, build(*tool)))
            .collect()
    });
    &DEFINITIONS[&tool]
}

fn app_property() -> Value {
    app_id_property(
        "The app id (lowercase kebab-case), as shown by open_app__<id> (with _ for -) or listAppFiles.",
    )
}

fn draft_property() -> Value {
    json!({"type": "boolean", "description": "true: work on your draft of this app instead of the live app. A draft is not live: the person previews it in Studio, and publishAppDraft makes it live. Omit it to work on the live app."})
}

fn path_property() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 1024, "description": "A package-relative POSIX path such as app.js or actions/log-hours.action.yaml."})
}

fn version_property(what: &str) -> Value {
    json!({"type": "string", "pattern": "^[0-9a-f]{64}$", "description": format!("The version {what} returned by listAppFiles or readAppFile; a mismatch means the file changed: read it again.")})
}

fn revision_property(what: &str) -> Value {
    json!({"type": "string", "pattern": "^[0-9a-f]{64}$", "description": format!("{what}: a revision (64 hex digits) as listAppRevisions shows it.")})
}

/// The undo tools' selection of changes, with paging for the listing ones.
fn selection_properties(paged: bool) -> Value {
    use sasha_contract::caller::{Initiator, MAX_INITIATOR_ID};
    use sasha_contract::grammar::{MAX_ACTIVITY, MAX_UNDO_ENTRIES};
    let time = |what: &str| json!({"type": "string", "maxLength": 64, "description": format!("{what} (an RFC 3339 time such as 2026-12-07T09:30:00Z).")});
    let mut properties = json!({
        "app": app_property(),
        "table": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Only this declared table's changes."},
        "since": time("Changes at or after this instant"),
        "until": time("Changes at or before this instant"),
        "asOf": time("A restore to this instant: every change after it, by anyone, is undone, so the rows are as they were then; no since, until, initiator, actor or entries with it"),
        "initiator": {"type": "string", "enum": Initiator::ALL.iter().map(|i| i.as_str()).collect::<Vec<_>>(), "description": "Only changes started through this."},
        "initiatorId": {"type": "string", "minLength": 1, "maxLength": MAX_INITIATOR_ID, "description": "With initiator: the conversation, oauth:<client>, token:<number>, import key, undo id or migration file."},
        "actor": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Only changes made as this user id."},
        "entries": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1, "maxItems": MAX_UNDO_ENTRIES, "description": "Only these entry numbers (from listAppActivity)."},
    });
    if paged {
        properties["limit"] = json!({"type": "integer", "minimum": 1, "maximum": MAX_ACTIVITY});
        properties["cursor"] = json!({"type": "string", "maxLength": 32, "description": "nextCursor of the previous page."});
    }
    properties
}

/// The selection of a preview or an undo: the activity's, plus where a
/// restore reads the rows as they were.
fn restore_properties(paged: bool) -> Value {
    let mut properties = selection_properties(paged);
    properties["from"] = json!({"type": "string", "enum": ["ledger", "replica"], "description": "With asOf: read the rows as they were from the ledger (the default: every change after asOf undone) or from the copy of the app's data in object storage as it was at asOf, compared row by row with the rows now (it also holds what the ledger never saw: rows written behind the platform's back, rows older than the ledger; needs replication)."});
    properties
}

fn undo_properties() -> Value {
    use sasha_contract::grammar::{MAX_IDEMPOTENCY_KEY_CHARS, MAX_UNDO_ROWS};
    let mut properties = restore_properties(false);
    properties["planHash"] = json!({"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "planHash of the preview the person saw."});
    properties["overwrite"] = json!({"type": "array", "maxItems": MAX_UNDO_ROWS, "items": {"type": "object", "properties": {"table": {"type": "string"}, "id": {"type": ["integer", "string"]}}, "required": ["table", "id"], "additionalProperties": false}, "description": "Conflicting rows to put back anyway."});
    properties["idempotencyKey"] =
        json!({"type": "string", "minLength": 1, "maxLength": MAX_IDEMPOTENCY_KEY_CHARS});
    properties
}

/// Longest `content` of writeAppFile: 1 MiB of text, or the base64 of a 1 MiB
/// binary asset (core refuses a file over 1 MiB either way).
const MAX_CONTENT_CHARS: u64 = 1024 * 1024 / 3 * 4 + 4;

pub(crate) fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// A model-only tool of the platform or the member tier.
pub(crate) fn tool(
    name: &'static str,
    title: &str,
    description: &'static str,
    input: Value,
    read_only: bool,
    destructive: bool,
) -> Tool {
    Tool::new(name, description, json_object(input))
        .with_title(title)
        .with_annotations(
            ToolAnnotations::new()
                .read_only(read_only)
                .destructive(destructive)
                .open_world(false),
        )
        .with_meta(meta(json!({"ui": {"visibility": ["model"]}})))
}

/// The definition of `platform_tool` (see [`definition`]).
fn build(platform_tool: PlatformTool) -> Tool {
    use PlatformTool as T;
    let name = platform_tool.name();
    match platform_tool {
        T::ListAppFiles => tool(
            name,
            "List the source files of a Sasha App you manage",
            "List every source file in the app package with its byte size and version, plus the package status. When status.ok is false the app is NOT usable until the listed diagnostics are fixed; each names the package file, the line when known, the error code and a reason. Call it before you change an app.",
            object(
                json!({"app": app_property(), "draft": draft_property()}),
                &["app"],
            ),
            true,
            false,
        ),
        T::ReadAppFile => tool(
            name,
            "Read one source file of a Sasha App you manage",
            "Read one file of the app package with its version; pass that version as expectedVersion when you change the file. A text file comes as it is; a binary asset (.png .jpg .jpeg .webp .gif .woff2) comes as base64 with encoding: \"base64\".",
            object(
                json!({"app": app_property(), "path": path_property(), "draft": draft_property()}),
                &["app", "path"],
            ),
            true,
            false,
        ),
        T::WriteAppFile => tool(
            name,
            "Create or replace one source file of a Sasha App you manage",
            "Write a whole file (at most 1 MiB). Send a text file as it is; send a binary asset (.png .jpg .jpeg .webp .gif .woff2) as base64 with encoding: \"base64\": it is refused unless it decodes as an asset of its extension. expectedVersion is required when the file exists. The change is live at once and is never refused for breaking validation: the result's status says whether the app validates, with diagnostics to fix.",
            object(
                json!({"app": app_property(), "path": path_property(), "content": {"type": "string", "maxLength": MAX_CONTENT_CHARS, "description": "The whole text, or for a binary asset its bytes in base64 (at most 1 MiB either way)."}, "expectedVersion": version_property("of the file you replace"), "encoding": {"type": "string", "enum": ["base64"], "description": "Only for binary assets: content is their bytes in standard base64. Omit it for text."}, "draft": draft_property()}),
                &["app", "path", "content"],
            ),
            false,
            true,
        ),
        T::EditAppFile => tool(
            name,
            "Replace one exact piece of text in a source file of a Sasha App you manage",
            "Replace oldString with newString in one file; oldString must occur exactly once. The result's status says whether the app validates.",
            object(
                json!({"app": app_property(), "path": path_property(), "oldString": {"type": "string", "minLength": 1, "maxLength": 1048576}, "newString": {"type": "string", "maxLength": 1048576}, "expectedVersion": version_property("of the file"), "draft": draft_property()}),
                &["app", "path", "oldString", "newString", "expectedVersion"],
            ),
            false,
            true,
        ),
        T::DeleteAppFile => tool(
            name,
            "Delete one source file of a Sasha App you manage",
            "Delete one file of the package (APP.md cannot be deleted). The result's status says whether the app still validates.",
            object(
                json!({"app": app_property(), "path": path_property(), "expectedVersion": version_property("of the file"), "draft": draft_property()}),
                &["app", "path", "expectedVersion"],
            ),
            false,
            true,
        ),
        T::CheckApp => tool(
            name,
            "Validate a Sasha App you manage",
            "Validate the package again, including its migrations against the live database, and return its status. With draft: true, validate your draft and review what publishing it would do: the files that differ from the live app, the migrations it would apply, table and column changes, and anything that blocks publishing.",
            object(
                json!({"app": app_property(), "draft": draft_property()}),
                &["app"],
            ),
            true,
            false,
        ),
        // The id carries no pattern here, so studio-core's refusal, which
        // names the rule, is what a caller reads; the bounds are the
        // contract's.
        T::CreateApp => tool(
            name,
            "Create a new Sasha App",
            "Create a new app from an id, a name and a short description: the platform writes a minimal valid package (with withTable, one owner-scoped table items and a page that lists and adds rows) and registers it, so every admin and staff user gets manage on it. Then change it with the source tools. The result's status says whether it validates. An id that exists, or was ever used, is refused with APP_CONFLICT: choose another.",
            object(
                json!({
                    "app": {"type": "string", "minLength": 1, "maxLength": 60, "description": "The new app's id: lowercase kebab-case (a-z and digits in words joined by single hyphens, starting with a letter), at most 60 characters, for example expense-claims. Its opener will be open_app__<id> with _ for -."},
                    "name": {"type": "string", "minLength": 1, "maxLength": CREATE_APP_MAX_NAME_CHARS, "description": "The app's name as people see it, one line."},
                    "description": {"type": "string", "minLength": 1, "maxLength": CREATE_APP_MAX_DESCRIPTION_CHARS, "description": "One line saying what the app is for."},
                    "withTable": {"type": "boolean", "default": false, "description": "true for a data app with one owner-scoped table items (each user sees only their own rows)."},
                }),
                &["app", "name", "description"],
            ),
            false,
            false,
        ),
        T::PublishAppDraft => tool(
            name,
            "Publish your draft of a Sasha App",
            "Make your draft of the app its live revision for every user: the draft's new migrations are applied to the live data in one transaction, then its files replace the live ones. The person is asked to approve first, shown the schema changes; without their approval nothing is published. expectedRevision is the draft's baseRevision and contentHash its contentHash, both as checkApp with draft: true shows them; publishing is refused when the live app changed since the draft began, when the draft changed since that check (check it again, and show the person what changed), when the draft does not validate, or when it would drop or edit an applied migration.",
            object(
                json!({"app": app_property(), "expectedRevision": {"type": "string", "pattern": "^([0-9a-f]{64})?$", "description": "The draft's baseRevision: the live revision it began from."}, "contentHash": {"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "The draft's contentHash from the review you and the person looked at: only that exact draft is published."}}),
                &["app", "expectedRevision", "contentHash"],
            ),
            false,
            true,
        ),
        T::DiscardAppDraft => tool(
            name,
            "Discard your draft of a Sasha App",
            "Throw your draft of the app away, with its preview data; the live app is not changed.",
            object(json!({"app": app_property()}), &["app"]),
            false,
            true,
        ),
        // Each history call goes to `CoreService.History`, which decides
        // again.
        T::ListAppRevisions => tool(
            name,
            "List the revisions of a Sasha App you manage",
            "List the app's recorded revisions, newest first: revision, its ui:// resource URI, when it was recorded (unix seconds), who made it, through which surface (mcp, studio, filesystem, seed), a one-line summary, file count and bytes, and which one is current. Old revisions beyond the retention policy are removed.",
            object(json!({"app": app_property()}), &["app"]),
            true,
            false,
        ),
        T::ReadAppRevisionFile => tool(
            name,
            "Read one source file of a Sasha App at a revision",
            "Read one file as it was at a revision, with its version (sha256). A text file comes as it is; a binary asset comes as base64 with encoding: \"base64\". Same path rules as readAppFile.",
            object(
                json!({"app": app_property(), "revision": revision_property("The revision"), "path": path_property()}),
                &["app", "revision", "path"],
            ),
            true,
            false,
        ),
        T::DiffAppRevisions => tool(
            name,
            "Compare two revisions of a Sasha App",
            "List the files added, removed or changed from one revision to another, with a unified diff for each changed text file. The answer is bounded: when diffs were left out, truncated is true and those files say so; read them with readAppRevisionFile.",
            object(
                json!({"app": app_property(), "from": revision_property("The older revision"), "to": revision_property("The newer revision")}),
                &["app", "from", "to"],
            ),
            true,
            false,
        ),
        T::RevertApp => tool(
            name,
            "Revert a Sasha App's files to an old revision",
            "Make the app's files exactly those of an old revision; the change is live at once. Data and the audit log are never rewound. expectedRevision must be the current revision (from listAppRevisions): otherwise APP_CONFLICT, list again. Refused with APP_SCHEMA_INCOMPATIBLE naming the migration when the old revision lacks (or differs in) a migration the live database has applied.",
            object(
                json!({"app": app_property(), "revision": revision_property("The revision to go back to"), "expectedRevision": revision_property("The app's current revision")}),
                &["app", "revision", "expectedRevision"],
            ),
            false,
            true,
        ),
        // The undo tools go to the app's data-worker, which decides again.
        T::ListAppActivity => tool(
            name,
            "List the changes made to a Sasha App's data",
            "List the app's recorded data changes, newest first: entry number, table, row, create/update/delete (or migrate: a publication's migration that changed the columns of a table holding rows, shown as the table's columns and row count before and after), who made it (actor), through what (initiator: app-view, recovery-view, assistant with its conversation id, mcp-client with its OAuth client or token, automation, import with its key, undo with its undo id, migration with its file), when, and the row before and after. Filter by table, since/until, initiator (and initiatorId) or actor; page with cursor. Only the app's managers; in an owner-scoped table only the caller's own rows, unless the table lets managers read every row.",
            object(selection_properties(true), &["app"]),
            true,
            false,
        ),
        T::PreviewAppUndo => tool(
            name,
            "Preview undoing changes to a Sasha App's data",
            "Say what undoing a selection of the app's changes would do, without changing anything: the selection is changes since an instant (since, optionally until), optionally of one table, one initiator (with initiatorId, e.g. one assistant conversation) or one actor, or listed entries; or, with asOf, every change after that instant (a restore: the rows as they were then). Each row shows its current and its earlier state and the action (recreate, update, delete). A row changed since by anything outside the selection, or behind the platform's back, is a conflict and is left alone unless named in undoAppChanges' overwrite. A migration is never undone here (revert the app instead). For a restore, from: replica reads the app's data as object storage held it at asOf instead of the ledger (answered as from; ledgerStarts says when the ledger's first entry was written: before it, only the replica knows the rows). Pass planHash to undoAppChanges. Pages with cursor.",
            object(restore_properties(true), &["app"]),
            true,
            false,
        ),
        T::UndoAppChanges => tool(
            name,
            "Undo changes to a Sasha App's data",
            "Apply an undo (or restore) previewed with previewAppUndo: the same selection and the preview's planHash; if the changes moved since, APP_CONFLICT with the new planHash: preview again. Conflicts are left alone unless listed in overwrite ({table, id}). The person confirms it. It is recorded as an undo (initiator undo, its undoId), which can itself be undone. A replay with the same idempotencyKey applies once.",
            object(undo_properties(), &["app", "planHash"]),
            false,
            true,
        ),
        // studio-core refuses the lifecycle tools to anyone but an admin.
        T::WithdrawApp => tool(
            name,
            "Withdraw a Sasha App for everyone (admins)",
            "Withdraw an app: its opener, tools and resources disappear for every user at once, and the source and history tools refuse it, while its data, history and grants are kept. restoreApp brings it back exactly as it was. Admins only.",
            object(json!({"app": app_property()}), &["app"]),
            false,
            false,
        ),
        T::RestoreApp => tool(
            name,
            "Restore a withdrawn Sasha App (admins)",
            "Bring a withdrawn app back as it was, with its grants, data and history. A deleted app cannot be restored. Admins only.",
            object(json!({"app": app_property()}), &["app"]),
            false,
            false,
        ),
        T::DeleteApp => tool(
            name,
            "Delete a withdrawn Sasha App (admins)",
            "Delete a withdrawn app's package (withdraw it first with withdrawApp); its revision history and audit log are kept and its id is never reused. Its data file is deleted too only with deleteData: true and confirmAppId equal to the app id: the file is backed up first and the backup's name is returned. Ask the person before deleting data. Admins only.",
            object(
                json!({
                    "app": app_property(),
                    "deleteData": {"type": "boolean", "default": false, "description": "Also delete the app's data file (after a backup). Needs confirmAppId."},
                    "confirmAppId": {"type": "string", "maxLength": 60, "description": "With deleteData: the app id again, as the second confirmation."},
                }),
                &["app"],
            ),
            false,
            true,
        ),
        T::GetDocs => {
            let sections: Vec<&str> = DOCS.iter().map(|(name, _)| *name).collect();
            tool(
                name,
                "Read the Sasha Apps documentation",
                "Documentation for building and repairing Sasha Apps: call it without a section for the contents, then read apps-authoring before you write an app.",
                object(
                    json!({"section": {"type": "string", "enum": sections}}),
                    &[],
                ),
                true,
                false,
            )
        }
        T::Suggest => tool(
            name,
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
        ),
    }
}

/// The `structuredContent` of `createApp`: `{app, status}`.
pub fn create_json(reply: &pb::CreateAppReply) -> Value {
    json!({
        "app": reply.app,
        "status": sasha_proto::client_json::status(&reply.status.clone().unwrap_or_default()),
    })
}

/// The text part of `createApp`: what was created, then whether it
/// validates, as the source tools say it.
pub fn create_text(reply: &pb::CreateAppReply) -> String {
    let check = pb::SourceFilesReply {
        app: reply.app.clone(),
        status: reply.status.clone(),
        kind: SourceReplyKind::Check as i32,
        ..pb::SourceFilesReply::default()
    };
    let ok = reply.status.as_ref().is_some_and(|status| status.ok);
    let next = if ok {
        format!(
            " Open it with {}; change it with the source tools (listAppFiles, then readAppFile and writeAppFile or editAppFile).",
            opener_name(&reply.app)
        )
    } else {
        String::new()
    };
    format!(
        "Created the app {}.{next}\n{}",
        reply.app,
        source_text("checkApp", &check)
    )
}

// --- the draft tools --------------------------------------------------------

/// The `CoreService.Draft` request of the draft tool `tool`; a publication
/// carries `approval` (unspecified until the person approved). `None` for
/// another tool, or arguments without what it needs.
pub fn draft_request(
    tool: PlatformTool,
    principal: &pb::Principal,
    args: &Value,
    approval: pb::DraftApproval,
) -> Option<pb::DraftRequest> {
    use pb::draft_request::Operation;
    let operation = match tool {
        PlatformTool::PublishAppDraft => Operation::Publish(pb::DraftPublishRequest {
            expected_revision: args["expectedRevision"].as_str()?.to_owned(),
            approval: approval as i32,
            content_hash: args["contentHash"].as_str()?.to_owned(),
        }),
        PlatformTool::DiscardAppDraft => Operation::Discard(pb::DraftDiscardRequest {}),
        _ => return None,
    };
    Some(pb::DraftRequest {
        principal: Some(principal.clone()),
        app_id: args["app"].as_str()?.to_owned(),
        operation: Some(operation),
    })
}

/// The text part and `structuredContent` of a draft tool's result.
pub fn draft_result(reply: &pb::DraftReply) -> Option<(String, Value)> {
    use pb::draft_reply::Result as R;
    let value = sasha_proto::client_json::draft_reply(reply)?;
    let text = match reply.result.as_ref()? {
        R::Published(published) => {
            let migrations = if published.migrations_applied.is_empty() {
                "no migrations".to_owned()
            } else {
                published.migrations_applied.join(", ")
            };
            format!(
                "Published the draft of {}: its live revision is now {} (was {}); applied {migrations}.",
                reply.app, published.revision, published.previous_revision
            )
        }
        R::Discarded(_) => format!(
            "Discarded the draft of {}; the live app is unchanged.",
            reply.app
        ),
        R::Draft(_) => format!("The draft of {}.", reply.app),
    };
    Some((text, value))
}

// --- the history tools ------------------------------------------------------

/// The `CoreService.History` request for the history tool `tool` with its
/// (schema-checked) arguments; `None` for another tool.
pub fn history_request(
    tool: PlatformTool,
    principal: &pb::Principal,
    args: &Value,
) -> Option<pb::HistoryRequest> {
    use pb::history_request::Operation;
    let text = |key: &str| args[key].as_str().unwrap_or_default().to_owned();
    let operation = match tool {
        PlatformTool::ListAppRevisions => Operation::List(pb::HistoryListRequest {}),
        PlatformTool::ReadAppRevisionFile => Operation::Read(pb::HistoryReadRequest {
            revision: text("revision"),
            path: text("path"),
        }),
        PlatformTool::DiffAppRevisions => Operation::Diff(pb::HistoryDiffRequest {
            from: text("from"),
            to: text("to"),
        }),
        PlatformTool::RevertApp => Operation::Revert(pb::HistoryRevertRequest {
            revision: text("revision"),
            expected_revision: text("expectedRevision"),
        }),
        _ => return None,
    };
    Some(pb::HistoryRequest {
        principal: Some(principal.clone()),
        app_id: text("app"),
        operation: Some(operation),
    })
}

/// The `structuredContent` and text part of a history tool's result;
/// `None` for a reply that carries no result (a peer's bug).
pub fn history_result(reply: &pb::HistoryReply) -> Option<(String, Value)> {
    use pb::history_reply::Result as R;
    let value = sasha_proto::client_json::history(reply)?;
    let text = match reply.result.as_ref()? {
        R::Revisions(list) => {
            let lines: Vec<String> = list
                .revisions
                .iter()
                .map(|r| {
                    format!(
                        "{}{} at {} by {} ({}): {} [{} files, {} bytes]",
                        r.revision,
                        if r.current { " (current)" } else { "" },
                        r.recorded_at,
                        r.username
                            .as_deref()
                            .or(r.user_id.as_deref())
                            .unwrap_or("nobody known"),
                        r.surface,
                        r.summary,
                        r.files,
                        r.bytes
                    )
                })
                .collect();
            if lines.is_empty() {
                "No revisions are recorded.".to_owned()
            } else {
                lines.join("\n")
            }
        }
        R::File(file) => {
            let encoded = file
                .encoding
                .as_ref()
                .map(|encoding| format!(", {encoding}"))
                .unwrap_or_default();
            format!(
                "{} at {} ({} bytes{encoded}, version {})\n\n{}",
                file.path, file.revision, file.bytes, file.version, file.content
            )
        }
        R::Diff(diff) => {
            let mut lines = vec![format!(
                "{} file{} differ from {} to {}.",
                diff.files.len(),
                if diff.files.len() == 1 { "" } else { "s" },
                diff.from,
                diff.to
            )];
            for f in &diff.files {
                let note = if f.truncated {
                    " (diff left out to keep the answer bounded)"
                } else if f.binary {
                    " (binary)"
                } else {
                    ""
                };
                lines.push(format!("{} {}{note}", f.change, f.path));
            }
            for unified in diff.files.iter().filter_map(|f| f.unified.as_deref()) {
                lines.push(String::new());
                lines.push(unified.trim_end().to_owned());
            }
            if diff.truncated {
                lines.push(String::new());
                lines.push(
                    "Some diffs were left out; read those files with readAppRevisionFile."
                        .to_owned(),
                );
            }
            lines.join("\n")
        }
        R::Reverted(reverted) => {
            let check = pb::SourceFilesReply {
                app: reply.app.clone(),
                status: reverted.status.clone(),
                kind: SourceReplyKind::Check as i32,
                ..pb::SourceFilesReply::default()
            };
            format!(
                "Reverted {} from {} to the files of {}.\n{}",
                reply.app,
                reverted.previous_revision,
                reverted.revision,
                source_text("checkApp", &check)
            )
        }
    };
    Some((text, value))
}

// --- the lifecycle tools ----------------------------------------------------

/// The `CoreService.AppLifecycle` request for the lifecycle tool `tool`
/// with its (schema-checked) arguments; `None` for another tool.
pub fn lifecycle_request(
    tool: PlatformTool,
    principal: &pb::Principal,
    args: &Value,
) -> Option<pb::AppLifecycleRequest> {
    use pb::AppLifecycleOperation as Operation;
    let operation = match tool {
        PlatformTool::WithdrawApp => Operation::Withdraw,
        PlatformTool::RestoreApp => Operation::Restore,
        PlatformTool::DeleteApp => Operation::Delete,
        _ => return None,
    };
    Some(pb::AppLifecycleRequest {
        principal: Some(principal.clone()),
        app_id: args["app"].as_str().unwrap_or_default().to_owned(),
        operation: operation as i32,
        delete_data: args["deleteData"].as_bool().unwrap_or(false),
        confirm_app_id: args["confirmAppId"].as_str().unwrap_or_default().to_owned(),
    })
}

/// The text part and `structuredContent` of a lifecycle tool's result.
pub fn lifecycle_result(tool: PlatformTool, reply: &pb::AppLifecycleReply) -> (String, Value) {
    let name = tool.name();
    let app = &reply.app;
    let mut text = match (name, reply.changed) {
        (WITHDRAW_APP, true) => format!(
            "Withdrew {app}: it is gone for everyone; its data, history and grants are kept. restoreApp brings it back."
        ),
        (WITHDRAW_APP, false) => format!("{app} was already withdrawn."),
        (RESTORE_APP, true) => format!("Restored {app} as it was, with its grants."),
        (RESTORE_APP, false) => format!("{app} is not withdrawn; nothing changed."),
        (_, true) => format!(
            "Deleted the package of {app}; its history and audit log are kept and its id stays taken."
        ),
        (_, false) => format!("{app} was already deleted; nothing changed."),
    };
    if reply.data_deleted {
        match &reply.data_backup {
            Some(backup) => text.push_str(&format!(
                " Its data file was backed up as {backup} (under APP_DATA_ROOT) and deleted."
            )),
            None if name == DELETE_APP => text.push_str(" Its data is deleted."),
            None => {}
        }
    } else if name == DELETE_APP {
        text.push_str(" Its data file is kept.");
    }
    (text, sasha_proto::client_json::lifecycle(reply))
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
    let status = sasha_proto::client_json::status(&reply.status.clone().unwrap_or_default());
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
            // Only a binary asset has one: text reads stay exactly as before.
            if let Some(encoding) = &reply.encoding {
                out.insert("encoding".into(), json!(encoding));
            }
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
    if let Some(draft) = &reply.draft {
        out.insert("draft".into(), sasha_proto::client_json::draft(draft));
    }
    Some(Value::Object(out))
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
            let encoded = match &reply.encoding {
                Some(encoding) => format!(", {encoding}"),
                None => String::new(),
            };
            return format!(
                "{} ({} bytes{encoded}, version {version})\n\n{}",
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
    if let Some(draft) = &reply.draft {
        draft_lines(draft, &status, &mut lines);
        return lines.join("\n");
    }
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

/// What a draft reply says after its files: whether the draft validates,
/// what publishing would apply, and what blocks it.
fn draft_lines(draft: &pb::DraftInfo, status: &pb::PackageStatus, lines: &mut Vec<String>) {
    for change in &draft.changes {
        lines.push(format!("Draft {} {}.", change.change, change.path));
    }
    if let Some(review) = &draft.review {
        for migration in &review.migrations {
            lines.push(format!("Publishing applies {}.", migration.file));
        }
        for widened in &review.read_widened {
            lines.push(format!("{widened} (only an admin can publish this)."));
        }
    }
    for diagnostic in &status.diagnostics {
        let at = match diagnostic.line {
            Some(line) => format!("{}:{line}", diagnostic.file),
            None => diagnostic.file.clone(),
        };
        lines.push(format!("- {at} {}: {}", diagnostic.code, diagnostic.reason));
    }
    if draft.base_revision != draft.live_revision {
        lines.push("The live app changed since this draft began: it cannot be published; discard it and start again.".to_owned());
    } else if status.ok {
        lines.push(format!(
            "The draft validates (revision {}). It is not live: the person can preview it in Studio; publishAppDraft with expectedRevision {:?} and contentHash {:?} makes it live after they approve.",
            status.revision.as_deref().unwrap_or(""),
            draft.base_revision,
            draft.content_hash
        ));
    } else {
        lines.push(format!(
            "The draft does not validate ({} problem(s)); fix them, then checkApp with draft: true.",
            status.diagnostics.len()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sasha_contract::caller::{PrincipalKind, Role as UserRole};
    use sasha_contract::tools::{CREATE_APP, GET_DOCS, REVERT_APP, SUGGEST};
    use sasha_proto::convert::ToWire;
    use sasha_proto::pb;

    /// The listing as a client reads it.
    fn tools_for(caller: &Caller) -> Vec<Value> {
        super::tools_for(caller)
            .iter()
            .map(|tool| serde_json::to_value(tool).unwrap())
            .collect()
    }

    /// The names of the platform tools of `family`, in listing order.
    fn family(family: PlatformFamily) -> Vec<&'static str> {
        PlatformTool::ALL
            .iter()
            .filter(|tool| tool.family() == family)
            .map(|tool| tool.name())
            .collect()
    }

    fn is_platform_tool(name: &str) -> bool {
        PlatformTool::from_name(name).is_some()
    }

    fn caller(role: &str, scopes: &[&str]) -> Caller {
        Caller::new(pb::Principal {
            member_apps_off: false,
            origin: None,
            user_id: "u".into(),
            role: UserRole::parse(role).unwrap().to_wire(),
            scopes: scopes
                .iter()
                .map(|scope| Scope::parse(scope).unwrap().to_wire())
                .collect(),
            kind: PrincipalKind::Access.to_wire(),
            username: "u".into(),
        })
        .unwrap()
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
        for name in family(PlatformFamily::Source) {
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
                    .any(|name| family(PlatformFamily::Source).contains(&name.as_str())),
                "{role} {scopes:?}"
            );
            assert!(listed.contains(&GET_DOCS.to_owned()));
        }
        assert!(!names(&caller("staff", &["chat:use"])).contains(&SUGGEST.to_owned()));
    }

    #[test]
    fn write_app_file_takes_base64_for_binary_assets() {
        let tools = tools_for(&caller("staff", &["apps:invoke", "apps:write"]));
        let write = tools
            .iter()
            .find(|tool| tool["name"] == "writeAppFile")
            .unwrap();
        let input = &write["inputSchema"];
        assert_eq!(input["properties"]["encoding"]["enum"], json!(["base64"]));
        assert_eq!(input["required"], json!(["app", "path", "content"]));
        // The base64 of a 1 MiB file fits; core refuses anything over 1 MiB.
        let longest = input["properties"]["content"]["maxLength"]
            .as_u64()
            .unwrap();
        assert!(longest >= (1024 * 1024u64).div_ceil(3) * 4, "{longest}");
        let read = tools
            .iter()
            .find(|tool| tool["name"] == "readAppFile")
            .unwrap();
        assert!(
            read["inputSchema"]["properties"].get("encoding").is_none(),
            "readAppFile decides the encoding itself"
        );
    }

    #[test]
    fn create_app_is_listed_exactly_for_the_source_tools_callers() {
        let writer = caller("admin", &["apps:invoke", "apps:write"]);
        let listed = names(&writer);
        assert!(listed.contains(&CREATE_APP.to_owned()));
        assert!(is_platform_tool(CREATE_APP));
        for (role, scopes) in [
            ("staff", &["apps:invoke"][..]),
            ("admin", &["apps:write"][..]),
            ("member", &["apps:invoke", "apps:write"][..]),
        ] {
            assert!(
                !names(&caller(role, scopes)).contains(&CREATE_APP.to_owned()),
                "{role} {scopes:?}"
            );
        }
        let tools = tools_for(&writer);
        let tool = tools
            .iter()
            .find(|tool| tool["name"] == CREATE_APP)
            .unwrap();
        let input = &tool["inputSchema"];
        assert_eq!(input["additionalProperties"], false);
        assert_eq!(input["required"], json!(["app", "name", "description"]));
        assert_eq!(
            input["properties"]["name"]["maxLength"],
            CREATE_APP_MAX_NAME_CHARS
        );
        assert_eq!(
            input["properties"]["description"]["maxLength"],
            CREATE_APP_MAX_DESCRIPTION_CHARS
        );
        assert_eq!(tool["_meta"]["ui"]["visibility"], json!(["model"]));
    }

    #[test]
    fn draft_tools_are_listed_for_the_source_tools_callers_and_typed() {
        let writer = caller("staff", &["apps:invoke", "apps:write"]);
        let tools = tools_for(&writer);
        for name in family(PlatformFamily::Draft) {
            let tool = tools.iter().find(|tool| tool["name"] == name).unwrap();
            assert!(is_platform_tool(name));
            assert_eq!(tool["annotations"]["destructiveHint"], true, "{name}");
        }
        for name in family(PlatformFamily::Source) {
            let tool = tools.iter().find(|tool| tool["name"] == name).unwrap();
            assert_eq!(
                tool["inputSchema"]["properties"]["draft"]["type"], "boolean",
                "{name}"
            );
        }
        for (role, scopes) in [
            ("staff", &["apps:invoke"][..]),
            ("member", &["apps:invoke", "apps:write"][..]),
        ] {
            let listed = names(&caller(role, scopes));
            assert!(
                !listed
                    .iter()
                    .any(|name| family(PlatformFamily::Draft).contains(&name.as_str())),
                "{role} {scopes:?}"
            );
        }
        let args = json!({"app": "notes", "expectedRevision": "a".repeat(64), "contentHash": "c".repeat(64)});
        let request = draft_request(
            PlatformTool::PublishAppDraft,
            &writer.principal,
            &args,
            pb::DraftApproval::Unspecified,
        )
        .unwrap();
        assert_eq!(request.app_id, "notes");
        assert_eq!(
            request.operation,
            Some(pb::draft_request::Operation::Publish(
                pb::DraftPublishRequest {
                    expected_revision: "a".repeat(64),
                    approval: pb::DraftApproval::Unspecified as i32,
                    content_hash: "c".repeat(64),
                }
            ))
        );
        let discard = draft_request(
            PlatformTool::DiscardAppDraft,
            &writer.principal,
            &json!({"app": "notes"}),
            pb::DraftApproval::Unspecified,
        )
        .unwrap();
        assert!(matches!(
            discard.operation,
            Some(pb::draft_request::Operation::Discard(_))
        ));
        assert!(
            draft_request(
                PlatformTool::GetDocs,
                &writer.principal,
                &args,
                pb::DraftApproval::Unspecified
            )
            .is_none()
        );
        let (text, value) = draft_result(&pb::DraftReply {
            app: "notes".into(),
            result: Some(pb::draft_reply::Result::Published(pb::DraftPublished {
                revision: "b".into(),
                previous_revision: "a".into(),
                migrations_applied: vec!["migrations/002-x.sql".into()],
                status: None,
            })),
        })
        .unwrap();
        assert!(text.contains("migrations/002-x.sql"), "{text}");
        assert_eq!(value["published"]["revision"], "b");
    }

    #[test]
    fn a_draft_reply_says_it_is_not_live() {
        let draft = pb::DraftInfo {
            preview_id: "p".into(),
            base_revision: "r1".into(),
            live_revision: "r1".into(),
            content_hash: "d".repeat(64),
            changes: vec![pb::HistoryFileChange {
                path: "app.js".into(),
                change: "changed".into(),
                ..pb::HistoryFileChange::default()
            }],
            ..pb::DraftInfo::default()
        };
        let status = pb::PackageStatus {
            ok: true,
            revision: Some("r2".into()),
            diagnostics: Vec::new(),
        };
        let reply = pb::SourceFilesReply {
            app: "notes".into(),
            status: Some(status.clone()),
            kind: SourceReplyKind::Check as i32,
            draft: Some(draft.clone()),
            ..pb::SourceFilesReply::default()
        };
        let text = source_text("checkApp", &reply);
        assert!(text.contains("Draft changed app.js."), "{text}");
        assert!(text.contains("It is not live"), "{text}");
        assert!(
            text.contains(&format!("contentHash {:?}", "d".repeat(64))),
            "the model is told what to publish: {text}"
        );
        assert!(!text.contains("its live revision is"), "{text}");
        assert_eq!(source_json(&reply).unwrap()["draft"]["baseRevision"], "r1");
        assert_eq!(
            source_json(&reply).unwrap()["draft"]["contentHash"],
            "d".repeat(64)
        );
        let stale = pb::SourceFilesReply {
            draft: Some(pb::DraftInfo {
                live_revision: "r9".into(),
                ..draft
            }),
            ..reply
        };
        assert!(source_text("checkApp", &stale).contains("cannot be published"));
    }

    #[test]
    fn history_tools_are_listed_exactly_for_the_source_tools_callers() {
        let writer = caller("staff", &["apps:invoke", "apps:write"]);
        let tools = tools_for(&writer);
        for name in family(PlatformFamily::History) {
            let tool = tools.iter().find(|tool| tool["name"] == name).unwrap();
            assert!(is_platform_tool(name));
            assert_eq!(tool["inputSchema"]["additionalProperties"], false);
            let revert = name == REVERT_APP;
            assert_eq!(tool["annotations"]["readOnlyHint"], !revert, "{name}");
            assert_eq!(tool["annotations"]["destructiveHint"], revert, "{name}");
        }
        let revert = tools
            .iter()
            .find(|tool| tool["name"] == REVERT_APP)
            .unwrap();
        assert_eq!(
            revert["inputSchema"]["required"],
            json!(["app", "revision", "expectedRevision"])
        );
        for (role, scopes) in [
            ("staff", &["apps:invoke"][..]),
            ("admin", &["apps:write"][..]),
            ("member", &["apps:invoke", "apps:write"][..]),
        ] {
            let listed = names(&caller(role, scopes));
            assert!(
                !listed
                    .iter()
                    .any(|name| family(PlatformFamily::History).contains(&name.as_str())),
                "{role} {scopes:?}"
            );
        }
    }

    #[test]
    fn lifecycle_tools_are_listed_for_the_source_tools_callers_and_typed() {
        let writer = caller("staff", &["apps:invoke", "apps:write"]);
        let tools = tools_for(&writer);
        for name in family(PlatformFamily::Lifecycle) {
            let tool = tools.iter().find(|tool| tool["name"] == name).unwrap();
            assert!(is_platform_tool(name));
            assert_eq!(tool["inputSchema"]["additionalProperties"], false);
            assert_eq!(tool["annotations"]["readOnlyHint"], false, "{name}");
            assert_eq!(
                tool["annotations"]["destructiveHint"],
                name == DELETE_APP,
                "{name}"
            );
        }
        for (role, scopes) in [
            ("admin", &["apps:invoke"][..]),
            ("member", &["apps:invoke", "apps:write"][..]),
        ] {
            let listed = names(&caller(role, scopes));
            assert!(
                !listed
                    .iter()
                    .any(|name| family(PlatformFamily::Lifecycle).contains(&name.as_str())),
                "{role} {scopes:?}"
            );
        }
        let request = lifecycle_request(
            PlatformTool::DeleteApp,
            &writer.principal,
            &json!({"app": "notes", "deleteData": true, "confirmAppId": "notes"}),
        )
        .unwrap();
        assert_eq!(request.operation(), pb::AppLifecycleOperation::Delete);
        assert_eq!(
            (
                request.app_id.as_str(),
                request.delete_data,
                request.confirm_app_id.as_str()
            ),
            ("notes", true, "notes")
        );
        let withdraw = lifecycle_request(
            PlatformTool::WithdrawApp,
            &writer.principal,
            &json!({"app": "notes"}),
        )
        .unwrap();
        assert_eq!(withdraw.operation(), pb::AppLifecycleOperation::Withdraw);
        assert!(!withdraw.delete_data && withdraw.confirm_app_id.is_empty());
        assert!(lifecycle_request(PlatformTool::GetDocs, &writer.principal, &json!({})).is_none());
        let (text, result) = lifecycle_result(
            PlatformTool::DeleteApp,
            &pb::AppLifecycleReply {
                app: "notes".into(),
                changed: true,
                withdrawn: true,
                package_deleted: true,
                data_deleted: true,
                data_backup: Some(".deleted-app-backups/notes-1-0.sqlite".into()),
            },
        );
        assert!(
            text.contains("backed up as .deleted-app-backups/notes-1-0.sqlite"),
            "{text}"
        );
        assert_eq!(
            result["dataBackup"],
            ".deleted-app-backups/notes-1-0.sqlite"
        );
        assert_eq!(result["packageDeleted"], true);
    }

    #[test]
    fn history_requests_and_results_are_typed_both_ways() {
        let principal = caller("staff", &["apps:invoke", "apps:write"]).principal;
        let request = history_request(
            PlatformTool::RevertApp,
            &principal,
            &json!({"app": "notes", "revision": "a", "expectedRevision": "b"}),
        )
        .unwrap();
        assert_eq!(request.app_id, "notes");
        assert_eq!(
            request.operation,
            Some(pb::history_request::Operation::Revert(
                pb::HistoryRevertRequest {
                    revision: "a".into(),
                    expected_revision: "b".into(),
                }
            ))
        );
        assert!(history_request(PlatformTool::ListAppFiles, &principal, &json!({})).is_none());
        let listed = pb::HistoryReply {
            app: "notes".into(),
            result: Some(pb::history_reply::Result::Revisions(pb::HistoryRevisions {
                revisions: vec![pb::HistoryRevision {
                    revision: "r2".into(),
                    uri: "ui://sasha/apps/notes/revisions/r2".into(),
                    recorded_at: 7,
                    user_id: Some("u1".into()),
                    username: Some("sam".into()),
                    surface: "mcp".into(),
                    summary: "writeAppFile app.js".into(),
                    files: 4,
                    bytes: 100,
                    current: true,
                }],
            })),
        };
        let (text, value) = history_result(&listed).unwrap();
        assert_eq!(
            value,
            json!({"app": "notes", "revisions": [{"revision": "r2", "uri": "ui://sasha/apps/notes/revisions/r2", "recordedAt": 7, "user": "sam", "surface": "mcp", "summary": "writeAppFile app.js", "files": 4, "bytes": 100, "current": true}]})
        );
        assert!(text.starts_with("r2 (current) at 7 by sam (mcp)"), "{text}");
        let diff = pb::HistoryReply {
            app: "notes".into(),
            result: Some(pb::history_reply::Result::Diff(pb::HistoryDiff {
                from: "r1".into(),
                to: "r2".into(),
                files: vec![pb::HistoryFileChange {
                    path: "app.js".into(),
                    change: "changed".into(),
                    from_version: Some("a".into()),
                    to_version: Some("b".into()),
                    unified: None,
                    binary: false,
                    truncated: true,
                }],
                truncated: true,
            })),
        };
        let (text, value) = history_result(&diff).unwrap();
        assert_eq!(value["files"][0]["truncated"], true);
        assert!(value["files"][0].get("diff").is_none());
        assert!(text.contains("changed app.js (diff left out"), "{text}");
        assert!(history_result(&pb::HistoryReply::default()).is_none());
    }

    #[test]
    fn create_app_answers_its_app_and_status() {
        let reply = pb::CreateAppReply {
            app: "expense-claims".into(),
            status: Some(valid("r1")),
        };
        assert_eq!(
            create_json(&reply).to_string(),
            json!({"app": "expense-claims", "status": {"ok": true, "revision": "r1", "diagnostics": []}})
                .to_string()
        );
        let text = create_text(&reply);
        assert!(
            text.starts_with(
                "Created the app expense-claims. Open it with open_app__expense_claims;"
            ),
            "{text}"
        );
        assert!(
            text.ends_with("The app validates; its live revision is r1."),
            "{text}"
        );
        let broken = pb::CreateAppReply {
            app: "expense-claims".into(),
            status: Some(broken()),
        };
        let text = create_text(&broken);
        assert!(!text.contains("open_app__"), "{text}");
        assert!(text.contains("- app.js:3 JS_SYNTAX"), "{text}");
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
        // A binary asset's bytes come as base64 and say so; its size is the
        // file's.
        let asset = pb::SourceFilesReply {
            app: "notes".into(),
            path: "assets/logo.png".into(),
            content: Some("iVBORw==".into()),
            bytes: 5,
            version: Some("ef".into()),
            encoding: Some("base64".into()),
            kind: SourceReplyKind::Read as i32,
            ..Default::default()
        };
        assert_eq!(
            source_json(&asset).unwrap().to_string(),
            json!({"app": "notes", "path": "assets/logo.png", "content": "iVBORw==", "bytes": 5, "version": "ef", "encoding": "base64"})
                .to_string()
        );
        assert!(
            source_text("readAppFile", &asset)
                .starts_with("assets/logo.png (5 bytes, base64, version ef)\n\niVBORw=="),
            "{}",
            source_text("readAppFile", &asset)
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
