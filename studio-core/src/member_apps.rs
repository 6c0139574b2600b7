//! Member apps: the second trust tier. Any user whose credential holds
//! `apps:invoke` + `apps:author` deploys their own app; it is user content,
//! stored in the core database (its files are revision-ledger blobs, never a
//! folder under `DOCS_ROOT`), validated by the one validator into the same
//! hashed resource and served in the same two-layer sandbox by the same
//! catalogue (`Catalogue::set_member`). `CoreService.MemberApps` (the
//! gateway's member app tools) and App Studio (`crate::http`) call the
//! same functions here.
//!
//! The tier's rules: the platform names every member app
//! (`sasha_package::manifest::member_app_id`, random, and written into
//! `APP.md`'s `id:`), so a new app names no id and nobody learns that another
//! app holds one or takes one a catalogue app will want; its files obey the
//! package file rules every source-tool write obeys
//! (`crate::source::check_package_files`); every declared table is
//! owner-scoped, so each user of a shared app sees only their own rows; the
//! author alone manages the app and may share `use` by user name, answered
//! alike whether or not an account holds that name; only the recorded author
//! deploys over it (an assistant acts with its person's own credential, so
//! "the assistant acting for that author" is that author); the caps (200 in
//! the instance, 40 per author), the bytes one author's apps keep in the
//! ledger and the switch hold in the deploy's one transaction
//! (`Store::deploy_member_app`), and each author's deploys are throttled; a
//! deploy, a share and a delete each need a person's approval (App Studio's
//! button, or their yes to the gateway's question), so a model acting with
//! the person's credential cannot hand the app (or everyone's rows in it) to
//! anyone, or destroy them, alone. While a moderator has an app disabled,
//! its author can neither deploy, draft, preview nor share it.
//! Moderators (admin and staff, the role read fresh) list, disable and
//! delete any member app without being able to read or change it; an admin
//! promotes one into the catalogue.
//!
//! What it must never do: tell a caller whether an app they may not change
//! exists (every such refusal is the same `APP_ACCESS_DENIED`) or whether a
//! user name has an account, write under `DOCS_ROOT` except a promotion's
//! package, or deploy while member apps are turned off (deleting stays
//! open).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use base64::Engine as _;
use sasha_contract::data::Access;
use sasha_package::Diagnostic;
use sasha_package::manifest::{MEMBER_ID_ENTROPY_BYTES, member_app_id, with_manifest_id};
use sasha_package::source::PackageSource;
use sasha_package::validate::{Package, validate_source};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};
use studio_identity::actor::Actor;

use studio_store::blocking;
use studio_store::{
    MemberApp, MemberCaps, MemberDeploy, MemberRefusal, PrincipalKind, RevisionContent,
    RevisionOrigin, RevisionSurface, Scope, UserRole,
};

use crate::history::Revision;
use crate::state::Core;
use crate::status::PackageStatus;

/// Live member apps the instance holds at most.
pub(crate) const MAX_MEMBER_APPS: usize = 200;
/// Live member apps one author holds at most, so nobody starves the
/// instance's cap.
pub(crate) const MAX_MEMBER_APPS_PER_AUTHOR: usize = 40;
/// Bytes the ledger keeps for one author's member apps at most (every kept
/// revision's resource and each distinct file of their revisions and
/// drafts). Room for one full-size app's whole kept history (at the default
/// retention of 50 revisions, a 1 MiB package with its resource of up to
/// about 1.4 MiB is some 120 MiB), so no single app is ever stuck by its own
/// history; and a bound on what one person can make the core database hold.
pub(crate) const MAX_MEMBER_LEDGER_BYTES_PER_AUTHOR: u64 = 128 * 1024 * 1024;
/// User names one member app may be shared with.
pub(crate) const MAX_MEMBER_APP_SHARES: usize = 100;
/// The diagnostic of a shared table in a member app.
pub(crate) const MEMBER_TABLE_SHARED: &str = "MEMBER_TABLE_SHARED";
/// The diagnostic of `managersReadAll` in a member app.
pub(crate) const MEMBER_TABLE_MANAGERS_READ_ALL: &str = "MEMBER_TABLE_MANAGERS_READ_ALL";

/// The caps a deploy is checked against, as `Core` holds them.
pub(crate) const MEMBER_CAPS: MemberCaps = MemberCaps {
    instance: MAX_MEMBER_APPS,
    per_author: MAX_MEMBER_APPS_PER_AUTHOR,
    author_bytes: MAX_MEMBER_LEDGER_BYTES_PER_AUTHOR,
};

fn denied() -> AppError {
    AppError::new(
        ErrorCode::AccessDenied,
        "that is not a member app you may change",
    )
}

fn invalid(message: impl Into<String>) -> AppError {
    AppError::new(ErrorCode::InputInvalid, message)
}

/// The refusal of a build or change while an admin turned member apps off.
pub(crate) fn turned_off() -> AppError {
    AppError::new(
        ErrorCode::OperationUnavailable,
        "an administrator has turned off member apps: nothing was deployed. Apps already \
         deployed keep running and can still be deleted",
    )
    .with_details(json!({"reason": "member-apps-off"}))
}

/// The refusal of a change to an app a moderator disabled.
fn disabled(app_id: &str) -> AppError {
    AppError::new(
        ErrorCode::OperationUnavailable,
        format!(
            "a moderator disabled {app_id}: it cannot be changed, previewed or shared until an \
             admin or staff member enables it again"
        ),
    )
    .with_details(json!({"reason": "disabled"}))
}

