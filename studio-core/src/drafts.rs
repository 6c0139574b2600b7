//! Drafts and publication: a draft is a copy-on-write working set of one
//! app (`studio_store::drafts`), edited by the source tools with `draft: true`
//! (the live-write contract of the tools without it is unchanged),
//! validated like a package, previewed in Studio's sandbox against a scratch
//! copy of the app's data (data-worker's previews, named by the draft's
//! preview id), and published in one step.
//!
//! Who may: the source tools' callers (`crate::access::authorize_manager`):
//! admin or staff with `manage` on the app, through `apps:invoke` +
//! `apps:write`. A draft of an app that is not theirs (or does not exist) is
//! the same `APP_ACCESS_DENIED`; a draft they ask about that was never
//! started is `APP_RECORD_NOT_FOUND` with `details.cause = "DRAFT_NOT_FOUND"`.
//!
//! Publication makes the draft the live revision: refused unless a person
//! approved it (Studio's Draft page, or an elicitation the MCP host answered;
//! `APP_CONFIRMATION_REQUIRED` otherwise), unless the live revision is still
//! the one the draft began from and the caller expected (`APP_CONFLICT`,
//! diagnostic `DRAFT_BASE_MOVED`), unless the draft's files are still the
//! ones reviewed (the review's [`content_hash`], carried back by every
//! publication; `APP_CONFLICT`, `details.cause = "DRAFT_CHANGED"`, so a
//! change made after the review is never published unseen), unless the
//! draft validates, and unless it
//! keeps every applied migration (`APP_SCHEMA_INCOMPATIBLE`). A draft that
//! widens who reads rows that exist needs an admin. The draft's pending
//! migrations are applied to the live data in one transaction first
//! (data-worker's `ApplyContract`); only then are the package's files
//! swapped in with one `RENAME_EXCHANGE` (`package_dir::swap_package`). If the
//! swap fails after the migrations, the applied migrations stay (a migration
//! is never rolled back) and publishing again finishes the job: they are
//! then already applied and the swap is retried.
//!
//! What it must never do: write the live package folder except in
//! publication's swap, or let a preview reach live data (the preview id is
//! data-worker's routing key; the live path never carries one).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use sasha_contract::data::{DATA_OWNER_CHANGED, DATA_READ_WIDENED, DataContract, Widening};
use sasha_package::Diagnostic;
use sasha_package::source::PackageSource;
use sasha_package::validate::{Package, validate_source};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};
use studio_identity::actor::Actor;

use studio_store::blocking;
use studio_store::{
    Draft, DraftFile, Ending, RevisionFile, RevisionOrigin, RevisionSurface, UserRole, draft_action,
};

use crate::access::authorize_manager;
use crate::catalogue::AppEntry;
use crate::data_worker::{self, Application, DriftKind, Publication};
use crate::diff::{FileChange, diff_files};
use crate::package_dir::{SWAP_STAGING_DIR, swap_package};
use crate::read_guard::ReadGuard;
use crate::registry::refresh_catalogue;
use crate::state::Core;
use crate::state::draft_cache::Validated;
use crate::status::{PackageStatus, status};

/// Who approved a publication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Approval {
    /// A person pressed Publish on Studio's Draft page (a signed-in session).
    Studio,
    /// A person answered the MCP host's elicitation with an explicit yes.
    Elicitation,
}

impl Approval {
    fn as_str(self) -> &'static str {
        match self {
            Approval::Studio => "studio",
            Approval::Elicitation => "elicitation",
        }
    }

    fn surface(self) -> RevisionSurface {
        match self {
            Approval::Studio => RevisionSurface::Studio,
            Approval::Elicitation => RevisionSurface::Mcp,
        }
    }
}

/// A draft as the tools and Studio show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DraftInfo {
    /// Names the draft's preview data; a new draft gets a new id.
    pub(crate) preview_id: String,
    /// The live revision the draft began from ("" when the live package did
    /// not validate).
    pub(crate) base_revision: String,
    /// The live revision now; not `base_revision`: the draft is stale.
    pub(crate) live_revision: String,
    pub(crate) status: PackageStatus,
    pub(crate) created_by: Option<String>,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    /// Files that differ from the live package.
    pub(crate) changes: Vec<FileChange>,
    /// What publishing would change besides files (with `detail`, when the
    /// draft validates).
    pub(crate) review: Option<DraftReview>,
    /// Names this exact state of the draft ([`content_hash`]).
    pub(crate) content_hash: String,
}

