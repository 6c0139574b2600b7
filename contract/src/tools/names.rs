//! The MCP tool-name codec, the one place a tool's name is written or read:
//! `open_app__<app>`, `app__<app>__<table>__<operation>`,
//! `app__<app>__<action>` (each id with `-` written as `_`), the platform's
//! own tools, the member app tools and the open app's app-only tools.
//! [`ToolTarget::decode`] reads a name once into what it names; every
//! encoder here writes what it reads back.
//!
//! The mapping is injective: app and action ids are kebab ids
//! ([`crate::ids`]: no `_`, no `--`, no leading or trailing `-`), and a table name never holds `__` (the
//! validator refuses one, `TABLE_RESERVED`), so the first `__` after the app
//! and the last `__` before the operation are the separators.
//!
//! This module must never decide who sees or may call a tool: a decoded name
//! says what it would name, not that it exists or that anyone may call it.

use std::borrow::Cow;

use super::{
    CHAT_TOOL, CHECK_APP, CHECK_MY_APP, CREATE_APP, DELETE_APP, DELETE_APP_FILE, DELETE_MY_APP,
    DEPLOY_MY_APP, DIFF_APP_REVISIONS, DISCARD_APP_DRAFT, DRAFT_MY_APP, EDIT_APP_FILE, GET_DOCS,
    LIST_APP_ACTIVITY, LIST_APP_FILES, LIST_APP_REVISIONS, LIST_MY_APP_REVISIONS, LIST_MY_APPS,
    PREVIEW_APP_UNDO, PUBLISH_APP_DRAFT, READ_APP_FILE, READ_APP_REVISION_FILE, READ_MY_APP,
    RESTORE_APP, REVERT_APP, REVERT_MY_APP, SHARE_MY_APP, SUGGEST, UNDO_APP_CHANGES, UPLOAD_TOOL,
    WITHDRAW_APP, WRITE_APP_FILE,
};
use crate::grammar::TableOperation;
use crate::ids::AppId;

/// The prefix of an app's opener: `open_app__<app>`.
pub const OPENER_PREFIX: &str = "open_app__";
/// The prefix of an app's table and action tools: `app__<app>__…`.
pub const APP_TOOL_PREFIX: &str = "app__";
/// What joins the parts of an app tool's name.
const SEPARATOR: &str = "__";

/// What a tool name names, read once ([`ToolTarget::decode`]). Ids are the
/// real ones (`-` restored), table names as declared.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ToolTarget {
    /// `open_app__<app>`: opens the app's UI.
    OpenApp { app: AppId },
    /// `app__<app>__<table>__<operation>`: one data operation on a declared
    /// table.
    Table {
        app: AppId,
        table: String,
        operation: TableOperation,
    },
    /// `app__<app>__<action>`: a declared action (or a name shaped like
    /// one, which an app may not have).
    Action { app: AppId, action: String },
    /// One of the platform's own tools.
    Platform(PlatformTool),
    /// One of the member app tools.
    Member(MemberTool),
    /// A tool of the app a Studio session has open (no app in its name).
    AppOnly(AppOnlyTool),
}

impl ToolTarget {
    /// What `name` names, or `None` when it cannot name any tool (an
    /// unknown word, an app part that is no app id, an operation the
    /// grammar lacks, a `-` where the name must carry `_`). Only the name
    /// [`ToolTarget::name`] writes decodes, so two names never name the
    /// same thing. Allocates only the ids it returns.
    pub fn decode(name: &str) -> Option<ToolTarget> {
        if let Some(tool) = AppOnlyTool::from_name(name) {
            return Some(ToolTarget::AppOnly(tool));
        }
        if let Some(tool) = PlatformTool::from_name(name) {
            return Some(ToolTarget::Platform(tool));
        }
        if let Some(tool) = MemberTool::from_name(name) {
            return Some(ToolTarget::Member(tool));
        }
        if let Some(encoded) = name.strip_prefix(OPENER_PREFIX) {
            return decode_app(encoded).map(|app| ToolTarget::OpenApp { app });
        }
        let (encoded_app, rest) = name.strip_prefix(APP_TOOL_PREFIX)?.split_once(SEPARATOR)?;
        let app = decode_app(encoded_app)?;
        Some(match rest.rsplit_once(SEPARATOR) {
            None if rest.contains('-') => return None,
            None => ToolTarget::Action {
                app,
                action: decode_id(rest).into_owned(),
            },
            Some((table, operation)) => ToolTarget::Table {
                app,
                table: table.to_owned(),
                operation: TableOperation::parse(operation)?,
            },
        })
    }

