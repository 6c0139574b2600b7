//! What a confirmation card says first: a short title and one sentence of
//! what will happen (which app, which file, table or fields, who will see
//! it, whether it can be undone), made here from the call itself (the
//! tool's name read as a [`ToolTarget`] and its arguments) and the card's
//! summary, never from a tool's description, which is text the model and
//! app authors can write.
//!
//! What it must never do: say less than the change does (a live write is
//! called live, a deletion of data is called final), or quote an argument
//! longer than a short name.

use sasha_contract::grammar::TableOperation;
use sasha_contract::tools::{MemberTool, PlatformTool, ToolTarget};
use serde_json::{Map, Value};

/// Most characters of one quoted argument (a name, a path, a user name).
const MAX_QUOTED_CHARS: usize = 60;
/// Most field names a row sentence lists before "and N more".
const MAX_FIELDS_NAMED: usize = 6;
/// Most file names a deploy or publish sentence lists per kind.
const MAX_FILES_NAMED: usize = 4;

/// A mutating call, as the card describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    CreateApp {
        app: String,
        name: String,
        with_table: bool,
    },
    File {
        app: String,
        path: String,
        draft: bool,
        kind: FileKind,
    },
    Publish {
        app: String,
    },
    Discard {
        app: String,
    },
    Revert {
        app: String,
        revision: String,
    },
    Withdraw {
        app: String,
    },
    Restore {
        app: String,
    },
    Delete {
        app: String,
        with_data: bool,
    },
    Suggest,
    DeployMine {
        app: Option<String>,
        name: String,
    },
    DraftMine {
        app: String,
    },
    RevertMine {
        app: String,
    },
    Share {
        app: String,
        username: String,
        remove: bool,
    },
    DeleteMine {
        app: String,
    },
    Row {
        app: String,
        table: String,
        operation: TableOperation,
        fields: Vec<String>,
        id: Option<String>,
    },
    Action {
        app: String,
        action: String,
    },
    Other {
        tool: String,
    },
}

/// Which file change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    Write,
    Edit,
    Delete,
}

/// `text` cut to [`MAX_QUOTED_CHARS`], on one line.
fn quoted(text: &str) -> String {
    let line: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    if line.chars().count() > MAX_QUOTED_CHARS {
        let cut: String = line.chars().take(MAX_QUOTED_CHARS).collect();
        format!("{cut}…")
    } else {
        line
    }
}

/// `names` as "a, b and c", at most `limit` of them then "and N more".
fn listed(names: &[String], limit: usize) -> String {
    let shown: Vec<&str> = names.iter().take(limit).map(String::as_str).collect();
    let rest = names.len().saturating_sub(limit);
    match (shown.as_slice(), rest) {
        ([], _) => String::new(),
        ([one], 0) => (*one).to_owned(),
        (many, 0) => format!(
            "{} and {}",
            many[..many.len() - 1].join(", "),
            many[many.len() - 1]
        ),
        (many, rest) => format!("{} and {rest} more", many.join(", ")),
    }
}