/// What publishing a draft would change besides files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DraftReview {
    /// Migration files publication applies to the live data, in order.
    pub(crate) migrations: Vec<DraftMigration>,
    /// Applied migrations the draft edits or drops, and what cannot be
    /// checked now: publication is refused.
    pub(crate) drift: Vec<Diagnostic>,
    pub(crate) tables: Vec<TableChange>,
    /// Owner-scoped tables holding rows that the draft makes readable to
    /// more people.
    pub(crate) read_widened: Vec<String>,
    /// Whether only an admin may publish this draft.
    pub(crate) needs_admin: bool,
}

/// One migration publication applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DraftMigration {
    pub(crate) file: String,
    pub(crate) sql: String,
}

/// A table added, removed or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableChange {
    pub(crate) table: String,
    /// `added`, `removed` or `changed`.
    pub(crate) change: String,
    pub(crate) columns: Vec<ColumnChange>,
    /// `declared` / `undeclared`: the table joins or leaves the app's tools.
    pub(crate) declaration: Option<String>,
}

/// A column added, removed or changed, with its declared types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ColumnChange {
    pub(crate) column: String,
    /// `added`, `removed` or `changed`.
    pub(crate) change: String,
    pub(crate) before: Option<String>,
    pub(crate) after: Option<String>,
}

/// A publication done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Published {
    pub(crate) revision: String,
    pub(crate) previous_revision: String,
    pub(crate) migrations_applied: Vec<String>,
    pub(crate) status: PackageStatus,
}

fn invalid(message: impl Into<String>) -> AppError {
    AppError::new(ErrorCode::InputInvalid, message)
}

/// No draft of `app_id`: a record that is not there (not the hidden 404,
/// which would hide the cause the Draft page needs).
pub(crate) fn no_draft(app_id: &str) -> AppError {
    AppError::new(
        ErrorCode::RecordNotFound,
        format!(
            "{app_id} has no draft; a change with draft: true (writeAppFile, editAppFile, deleteAppFile) starts one from the live app"
        ),
    )
    .with_details(json!({"cause": "DRAFT_NOT_FOUND"}))
}

pub(crate) async fn draft_of(core: &Arc<Core>, app_id: &str) -> Result<Option<Draft>, AppError> {
    let (store, app) = (core.store.clone(), app_id.to_owned());
    blocking(move || store.draft(&app)).await
}

pub(crate) async fn contents(
    core: &Arc<Core>,
    app_id: &str,
) -> Result<Vec<(DraftFile, Vec<u8>)>, AppError> {
    let (store, app) = (core.store.clone(), app_id.to_owned());
    blocking(move || store.draft_contents(&app)).await
}

/// The content hash of a draft's files: sha256 hex over each file's path and
/// the sha256 of its bytes (`path NUL sha256 LF`, no path holds either), in
/// path order. It names one exact state of the draft: the review carries it
/// (`DraftInfo.content_hash`), publication must carry it back, and the
/// validation cache is keyed by it.
pub(crate) fn content_hash(files: &[(DraftFile, Vec<u8>)]) -> String {
    let mut listed: Vec<(&str, &str)> = files
        .iter()
        .map(|(file, _)| (file.path.as_str(), file.sha256.as_str()))
        .collect();
    listed.sort_unstable();
    sasha_contract::data::sha256_hex(
        listed
            .into_iter()
            .map(|(path, sha256)| format!("{path}\0{sha256}\n"))
            .collect::<String>()
            .as_bytes(),
    )
}

/// The refusal of a publication whose draft is not the one reviewed.
fn draft_changed(reviewed: &str, now: &str) -> AppError {
    AppError::new(
        ErrorCode::Conflict,
        "the draft changed since you reviewed it; nothing was published. Review it again \
         (its changes are shown as they are now) and publish what you reviewed",
    )
    .with_details(json!({
        "cause": "DRAFT_CHANGED",
        "contentHash": now,
        "reviewedContentHash": reviewed,
    }))
}