    /// The tool's name: what [`ToolTarget::decode`] reads back.
    pub fn name(&self) -> Cow<'static, str> {
        match self {
            ToolTarget::OpenApp { app } => Cow::Owned(opener_name(app.as_str())),
            ToolTarget::Table {
                app,
                table,
                operation,
            } => Cow::Owned(table_tool_name(app.as_str(), table, *operation)),
            ToolTarget::Action { app, action } => {
                Cow::Owned(action_tool_name(app.as_str(), action))
            }
            ToolTarget::Platform(tool) => Cow::Borrowed(tool.name()),
            ToolTarget::Member(tool) => Cow::Borrowed(tool.name()),
            ToolTarget::AppOnly(tool) => Cow::Borrowed(tool.name()),
        }
    }

    /// The app the name carries (`None` for a platform, member or app-only
    /// tool).
    pub fn app(&self) -> Option<&AppId> {
        match self {
            ToolTarget::OpenApp { app }
            | ToolTarget::Table { app, .. }
            | ToolTarget::Action { app, .. } => Some(app),
            ToolTarget::Platform(_) | ToolTarget::Member(_) | ToolTarget::AppOnly(_) => None,
        }
    }
}

/// `open_app__<app>`.
pub fn opener_name(app_id: &str) -> String {
    let mut name = String::from(OPENER_PREFIX);
    name.push_str(&encode_id(app_id));
    name
}

/// `app__<app>__<table>__<operation>`.
pub fn table_tool_name(app_id: &str, table: &str, operation: TableOperation) -> String {
    let mut name = app_tool_start(app_id);
    name.push_str(table);
    name.push_str(SEPARATOR);
    name.push_str(operation.name());
    name
}

/// `app__<app>__<action>`: what the validator records as an action's
/// `mcp_name`.
pub fn action_tool_name(app_id: &str, action_id: &str) -> String {
    let mut name = app_tool_start(app_id);
    name.push_str(&encode_id(action_id));
    name
}

/// The app a tool name carries (see [`ToolTarget::app`]).
pub fn app_of_tool(name: &str) -> Option<AppId> {
    match ToolTarget::decode(name)? {
        ToolTarget::OpenApp { app }
        | ToolTarget::Table { app, .. }
        | ToolTarget::Action { app, .. } => Some(app),
        ToolTarget::Platform(_) | ToolTarget::Member(_) | ToolTarget::AppOnly(_) => None,
    }
}

fn app_tool_start(app_id: &str) -> String {
    let mut name = String::from(APP_TOOL_PREFIX);
    name.push_str(&encode_id(app_id));
    name.push_str(SEPARATOR);
    name
}

/// An id as a name carries it: `-` written as `_`.
fn encode_id(id: &str) -> Cow<'_, str> {
    if id.contains('-') {
        Cow::Owned(id.replace('-', "_"))
    } else {
        Cow::Borrowed(id)
    }
}

/// An id read back from a name: `_` is `-`.
fn decode_id(encoded: &str) -> Cow<'_, str> {
    if encoded.contains('_') {
        Cow::Owned(encoded.replace('_', "-"))
    } else {
        Cow::Borrowed(encoded)
    }
}