fn plural(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

impl Change {
    /// The change `tool` makes with `arguments`.
    pub(crate) fn of(tool: &str, arguments: &Map<String, Value>) -> Change {
        let text = |name: &str| {
            arguments
                .get(name)
                .and_then(Value::as_str)
                .map(quoted)
                .unwrap_or_default()
        };
        let flag = |name: &str| arguments.get(name) == Some(&Value::Bool(true));
        let app = text("app");
        let file = |kind| Change::File {
            app: app.clone(),
            path: text("path"),
            draft: flag("draft"),
            kind,
        };
        match ToolTarget::decode(tool) {
            Some(ToolTarget::Platform(platform)) => match platform {
                PlatformTool::CreateApp => Change::CreateApp {
                    app,
                    name: text("name"),
                    with_table: flag("withTable"),
                },
                PlatformTool::WriteAppFile => file(FileKind::Write),
                PlatformTool::EditAppFile => file(FileKind::Edit),
                PlatformTool::DeleteAppFile => file(FileKind::Delete),
                PlatformTool::PublishAppDraft => Change::Publish { app },
                PlatformTool::DiscardAppDraft => Change::Discard { app },
                PlatformTool::RevertApp => Change::Revert {
                    app,
                    revision: text("revision").chars().take(12).collect(),
                },
                PlatformTool::WithdrawApp => Change::Withdraw { app },
                PlatformTool::RestoreApp => Change::Restore { app },
                PlatformTool::DeleteApp => Change::Delete {
                    app,
                    with_data: flag("deleteData"),
                },
                PlatformTool::Suggest => Change::Suggest,
                _ => Change::Other {
                    tool: tool.to_owned(),
                },
            },
            Some(ToolTarget::Member(member)) => match member {
                MemberTool::DeployMyApp => Change::DeployMine {
                    app: (!app.is_empty()).then_some(app),
                    name: text("name"),
                },
                MemberTool::DraftMyApp => Change::DraftMine { app },
                MemberTool::RevertMyApp => Change::RevertMine { app },
                MemberTool::ShareMyApp => Change::Share {
                    app,
                    username: text("username"),
                    remove: flag("remove"),
                },
                MemberTool::DeleteMyApp => Change::DeleteMine { app },
                _ => Change::Other {
                    tool: tool.to_owned(),
                },
            },
            Some(ToolTarget::Table {
                app,
                table,
                operation,
            }) => {
                let values = match operation {
                    TableOperation::Update => arguments.get("changes"),
                    _ => arguments.get("values"),
                };
                Change::Row {
                    app: app.into_string(),
                    table,
                    operation,
                    fields: values
                        .and_then(Value::as_object)
                        .map(|values| values.keys().map(|key| quoted(key)).collect())
                        .unwrap_or_default(),
                    id: arguments.get("id").map(|id| match id {
                        Value::String(id) => quoted(id),
                        other => quoted(&other.to_string()),
                    }),
                }
            }
            Some(ToolTarget::Action { app, action }) => Change::Action {
                app: app.into_string(),
                action,
            },
            _ => Change::Other {
                tool: tool.to_owned(),
            },
        }
    }

    /// The card's title: what is asked, in a few words.
    pub(crate) fn title(&self) -> String {
        match self {
            Change::CreateApp { app, .. } => format!("Create the app {app}"),
            Change::File {
                app,
                path,
                draft,
                kind,
            } => {
                let verb = match kind {
                    FileKind::Write | FileKind::Edit => "Change",
                    FileKind::Delete => "Delete",
                };
                let place = if *draft { "the draft of " } else { "" };
                format!("{verb} {path} in {place}{app}")
            }
            Change::Publish { app } => format!("Publish the draft of {app}"),
            Change::Discard { app } => format!("Discard the draft of {app}"),
            Change::Revert { app, .. } => format!("Revert {app}"),
            Change::Withdraw { app } => format!("Withdraw {app}"),
            Change::Restore { app } => format!("Restore {app}"),
            Change::Delete { app, .. } => format!("Delete {app}"),
            Change::Suggest => "Send a suggestion".to_owned(),
            Change::DeployMine { app: None, name } => format!("Create your app {name}"),
            Change::DeployMine { app: Some(app), .. } => format!("Update your app {app}"),
            Change::DraftMine { app } => format!("Save a draft of your app {app}"),
            Change::RevertMine { app } => format!("Revert your app {app}"),
            Change::Share {
                app,
                username,
                remove: false,
            } => format!("Share {app} with {username}"),
            Change::Share { app, username, .. } => format!("Stop sharing {app} with {username}"),
            Change::DeleteMine { app } => format!("Delete your app {app}"),
            Change::Row {
                table, operation, ..
            } => match operation {
                TableOperation::Create => format!("Add a row to {table}"),
                TableOperation::Update => format!("Change a row of {table}"),
                TableOperation::Delete => format!("Delete a row of {table}"),
                TableOperation::Import => format!("Import rows into {table}"),
                _ => format!("Change {table}"),
            },
            Change::Action { app, action } => format!("Run {action} in {app}"),
            Change::Other { tool } => format!("Run {tool}"),
        }
    }

    /// What will happen, in one sentence, with what the card's `summary`
    /// found (a file's change, a publication's files and migrations, a
    /// deploy's files).
    pub(crate) fn sentence(&self, summary: &Value) -> String {
        match self {
            Change::CreateApp {
                app,
                name,
                with_table,
            } => format!(
                "Creates a new app “{name}” ({app}){}; every admin and staff user can manage it, and members see it only once someone grants them access. It can be withdrawn later, but its id is never reused.",
                if *with_table {
                    " with a starter table, items, and a page that lists and adds rows"
                } else {
                    ""
                }
            ),
            Change::File {
                app,
                path,
                draft,
                kind,
            } => {
                let verb = match (kind, summary["change"].as_str()) {
                    (FileKind::Delete, _) => "Deletes",
                    (_, Some("create")) => "Adds",
                    _ => "Changes",
                };
                if *draft {
                    format!(
                        "{verb} {path} in your draft of {app}: nobody else sees it until the draft is published, and discarding the draft undoes it."
                    )
                } else {
                    format!(
                        "{verb} {path} in the live app {app}: everyone who uses {app} gets it at once; History can revert it."
                    )
                }
            }
            Change::Publish { app } => {
                let files = summary["changes"].as_array().map_or(0, Vec::len);
                let migrations = summary["migrations"].as_array().map_or(0, Vec::len);
                let widened = summary["readWidened"]
                    .as_array()
                    .is_some_and(|reasons| !reasons.is_empty());
                format!(
                    "Makes your draft of {app} live for everyone who uses it: {}{}{}. History can revert the files{}.",
                    plural(files, "file changes", "files change"),
                    if migrations > 0 {
                        format!(
                            ", {} on its live data",
                            plural(migrations, "migration runs", "migrations run")
                        )
                    } else {
                        String::new()
                    },
                    if widened {
                        ", and more people can read records it already holds"
                    } else {
                        ""
                    },
                    if migrations > 0 {
                        ", but not what a migration did to the data"
                    } else {
                        ""
                    },
                )
            }
            Change::Discard { app } => format!(
                "Throws away your draft of {app} and its preview data; the live app does not change. This cannot be undone."
            ),
            Change::Revert { app, revision } => format!(
                "Makes the files of {app} those of revision {revision}, live for everyone at once; its data is not rewound, and History can revert again."
            ),
            Change::Withdraw { app } => format!(
                "Withdraws {app} for everyone at once: it leaves every Apps list and its tools stop, while its data, history and grants are kept; restoring brings it back as it was."
            ),
            Change::Restore { app } => {
                format!("Brings {app} back as it was, for everyone who had access to it.")
            }
            Change::Delete {
                app,
                with_data: true,
            } => format!(
                "Deletes the withdrawn app {app} and its data (a backup of the data is kept for the operator); its history stays and its id is never reused. This cannot be undone from Studio."
            ),
            Change::Delete { app, .. } => format!(
                "Deletes the withdrawn app {app}'s files; its data and history stay and its id is never reused. This cannot be undone from Studio."
            ),
            Change::Suggest => {
                "Sends a suggestion to the administrators of this Sasha; it cannot be taken back."
                    .to_owned()
            }
            Change::DeployMine { app, name } => {
                let files = files_of(summary);
                match app {
                    None => format!(
                        "Creates your app “{name}” with {}; only you see it until you share it, and you can delete it.",
                        plural(files.added.len(), "file", "files"),
                    ),
                    Some(app) => format!(
                        "Makes a new version of your app {app} live: {}. People you shared it with get it at once; you can revert to the previous version.",
                        files.counts(),
                    ),
                }
            }
            Change::DraftMine { app } => format!(
                "Saves a draft of your app {app} ({}); the live app does not change and nobody else sees the draft.",
                files_of(summary).counts(),
            ),
            Change::RevertMine { app } => format!(
                "Makes an earlier version of your app {app} live again, for you and everyone you shared it with; data is not rewound."
            ),
            Change::Share {
                app,
                username,
                remove: false,
            } => format!(
                "Lets {username} use your app {app}; they see only their own rows, and you can stop sharing at any time."
            ),
            Change::Share { app, username, .. } => {
                format!("Stops sharing your app {app} with {username}; their rows stay in the app.")
            }
            Change::DeleteMine { app } => format!(
                "Deletes your app {app} with its data, the rows of everyone you shared it with included; it leaves everyone's Apps list at once. This cannot be undone from Studio."
            ),
            Change::Row {
                app,
                table,
                operation,
                fields,
                id,
            } => {
                let fields = if fields.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", listed(fields, MAX_FIELDS_NAMED))
                };
                let row = id
                    .as_ref()
                    .map_or_else(|| "a row".to_owned(), |id| format!("row {id}"));
                match operation {
                    TableOperation::Create => format!(
                        "Adds a row{fields} to the {table} table of {app}, as you; whoever can read that table sees it, and it can be changed or deleted later."
                    ),
                    TableOperation::Update => format!(
                        "Changes {row} of the {table} table of {app}{fields}, as you; the app's history keeps the old values."
                    ),
                    TableOperation::Delete => format!(
                        "Deletes {row} of the {table} table of {app}, as you; the app's history keeps what it held, but the row is gone for everyone."
                    ),
                    _ => format!("Changes the {table} table of {app}, as you."),
                }
            }
            Change::Action { app, action } => format!(
                "Runs the action {action} of {app}, as you; what it changes is the app's to say, so check the details."
            ),
            Change::Other { tool } => {
                format!("Runs {tool}, as you; check the details for what it changes.")
            }
        }
    }
}