const MIB: u64 = 1024 * 1024;

fn refused(app_id: &str, refusal: MemberRefusal) -> AppError {
    match refusal {
        MemberRefusal::Off => turned_off(),
        MemberRefusal::InstanceCap(limit) => AppError::new(
            ErrorCode::ResourceLimit,
            format!(
                "this instance already holds {limit} member apps, the most it allows; \
                 nothing was deployed: delete an app first"
            ),
        )
        .with_details(json!({"cap": "instance", "limit": limit})),
        MemberRefusal::AuthorCap(limit) => AppError::new(
            ErrorCode::ResourceLimit,
            format!(
                "you already have {limit} member apps, the most one person may have; \
                 nothing was deployed: delete one of yours first"
            ),
        )
        .with_details(json!({"cap": "per-author", "limit": limit})),
        MemberRefusal::AuthorBytes { limit, used } => AppError::new(
            ErrorCode::ResourceLimit,
            format!(
                "with this deploy your member apps and their kept history would hold {} MiB, \
                 more than the {} MiB one person may keep; nothing was deployed: delete an app \
                 you no longer need (its history goes with it)",
                used.div_ceil(MIB),
                limit / MIB
            ),
        )
        .with_details(json!({"cap": "author-bytes", "limit": limit, "used": used})),
        MemberRefusal::SharesCap(limit) => AppError::new(
            ErrorCode::ResourceLimit,
            format!(
                "{app_id} is already shared with {limit} names, the most an app may be; \
                 stop sharing it with someone first"
            ),
        )
        .with_details(json!({"cap": "shares", "limit": limit})),
        // A fresh random id an app took between the look and the deploy.
        MemberRefusal::IdTaken => AppError::new(
            ErrorCode::Conflict,
            "the new app's id was taken in the meantime; nothing was deployed: deploy again",
        )
        .with_details(json!({"reason": "id-taken"})),
        MemberRefusal::Denied => denied(),
        MemberRefusal::Disabled => disabled(app_id),
        MemberRefusal::Stale { current } => AppError::new(
            ErrorCode::Conflict,
            format!(
                "{app_id} changed since you read it (it is now at revision {}); read it again, \
                 then deploy with that revision",
                &current[..current.len().min(12)]
            ),
        )
        .with_details(json!({"reason": "stale-revision", "currentRevision": current})),
    }
}

/// The user id of a principal that may author member apps: a user's
/// credential (never an API key) holding `apps:invoke` + `apps:author`, the
/// user read again.
pub(crate) async fn author(core: &Arc<Core>, actor: &Actor) -> Result<String, AppError> {
    let scoped = !actor.is(PrincipalKind::ApiKey)
        && actor.has(Scope::AppsInvoke)
        && actor.has(Scope::AppsAuthor);
    if !scoped {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            "member apps need a user's credential with the apps:invoke and apps:author scopes",
        ));
    }
    let (store, user) = (core.store.clone(), actor.user_id.clone());
    match blocking(move || store.user(&user)).await? {
        Some(user) => Ok(user.id),
        None => Err(AppError::new(
            ErrorCode::Unauthenticated,
            "the account no longer exists",
        )),
    }
}

/// The role of `user_id`, read fresh: `Some` for admin and staff.
async fn moderator(core: &Arc<Core>, user_id: &str) -> Result<Option<UserRole>, AppError> {
    let (store, user) = (core.store.clone(), user_id.to_owned());
    let role = blocking(move || store.user(&user)).await?.map(|u| u.role);
    Ok(role.filter(|role| role.is_privileged()))
}

/// `user_id`'s own live member app `app_id`; anything else is the one
/// refusal that does not say whether the app exists.
pub(crate) async fn owned(
    core: &Arc<Core>,
    user_id: &str,
    app_id: &str,
) -> Result<MemberApp, AppError> {
    if sasha_contract::AppId::parse(app_id).is_err() {
        return Err(invalid("app must be an app id in lowercase kebab-case"));
    }
    let (store, app) = (core.store.clone(), app_id.to_owned());
    match blocking(move || store.member_app(&app)).await? {
        Some(app) if app.author_id.as_deref() == Some(user_id) => Ok(app),
        _ => Err(denied()),
    }
}

/// [`owned`], and not disabled by a moderator: what its author may change,
/// draft, preview or share.
pub(crate) async fn changeable(
    core: &Arc<Core>,
    user_id: &str,
    app_id: &str,
) -> Result<MemberApp, AppError> {
    let app = owned(core, user_id, app_id).await?;
    if app.disabled {
        return Err(disabled(app_id));
    }
    Ok(app)
}

/// Whether `actor` may author member apps and is the author of the live
/// member app `app_id` (`Ok(false)`: they are not); the author of one a
/// moderator disabled is refused with why.
pub(crate) async fn authored_by(
    core: &Arc<Core>,
    actor: &Actor,
    app_id: &str,
) -> Result<bool, AppError> {
    let Ok(user_id) = author(core, actor).await else {
        return Ok(false);
    };
    match changeable(core, &user_id, app_id).await {
        Ok(_) => Ok(true),
        Err(error) if error.code == ErrorCode::OperationUnavailable => Err(error),
        Err(_) => Ok(false),
    }
}