/// The app id an encoded app part names, when it is one.
fn decode_app(encoded: &str) -> Option<AppId> {
    if encoded.contains('-') {
        return None;
    }
    AppId::try_from(decode_id(encoded).into_owned()).ok()
}

/// Declares a closed set of tools named by constants, with its listing
/// order, each tool's name, and the reverse lookup.
macro_rules! tool_set {
    ($(#[$doc:meta])* $set:ident { $($(#[$variant_doc:meta])* $variant:ident => $name:expr),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $set {
            $($(#[$variant_doc])* $variant),+
        }

        impl $set {
            /// Every tool of the set, in listing order.
            pub const ALL: &'static [$set] = &[$($set::$variant),+];

            /// The tool's MCP name.
            pub const fn name(self) -> &'static str {
                match self {
                    $($set::$variant => $name),+
                }
            }

            /// The tool named `name`.
            pub fn from_name(name: &str) -> Option<$set> {
                $set::ALL.iter().copied().find(|tool| tool.name() == name)
            }
        }
    };
}

tool_set! {
    /// The platform's own tools, beside the per-app ones.
    PlatformTool {
        ListAppFiles => LIST_APP_FILES,
        ReadAppFile => READ_APP_FILE,
        WriteAppFile => WRITE_APP_FILE,
        EditAppFile => EDIT_APP_FILE,
        DeleteAppFile => DELETE_APP_FILE,
        CheckApp => CHECK_APP,
        CreateApp => CREATE_APP,
        PublishAppDraft => PUBLISH_APP_DRAFT,
        DiscardAppDraft => DISCARD_APP_DRAFT,
        ListAppRevisions => LIST_APP_REVISIONS,
        ReadAppRevisionFile => READ_APP_REVISION_FILE,
        DiffAppRevisions => DIFF_APP_REVISIONS,
        RevertApp => REVERT_APP,
        ListAppActivity => LIST_APP_ACTIVITY,
        PreviewAppUndo => PREVIEW_APP_UNDO,
        UndoAppChanges => UNDO_APP_CHANGES,
        WithdrawApp => WITHDRAW_APP,
        RestoreApp => RESTORE_APP,
        DeleteApp => DELETE_APP,
        GetDocs => GET_DOCS,
        Suggest => SUGGEST,
    }
}

/// Which kind of platform tool, and so which `CoreService` call it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlatformFamily {
    /// The six source tools (`CoreService.SourceFiles`).
    Source,
    /// `createApp`.
    Create,
    /// `publishAppDraft`, `discardAppDraft` (`CoreService.Draft`).
    Draft,
    /// The four history tools (`CoreService.History`).
    History,
    /// `listAppActivity`, `previewAppUndo`, `undoAppChanges`: the gateway
    /// calls the app's data-worker, like a table tool.
    Undo,
    /// `withdrawApp`, `restoreApp`, `deleteApp` (`CoreService.AppLifecycle`).
    Lifecycle,
    /// `getDocs`, answered by the gateway itself.
    Docs,
    /// `suggestImprovement`.
    Suggest,
}

impl PlatformTool {
    pub const fn family(self) -> PlatformFamily {
        use PlatformTool as T;
        match self {
            T::ListAppFiles
            | T::ReadAppFile
            | T::WriteAppFile
            | T::EditAppFile
            | T::DeleteAppFile
            | T::CheckApp => PlatformFamily::Source,
            T::CreateApp => PlatformFamily::Create,
            T::PublishAppDraft | T::DiscardAppDraft => PlatformFamily::Draft,
            T::ListAppRevisions | T::ReadAppRevisionFile | T::DiffAppRevisions | T::RevertApp => {
                PlatformFamily::History
            }
            T::ListAppActivity | T::PreviewAppUndo | T::UndoAppChanges => PlatformFamily::Undo,
            T::WithdrawApp | T::RestoreApp | T::DeleteApp => PlatformFamily::Lifecycle,
            T::GetDocs => PlatformFamily::Docs,
            T::Suggest => PlatformFamily::Suggest,
        }
    }
}