/// The draft's files validated (cached by their content hash).
pub(crate) async fn validated(
    core: &Arc<Core>,
    app_id: &str,
) -> Result<(Vec<(DraftFile, Vec<u8>)>, Arc<Validated>), AppError> {
    let files = contents(core, app_id).await?;
    let fingerprint = content_hash(&files);
    if let Some(validated) = core.drafts.get(app_id, &fingerprint) {
        return Ok((files, validated));
    }
    let mut source = PackageSource::default();
    for (file, bytes) in &files {
        source.set(&file.path, Some(bytes));
    }
    let app = app_id.to_owned();
    let validation = tokio::task::spawn_blocking(move || validate_source(&app, source))
        .await
        .map_err(|_| AppError::from_code(ErrorCode::Internal))?;
    let validated = Arc::new(Validated {
        package: validation.package.map(Arc::new),
        diagnostics: validation.diagnostics.to_vec(),
    });
    core.drafts
        .insert(app_id, fingerprint, Arc::clone(&validated));
    Ok((files, validated))
}

/// The live package as the catalogue holds it, and its revision ("" when it
/// does not validate).
fn live(core: &Core, app_id: &str) -> (Option<Arc<Package>>, String) {
    match core.catalogue.current().apps.get(app_id) {
        Some(AppEntry::Valid(package)) => {
            (Some(package.clone()), package.resource.revision.clone())
        }
        _ => (None, String::new()),
    }
}

/// The live package folder's files, as the validator reads them.
async fn live_files(core: &Arc<Core>, app_id: &str) -> Result<Vec<(String, Vec<u8>)>, AppError> {
    let (tree, app) = (core.source.clone(), app_id.to_owned());
    tokio::task::spawn_blocking(move || {
        tree.package_source(&app)
            .entries()
            .into_iter()
            .map(|(path, bytes)| (path.to_owned(), bytes.to_vec()))
            .collect()
    })
    .await
    .map_err(|_| AppError::from_code(ErrorCode::Internal))
}

/// The app's draft, started from the live package now if it has none.
pub(crate) async fn start(
    core: &Arc<Core>,
    user_id: &str,
    app_id: &str,
) -> Result<(Draft, bool), AppError> {
    if let Some(draft) = draft_of(core, app_id).await? {
        return Ok((draft, false));
    }
    refresh_catalogue(core).await;
    let (_, base) = live(core, app_id);
    let files = live_files(core, app_id).await?;
    let (store, app, user) = (core.store.clone(), app_id.to_owned(), user_id.to_owned());
    let started = blocking(move || store.start_draft(&app, &user, &base, &files)).await?;
    if started.1 {
        tracing::info!(app_id, "draft started");
    }
    Ok(started)
}

/// Starts the app's draft for Studio's Draft page: `(draft, started now)`.
pub(crate) async fn start_for(
    core: &Arc<Core>,
    actor: &Actor,
    app_id: &str,
) -> Result<(DraftInfo, bool), AppError> {
    let (draft, started) = start(core, &actor.user_id, app_id).await?;
    Ok((info(core, &draft, true).await?, started))
}

// --- what a draft is, against the live app -------------------------------

/// The draft as the tools and Studio show it; with `detail`, the unified
/// diffs of its changes and the review of what publishing would do.
pub(crate) async fn info(
    core: &Arc<Core>,
    draft: &Draft,
    detail: bool,
) -> Result<DraftInfo, AppError> {
    let app_id = draft.app_id.as_str();
    let (files, validated) = validated(core, app_id).await?;
    let content_hash = content_hash(&files);
    let (live_package, live_revision) = live(core, app_id);
    let draft_revision = validated
        .package
        .as_ref()
        .map(|package| package.resource.revision.clone());
    let changes = changes(
        core,
        app_id,
        &live_revision,
        draft_revision.as_deref(),
        files,
        detail,
    )
    .await?;
    let mut diagnostics = validated.diagnostics.clone();
    let review = match &validated.package {
        Some(package) if detail => {
            let review = review(core, app_id, live_package.as_deref(), package).await;
            diagnostics.extend(review.drift.iter().cloned());
            Some(review)
        }
        _ => None,
    };
    let (store, user) = (core.store.clone(), draft.created_by.clone());
    let created_by = blocking(move || store.user(&user))
        .await
        .ok()
        .flatten()
        .map(|user| user.username);
    Ok(DraftInfo {
        preview_id: draft.preview_id.clone(),
        base_revision: draft.base_revision.clone(),
        live_revision,
        status: PackageStatus {
            ok: validated.package.is_some() && diagnostics.is_empty(),
            revision: draft_revision,
            diagnostics,
        },
        created_by,
        created_at: draft.created_at,
        updated_at: draft.updated_at,
        changes,
        review,
        content_hash,
    })
}