fn diagnostic(file: &str, line: Option<u32>, code: &str, reason: &str) -> Diagnostic {
    Diagnostic {
        file: file.to_owned(),
        line,
        code: code.to_owned(),
        reason: reason.to_owned(),
    }
}

/// The member tier's own rule beyond the validator: every declared table is
/// owner-scoped and read by its owners alone (no `managersReadAll`: the
/// author holds `manage`, and would read every sharee's rows), so a shared
/// app never shows one user's rows to another.
fn tier_diagnostics(package: &Package) -> Vec<Diagnostic> {
    let Some(data) = &package.data else {
        return Vec::new();
    };
    let mut diagnostics = Vec::new();
    for (name, table) in &data.tables {
        if table.access != Access::Owner {
            diagnostics.push(diagnostic(
                "APP.md",
                None,
                MEMBER_TABLE_SHARED,
                &format!(
                    "member apps keep each person's rows to themselves: declare {name} with \
                     access: owner and an ownerField"
                ),
            ));
        } else if table.managers_read_all {
            diagnostics.push(diagnostic(
                "APP.md",
                None,
                MEMBER_TABLE_MANAGERS_READ_ALL,
                &format!(
                    "member apps keep each person's rows to themselves, from the app's author \
                     too: remove managersReadAll from {name}"
                ),
            ));
        }
    }
    diagnostics
}

/// A fresh id for a new member app, held by no app and no package folder.
/// Eighty random bits leave a repeat to chance alone; the deploy's
/// transaction checks again.
async fn mint_id(core: &Arc<Core>) -> Result<String, AppError> {
    for _ in 0..4 {
        let id = member_app_id(rand::random::<[u8; MEMBER_ID_ENTROPY_BYTES]>());
        let (store, candidate) = (core.store.clone(), id.clone());
        let registered = blocking(move || store.registered_app(&candidate)).await?;
        if registered.is_none() && !core.catalogue.apps_dir().join(&id).exists() {
            return Ok(id);
        }
    }
    let failure = AppError::from_code(ErrorCode::Internal);
    tracing::error!(diagnostic_id = %failure.diagnostic_id, "four random member app ids were all taken");
    Err(failure)
}

/// `files` as the member app `app_id` keeps them, or why not: every file
/// within the package file rules (`crate::source::check_package_files`), and
/// `APP.md`'s `id:` set to `app_id` (the platform names member apps; see
/// `sasha_package::manifest::with_manifest_id`).
pub(crate) fn member_files(
    app_id: &str,
    files: Vec<(String, Vec<u8>)>,
) -> Result<Vec<(String, Vec<u8>)>, Vec<Diagnostic>> {
    let refused = crate::source::check_package_files(&files);
    if !refused.is_empty() {
        return Err(refused
            .iter()
            .map(|d| diagnostic(&d.file, d.line, &d.code, &d.reason))
            .collect());
    }
    Ok(files
        .into_iter()
        .map(|(path, bytes)| {
            let named = (path == "APP.md")
                .then(|| std::str::from_utf8(&bytes).ok())
                .flatten()
                .and_then(|text| with_manifest_id(text, app_id));
            match named {
                Some(text) => (path, text.into_bytes()),
                None => (path, bytes),
            }
        })
        .collect())
}

/// Validates `files` (already [`member_files`]) as the member app `app_id`:
/// the package (if valid and within the tier's rules) or every diagnostic
/// with its file and line.
pub(crate) async fn validate(
    app_id: &str,
    files: &[(String, Vec<u8>)],
) -> Result<(Result<Package, Vec<Diagnostic>>, PackageSource), AppError> {
    let mut source = PackageSource::default();
    for (path, bytes) in files {
        source.set(path, Some(bytes));
    }
    let (app, checked) = (app_id.to_owned(), source.clone());
    let validation = tokio::task::spawn_blocking(move || validate_source(&app, checked))
        .await
        .map_err(|_| AppError::from_code(ErrorCode::Internal))?;
    let mut diagnostics: Vec<Diagnostic> = validation
        .diagnostics
        .iter()
        .map(|problem| diagnostic(&problem.file, problem.line, &problem.code, &problem.reason))
        .collect();
    let outcome = match validation.package {
        Some(package) => {
            diagnostics.extend(tier_diagnostics(&package));
            if diagnostics.is_empty() {
                Ok(package)
            } else {
                Err(diagnostics)
            }
        }
        None => Err(diagnostics),
    };
    Ok((outcome, source))
}

/// Checks `files` as the caller's app `app_id`, or as a new app when it is
/// empty: nothing is stored.
pub(crate) async fn check(
    core: &Arc<Core>,
    user_id: &str,
    app_id: &str,
    files: Vec<(String, Vec<u8>)>,
) -> Result<PackageStatus, AppError> {
    require_enabled(core).await?;
    let app_id = if app_id.is_empty() {
        mint_id(core).await?
    } else {
        owned(core, user_id, app_id).await?.id
    };
    match member_files(&app_id, files) {
        Ok(files) => Ok(status(&validate(&app_id, &files).await?.0)),
        Err(diagnostics) => Ok(status(&Err(diagnostics))),
    }
}