tool_set! {
    /// The member app tools (any role with `apps:author`; studio-core's
    /// `CoreService.MemberApps` decides every call).
    MemberTool {
        ListMyApps => LIST_MY_APPS,
        ReadMyApp => READ_MY_APP,
        CheckMyApp => CHECK_MY_APP,
        DraftMyApp => DRAFT_MY_APP,
        DeployMyApp => DEPLOY_MY_APP,
        ListMyAppRevisions => LIST_MY_APP_REVISIONS,
        RevertMyApp => REVERT_MY_APP,
        ShareMyApp => SHARE_MY_APP,
        DeleteMyApp => DELETE_MY_APP,
    }
}

impl MemberTool {
    /// Whether the tool builds or changes an app (left out while an admin
    /// has turned member apps off).
    pub const fn builds(self) -> bool {
        matches!(
            self,
            MemberTool::CheckMyApp
                | MemberTool::DraftMyApp
                | MemberTool::DeployMyApp
                | MemberTool::RevertMyApp
        )
    }

    /// Whether the change needs the person's approval: what goes live, who
    /// may use it, and deleting it with everyone's rows.
    pub const fn needs_approval(self) -> bool {
        matches!(
            self,
            MemberTool::DeployMyApp
                | MemberTool::RevertMyApp
                | MemberTool::ShareMyApp
                | MemberTool::DeleteMyApp
        )
    }
}