/// The files of the draft that differ from the live package's; with
/// `detail`, with unified diffs (bounded as `diffAppRevisions`' are).
async fn changes(
    core: &Arc<Core>,
    app_id: &str,
    live_revision: &str,
    draft_revision: Option<&str>,
    files: Vec<(DraftFile, Vec<u8>)>,
    detail: bool,
) -> Result<Vec<FileChange>, AppError> {
    let addressed = |path: String, bytes: Vec<u8>| {
        (
            RevisionFile {
                sha256: sasha_contract::data::sha256_hex(&bytes),
                size: i64::try_from(bytes.len()).unwrap_or(i64::MAX),
                path,
            },
            bytes,
        )
    };
    let live_files: Vec<(RevisionFile, Vec<u8>)> = live_files(core, app_id)
        .await?
        .into_iter()
        .map(|(path, bytes)| addressed(path, bytes))
        .collect();
    let draft_files: Vec<(RevisionFile, Vec<u8>)> = files
        .into_iter()
        .map(|(file, bytes)| addressed(file.path, bytes))
        .collect();
    let mut changes = diff_files(
        live_revision,
        draft_revision.unwrap_or("draft"),
        &live_files,
        &draft_files,
    )
    .files;
    if !detail {
        for change in &mut changes {
            change.unified = None;
        }
    }
    Ok(changes)
}