/// Saves `files` as the draft of the caller's app `app_id` (App Studio's
/// Preview, the assistant's `draftMyApp`): its preview id and validation.
/// Files that break the package file rules are refused and nothing is
/// stored.
pub(crate) async fn draft(
    core: &Arc<Core>,
    user_id: &str,
    app_id: &str,
    files: Vec<(String, Vec<u8>)>,
) -> Result<(String, Arc<crate::state::draft_cache::Validated>), AppError> {
    require_enabled(core).await?;
    let app = changeable(core, user_id, app_id).await?;
    let files = member_files(&app.id, files).map_err(|diagnostics| {
        not_valid(
            "the draft breaks the package file rules, so it was not saved",
            &diagnostics,
        )
    })?;
    crate::drafts::replace_member_draft(core, user_id, &app.id, &app.revision, files).await
}

pub(crate) fn status(outcome: &Result<Package, Vec<Diagnostic>>) -> PackageStatus {
    match outcome {
        Ok(package) => PackageStatus {
            ok: true,
            revision: Some(package.resource.revision.clone()),
            diagnostics: Vec::new(),
        },
        Err(diagnostics) => PackageStatus {
            ok: false,
            revision: None,
            diagnostics: diagnostics.clone(),
        },
    }
}

/// `APP_INPUT_INVALID` saying `what`, with how many problems, the first with
/// its file and line, and every one in `details.diagnostics`.
fn not_valid(what: &str, diagnostics: &[Diagnostic]) -> AppError {
    let first = diagnostics
        .first()
        .map(|d| match d.line {
            Some(line) => format!("{}:{line}: {}", d.file, d.reason),
            None => format!("{}: {}", d.file, d.reason),
        })
        .unwrap_or_default();
    let listed: Vec<Value> = diagnostics
        .iter()
        .map(|d| json!({"file": d.file, "line": d.line, "code": d.code, "reason": d.reason}))
        .collect();
    invalid(format!(
        "{what} ({} problem{}; first: {first})",
        diagnostics.len(),
        if diagnostics.len() == 1 { "" } else { "s" }
    ))
    .with_details(json!({"diagnostics": listed}))
}

/// The files of a member tool call as bytes. A file sent with an encoding
/// is decoded by the source tools' one rule (`source::content_bytes`): base64
/// only for binary assets, so a text file (app.js) always arrives, is shown
/// to the person approving and is deployed as the same readable text.
fn files_of(files: Vec<MemberFile>) -> Result<Vec<(String, Vec<u8>)>, AppError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(files.len());
    for file in files {
        if !seen.insert(file.path.clone()) {
            return Err(invalid(format!("the file {} is given twice", file.path))
                .with_details(json!({"field": "files", "path": file.path})));
        }
        let content = if file.encoding.is_empty() {
            file.content
        } else {
            let encoded = String::from_utf8(file.content).map_err(|_| {
                invalid(format!("{}: base64 content is plain ASCII text", file.path))
                    .with_details(json!({"field": "files", "path": file.path}))
            })?;
            crate::source::content_bytes(&file.path, &encoded, Some(&file.encoding))?
        };
        out.push((file.path, content));
    }
    if out.is_empty() {
        return Err(invalid(
            "files must hold the package: APP.md, index.html and the rest",
        ));
    }
    Ok(out)
}