/// A deploy summary's files by change.
struct Files {
    added: Vec<String>,
    changed: Vec<String>,
    removed: Vec<String>,
}

fn files_of(summary: &Value) -> Files {
    let mut files = Files {
        added: Vec::new(),
        changed: Vec::new(),
        removed: Vec::new(),
    };
    for file in summary["files"].as_array().into_iter().flatten() {
        let path = quoted(file["path"].as_str().unwrap_or_default());
        match file["change"].as_str() {
            Some("create") => files.added.push(path),
            Some("delete") => files.removed.push(path),
            _ => files.changed.push(path),
        }
    }
    files
}

impl Files {
    /// "1 file added (a.js), 2 changed (b.js and c.js)"; "no file changes".
    fn counts(&self) -> String {
        let parts: Vec<String> = [
            (&self.added, "added"),
            (&self.changed, "changed"),
            (&self.removed, "removed"),
        ]
        .into_iter()
        .filter(|(names, _)| !names.is_empty())
        .map(|(names, what)| {
            format!(
                "{} {what} ({})",
                plural(names.len(), "file", "files"),
                listed(names, MAX_FILES_NAMED)
            )
        })
        .collect();
        if parts.is_empty() {
            "no file changes".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(tool: &str, arguments: Value) -> Change {
        Change::of(tool, arguments.as_object().unwrap())
    }

    #[test]
    fn a_new_app_is_said_in_words_not_json() {
        let create = change(
            "createApp",
            json!({"app": "expense-log", "name": "Expense log", "description": "d", "withTable": true}),
        );
        assert_eq!(create.title(), "Create the app expense-log");
        let sentence = create.sentence(&json!({"kind": "arguments"}));
        assert!(
            sentence
                .starts_with("Creates a new app “Expense log” (expense-log) with a starter table"),
            "{sentence}"
        );
        assert!(
            sentence.contains("members see it only once someone grants them access"),
            "{sentence}"
        );
        assert!(!sentence.contains('{'), "{sentence}");
    }

    #[test]
    fn a_file_change_says_draft_or_live_and_how_to_undo_it() {
        let draft = change(
            "writeAppFile",
            json!({"app": "notes", "path": "notes.md", "content": "x", "draft": true}),
        );
        assert_eq!(draft.title(), "Change notes.md in the draft of notes");
        let sentence = draft.sentence(&json!({"change": "create"}));
        assert!(
            sentence.starts_with("Adds notes.md in your draft of notes: nobody else sees it"),
            "{sentence}"
        );
        let live = change("deleteAppFile", json!({"app": "notes", "path": "old.js"}));
        let sentence = live.sentence(&json!({"change": "delete"}));
        assert!(
            sentence.starts_with(
                "Deletes old.js in the live app notes: everyone who uses notes gets it at once"
            ),
            "{sentence}"
        );
    }

    #[test]
    fn a_row_names_its_table_fields_and_who_sees_it() {
        let create = change(
            "app__expense_log__items__create",
            json!({"values": {"title": "Coffee", "amount": 3}}),
        );
        assert_eq!(create.title(), "Add a row to items");
        assert_eq!(
            create.sentence(&Value::Null),
            "Adds a row (amount and title) to the items table of expense-log, as you; whoever can read that table sees it, and it can be changed or deleted later."
        );
        let delete = change("app__expense_log__items__delete", json!({"id": 7}));
        assert!(
            delete
                .sentence(&Value::Null)
                .starts_with("Deletes row 7 of the items table of expense-log"),
        );
    }

    #[test]
    fn a_deploy_counts_and_names_its_files_and_a_publish_its_migrations() {
        let summary = json!({"kind": "deploy", "files": [
            {"path": "app.js", "change": "change"},
            {"path": "chart.js", "change": "create"},
            {"path": "old.css", "change": "delete"},
            {"path": "index.html", "change": "change"},
        ]});
        let update = change(
            "deployMyApp",
            json!({"app": "habits", "name": "Habits", "files": [], "expectedRevision": "a"}),
        );
        assert_eq!(
            update.sentence(&summary),
            "Makes a new version of your app habits live: 1 file added (chart.js), 2 files changed (app.js and index.html), 1 file removed (old.css). People you shared it with get it at once; you can revert to the previous version."
        );
        let new = change("deployMyApp", json!({"name": "Habits", "files": []}));
        assert_eq!(new.title(), "Create your app Habits");
        let publish = change("publishAppDraft", json!({"app": "notes"}));
        let sentence = publish.sentence(&json!({
            "changes": [{"path": "a"}, {"path": "b"}],
            "migrations": [{"file": "m"}],
            "readWidened": ["r"],
        }));
        assert_eq!(
            sentence,
            "Makes your draft of notes live for everyone who uses it: 2 files change, 1 migration runs on its live data, and more people can read records it already holds. History can revert the files, but not what a migration did to the data."
        );
    }

    #[test]
    fn quoted_arguments_are_short_single_lines() {
        let long = change(
            "createApp",
            json!({"app": "x", "name": format!("a\nb {}", "n".repeat(200))}),
        );
        let Change::CreateApp { name, .. } = long else {
            panic!("{long:?}")
        };
        assert!(name.starts_with("a b n"), "{name}");
        assert_eq!(name.chars().count(), MAX_QUOTED_CHARS + 1);
        assert_eq!(
            listed(&["a".into(), "b".into(), "c".into()], 2),
            "a, b and 1 more"
        );
    }
}