/// What the person is asked before a publication: what changes, and that
/// it becomes live for everyone.
fn publication_summary(app_id: &str, changes: &[FileChange], review: &DraftReview) -> String {
    let mut lines = vec![format!(
        "Publish the draft of {app_id}? It becomes the live app for every user."
    )];
    let shown: Vec<String> = changes
        .iter()
        .take(12)
        .map(|change| format!("{} {}", change.change, change.path))
        .collect();
    let more = changes.len().saturating_sub(shown.len());
    if shown.is_empty() {
        lines.push("Files: none changed.".to_owned());
    } else {
        lines.push(format!(
            "Files: {}{}.",
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    for migration in &review.migrations {
        lines.push(format!(
            "Applies the data migration {} to the live data.",
            migration.file
        ));
    }
    for table in &review.tables {
        let columns: Vec<String> = table
            .columns
            .iter()
            .map(|column| format!("{} {}", column.change, column.column))
            .collect();
        lines.push(format!(
            "Table {} {}{}.",
            table.table,
            table.change,
            if columns.is_empty() {
                String::new()
            } else {
                format!(" ({})", columns.join(", "))
            }
        ));
    }
    for widened in &review.read_widened {
        lines.push(format!("Warning: {widened}."));
    }
    lines.join("\n")
}

/// What publishing `package` over the live app would change besides files.
/// A check that cannot be made now (data-worker unreachable) is a
/// diagnostic, so the draft does not look publishable.
async fn review(
    core: &Arc<Core>,
    app_id: &str,
    live: Option<&Package>,
    package: &Package,
) -> DraftReview {
    let mut review = DraftReview {
        tables: table_changes(
            live.and_then(|live| live.data.as_ref()),
            package.data.as_ref(),
        ),
        ..DraftReview::default()
    };
    let drift = |file: &str, reason: &str| Diagnostic {
        file: file.to_owned(),
        line: None,
        code: "APP_MIGRATION_DRIFT".to_owned(),
        reason: reason.to_owned(),
    };
    match &package.data {
        Some(data) => {
            match data_worker::apply_contract(&core.data, app_id, data, Application::DryRun).await {
                Ok(reply) => {
                    review.migrations = reply
                        .applied
                        .iter()
                        .filter_map(|file| data.migrations.iter().find(|m| &m.file == file))
                        .map(|migration| DraftMigration {
                            file: migration.file.clone(),
                            sql: migration.sql.clone(),
                        })
                        .collect();
                    review.drift = reply
                    .drift
                    .iter()
                    .map(|d| {
                        drift(
                            &d.file,
                            if d.kind == DriftKind::NotInContract {
                                "applied to the live data, and the draft does not have it; restore it"
                            } else {
                                "applied to the live data with other content; restore its applied content and add a new migration instead"
                            },
                        )
                    })
                    .collect();
                }
                Err(error) => review.drift.push(Diagnostic {
                    file: "migrations".to_owned(),
                    line: None,
                    code: error.code.as_str().to_owned(),
                    reason: format!(
                        "the live data's migrations cannot be checked right now: {}",
                        error.message
                    ),
                }),
            }
        }
        None => {
            for migration in live
                .and_then(|live| live.data.as_ref())
                .map(|data| data.migrations.as_slice())
                .unwrap_or_default()
            {
                review.drift.push(drift(
                    &migration.file,
                    "in the live app, and the draft has no data at all",
                ));
            }
        }
    }
    match ReadGuard::load_for(core, app_id, package.data.as_ref()).await {
        Ok(guard) => {
            let widened = guard.widenings(package.data.as_ref());
            review.read_widened = widened.iter().map(Widening::reason).collect();
            if guard.is_member() {
                // Nobody may approve it: a refusal, like drift.
                review
                    .drift
                    .extend(widened.iter().map(|widening| Diagnostic {
                        file: "APP.md".to_owned(),
                        line: None,
                        code: widening.code().to_owned(),
                        reason: format!(
                            "{}; this is never allowed in a member app",
                            widening.reason()
                        ),
                    }));
            } else {
                review.needs_admin = !widened.is_empty();
            }
        }
        Err(error) => review.drift.push(Diagnostic {
            file: "APP.md".to_owned(),
            line: None,
            code: error.code.as_str().to_owned(),
            reason: "cannot check which tables hold rows right now; try again".to_owned(),
        }),
    }
    review
}

/// Tables and columns added, removed or changed from `before` to `after`.
pub(crate) fn table_changes(
    before: Option<&DataContract>,
    after: Option<&DataContract>,
) -> Vec<TableChange> {
    let empty = BTreeMap::new();
    let old = before.map_or(&empty, |contract| &contract.schema.tables);
    let new = after.map_or(&empty, |contract| &contract.schema.tables);
    let declared = |contract: Option<&DataContract>, name: &str| {
        contract.is_some_and(|contract| contract.tables.contains_key(name))
    };
    let names: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut changes = Vec::new();
    for name in names {
        let declaration = match (declared(before, name), declared(after, name)) {
            (false, true) => Some("declared".to_owned()),
            (true, false) => Some("undeclared".to_owned()),
            _ => None,
        };
        let (change, columns) = match (old.get(name), new.get(name)) {
            (None, Some(table)) => (
                "added",
                table
                    .columns
                    .iter()
                    .map(|column| ColumnChange {
                        column: column.name.clone(),
                        change: "added".to_owned(),
                        before: None,
                        after: Some(column.declared_type.clone()),
                    })
                    .collect(),
            ),
            (Some(_), None) => ("removed", Vec::new()),
            (Some(was), Some(is)) => {
                let mut columns = Vec::new();
                for column in &is.columns {
                    match was.column(&column.name) {
                        None => columns.push(ColumnChange {
                            column: column.name.clone(),
                            change: "added".to_owned(),
                            before: None,
                            after: Some(column.declared_type.clone()),
                        }),
                        Some(old) if old != column => columns.push(ColumnChange {
                            column: column.name.clone(),
                            change: "changed".to_owned(),
                            before: Some(old.declared_type.clone()),
                            after: Some(column.declared_type.clone()),
                        }),
                        Some(_) => {}
                    }
                }
                for column in &was.columns {
                    if is.column(&column.name).is_none() {
                        columns.push(ColumnChange {
                            column: column.name.clone(),
                            change: "removed".to_owned(),
                            before: Some(column.declared_type.clone()),
                            after: None,
                        });
                    }
                }
                if columns.is_empty() && declaration.is_none() && was == is {
                    continue;
                }
                ("changed", columns)
            }
            (None, None) => continue,
        };
        changes.push(TableChange {
            table: name.clone(),
            change: change.to_owned(),
            columns,
            declaration,
        });
    }
    changes
}

// --- publish and discard ------------------------------------------------------

/// Serialises publications and discards in this process: a draft ends once.
static ENDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What a publication names: the live revision the draft began from and the
/// content hash of the draft the person reviewed.
pub(crate) struct Reviewed<'a> {
    pub(crate) expected_revision: &'a str,
    pub(crate) content_hash: &'a str,
}

/// Publishes the app's draft; see the module comment for every refusal.
pub(crate) async fn publish(
    core: &Arc<Core>,
    actor: &Actor,
    app_id: &str,
    reviewed: Reviewed<'_>,
    approval: Option<Approval>,
) -> Result<Published, AppError> {
    let expected = reviewed.expected_revision;
    if !sasha_contract::data::is_sha256_hex(reviewed.content_hash) {
        return Err(invalid(
            "contentHash is required: the contentHash of the draft you reviewed \
             (checkApp with draft: true, or the Draft page, shows it)",
        )
        .with_details(json!({"field": "contentHash"})));
    }
    let _ending = ENDING.lock().await;
    let draft = draft_of(core, app_id)
        .await?
        .ok_or_else(|| no_draft(app_id))?;
    refresh_catalogue(core).await;
    let (_, live_revision) = live(core, app_id);
    if expected != draft.base_revision || live_revision != draft.base_revision {
        let reason = if live_revision != draft.base_revision {
            format!(
                "the live app changed since the draft began (it began from {}, the live revision is now {}); \
                 discard the draft and start again from the live app",
                shown(&draft.base_revision),
                shown(&live_revision)
            )
        } else {
            format!(
                "expectedRevision is not the revision the draft began from ({}); check the draft again",
                shown(&draft.base_revision)
            )
        };
        return Err(
            AppError::new(ErrorCode::Conflict, reason.clone()).with_details(json!({
                "reason": "stale-revision",
                "baseRevision": draft.base_revision,
                "liveRevision": live_revision,
                "diagnostics": [{"file": "APP.md", "code": "DRAFT_BASE_MOVED", "reason": reason}],
            })),
        );
    }
    // The files read here are the ones published: the hash is checked on
    // exactly these bytes, so an edit after the review never goes live
    // unseen (and one landing after this read stays out of the swap).
    let (files, validated) = validated(core, app_id).await?;
    let now = content_hash(&files);
    if now != reviewed.content_hash {
        return Err(draft_changed(reviewed.content_hash, &now));
    }
    let Some(package) = validated.package.clone() else {
        return Err(invalid(
            "the draft does not validate; fix its diagnostics (checkApp with draft: true) before publishing",
        )
        .with_details(json!({"diagnostics": diagnostics_json(&validated.diagnostics)})));
    };
    let (live_package, _) = live(core, app_id);
    let review = review(core, app_id, live_package.as_deref(), &package).await;
    if let Some(first) = review
        .drift
        .iter()
        .find(|d| [DATA_READ_WIDENED, DATA_OWNER_CHANGED].contains(&d.code.as_str()))
    {
        return Err(AppError::new(ErrorCode::AccessDenied, first.reason.clone())
            .with_details(json!({"diagnostics": diagnostics_json(&review.drift)})));
    }
    if let Some(first) = review.drift.first() {
        return Err(AppError::new(
            ErrorCode::SchemaIncompatible,
            format!(
                "{}: {}; publishing never rewinds or edits applied data migrations",
                first.file, first.reason
            ),
        )
        .with_details(json!({"diagnostics": diagnostics_json(&review.drift)})));
    }
    if review.needs_admin && !actor.has_role(UserRole::Admin) {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            format!(
                "{}; a draft that widens who can read existing rows can only be published by an admin",
                review.read_widened.first().map_or("", String::as_str)
            ),
        )
        .with_details(json!({"diagnostics": review.read_widened.iter().map(|reason| json!({"file": "APP.md", "code": DATA_READ_WIDENED, "reason": reason})).collect::<Vec<_>>()})));
    }
    // Everything a person would be asked about holds: now their approval.
    let Some(approval) = approval else {
        let changes = changes(
            core,
            app_id,
            &live_revision,
            Some(&package.resource.revision),
            files,
            false,
        )
        .await?;
        return Err(AppError::new(
            ErrorCode::ConfirmationRequired,
            "publishing a draft needs a person's approval: publish it from Studio's Draft page, \
             or from an MCP client that can ask its user (elicitation); nothing was published",
        )
        .with_details(json!({"summary": publication_summary(app_id, &changes, &review)})));
    };
    // The risky step first, in one transaction: a migration that fails
    // leaves the live data and the live package as they were.
    // An admin publishing a draft whose review showed a widening approves
    // it (the check above); data-worker allows such a change only then, and
    // refuses anything the review did not show.
    let approved_by_admin = if review.needs_admin && actor.has_role(UserRole::Admin) {
        actor.user_id.as_str()
    } else {
        ""
    };
    let migrations_applied = match &package.data {
        Some(data) => {
            let publication = Publication {
                by: &actor.user_id,
                revision: &package.resource.revision,
                approved_by_admin,
            };
            let reply = data_worker::apply_contract(
                &core.data,
                app_id,
                data,
                Application::Publish(publication),
            )
            .await?;
            if !reply.drift.is_empty() {
                return Err(AppError::new(
                    ErrorCode::SchemaIncompatible,
                    "the live data's applied migrations changed while publishing; nothing was published",
                ));
            }
            reply.applied
        }
        None => Vec::new(),
    };
    let changed_at = core.store.timestamp();
    let apps_dir = core.catalogue.apps_dir().to_owned();
    let staging = apps_dir
        .parent()
        .map(|docs| docs.join(SWAP_STAGING_DIR))
        .unwrap_or_else(|| apps_dir.join(SWAP_STAGING_DIR));
    let written: BTreeMap<String, Vec<u8>> = files
        .into_iter()
        .map(|(file, bytes)| (file.path, bytes))
        .collect();
    let (id, tree) = (app_id.to_owned(), core.source.clone());
    let (store, packages) = (core.store.clone(), core.packages.clone());
    // The swap and its settling as the package's head, under one hold of
    // the app's lock: no other replica's head is taken in between.
    tokio::task::spawn_blocking(move || {
        tree.with_app_lock(&id, || {
            let before = packages.overtaken(&id);
            swap_package(&apps_dir, &staging, &id, &written)
                .map(|()| crate::registry::settle_change(&store, &packages, &id, before))
        })
    })
    .await
    .map_err(|_| AppError::from_code(ErrorCode::Internal))?
    .map_err(|error| {
        let failure = AppError::new(
            ErrorCode::DatabaseUnavailable,
            "the draft's files could not be made live; its migrations are applied, publish again to finish",
        );
        tracing::error!(diagnostic_id = %failure.diagnostic_id, app_id, %error, "publishing a draft's files failed");
        failure
    })??;
    let revision = package.resource.revision.clone();
    end(
        core,
        &actor.user_id,
        &draft,
        draft_action::DRAFT_PUBLISHED,
        Some(approval.as_str()),
        Some(&live_revision),
        Some(&revision),
    )
    .await?;
    let status = status(core, app_id).await;
    let summary = match migrations_applied.len() {
        0 => "publishAppDraft".to_owned(),
        count => format!("publishAppDraft with {count} migration(s)"),
    };
    let origin = RevisionOrigin::authored(approval.surface(), &actor.user_id, summary, changed_at);
    crate::ledger::record_authored(core, app_id, origin).await;
    tracing::info!(app_id, from = %live_revision, to = %revision, approval = approval.as_str(), "draft published");
    Ok(Published {
        revision,
        previous_revision: live_revision,
        migrations_applied,
        status,
    })
}