/// The one-line question a person approves: what the deploy does.
fn summary(
    app_id: &str,
    name: &str,
    package: &Package,
    before: Option<&BTreeMap<String, Vec<u8>>>,
    after: &[(String, Vec<u8>)],
) -> String {
    let bytes: usize = after.iter().map(|(_, content)| content.len()).sum();
    let tables: Vec<&str> = package
        .data
        .as_ref()
        .map(|data| data.tables.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let tables = if tables.is_empty() {
        "no tables".to_owned()
    } else {
        format!(
            "tables {} (each person sees only their own rows)",
            tables.join(", ")
        )
    };
    match before {
        None => format!(
            "Deploy the new member app \"{name}\": {} files, {bytes} bytes, {tables}. \
             It appears in your Apps list; only you can use it until you share it.",
            after.len()
        ),
        Some(before) => {
            let after_paths: BTreeMap<&str, &[u8]> = after
                .iter()
                .map(|(path, bytes)| (path.as_str(), bytes.as_slice()))
                .collect();
            let mut changed: Vec<String> = after_paths
                .iter()
                .filter(|(path, bytes)| before.get(**path).map(Vec::as_slice) != Some(**bytes))
                .map(|(path, _)| (*path).to_owned())
                .collect();
            changed.extend(
                before
                    .keys()
                    .filter(|path| !after_paths.contains_key(path.as_str()))
                    .map(|path| format!("{path} (removed)")),
            );
            format!(
                "Deploy a new version of your member app \"{name}\" ({app_id}): changes {}; {tables}. \
                 The old version stays in its history.",
                if changed.is_empty() {
                    "no file".to_owned()
                } else {
                    changed.join(", ")
                }
            )
        }
    }
}

/// The current files of a member app as the catalogue serves them.
pub(crate) fn current_files(core: &Core, app_id: &str) -> BTreeMap<String, Vec<u8>> {
    core.catalogue
        .current()
        .source(app_id)
        .map(|source| {
            source
                .entries()
                .into_iter()
                .map(|(path, bytes)| (path.to_owned(), bytes.to_vec()))
                .collect()
        })
        .unwrap_or_default()
}

/// Hands the stored member apps to the catalogue (at boot; afterwards each
/// change hands over its own app).
pub(crate) async fn load_into_catalogue(
    core_store: &studio_store::Store,
    catalogue: &crate::catalogue::Catalogue,
) {
    let store = core_store.clone();
    match studio_store::blocking(move || store.member_sources()).await {
        Ok(sources) => {
            for (id, files) in sources {
                let mut source = PackageSource::default();
                for (path, bytes) in &files {
                    source.set(path, Some(bytes));
                }
                catalogue.set_member(&id, Some(source));
            }
        }
        Err(error) => tracing::error!(
            diagnostic_id = %error.diagnostic_id,
            "cannot load the member apps; none are served"
        ),
    }
}

/// A new revision of one of the caller's apps.
pub(crate) struct Update {
    pub(crate) app_id: String,
    /// The app's current revision as the caller read it.
    pub(crate) expected_revision: String,
}

/// What a deploy asks for.
pub(crate) struct Deploy {
    /// `None` deploys a new app, which the platform names.
    pub(crate) update: Option<Update>,
    /// The name shown in the Apps list; empty keeps an app's name.
    pub(crate) name: String,
    pub(crate) files: Vec<(String, Vec<u8>)>,
    /// A person approved it (Studio's button, or their yes to the gateway).
    pub(crate) approved: bool,
    pub(crate) surface: RevisionSurface,
    /// The one-line summary recorded in the ledger.
    pub(crate) summary: &'static str,
}

/// Refuses with [`turned_off`] while an admin has turned member apps off.
pub(crate) async fn require_enabled(core: &Arc<Core>) -> Result<(), AppError> {
    let store = core.store.clone();
    if blocking(move || store.member_apps_enabled()).await? {
        Ok(())
    } else {
        Err(turned_off())
    }
}

/// Deploys a member app (new, or a new revision of the caller's own).
pub(crate) async fn deploy(
    core: &Arc<Core>,
    user_id: &str,
    deploy: Deploy,
) -> Result<MemberApp, AppError> {
    let since = core.store.timestamp();
    require_enabled(core).await?;
    let (app_id, expected, name, before) = match &deploy.update {
        None => {
            let name = crate::create::text_field(
                "name",
                &deploy.name,
                sasha_contract::tools::CREATE_APP_MAX_NAME_CHARS,
            )?;
            (mint_id(core).await?, None, name, None)
        }
        Some(update) => {
            let app = changeable(core, user_id, &update.app_id).await?;
            let name = if deploy.name.trim().is_empty() {
                app.name.clone()
            } else {
                crate::create::text_field(
                    "name",
                    &deploy.name,
                    sasha_contract::tools::CREATE_APP_MAX_NAME_CHARS,
                )?
            };
            let before = current_files(core, &app.id);
            (
                app.id,
                Some(update.expected_revision.clone()),
                name,
                Some(before),
            )
        }
    };
    let app_id = app_id.as_str();
    let files = member_files(app_id, deploy.files).map_err(|diagnostics| {
        not_valid(
            "the app breaks the package file rules, so nothing was deployed",
            &diagnostics,
        )
    })?;
    let (outcome, source) = validate(app_id, &files).await?;
    let package = outcome.map_err(|diagnostics| {
        not_valid(
            "the app does not validate, so nothing was deployed",
            &diagnostics,
        )
    })?;
    if before.is_some() {
        crate::drift::check_migrations(core, app_id, &package, "deploying").await?;
        crate::read_guard::check_reads(core, app_id, &package, "deploying").await?;
    }
    if !deploy.approved {
        let question = summary(app_id, &name, &package, before.as_ref(), &files);
        return Err(AppError::new(
            ErrorCode::ConfirmationRequired,
            "deploying needs the person's approval; nothing was deployed",
        )
        .with_details(json!({"summary": question})));
    }
    core.member_deploys.admit(user_id).await?;
    let actions_json = serde_json::to_string(&package.actions).unwrap_or_else(|_| "[]".into());
    let read_policy = package
        .data
        .as_ref()
        .map(|data| data.read_policy())
        .unwrap_or_default();
    let read_policy_json = serde_json::to_string(&read_policy).unwrap_or_else(|_| "{}".into());
    let schema_hash = package.data.as_ref().map(|data| data.hash.clone());
    let retention = core.revision_retention;
    let caps = core.member_caps;
    let (store, app, user) = (core.store.clone(), app_id.to_owned(), user_id.to_owned());
    let (recorded_package, recorded_source, surface, summary) = (
        package.clone(),
        source.clone(),
        deploy.surface,
        deploy.summary,
    );
    let outcome = blocking(move || {
        store.deploy_member_app(
            &app,
            &MemberDeploy {
                name: &name,
                author_id: &user,
                expected_revision: expected.as_deref(),
                content: RevisionContent {
                    resource: &recorded_package.resource,
                    files: recorded_source.entries(),
                },
                origin: RevisionOrigin::authored(surface, &user, summary, since),
                schema_hash: schema_hash.as_deref(),
                actions_json: &actions_json,
                read_policy_json: &read_policy_json,
                caps,
                retention,
            },
        )
    })
    .await?;
    if let Err(refusal) = outcome {
        return Err(refused(app_id, refusal));
    }
    tracing::info!(app_id, revision = %package.resource.revision, "member app deployed");
    if let Err(error) = crate::drafts::end_member_draft(core, user_id, app_id).await {
        // A stale draft is refused at its next use; the deploy stands.
        tracing::warn!(app_id, error = %error.message, "a deployed member app's draft was kept");
    }
    core.catalogue.set_member(app_id, Some(source));
    crate::registry::refresh_catalogue(core).await;
    let (store, app) = (core.store.clone(), app_id.to_owned());
    blocking(move || store.member_app(&app))
        .await?
        .ok_or_else(|| AppError::from_code(ErrorCode::Internal))
}

/// The refusal of a change the person has not approved yet, with the
/// question to ask them (`details.summary`), as for a deploy.
fn needs_approval(what: &str, question: String) -> AppError {
    AppError::new(
        ErrorCode::ConfirmationRequired,
        format!("{what} needs the person's approval; nothing was changed"),
    )
    .with_details(json!({"summary": question}))
}

/// Deletes a member app: its author, or a moderator, once the person
/// approved (App Studio's click, or their yes to the gateway's question):
/// it takes every row in it, the sharees' too. Its draft and what the
/// ledger kept of it go at once; its data file goes too, backed up by
/// data-worker first.
pub(crate) async fn delete(
    core: &Arc<Core>,
    user_id: &str,
    app_id: &str,
    approved: bool,
) -> Result<(), AppError> {
    let may = match owned(core, user_id, app_id).await {
        Ok(_) => true,
        Err(error) if error.code == ErrorCode::AccessDenied => {
            moderator(core, user_id).await?.is_some()
        }
        Err(error) => return Err(error),
    };
    if !may {
        return Err(denied());
    }
    if !approved {
        let (store, app) = (core.store.clone(), app_id.to_owned());
        let Some(app) = blocking(move || store.member_app(&app)).await? else {
            return Err(denied());
        };
        let whose = if app.shares.is_empty() {
            "every row in it".to_owned()
        } else {
            format!(
                "every row in it, also those of the {} people it is shared with ({})",
                app.shares.len(),
                app.shares.join(", ")
            )
        };
        return Err(needs_approval(
            "deleting a member app",
            format!(
                "Delete the member app \"{}\" ({})? It leaves everyone's Apps list at once and takes {whose}; \
                 only the operator keeps a backup.",
                app.name, app.id
            ),
        ));
    }
    // The draft's preview data and cached validation go with it; the store's
    // delete removes a draft begun since in its own transaction.
    crate::drafts::end_member_draft(core, user_id, app_id).await?;
    let (store, app, actor) = (core.store.clone(), app_id.to_owned(), user_id.to_owned());
    if !blocking(move || store.delete_member_app(&app, &actor)).await? {
        return Err(denied());
    }
    core.catalogue.set_member(app_id, None);
    crate::registry::refresh_catalogue(core).await;
    if let Err(error) = crate::data_worker::remove_app_data(&core.data, app_id).await {
        // The app is gone from every catalogue; its file stays for an operator.
        tracing::warn!(app_id, error = %error.message, "a deleted member app's data file was kept");
    }
    tracing::info!(app_id, "member app deleted");
    Ok(())
}

/// What a share says, the same whether or not an account holds the name:
/// the person it names, if they have an account here, now uses the app (or,
/// with `remove`, no longer does).
pub(crate) fn share_outcome(app: &MemberApp, username: &str, remove: bool) -> String {
    let username = username.trim().to_lowercase();
    if remove {
        format!(
            "{} is no longer shared with {username}: if someone uses this name here, they no \
             longer have the app.",
            app.name
        )
    } else {
        format!(
            "{} is shared with {username}: if someone uses this name here, it is in their Apps \
             list now (they see only their own rows).",
            app.name
        )
    }
}

/// Shares the caller's app with the user name `username` (`use`), or stops
/// sharing it, once the person approved (App Studio's click, or their yes to
/// the gateway's question): who uses an app is the person's choice, never a
/// model's. The answer does not depend on whether an account holds the name
/// (see `studio_store::member_apps`); only the name's spelling is checked.
pub(crate) async fn share(
    core: &Arc<Core>,
    user_id: &str,
    app_id: &str,
    username: &str,
    remove: bool,
    approved: bool,
) -> Result<MemberApp, AppError> {
    // A disabled app is refused before the person is asked; taking a share
    // away stays open.
    let app = if remove {
        owned(core, user_id, app_id).await?
    } else {
        changeable(core, user_id, app_id).await?
    };
    if !approved {
        // Asked before the name is looked up: the question says nothing of
        // whether such a person exists.
        let who: String = username.trim().chars().take(64).collect();
        let question = if remove {
            format!(
                "Stop sharing your member app \"{}\" ({}) with {who:?}? They can no longer open it.",
                app.name, app.id
            )
        } else {
            format!(
                "Share your member app \"{}\" ({}) with {who:?}? They can open it and keep their own rows in it \
                 (never yours), and run its code as themselves.",
                app.name, app.id
            )
        };
        return Err(needs_approval("sharing a member app", question));
    }
    let name = username.trim().to_lowercase();
    if let Err(error) = studio_store::validate_username(&name) {
        return Err(invalid(format!("that is not a user name: {error}"))
            .with_details(json!({"field": "username"})));
    }
    let (store, author) = (core.store.clone(), user_id.to_owned());
    let own = blocking(move || store.user(&author))
        .await?
        .is_some_and(|me| me.username.eq_ignore_ascii_case(&name));
    if own {
        return Err(invalid("you are the author: you always have this app")
            .with_details(json!({"field": "username"})));
    }
    let (store, app_key, actor) = (core.store.clone(), app.id.clone(), user_id.to_owned());
    let outcome = blocking(move || {
        store.share_member_app(&app_key, &actor, &name, remove, MAX_MEMBER_APP_SHARES)
    })
    .await?;
    if let Err(refusal) = outcome {
        return Err(refused(app_id, refusal));
    }
    let (store, app) = (core.store.clone(), app_id.to_owned());
    blocking(move || store.member_app(&app))
        .await?
        .ok_or_else(denied)
}

/// A deploy request's target: a new app (no `app`, no `expectedRevision`) or
/// a new revision of one of the caller's (both).
fn update_of(app_id: String, expected_revision: String) -> Result<Option<Update>, AppError> {
    match (app_id.is_empty(), expected_revision.is_empty()) {
        (true, true) => Ok(None),
        (false, false) => Ok(Some(Update {
            app_id,
            expected_revision,
        })),
        (false, true) => Err(invalid(
            "a new member app gets its id from the platform: leave app out to deploy a new \
             app, or give expectedRevision (as readMyApp shows it) to change one of yours",
        )
        .with_details(json!({"field": "expectedRevision"}))),
        (true, false) => Err(
            invalid("app is required with expectedRevision: the app you change")
                .with_details(json!({"field": "app"})),
        ),
    }
}

/// One file of a member tool call: the caller's own bytes, or with
/// `encoding` `base64` the base64 text they sent (decoded by the source
/// tools' one rule, [`files_of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberFile {
    pub(crate) path: String,
    pub(crate) content: Vec<u8>,
    /// `""` (content is the bytes) or `base64`.
    pub(crate) encoding: String,
}