tool_set! {
    /// The open app's own tools: they exist only for the Studio session
    /// bound to that app.
    AppOnlyTool {
        /// One chat turn of the open app.
        Chat => CHAT_TOOL,
        /// Documents converted for the open app.
        Upload => UPLOAD_TOOL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(name: &str) -> Option<ToolTarget> {
        ToolTarget::decode(name)
    }

    fn id(app: &str) -> AppId {
        AppId::parse(app).unwrap()
    }

    fn table(app: &str, table: &str, operation: TableOperation) -> ToolTarget {
        ToolTarget::Table {
            app: id(app),
            table: table.into(),
            operation,
        }
    }

    fn action(app: &str, action: &str) -> ToolTarget {
        ToolTarget::Action {
            app: id(app),
            action: action.into(),
        }
    }

    #[test]
    fn names_decode_into_what_they_name() {
        assert_eq!(
            decode("open_app__time_sheet_entry"),
            Some(ToolTarget::OpenApp {
                app: id("time-sheet-entry")
            })
        );
        assert_eq!(
            decode("app__expense_log__expenses__list"),
            Some(table("expense-log", "expenses", TableOperation::List))
        );
        // Table names keep their underscores, wherever they are.
        assert_eq!(
            decode("app__t__note_items__delete"),
            Some(table("t", "note_items", TableOperation::Delete))
        );
        assert_eq!(
            decode("app__t___drafts__get"),
            Some(table("t", "_drafts", TableOperation::Get))
        );
        assert_eq!(
            decode("app__t__x___import"),
            Some(table("t", "x_", TableOperation::Import))
        );
        assert_eq!(
            decode("app__time_sheet__log_hours"),
            Some(action("time-sheet", "log-hours"))
        );
        // Shaped like an action even when no app declares it.
        assert_eq!(decode("app__notes__"), Some(action("notes", "")));
        assert_eq!(decode("app__notes__Drop"), Some(action("notes", "Drop")));
        assert_eq!(
            decode(GET_DOCS),
            Some(ToolTarget::Platform(PlatformTool::GetDocs))
        );
        assert_eq!(
            decode(SHARE_MY_APP),
            Some(ToolTarget::Member(MemberTool::ShareMyApp))
        );
        assert_eq!(
            decode(UPLOAD_TOOL),
            Some(ToolTarget::AppOnly(AppOnlyTool::Upload))
        );
        for nothing in [
            "",
            "delete_everything",
            "app__",
            "app__notes",
            "app__notes__note_items__drop",
            "app__notes__a__b__LIST",
            "app__Notes__x",
            "app___a__x",
            "app__a-b__x",
            "app__time_sheet__log-hours",
            "open_app__",
            "open_app__x__y",
            "open_app__Time",
            // An app id starts with a letter, as every package's does.
            "open_app__1app",
            "app__9__entries__list",
            "sasha__files_upload_x",
            "getdocs",
        ] {
            assert_eq!(decode(nothing), None, "{nothing}");
        }
        let long = "a".repeat(61);
        assert_eq!(decode(&format!("open_app__{long}")), None);
        assert!(decode(&format!("open_app__{}", &long[1..])).is_some());
    }

    #[test]
    fn every_name_written_is_read_back() {
        let apps = ["t", "expense-log", "a1-b2-c3", "x9"];
        let tables = ["entries", "note_items", "_drafts", "x_", "Mixed_Case", "t1"];
        let actions = ["log-hours", "submit-week", "a", "v2-export"];
        let mut names = std::collections::BTreeSet::new();
        for app in apps {
            let opener = ToolTarget::OpenApp { app: id(app) };
            assert_eq!(decode(&opener.name()), Some(opener.clone()));
            assert!(names.insert(opener.name().into_owned()));
            for name in tables {
                for operation in TableOperation::ALL {
                    let target = table(app, name, operation);
                    assert_eq!(decode(&target.name()), Some(target.clone()), "{target:?}");
                    assert!(names.insert(target.name().into_owned()), "{target:?}");
                }
            }
            for id in actions {
                let target = action(app, id);
                assert_eq!(decode(&target.name()), Some(target.clone()));
                assert_eq!(target.name(), action_tool_name(app, id));
                assert!(names.insert(target.name().into_owned()), "{target:?}");
            }
        }
        for tool in PlatformTool::ALL {
            let target = ToolTarget::Platform(*tool);
            assert_eq!(decode(&target.name()), Some(target.clone()));
            assert!(names.insert(target.name().into_owned()));
        }
        for tool in MemberTool::ALL {
            let target = ToolTarget::Member(*tool);
            assert_eq!(decode(&target.name()), Some(target.clone()));
            assert!(names.insert(target.name().into_owned()));
        }
        for tool in AppOnlyTool::ALL {
            let target = ToolTarget::AppOnly(*tool);
            assert_eq!(decode(&target.name()), Some(target.clone()));
            assert!(names.insert(target.name().into_owned()));
        }
    }

    #[test]
    fn names_map_hyphens_to_underscores() {
        assert_eq!(
            table_tool_name("time-sheet", "entries", TableOperation::List),
            "app__time_sheet__entries__list"
        );
        assert_eq!(opener_name("expense-log"), "open_app__expense_log");
        assert_eq!(
            action_tool_name("time-sheet", "log-hours"),
            "app__time_sheet__log_hours"
        );
        assert_eq!(
            app_of_tool("open_app__time_sheet_entry"),
            Some(id("time-sheet-entry"))
        );
        assert_eq!(app_of_tool(GET_DOCS), None);
        assert_eq!(app_of_tool("app__"), None);
    }

    #[test]
    fn member_tool_kinds() {
        let builds: Vec<&str> = MemberTool::ALL
            .iter()
            .filter(|tool| tool.builds())
            .map(|tool| tool.name())
            .collect();
        assert_eq!(
            builds,
            [CHECK_MY_APP, DRAFT_MY_APP, DEPLOY_MY_APP, REVERT_MY_APP]
        );
        let approved: Vec<&str> = MemberTool::ALL
            .iter()
            .filter(|tool| tool.needs_approval())
            .map(|tool| tool.name())
            .collect();
        assert_eq!(
            approved,
            [DEPLOY_MY_APP, REVERT_MY_APP, SHARE_MY_APP, DELETE_MY_APP]
        );
    }
}