fn shown(revision: &str) -> &str {
    if revision.is_empty() {
        "a package that did not validate"
    } else {
        revision
    }
}

fn diagnostics_json(diagnostics: &[Diagnostic]) -> Vec<Value> {
    diagnostics
        .iter()
        .map(|d| json!({"file": d.file, "line": d.line, "code": d.code, "reason": d.reason}))
        .collect()
}

/// Discards the app's draft.
pub(crate) async fn discard(core: &Arc<Core>, user_id: &str, app_id: &str) -> Result<(), AppError> {
    let _ending = ENDING.lock().await;
    let draft = draft_of(core, app_id)
        .await?
        .ok_or_else(|| no_draft(app_id))?;
    let base = draft.base_revision.clone();
    end(
        core,
        user_id,
        &draft,
        draft_action::DRAFT_DISCARDED,
        None,
        Some(base.as_str()).filter(|base| !base.is_empty()),
        None,
    )
    .await?;
    tracing::info!(app_id, "draft discarded");
    Ok(())
}

/// Removes the draft's rows (audited as `ending`) and its preview data.
async fn end(
    core: &Arc<Core>,
    user_id: &str,
    draft: &Draft,
    action: &'static str,
    subject: Option<&str>,
    before: Option<&str>,
    after: Option<&str>,
) -> Result<(), AppError> {
    let (store, app, preview, user) = (
        core.store.clone(),
        draft.app_id.clone(),
        draft.preview_id.clone(),
        user_id.to_owned(),
    );
    let (subject, before, after) = (
        subject.map(str::to_owned),
        before.map(str::to_owned),
        after.map(str::to_owned),
    );
    blocking(move || {
        let ending = Ending {
            action,
            subject: subject.as_deref(),
            before: before.as_deref(),
            after: after.as_deref(),
        };
        store.end_draft(&app, &preview, &user, ending)
    })
    .await?;
    core.drafts.remove(&draft.app_id);
    data_worker::remove_preview(&core.data, &draft.app_id, &draft.preview_id).await;
    Ok(())
}