/// What one member tool call asks (`CoreService.MemberApps`). `approved`:
/// the person said yes to the gateway's question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Operation {
    List,
    Read {
        app_id: String,
    },
    Check {
        app_id: String,
        files: Vec<MemberFile>,
    },
    /// A new app (no `app_id`, no `expected_revision`), a new revision of
    /// one of the caller's, or with `from_revision` a revert to it.
    Deploy {
        app_id: String,
        expected_revision: String,
        name: String,
        files: Vec<MemberFile>,
        from_revision: String,
        approved: bool,
    },
    Draft {
        app_id: String,
        files: Vec<MemberFile>,
    },
    Delete {
        app_id: String,
        approved: bool,
    },
    Share {
        app_id: String,
        username: String,
        remove: bool,
        approved: bool,
    },
    Revisions {
        app_id: String,
    },
}

/// What one member tool call answers, with whether members may make apps
/// now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) enabled: bool,
    pub(crate) result: Answer,
}

/// The answer of one member tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Apps(Vec<MemberApp>),
    Source {
        app: MemberApp,
        files: BTreeMap<String, Vec<u8>>,
    },
    Status(PackageStatus),
    App(MemberApp),
    Drafted {
        app_id: String,
        preview_id: String,
        status: PackageStatus,
    },
    Deleted {
        app_id: String,
    },
    Revisions(Vec<Revision>),
}

