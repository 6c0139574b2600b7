//! Creating an app from nothing: `CoreService.CreateApp` (the MCP tool
//! `createApp`) and `POST /api/apps` (Studio's New app form).
//!
//! Who may: a user credential (never an API key) holding both `apps:invoke`
//! and `apps:write` whose user is admin or staff, the role read again from the
//! store. Anyone else is `APP_ACCESS_DENIED`.
//!
//! What it writes: a minimal package under `<DOCS_ROOT>/apps/<id>/` (`APP.md`,
//! `index.html`, `app.js`, `styles.css`; with a table also `schema.sql` and
//! `migrations/001-initial.sql` for one owner-scoped table `items`, and an
//! `app.js` that lists and adds rows through `Sasha.data`). The files are
//! built in memory and validated by the one validator before anything is
//! written; then they are written and fsynced into a slot of
//! `<DOCS_ROOT>/.app-create-staging/` and renamed into place with
//! `RENAME_NOREPLACE`, so a crash leaves no half package (only a staging
//! leftover outside the apps folder, removed by the next creation).
//!
//! An id is refused with `APP_CONFLICT` when a folder of that name exists in
//! the apps folder (valid or not) or the id is in the core registry, even if
//! its package is gone: an id is never reused, so grants, audit entries and
//! data written under it never pass to a new app.
//!
//! After the rename the creation is audited (`app.created`, actor the user,
//! `after` the revision), the catalogue is refreshed and the app registered,
//! so the spec's first-discovery rule grants `manage` to every admin and
//! staff user existing then (the creator among them) and members nothing.
//! The answer is the package's status `{ok, revision, diagnostics}`, as the
//! source tools give it.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use sasha_contract::AppId;
use sasha_contract::html::escape_text;
use sasha_contract::ids::MAX_ID_CHARS;
use sasha_contract::tools::{CREATE_APP_MAX_DESCRIPTION_CHARS, CREATE_APP_MAX_NAME_CHARS};
use sasha_package::source::{PackageSource, is_invisible};
use sasha_package::validate::{Package, validate_source};
use sasha_proto::{AppError, ErrorCode};
use serde_json::json;
use studio_store::blocking;
use studio_store::{AppAccess, RevisionOrigin, RevisionSurface};

use crate::package_dir::{prepare_staging, rename_no_replace, sync_dir, write_tree};
use crate::state::Core;
use crate::status::PackageStatus;

/// The folder below `DOCS_ROOT` where new packages are written before they
/// are renamed into the apps folder (a sibling of it, so the catalogue never
/// lists a slot).
pub(crate) const STAGING_DIR: &str = ".app-create-staging";

/// The declared table of a package created with a table.
pub(crate) const TABLE: &str = "items";

/// Serialises creations in this process: the staging folder is cleaned of
/// leftovers under it, which must not be another creation's slot.
static STAGING: Mutex<()> = Mutex::new(());

/// What a caller asks for, checked: the id, trimmed name and description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewApp {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) with_table: bool,
}

fn invalid(field: &str, message: String) -> AppError {
    AppError::new(ErrorCode::InputInvalid, message).with_details(json!({ "field": field }))
}

/// A name or description: trimmed, 1 to `max` characters, one line, no
/// control or invisible characters (the manifest's own character rules).
pub(crate) fn text_field(field: &str, value: &str, max: usize) -> Result<String, AppError> {
    let value = value.trim();
    let chars = value.chars().count();
    if chars == 0 || chars > max {
        return Err(invalid(
            field,
            format!("{field} must be 1 to {max} characters and not blank (it has {chars})"),
        ));
    }
    if value.chars().any(|c| {
        c.is_control() || is_invisible(c) || matches!(c, '\u{2028}' | '\u{2029}' | '\u{85}')
    }) {
        return Err(invalid(
            field,
            format!("{field} must be one line without control or invisible characters"),
        ));
    }
    Ok(value.to_owned())
}