// --- the draft tools and the Draft page ------------------------------------

/// What one draft request asks (the MCP tools `checkApp` with draft,
/// `publishAppDraft`, `discardAppDraft`, and the Draft page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Operation {
    /// The draft with its review.
    Review,
    /// Publish the draft reviewed against `expected_revision` whose files'
    /// hash was `content_hash`, approved by `approval` (`None`: not yet).
    Publish {
        expected_revision: String,
        content_hash: String,
        approval: Option<Approval>,
    },
    /// Discard the draft.
    Discard,
}

/// What one draft request answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Draft(DraftInfo),
    Published(Published),
    Discarded,
}

/// One draft request of `actor` about `app_id`. Who may is the source
/// tools' rule; `None` (no operation named) is refused after it.
pub(crate) async fn answer(
    core: &Arc<Core>,
    actor: &Actor,
    app_id: &str,
    operation: Option<Operation>,
) -> Result<Answer, AppError> {
    if sasha_contract::AppId::parse(app_id).is_err() {
        return Err(invalid("app must be an app id in lowercase kebab-case"));
    }
    authorize_manager(core, actor, app_id).await?;
    Ok(match operation {
        Some(Operation::Review) => {
            let draft = draft_of(core, app_id)
                .await?
                .ok_or_else(|| no_draft(app_id))?;
            Answer::Draft(info(core, &draft, true).await?)
        }
        Some(Operation::Publish {
            expected_revision,
            content_hash,
            approval,
        }) => {
            let reviewed = Reviewed {
                expected_revision: &expected_revision,
                content_hash: &content_hash,
            };
            Answer::Published(publish(core, actor, app_id, reviewed, approval).await?)
        }
        Some(Operation::Discard) => {
            discard(core, &actor.user_id, app_id).await?;
            Answer::Discarded
        }
        None => return Err(invalid("a draft request names its operation")),
    })
}