/// One member tool call of `actor` (the gateway's member app tools); `None`
/// (no operation named) is refused once the caller is known to author.
pub(crate) async fn answer(
    core: &Arc<Core>,
    actor: &Actor,
    operation: Option<Operation>,
) -> Result<Reply, AppError> {
    let user_id = author(core, actor).await?;
    let store = core.store.clone();
    let enabled = blocking(move || store.member_apps_enabled()).await?;
    let result = match operation {
        Some(Operation::List) => {
            let (store, user) = (core.store.clone(), user_id.clone());
            Answer::Apps(blocking(move || store.member_apps(Some(&user))).await?)
        }
        Some(Operation::Read { app_id }) => {
            let app = owned(core, &user_id, &app_id).await?;
            let files = current_files(core, &app.id);
            Answer::Source { app, files }
        }
        Some(Operation::Check { app_id, files }) => {
            let files = files_of(files)?;
            Answer::Status(check(core, &user_id, &app_id, files).await?)
        }
        Some(Operation::Deploy {
            app_id,
            expected_revision,
            name,
            files,
            from_revision,
            approved,
        }) => {
            let reverting = !from_revision.is_empty();
            let files = if reverting {
                revision_files(core, &user_id, &app_id, &from_revision).await?
            } else {
                files_of(files)?
            };
            let app = self::deploy(
                core,
                &user_id,
                Deploy {
                    update: update_of(app_id, expected_revision)?,
                    name,
                    files,
                    approved,
                    surface: RevisionSurface::Mcp,
                    summary: if reverting {
                        "revertMyApp"
                    } else {
                        "deployMyApp"
                    },
                },
            )
            .await?;
            Answer::App(app)
        }
        Some(Operation::Draft { app_id, files }) => {
            let files = files_of(files)?;
            let (preview_id, validated) = draft(core, &user_id, &app_id, files).await?;
            Answer::Drafted {
                app_id,
                preview_id,
                status: PackageStatus {
                    ok: validated.package.is_some(),
                    revision: validated
                        .package
                        .as_ref()
                        .map(|package| package.resource.revision.clone()),
                    diagnostics: validated.diagnostics.clone(),
                },
            }
        }
        Some(Operation::Delete { app_id, approved }) => {
            delete(core, &user_id, &app_id, approved).await?;
            Answer::Deleted { app_id }
        }
        Some(Operation::Share {
            app_id,
            username,
            remove,
            approved,
        }) => Answer::App(share(core, &user_id, &app_id, &username, remove, approved).await?),
        Some(Operation::Revisions { app_id }) => {
            let app = owned(core, &user_id, &app_id).await?;
            Answer::Revisions(crate::history::list(core, &app.id).await?)
        }
        None => return Err(invalid("no member app operation was given")),
    };
    Ok(Reply { enabled, result })
}