impl NewApp {
    /// Checks the caller's input; every refusal is `APP_INPUT_INVALID` naming
    /// the field and its rule in the message and `details.field`.
    pub(crate) fn parse(
        id: &str,
        name: &str,
        description: &str,
        with_table: bool,
    ) -> Result<NewApp, AppError> {
        if AppId::parse(id).is_err() {
            return Err(invalid(
                "app",
                format!(
                    "app must be an app id in lowercase kebab-case: letters a-z and digits in words joined by single \
                     hyphens, starting with a letter, at most {MAX_ID_CHARS} characters (for example expense-claims)"
                ),
            ));
        }
        Ok(NewApp {
            id: id.to_owned(),
            name: text_field("name", name, CREATE_APP_MAX_NAME_CHARS)?,
            description: text_field("description", description, CREATE_APP_MAX_DESCRIPTION_CHARS)?,
            with_table,
        })
    }

    /// The package's files by path. Text from the caller is quoted for YAML
    /// (a JSON string is a YAML 1.2 double-quoted scalar) and escaped for
    /// HTML; scripts never contain it.
    pub(crate) fn files(&self) -> BTreeMap<String, String> {
        let yaml = |text: &str| serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned());
        let (name, description) = (escape_text(&self.name), escape_text(&self.description));
        let mut manifest = format!(
            "---\nid: {id}\nname: {name_yaml}\ndescription: {description_yaml}\nversion: 0.1.0\ntheme: sasha-timesheet-v1\n",
            id = self.id,
            name_yaml = yaml(&self.name),
            description_yaml = yaml(&self.description),
        );
        if self.with_table {
            manifest.push_str(&format!(
                "capabilities:\n  data: read-write\ntables:\n  {TABLE}:\n    access: owner\n    ownerField: created_by\n"
            ));
        }
        manifest.push_str("---\n");
        manifest.push_str(&format!("# {}\n\n{}\n\n", self.name, self.description));
        manifest.push_str(if self.with_table {
            BRIEF_WITH_TABLE
        } else {
            BRIEF
        });
        let body = if self.with_table {
            BODY_WITH_TABLE
        } else {
            BODY
        };
        let index = format!(
            "<!doctype html>\n<html lang=\"en\">\n<head>\n  <meta charset=\"utf-8\">\n  \
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n  \
             <title>{name}</title>\n  <link rel=\"stylesheet\" href=\"styles.css\">\n</head>\n<body>\n  \
             <main>\n    <h1>{name}</h1>\n    <p class=\"description\">{description}</p>\n{body}  </main>\n  \
             <script src=\"app.js\"></script>\n</body>\n</html>\n"
        );
        let mut files = BTreeMap::from([
            ("APP.md".to_owned(), manifest),
            ("index.html".to_owned(), index),
            (
                "styles.css".to_owned(),
                if self.with_table {
                    format!("{STYLES}{STYLES_WITH_TABLE}")
                } else {
                    STYLES.to_owned()
                },
            ),
            (
                "app.js".to_owned(),
                if self.with_table {
                    SCRIPT_WITH_TABLE
                } else {
                    SCRIPT
                }
                .to_owned(),
            ),
        ]);
        if self.with_table {
            files.insert("schema.sql".to_owned(), SCHEMA.to_owned());
            files.insert("migrations/001-initial.sql".to_owned(), SCHEMA.to_owned());
        }
        files
    }

    /// The package validated as it will be written. A refusal here is the
    /// platform's bug, never the caller's.
    pub(crate) fn validated(&self) -> Result<Package, AppError> {
        let validation = validate_source(
            &self.id,
            PackageSource {
                files: self.files(),
                ..PackageSource::default()
            },
        );
        validation.package.ok_or_else(|| {
            let error = AppError::from_code(ErrorCode::Internal);
            tracing::error!(
                diagnostic_id = %error.diagnostic_id,
                app_id = %self.id,
                diagnostics = ?validation.diagnostics,
                "the generated package does not validate"
            );
            error
        })
    }
}

const BRIEF: &str = "Created with Sasha's New app as a starting point: `index.html` holds the markup, \
`styles.css` the styles and `app.js` the script. The app declares no capability and stores nothing; \
declare `capabilities.data` and a table (see the `data` section of getDocs) when it needs stored data.\n";

const BRIEF_WITH_TABLE: &str = "Created with Sasha's New app as a starting point. Each user keeps their own \
`items` (an owner-scoped table: `created_by` is stamped with the user and every read is filtered by it); \
`app.js` lists the newest 50 with `Sasha.data.list` and adds one with `Sasha.data.create`.\n\n\
Change the schema only with a new migration (`migrations/002-….sql`) and the same change in `schema.sql`; \
never edit an applied migration.\n";