/// Ends a member app's draft, if it has one, once its author deployed (the
/// draft began from a revision that is no longer current).
pub(crate) async fn end_member_draft(
    core: &Arc<Core>,
    user_id: &str,
    app_id: &str,
) -> Result<(), AppError> {
    let _ending = ENDING.lock().await;
    let Some(draft) = draft_of(core, app_id).await? else {
        return Ok(());
    };
    end(
        core,
        user_id,
        &draft,
        draft_action::DRAFT_DISCARDED,
        None,
        Some(draft.base_revision.as_str()).filter(|base| !base.is_empty()),
        None,
    )
    .await
}

/// Replaces a member app's draft with `files`, begun from `base` (App
/// Studio's Preview; `crate::member_apps` checked the author): its preview
/// id and validation.
pub(crate) async fn replace_member_draft(
    core: &Arc<Core>,
    user_id: &str,
    app_id: &str,
    base: &str,
    files: Vec<(String, Vec<u8>)>,
) -> Result<(String, Arc<Validated>), AppError> {
    let _ending = ENDING.lock().await;
    if let Some(draft) = draft_of(core, app_id).await? {
        end(
            core,
            user_id,
            &draft,
            draft_action::DRAFT_DISCARDED,
            None,
            Some(draft.base_revision.as_str()).filter(|base| !base.is_empty()),
            None,
        )
        .await?;
    }
    let (store, app, user, base) = (
        core.store.clone(),
        app_id.to_owned(),
        user_id.to_owned(),
        base.to_owned(),
    );
    let (draft, _) = blocking(move || store.start_draft(&app, &user, &base, &files)).await?;
    let (_, validated) = validated(core, app_id).await?;
    Ok((draft.preview_id, validated))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod preview_tests;