/// The files of the caller's app at an earlier `revision` (a revert).
pub(crate) async fn revision_files(
    core: &Arc<Core>,
    user_id: &str,
    app_id: &str,
    revision: &str,
) -> Result<Vec<(String, Vec<u8>)>, AppError> {
    owned(core, user_id, app_id).await?;
    if revision.len() != 64 || !revision.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid("revision must be a revision id (64 hex digits)")
            .with_details(json!({"field": "revision"})));
    }
    Ok(crate::history::revision_contents(core, app_id, revision)
        .await?
        .into_iter()
        .map(|(file, bytes)| (file.path, bytes))
        .collect())
}

/// Text files as they are; a binary asset as base64 with its encoding.
pub(crate) fn file_json(path: &str, content: &[u8]) -> Value {
    match std::str::from_utf8(content) {
        Ok(text) if sasha_package::source::is_text_path(path) => {
            json!({"path": path, "content": text})
        }
        _ => json!({
            "path": path,
            "content": base64::engine::general_purpose::STANDARD.encode(content),
            "encoding": "base64",
        }),
    }
}

// --- moderation and the switch (Studio's admin controls, `sasha admin`) -----

/// Every live member app, for a moderator (admin or staff, read fresh).
pub(crate) async fn moderated(core: &Arc<Core>, user_id: &str) -> Result<Vec<MemberApp>, AppError> {
    if moderator(core, user_id).await?.is_none() {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            "only admin and staff moderate member apps",
        ));
    }
    let store = core.store.clone();
    blocking(move || store.member_apps(None)).await
}

/// Disables (`true`) or enables a member app: a moderator's step.
pub(crate) async fn set_disabled(
    core: &Arc<Core>,
    user_id: &str,
    app_id: &str,
    disabled: bool,
) -> Result<MemberApp, AppError> {
    moderated(core, user_id).await?;
    let (store, app, actor) = (core.store.clone(), app_id.to_owned(), user_id.to_owned());
    let found = blocking(move || {
        if store.member_app(&app)?.is_none() {
            return Ok(None);
        }
        // A live member app is registered and its package never deleted, so
        // neither step's refusal applies; "already so" changes nothing.
        let _already_so = if disabled {
            store.withdraw_app(&app, &actor)?
        } else {
            store.restore_app(&app, &actor)?
        };
        store.member_app(&app)
    })
    .await?;
    let app = found.ok_or_else(|| {
        AppError::new(
            ErrorCode::NotFound,
            format!("there is no member app {app_id}"),
        )
    })?;
    crate::registry::refresh_catalogue(core).await;
    Ok(app)
}

/// Promotes a member app into the catalogue tier: its current files are
/// written to `DOCS_ROOT/apps/<id>` and it then follows the catalogue's
/// rules (admin and staff manage it). Admins only.
pub(crate) async fn promote(core: &Arc<Core>, user_id: &str, app_id: &str) -> Result<(), AppError> {
    if moderator(core, user_id).await? != Some(UserRole::Admin) {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            "only an admin promotes a member app into the catalogue",
        ));
    }
    let (store, app) = (core.store.clone(), app_id.to_owned());
    if blocking(move || store.member_app(&app)).await?.is_none() {
        return Err(AppError::new(
            ErrorCode::NotFound,
            format!("there is no member app {app_id}"),
        ));
    }
    let files = current_files(core, app_id);
    let apps_dir = core.catalogue.apps_dir().to_owned();
    let staging = apps_dir
        .parent()
        .map(|docs| docs.join(crate::create::STAGING_DIR))
        .unwrap_or_else(|| apps_dir.join(crate::create::STAGING_DIR));
    let id = app_id.to_owned();
    tokio::task::spawn_blocking(move || {
        crate::create::write_package_bytes(&apps_dir, &staging, &id, &files)
    })
    .await
    .map_err(|_| AppError::from_code(ErrorCode::Internal))??;
    let (store, app, actor) = (core.store.clone(), app_id.to_owned(), user_id.to_owned());
    blocking(move || store.promote_member_app(&app, &actor)).await?;
    core.catalogue.set_member(app_id, None);
    crate::registry::refresh_catalogue(core).await;
    tracing::info!(app_id, "member app promoted into the catalogue");
    Ok(())
}

/// Turns member apps on or off: admins only.
pub(crate) async fn set_enabled(
    core: &Arc<Core>,
    user_id: &str,
    on: bool,
) -> Result<bool, AppError> {
    if moderator(core, user_id).await? != Some(UserRole::Admin) {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            "only an admin turns member apps on or off",
        ));
    }
    let (store, actor) = (core.store.clone(), user_id.to_owned());
    blocking(move || store.set_member_apps_enabled(on, &actor)).await?;
    Ok(on)
}

#[cfg(test)]
pub(crate) mod tests;