const BODY: &str =
    "    <p id=\"status\" class=\"status\" role=\"status\" aria-live=\"polite\">Starting…</p>\n";

const BODY_WITH_TABLE: &str = "    <form id=\"add\" class=\"add\">\n      \
<label for=\"title\">New item</label>\n      \
<input id=\"title\" name=\"title\" required maxlength=\"200\" autocomplete=\"off\">\n      \
<button type=\"submit\">Add</button>\n    </form>\n    \
<p id=\"problem\" class=\"problem\" role=\"alert\" hidden></p>\n    \
<p id=\"empty\" class=\"empty\" hidden>No items yet. Add the first one above.</p>\n    \
<ul id=\"items\" class=\"items\"></ul>\n";

const STYLES: &str = "main { max-width: 40rem; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.5rem; margin: 0 0 0.25rem; }
.description, .status, .empty { color: var(--sasha-color-muted, #6b6b6b); }
";

const STYLES_WITH_TABLE: &str = ".add { display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: center; margin: 1rem 0; }
.add input { flex: 1 1 12rem; padding: 0.375rem 0.5rem; background: var(--sasha-color-surface, #fff);
  border: 1px solid var(--sasha-color-border, #d4d0c8); border-radius: var(--sasha-radius, 4px); }
.add button { padding: 0.375rem 0.75rem; color: #fff; background: var(--sasha-color-primary, #1a4a8a);
  border: 0; border-radius: var(--sasha-radius, 4px); cursor: pointer; }
.add button:disabled { opacity: 0.6; cursor: progress; }
.problem { color: var(--sasha-color-danger, #b52020); }
.items { list-style: none; margin: 0; padding: 0; }
.items li { padding: 0.5rem 0; border-bottom: 1px solid var(--sasha-color-border, #d4d0c8); }
@media (max-width: 30rem) { .add { flex-direction: column; align-items: stretch; } .add input { flex: none; } }
";

const SCRIPT: &str = "\"use strict\";
// A starting point: replace this with the app's behaviour.
const status = document.getElementById(\"status\");

Sasha.ready().then(
  () => {
    status.textContent = \"Ready.\";
  },
  (error) => {
    status.textContent = error && typeof error.message === \"string\" ? error.message : \"The app could not start.\";
  },
);
";

const SCRIPT_WITH_TABLE: &str = "\"use strict\";
// Lists the current user's items (newest first) and adds new ones, through
// Sasha.data on the owner-scoped table `items`.
const form = document.getElementById(\"add\");
const input = document.getElementById(\"title\");
const button = form.querySelector(\"button\");
const list = document.getElementById(\"items\");
const empty = document.getElementById(\"empty\");
const problem = document.getElementById(\"problem\");

function complain(error) {
  const text = error && typeof error.message === \"string\" ? error.message : \"Something went wrong.\";
  problem.textContent = error && error.diagnosticId ? `${text} (reference ${error.diagnosticId})` : text;
  problem.hidden = false;
}

async function load() {
  const { rows } = await Sasha.data.list(\"items\", { orderBy: [{ field: \"id\", direction: \"desc\" }], limit: 50 });
  list.replaceChildren(
    ...rows.map((row) => {
      const item = document.createElement(\"li\");
      item.textContent = row.title;
      return item;
    }),
  );
  empty.hidden = rows.length > 0;
}

form.addEventListener(\"submit\", async (event) => {
  event.preventDefault();
  const title = input.value.trim();
  if (!title) {
    input.focus();
    return;
  }
  problem.hidden = true;
  button.disabled = true;
  try {
    await Sasha.data.create(\"items\", { title });
    form.reset();
    await load();
  } catch (error) {
    complain(error);
  } finally {
    button.disabled = false;
    input.focus();
  }
});

load().catch(complain);
";

const SCHEMA: &str = "CREATE TABLE items (
  id INTEGER PRIMARY KEY,
  title TEXT NOT NULL,
  created_by TEXT NOT NULL
);
";

/// Who asks: the user and whether the credential may write app source at
/// all (both scopes, not an API key). The role is read again from the store.
#[derive(Debug, Clone)]
pub(crate) struct Creator {
    pub(crate) user_id: String,
    pub(crate) writes: bool,
    /// Where the request came from, recorded with the first revision.
    pub(crate) surface: RevisionSurface,
}

/// An app created: its id, and its package's status once registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Created {
    pub(crate) app: String,
    pub(crate) status: PackageStatus,
}

fn conflict(id: &str, message: String, reason: &str) -> AppError {
    AppError::new(ErrorCode::Conflict, message).with_details(json!({ "app": id, "reason": reason }))
}

fn exists_on_disk(id: &str) -> AppError {
    conflict(
        id,
        format!("an app folder named {id} already exists; choose another id"),
        "exists",
    )
}

/// The one answer for any write failure that is not a conflict; the cause is
/// logged under its diagnostic id.
fn write_failed(id: &str, error: &io::Error) -> AppError {
    let failure = AppError::new(ErrorCode::Internal, "the app's files could not be written");
    tracing::error!(diagnostic_id = %failure.diagnostic_id, app_id = %id, %error, "app creation failed");
    failure
}

/// Refuses a creator who may not create apps: without both scopes, or not
/// (or no longer) an admin or staff user.
pub(crate) async fn authorize(core: &Arc<Core>, creator: &Creator) -> Result<(), AppError> {
    if !creator.writes {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            "creating an app needs a user's credential with the apps:invoke and apps:write scopes",
        ));
    }
    let (store, user) = (core.store.clone(), creator.user_id.clone());
    let privileged = blocking(move || {
        Ok(store
            .user(&user)?
            .is_some_and(|user| user.role.is_privileged()))
    })
    .await?;
    if !privileged {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            "only admin and staff users can create apps; ask one to create it and grant you access",
        ));
    }
    Ok(())
}

/// Creates the app `request` (`(id, name, description, with_table)`) asks
/// for on behalf of `creator`.
pub(crate) async fn create(
    core: &Arc<Core>,
    creator: Creator,
    request: (&str, &str, &str, bool),
) -> Result<Created, AppError> {
    authorize(core, &creator).await?;
    let (id, name, description, with_table) = request;
    let app = NewApp::parse(id, name, description, with_table)?;
    let package = app.validated()?;
    let revision = package.resource.revision.clone();

    let (store, taken) = (core.store.clone(), app.id.clone());
    if blocking(move || store.registered_app(&taken))
        .await?
        .is_some()
    {
        return Err(conflict(
            &app.id,
            format!(
                "the app id {} is already taken: an app has used it, and ids are never reused, \
                 even after an app is withdrawn or removed; choose another id",
                app.id
            ),
            "registered",
        ));
    }
    let apps_dir = core.catalogue.apps_dir().to_owned();
    let staging = apps_dir
        .parent()
        .map(|docs| docs.join(STAGING_DIR))
        .unwrap_or_else(|| apps_dir.join(STAGING_DIR));
    let files = app.files();
    let written_id = app.id.clone();
    // The first revision is the creator's, not "found on disk" (see
    // `ledger::record_authored`).
    let created_at = core.store.timestamp();
    let (written_apps, written_staging) = (apps_dir.clone(), staging.clone());
    tokio::task::spawn_blocking(move || {
        write_package(&written_apps, &written_staging, &written_id, &files)
    })
    .await
    .map_err(|_| AppError::from_code(ErrorCode::Internal))??;

    let (store, audited, user, audited_revision) = (
        core.store.clone(),
        app.id.clone(),
        creator.user_id.clone(),
        revision.clone(),
    );
    if let Err(error) =
        blocking(move || store.record_app_created(&audited, &user, &audited_revision)).await
    {
        // Unaudited, the app must not stay: take it back out of the apps
        // folder before the catalogue registers it.
        let (removed, apps, staging) = (app.id.clone(), apps_dir.clone(), staging.clone());
        let undone =
            tokio::task::spawn_blocking(move || take_back(&apps, &staging, &removed)).await;
        if !matches!(undone, Ok(Ok(()))) {
            tracing::error!(app_id = %app.id, "a created app whose audit failed could not be removed again");
        }
        crate::registry::refresh_catalogue(core).await;
        return Err(error);
    }
    tracing::info!(app_id = %app.id, with_table, %revision, "app created");

    // Refreshed and registered (the first discovery grants `manage`), with
    // migration drift for a data app, as the source tools answer.
    let status = crate::status::status(core, &app.id).await;
    ensure_registered(core, &app.id).await?;
    let origin = RevisionOrigin::authored(
        creator.surface,
        &creator.user_id,
        format!("createApp {}", app.id),
        created_at,
    );
    crate::ledger::record_authored(core, &app.id, origin).await;
    let (store, check, user) = (core.store.clone(), app.id.clone(), creator.user_id.clone());
    if blocking(move || store.access(&check, &user)).await? != Some(AppAccess::Manage) {
        tracing::warn!(app_id = %app.id, "the creator does not manage the app they created");
    }
    Ok(Created {
        app: app.id,
        status,
    })
}

/// Makes sure `id` is registered: the refresh's registration only logs its
/// failures (a busy database), so one more refresh is tried, which registers
/// every valid package again. A successful creation is a registered app.
async fn ensure_registered(core: &Arc<Core>, id: &str) -> Result<(), AppError> {
    for attempt in 0..2 {
        let (store, app) = (core.store.clone(), id.to_owned());
        if blocking(move || store.registered_app(&app))
            .await?
            .is_some()
        {
            return Ok(());
        }
        if attempt == 0 {
            crate::registry::refresh_catalogue(core).await;
        }
    }
    tracing::error!(app_id = %id, "a created app is not registered yet");
    Err(AppError::new(
        ErrorCode::NotReady,
        format!(
            "the app {id} was created but is not registered yet; the next catalogue refresh registers it, try again in a moment"
        ),
    ))
}

/// Writes `files` as the package `apps_dir/<id>` atomically: into a fresh
/// slot of `staging`, every file created exclusively and fsynced, every
/// folder fsynced, then renamed into place without replacing anything.
/// Leftover slots of an interrupted creation are removed first.
pub(crate) fn write_package(
    apps_dir: &Path,
    staging: &Path,
    id: &str,
    files: &BTreeMap<String, String>,
) -> Result<(), AppError> {
    let bytes: BTreeMap<String, Vec<u8>> = files
        .iter()
        .map(|(path, text)| (path.clone(), text.as_bytes().to_vec()))
        .collect();
    write_package_bytes(apps_dir, staging, id, &bytes)
}

/// [`write_package`] for files given as bytes (a promoted member app's
/// binary assets included).
pub(crate) fn write_package_bytes(
    apps_dir: &Path,
    staging: &Path,
    id: &str,
    bytes: &BTreeMap<String, Vec<u8>>,
) -> Result<(), AppError> {
    let _serial = STAGING.lock().unwrap_or_else(PoisonError::into_inner);
    let dest = apps_dir.join(id);
    match std::fs::symlink_metadata(&dest) {
        Ok(_) => return Err(exists_on_disk(id)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(write_failed(id, &error)),
    }
    prepare_staging(staging, "app creation").map_err(|error| write_failed(id, &error))?;
    let slot = staging.join(format!("{id}-{:016x}", rand::random::<u64>()));
    let staged = slot.join(id);
    let written = std::fs::create_dir(&slot)
        .and_then(|()| write_tree(&staged, bytes))
        .and_then(|()| rename_no_replace(&staged, &dest));
    let outcome = match written {
        Ok(()) => {
            let _ = sync_dir(apps_dir);
            Ok(())
        }
        Err(error)
            if matches!(
                error.kind(),
                io::ErrorKind::AlreadyExists | io::ErrorKind::DirectoryNotEmpty
            ) && std::fs::symlink_metadata(&dest).is_ok() =>
        {
            Err(exists_on_disk(id))
        }
        Err(error) => Err(write_failed(id, &error)),
    };
    let _ = std::fs::remove_dir_all(&slot);
    outcome
}

/// Moves `apps_dir/<id>` into a staging slot and removes it.
fn take_back(apps_dir: &Path, staging: &Path, id: &str) -> io::Result<()> {
    let _serial = STAGING.lock().unwrap_or_else(PoisonError::into_inner);
    prepare_staging(staging, "app creation")?;
    let slot = staging.join(format!("{id}-{:016x}", rand::random::<u64>()));
    std::fs::create_dir(&slot)?;
    let moved = rename_no_replace(&apps_dir.join(id), &slot.join(id));
    let _ = sync_dir(apps_dir);
    let _ = std::fs::remove_dir_all(&slot);
    moved
}

#[cfg(test)]
mod tests;
