//! `sasha admin`: the operator CLI for a state folder's core database (users,
//! passwords, access tokens, app grants, reading improvement suggestions,
//! the data-workers' leases and each app's placement, and copying the
//! database into PostgreSQL with `migrate-core`).
//!
//! It works on the database file through `studio_store`, the same code
//! studio-core uses, so it is safe while the stack runs (WAL, immediate
//! transactions, a busy timeout) and every change is validated and audited
//! exactly as through the API (grant changes are recorded with the actor
//! `operator`).
//!
//! What it must not do: print a secret other than the token `token mint` was
//! asked for (and that only on stdout, alone), print a database URL's
//! password, take passwords anywhere but `--password` or one line of stdin
//! (or, for `migrate-core`, the URL, which may come from `DATABASE_URL`), or
//! edit the database by hand.
//!
//! Exit status: 0 on success, 2 when the command line or an input is refused
//! (usage, username, password, scopes, lifetime, an app or worker id, a
//! `migrate-core` target that is not empty or a source at another schema
//! version), 1 for anything else (unknown user, app or worker, a taken
//! username, a move the placement refuses, a database fault). Errors are one
//! line on stderr.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::io::{BufRead, IsTerminal as _, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::builder::TypedValueParser as _;
use clap::{Args, Subcommand};
use sasha_contract::caller::UnknownWord;
use sasha_service::config::{Env, ProcessEnv, StoragePaths};
use sasha_service::core_database::{
    CoreDatabase, DATABASE_CA_FILE, DATABASE_POOL_SIZE, DATABASE_URL, DATABASE_URL_FILE,
    PostgresConfig,
};
use studio_store::{
    ACTOR_OPERATOR, AppAccess, CopyError, DataWorker, Moved, Scope, Store, StoreError, TokenKind,
    User, UserRole, WorkerId,
};

/// `sasha admin …`.
#[derive(Debug, Subcommand)]
pub(crate) enum AdminCommand {
    /// Add users and set their passwords.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Mint access tokens for MCP clients.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// SCIM provisioning by the organisation's directory (Entra ID, Okta,
    /// Google, Keycloak): the bearer tokens it calls /scim/v2 with.
    Scim {
        #[command(subcommand)]
        command: ScimCommand,
    },
    /// Give a user `use` or `manage` access to an app, replacing what they had.
    ///
    /// The app must have been discovered (as a valid package) at least once.
    Grant {
        /// The app id, e.g. time-sheet
        app_id: String,
        /// The user's name
        username: String,
        /// The access to give
        #[arg(value_parser = word(AppAccess::ALL, AppAccess::as_str, AppAccess::parse))]
        access: AppAccess,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Remove a user's access to an app; takes effect on their next request.
    Revoke {
        /// The app id, e.g. time-sheet
        app_id: String,
        /// The user's name
        username: String,
        #[command(flatten)]
        state: StateArgs,
    },
    /// List who has access to an app: username, access, when, and by whom.
    Grants {
        /// The app id, e.g. time-sheet
        app_id: String,
        /// Print one JSON object per grant and line instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// List the MCP clients a user connected with OAuth (live connections
    /// only): id, client, redirect host, scopes, when connected and last used.
    Connections {
        /// The user's name
        username: String,
        /// Print one JSON object per connection and line instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// End one of a user's OAuth connections: every token issued under it
    /// stops working on its next request.
    Disconnect {
        /// The user's name
        username: String,
        /// The connection id, as `sasha admin connections` prints it
        connection_id: String,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Let members make their own apps (`on`, the default), stop new
    /// deploys and edits of member apps (`off`: deployed apps keep running
    /// and can still be deleted), or print the setting and every member app
    /// (`status`).
    MemberApps {
        /// on, off or status
        #[arg(value_enum)]
        switch: MemberAppsSwitch,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Print the improvement suggestions models sent (suggestImprovement),
    /// newest first, one JSON object per line.
    ///
    /// Each line has id, createdAt (unix seconds), userId, username, kind,
    /// severity, summary, and detail and metadata when given.
    Suggestions {
        /// Print at most this many (1–10000)
        #[arg(
            long,
            value_name = "N",
            default_value_t = 100,
            value_parser = clap::value_parser!(u32).range(1..=10_000)
        )]
        limit: u32,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Gives the core database what the folders hold: every package folder
    /// under DOCS_ROOT/apps (or FROM/apps) becomes its package's current
    /// files, over what the database held (running studio-core replicas
    /// take it within a second), and every document under UPLOADS_ROOT that
    /// the database lacks is imported under its name. Prints one line per
    /// package and the documents' counts. For moving packages in, and for an
    /// installation whose folders were volumes of their own before.
    Import {
        /// The docs folder to read packages from (its apps/ folder);
        /// default: DOCS_ROOT
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Writes every app package the core database holds, as files, into
    /// TO/apps/<app-id>/ (TO/apps must not hold a folder of that name).
    ExportPackages {
        /// The docs folder to write into
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
        #[command(flatten)]
        state: StateArgs,
    },
    /// List the data-workers that hold or held a lease (SASHA_DATA_PLACEMENT=leases):
    /// id, URL, whether it replicates, what is left of its lease (by the
    /// database's clock) or `lapsed`, whether it drains, and how many apps it
    /// owns; or drain or undrain one.
    #[command(args_conflicts_with_subcommands = true)]
    Workers {
        #[command(subcommand)]
        command: Option<WorkersCommand>,
        /// Print one JSON object per worker and line instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Where each app's data is served (SASHA_DATA_PLACEMENT=leases), and
    /// moving an app to another data-worker.
    Apps {
        #[command(subcommand)]
        command: AppsCommand,
    },
    /// Copy the core database into an empty PostgreSQL database, to run
    /// studio-core on PostgreSQL (DATABASE_URL) from then on.
    ///
    /// Creates the schema in the target, copies every table in one
    /// transaction, and commits only once each table's row count and the
    /// sha256 of its rows are the same read from both databases; then prints
    /// the rows copied per table. The target must be empty: if any of its
    /// core tables holds a row, nothing is written (exit 2). So is a core
    /// database at another schema version than this build's. The SQLite file
    /// is only read. Stop studio-core first: what it writes after the copy
    /// began is not copied.
    MigrateCore {
        /// The database to copy into:
        /// postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=require];
        /// default: the one DATABASE_URL or DATABASE_URL_FILE names, which
        /// keeps the password out of the process list. Its password is never
        /// printed
        #[arg(long, value_name = "URL")]
        to: Option<String>,
        /// PEM CA that verifies the server when the URL says sslmode=require
        /// (default: SASHA_DATABASE_CA_FILE, else the system's roots)
        #[arg(long, value_name = "FILE")]
        ca_file: Option<PathBuf>,
        #[command(flatten)]
        state: StateArgs,
    },
}

/// `sasha admin workers …`.
#[derive(Debug, Subcommand)]
pub(crate) enum WorkersCommand {
    /// Drain a data-worker: it is given no new app, and while it renews its
    /// lease its apps move to other workers one at a time, each handed over
    /// with a final sync (only a worker that replicates can hand apps over).
    Drain {
        /// The worker's id (SASHA_DATA_WORKER_ID)
        worker_id: String,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Let a draining data-worker take new apps again; the move in flight,
    /// if any, finishes.
    Undrain {
        /// The worker's id (SASHA_DATA_WORKER_ID)
        worker_id: String,
        #[command(flatten)]
        state: StateArgs,
    },
}

/// `sasha admin apps …`.
#[derive(Debug, Subcommand)]
pub(crate) enum AppsCommand {
    /// List every placed app: app, the data-worker that owns it, its epoch
    /// (raised on every change of owner), and where it is moving, if it is.
    Placement {
        /// Print one JSON object per app and line instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Move an app's data to another data-worker. Its owner finishes the
    /// calls running, makes a final sync and hands it over on its next
    /// renewal; an owner whose lease lapsed is not waited for. Both workers
    /// must replicate to object storage, and the target must hold a live
    /// lease and not drain.
    Move {
        /// The app id, e.g. time-sheet
        app_id: String,
        /// The data-worker to move it to
        #[arg(long, value_name = "WORKER")]
        to: String,
        #[command(flatten)]
        state: StateArgs,
    },
}

/// `sasha admin member-apps on|off|status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum MemberAppsSwitch {
    On,
    Off,
    Status,
}

/// `sasha admin user …`.
#[derive(Debug, Subcommand)]
pub(crate) enum UserCommand {
    /// Create a user and print their id.
    ///
    /// Without --password, the password is read from one line of stdin, which
    /// keeps it out of the process list and shell history:
    ///
    /// printf '%s\n' "$PW" | sasha admin user add alice --role staff
    Add {
        /// 3–128 characters of letters, digits, '.', '_', '-', '@' and '+',
        /// starting with a letter; sign-in ignores case, and two names cannot differ only by it
        username: String,
        /// The user's role: admin and staff may hold apps:write and receive
        /// manage on newly discovered apps, and when made, on apps no one
        /// manages; members get nothing automatically
        #[arg(long, value_parser = word(UserRole::ALL, UserRole::as_str, UserRole::parse))]
        role: UserRole,
        /// The password (at least 12 characters); default: one line of stdin
        #[arg(long)]
        password: Option<String>,
        #[command(flatten)]
        state: StateArgs,
    },
    /// List every user: name, role, last sign-in (unix seconds, `-` for
    /// never) and status.
    List {
        /// Print one JSON object per user and line instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Change a user's role (audited); their tokens keep only the scopes the
    /// new role allows.
    Role {
        /// The user's name
        username: String,
        /// The new role
        #[arg(value_parser = word(UserRole::ALL, UserRole::as_str, UserRole::parse))]
        role: UserRole,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Disable a user: sign-in is refused, and their sessions, tokens and MCP
    /// connections end at once; their grants stay for `enable`.
    Disable {
        /// The user's name
        username: String,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Remove a user (audited): every grant they hold ends, and their
    /// sessions, tokens and MCP connections go; member apps they wrote keep
    /// running with no author, so nobody can change them.
    Remove {
        /// The user's name
        username: String,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Let a disabled user sign in again.
    Enable {
        /// The user's name
        username: String,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Set a user's password from one line of stdin and end their Studio
    /// sessions.
    ///
    /// printf '%s\n' "$PW" | sasha admin user passwd alice
    Passwd {
        /// The user's name
        username: String,
        #[command(flatten)]
        state: StateArgs,
    },
}

/// `sasha admin token …`.
#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
    /// Mint an access token for a user and print only the token on stdout.
    ///
    /// The token carries exactly the given scopes, never more; a new scope
    /// needs a new token. apps:write is for admin and staff only.
    Mint {
        /// The user the token acts as
        username: String,
        /// Comma-separated: chat:use, apps:invoke, apps:write
        #[arg(long, value_name = "SCOPES")]
        scopes: String,
        /// Lifetime: a number and s, m, h or d, e.g. 90m, 12h, 30d (default 30d, at most 365d)
        #[arg(long, value_name = "DURATION")]
        ttl: Option<String>,
        /// An app this token may write as a script, without a model
        /// confirmation; its writes there are audited as automation (the
        /// user's grant still decides what it may do). Repeat for more apps.
        #[arg(long = "write-app", value_name = "APP")]
        write_apps: Vec<String>,
        #[command(flatten)]
        state: StateArgs,
    },
    /// List a user's tokens, newest first: number, kind, scopes, created,
    /// expires, whether an MCP client's connection holds it, status. Never a
    /// secret: only hashes are stored.
    List {
        /// The user's name
        username: String,
        /// Print one JSON object per token and line instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Revoke one of a user's tokens by its number (from `token list`); it
    /// stops working on its next request.
    Revoke {
        /// The user's name
        username: String,
        /// The token's number
        id: i64,
        #[command(flatten)]
        state: StateArgs,
    },
}

/// `sasha admin scim …`.
#[derive(Debug, Subcommand)]
pub(crate) enum ScimCommand {
    /// The directory's bearer tokens.
    Token {
        #[command(subcommand)]
        command: ScimTokenCommand,
    },
}

/// `sasha admin scim token …`.
#[derive(Debug, Subcommand)]
pub(crate) enum ScimTokenCommand {
    /// Mint a SCIM token and print only the token on stdout: paste it into
    /// the directory's provisioning settings (the tenant URL is Studio's
    /// origin and /scim/v2). It creates, changes and removes people and
    /// groups until it is revoked.
    Mint {
        /// What it is for, e.g. "Entra ID"
        label: String,
        #[command(flatten)]
        state: StateArgs,
    },
    /// List the SCIM tokens, newest first: number, name, created, by whom,
    /// last used, status. Never a secret: only hashes are stored.
    List {
        /// Print one JSON object per token and line instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Revoke a SCIM token by its number (from `scim token list`); the
    /// directory's next call is refused.
    Revoke {
        /// The token's number
        id: i64,
        #[command(flatten)]
        state: StateArgs,
    },
}

/// Where the core database is.
#[derive(Debug, Args)]
pub(crate) struct StateArgs {
    /// The state folder; its database is core.sqlite unless DB_PATH names
    /// another file [env: SASHA_STATE_DIR] [default: ./.sasha]
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

/// A closed word of `sasha_contract::caller` (a role, an access) on the
/// command line: its spellings are the possible values `--help` lists.
fn word<T>(
    all: &'static [T],
    as_str: fn(T) -> &'static str,
    parse: fn(&str) -> Result<T, UnknownWord>,
) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: Copy + Clone + Send + Sync + 'static,
{
    clap::builder::PossibleValuesParser::new(all.iter().map(|value| as_str(*value)))
        .try_map(move |text| parse(&text))
}

/// A refused command line or input (exit status 2).
#[derive(Debug)]
struct Usage(String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Usage(message.into()))
}

/// Runs one `sasha admin` command against the real stdin and stdout.
pub(crate) fn main(command: AdminCommand) -> ExitCode {
    let stdin = std::io::stdin();
    let prompt = stdin.is_terminal();
    let mut input = stdin.lock();
    let mut output = std::io::stdout().lock();
    match run(command, &mut input, prompt, &mut output) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line, whatever the causes say.
            let message = format!("{error:#}").replace(['\n', '\r'], " ");
            eprintln!("sasha admin: {message}");
            ExitCode::from(exit_status(&error))
        }
    }
}

/// 2 for a refused command line or input, 1 for anything else.
fn exit_status(error: &anyhow::Error) -> u8 {
    let refused_input = error.chain().any(|cause| {
        cause.is::<Usage>()
            || cause
                .downcast_ref::<StoreError>()
                .is_some_and(StoreError::is_invalid_input)
            || cause
                .downcast_ref::<CopyError>()
                .is_some_and(CopyError::is_refused_input)
    });
    if refused_input { 2 } else { 1 }
}

fn run(
    command: AdminCommand,
    input: &mut dyn BufRead,
    prompt: bool,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    match command {
        AdminCommand::User {
            command:
                UserCommand::Add {
                    username,
                    role,
                    password,
                    state,
                },
        } => {
            let password = match password {
                Some(password) => password,
                None => read_password(input, prompt)?,
            };
            let store = match configured_postgres(&state)? {
                Some(database) => open_postgres(&database)?,
                None => open_store(&db_path(&state)?)?,
            };
            let user = add_user(&store, &username, role, &password)?;
            writeln!(output, "{}", user.id)?;
        }
        AdminCommand::User {
            command: UserCommand::Passwd { username, state },
        } => {
            let password = read_password(input, prompt)?;
            let store = open_existing(&state)?;
            store
                .set_password(&username, &password)
                .map_err(|error| unknown_user(error, &username))
                .with_context(|| format!("cannot set the password of {username}"))?;
            writeln!(
                output,
                "password of {username} changed; their Studio sessions have ended"
            )?;
        }
        AdminCommand::User {
            command: UserCommand::List { json, state },
        } => {
            let store = open_existing(&state)?;
            for person in store.people()? {
                if json {
                    writeln!(output, "{}", serde_json::to_string(&person)?)?;
                } else {
                    writeln!(
                        output,
                        "{}\t{}\t{}\t{}",
                        person.user.username,
                        person.user.role,
                        person
                            .last_sign_in_at
                            .map_or_else(|| "-".to_owned(), |at| at.to_string()),
                        if person.disabled {
                            "disabled"
                        } else if person.invited {
                            "invited"
                        } else {
                            "active"
                        }
                    )?;
                }
            }
        }
        AdminCommand::User {
            command:
                UserCommand::Role {
                    username,
                    role,
                    state,
                },
        } => {
            let store = open_existing(&state)?;
            let changed = store
                .set_role(&username, role, ACTOR_OPERATOR)
                .map_err(|error| unknown_user(error, &username))?;
            if changed {
                writeln!(output, "{username} is now {role}")?;
            } else {
                writeln!(output, "{username} already was {role}")?;
            }
        }
        AdminCommand::User {
            command: UserCommand::Disable { username, state },
        } => {
            let store = open_existing(&state)?;
            let changed = store
                .set_disabled(&username, true, ACTOR_OPERATOR)
                .map_err(|error| unknown_user(error, &username))?;
            if changed {
                writeln!(
                    output,
                    "{username} is disabled; their sessions, tokens and MCP connections have ended"
                )?;
            } else {
                writeln!(output, "{username} already was disabled")?;
            }
        }
        AdminCommand::User {
            command: UserCommand::Remove { username, state },
        } => {
            let store = open_existing(&state)?;
            let removed = store
                .remove_user(&username, ACTOR_OPERATOR)
                .map_err(|error| unknown_user(error, &username))?;
            writeln!(
                output,
                "{username} is removed; {} grants ended, {} member apps now have no author",
                removed.grants_revoked, removed.member_apps_orphaned
            )?;
        }
        AdminCommand::User {
            command: UserCommand::Enable { username, state },
        } => {
            let store = open_existing(&state)?;
            let changed = store
                .set_disabled(&username, false, ACTOR_OPERATOR)
                .map_err(|error| unknown_user(error, &username))?;
            if changed {
                writeln!(output, "{username} may sign in again")?;
            } else {
                writeln!(output, "{username} was not disabled")?;
            }
        }
        AdminCommand::Token {
            command:
                TokenCommand::List {
                    username,
                    json,
                    state,
                },
        } => {
            let store = open_existing(&state)?;
            let tokens = store
                .tokens_of(&username)
                .map_err(|error| unknown_user(error, &username))?;
            for token in tokens {
                if json {
                    writeln!(output, "{}", serde_json::to_string(&token)?)?;
                } else {
                    writeln!(
                        output,
                        "{}\t{}\t{}\tcreated {}\texpires {}\tlast used {}\t{}\t{}",
                        token.id,
                        token.kind,
                        token.scopes,
                        token.created_at,
                        token
                            .expires_at
                            .map_or_else(|| "never".to_owned(), |at| at.to_string()),
                        token
                            .last_used_at
                            .map_or_else(|| "never".to_owned(), |at| at.to_string()),
                        if token.oauth { "oauth" } else { "operator" },
                        if token.revoked { "revoked" } else { "active" }
                    )?;
                }
            }
        }
        AdminCommand::Token {
            command:
                TokenCommand::Revoke {
                    username,
                    id,
                    state,
                },
        } => {
            let store = open_existing(&state)?;
            match store.revoke_token_of(&username, id, ACTOR_OPERATOR) {
                Ok(true) => writeln!(output, "token {id} of {username} is revoked")?,
                Ok(false) => writeln!(output, "token {id} of {username} already was revoked")?,
                Err(StoreError::UnknownToken) => {
                    anyhow::bail!("{username} has no token number {id}")
                }
                Err(error) => return Err(error.into()),
            }
        }
        AdminCommand::Token {
            command:
                TokenCommand::Mint {
                    username,
                    scopes,
                    ttl,
                    write_apps,
                    state,
                },
        } => {
            let scopes = parse_scopes(&scopes)?;
            let ttl = ttl.as_deref().map(parse_ttl).transpose()?;
            let store = open_existing(&state)?;
            let user = find_user(&store, &username)?;
            let token = store
                .mint_token(&user.id, TokenKind::Access, &scopes, ttl)
                .with_context(|| format!("cannot mint a token for {username}"))?;
            for app_id in &write_apps {
                // A refused consent revokes the token: it is printed whole or not at all.
                if let Err(error) = store.consent_writes(&token, app_id, ACTOR_OPERATOR) {
                    let _ = store.revoke_token(&token);
                    return Err(unknown_app(error, app_id)).with_context(|| {
                        format!("cannot let the token write {app_id}; no token was minted")
                    });
                }
            }
            writeln!(output, "{token}")?;
        }
        AdminCommand::Scim {
            command: ScimCommand::Token { command },
        } => scim_token(command, output)?,
        AdminCommand::Grant {
            app_id,
            username,
            access,
            state,
        } => {
            let store = open_existing(&state)?;
            let user = find_user(&store, &username)?;
            store
                .grant(&app_id, &user.id, access, Some(ACTOR_OPERATOR))
                .map_err(|error| unknown_app(error, &app_id))
                .with_context(|| format!("cannot grant {access} on {app_id} to {username}"))?;
            writeln!(output, "{username} now has {access} access to {app_id}")?;
        }
        AdminCommand::Revoke {
            app_id,
            username,
            state,
        } => {
            let store = open_existing(&state)?;
            let user = find_user(&store, &username)?;
            if store.registered_app(&app_id)?.is_none() {
                return Err(unknown_app(StoreError::UnknownApp, &app_id));
            }
            if store.revoke(&app_id, &user.id, Some(ACTOR_OPERATOR))? {
                writeln!(output, "{username} no longer has access to {app_id}")?;
            } else {
                writeln!(output, "{username} had no access to {app_id}")?;
            }
        }
        AdminCommand::Grants {
            app_id,
            json,
            state,
        } => {
            let store = open_existing(&state)?;
            if store.registered_app(&app_id)?.is_none() {
                return Err(unknown_app(StoreError::UnknownApp, &app_id));
            }
            let grants = store.grants(&app_id)?;
            if json {
                for grant in &grants {
                    writeln!(output, "{}", serde_json::to_string(grant)?)?;
                }
            } else {
                let width = grants
                    .iter()
                    .map(|grant| grant.username.len())
                    .max()
                    .unwrap_or(0)
                    .max("USERNAME".len());
                writeln!(
                    output,
                    "{:width$}  {:6}  {:20}  GRANTED BY",
                    "USERNAME", "ACCESS", "GRANTED AT"
                )?;
                for grant in &grants {
                    writeln!(
                        output,
                        "{:width$}  {:6}  {:20}  {}",
                        grant.username,
                        grant.access.as_str(),
                        rfc3339(grant.granted_at),
                        grant.granted_by
                    )?;
                }
            }
        }
        AdminCommand::Connections {
            username,
            json,
            state,
        } => {
            let store = open_existing(&state)?;
            let user = find_user(&store, &username)?;
            let connections = store.oauth_connections(&user.id)?;
            if json {
                for connection in &connections {
                    writeln!(output, "{}", serde_json::to_string(connection)?)?;
                }
            } else {
                writeln!(
                    output,
                    "{:36}  {:20}  {:20}  {:20}  SCOPES",
                    "ID", "CLIENT", "CONNECTED AT", "LAST USED AT"
                )?;
                for connection in &connections {
                    let name: String = connection.client_name.chars().take(20).collect();
                    writeln!(
                        output,
                        "{:36}  {:20}  {:20}  {:20}  {}",
                        connection.id,
                        name,
                        rfc3339(connection.connected_at),
                        rfc3339(connection.last_used_at),
                        connection.scopes.join(" ")
                    )?;
                }
            }
        }
        AdminCommand::Disconnect {
            username,
            connection_id,
            state,
        } => {
            let store = open_existing(&state)?;
            let user = find_user(&store, &username)?;
            if !store.oauth_revoke_connection(&user.id, &connection_id, ACTOR_OPERATOR)? {
                return Err(usage(format!(
                    "{username} has no live connection {connection_id:?}; see sasha admin connections {username}"
                )));
            }
            writeln!(output, "connection {connection_id} of {username} ended")?;
        }
        AdminCommand::MemberApps { switch, state } => {
            let store = open_existing(&state)?;
            match switch {
                MemberAppsSwitch::On | MemberAppsSwitch::Off => {
                    let on = switch == MemberAppsSwitch::On;
                    let changed = store.set_member_apps_enabled(on, ACTOR_OPERATOR)?;
                    let now = if on { "on" } else { "off" };
                    if changed {
                        writeln!(output, "member apps are now {now}")?;
                    } else {
                        writeln!(output, "member apps were already {now}")?;
                    }
                }
                MemberAppsSwitch::Status => {
                    let on = store.member_apps_enabled()?;
                    writeln!(output, "member apps: {}", if on { "on" } else { "off" })?;
                    for app in store.member_apps(None)? {
                        writeln!(
                            output,
                            "{}\t{}\t{} bytes\tchanged {}\t{}",
                            app.id,
                            app.author_name.as_deref().unwrap_or("(no author)"),
                            app.size,
                            app.updated_at,
                            if app.disabled { "disabled" } else { "active" }
                        )?;
                    }
                }
            }
        }
        AdminCommand::Import { from, state } => {
            let storage = storage_paths(state.state_dir.as_deref())?;
            let store = open_existing(&state)?;
            let docs = from.unwrap_or_else(|| storage.docs_root.clone());
            let packages =
                studio_core::package_sync::import_packages(&store, &docs.join("apps"))
                    .with_context(|| format!("cannot import the packages of {}", docs.display()))?;
            let mut unreadable = 0;
            for (id, outcome) in &packages {
                match outcome {
                    studio_core::package_sync::Imported::Head(generation) => {
                        writeln!(output, "{id}	imported (generation {generation})")?;
                    }
                    studio_core::package_sync::Imported::Unchanged => {
                        writeln!(output, "{id}	unchanged")?;
                    }
                    studio_core::package_sync::Imported::Unreadable(reason) => {
                        unreadable += 1;
                        writeln!(output, "{id}	not imported: {reason}")?;
                    }
                }
            }
            let documents = studio_uploads::import::import_folder(&store, &storage.uploads_root)
                .map_err(|error| anyhow::anyhow!("UPLOADS_ROOT: {error}"))?;
            writeln!(
                output,
                "documents: {} imported, {} already there, {} of users who are gone, {} skipped",
                documents.imported, documents.present, documents.orphaned, documents.skipped
            )?;
            if unreadable > 0 {
                anyhow::bail!(
                    "{unreadable} package folders could not be read in full and were not imported"
                );
            }
        }
        AdminCommand::ExportPackages { to, state } => {
            let store = open_existing(&state)?;
            let written = studio_core::package_sync::export_packages(&store, &to.join("apps"))
                .with_context(|| format!("cannot export the packages into {}", to.display()))?;
            for id in &written {
                writeln!(output, "{}", to.join("apps").join(id).display())?;
            }
            writeln!(output, "{} packages written", written.len())?;
        }
        AdminCommand::MigrateCore { to, ca_file, state } => {
            let storage = storage_paths(state.state_dir.as_deref())?;
            let target = migration_target(&ProcessEnv, to, ca_file.as_deref(), &storage)?;
            let db_path = existing(storage.db_path)?;
            let report =
                studio_store::copy_to_postgres(&db_path, &target.url, target.ca_file.as_deref())
                    .with_context(|| {
                        format!("cannot copy {} into PostgreSQL", db_path.display())
                    })?;
            writeln!(
                output,
                "copied {} into {}",
                db_path.display(),
                report.target
            )?;
            let width = report
                .tables
                .iter()
                .map(|table| table.table.len())
                .max()
                .unwrap_or(0)
                .max("TABLE".len());
            writeln!(output, "{:width$}  {:>9}", "TABLE", "ROWS")?;
            for table in &report.tables {
                writeln!(output, "{:width$}  {:>9}", table.table, table.rows)?;
            }
            writeln!(
                output,
                "verified: in all {} tables, the row count and the sha256 of the rows are the same in both databases",
                report.tables.len()
            )?;
        }
        AdminCommand::Workers {
            command: None,
            json,
            state,
        } => {
            let store = open_existing(&state)?;
            for worker in store.workers()? {
                if json {
                    writeln!(output, "{}", worker_json(&worker))?;
                } else {
                    writeln!(
                        output,
                        "{}\t{}\t{}\t{}\t{}\t{} apps",
                        worker.worker_id,
                        worker.url,
                        if worker.replicated {
                            "replicated"
                        } else {
                            "not replicated"
                        },
                        worker.lease_left.map_or_else(
                            || format!("lapsed (renewed {} ago)", seconds(worker.renewed_ago)),
                            |left| format!("lease {} left", seconds(left)),
                        ),
                        if worker.draining {
                            "draining"
                        } else {
                            "active"
                        },
                        worker.apps
                    )?;
                }
            }
        }
        AdminCommand::Workers {
            command: Some(WorkersCommand::Drain { worker_id, state }),
            ..
        } => {
            let worker = worker_id_arg(&worker_id)?;
            let store = open_existing(&state)?;
            let changed = store.set_draining(&worker, true)??;
            let listed = store
                .workers()?
                .into_iter()
                .find(|listed| listed.worker_id == worker_id);
            let (apps, replicated) = listed.map_or((0, false), |w| (w.apps, w.replicated));
            if !changed {
                writeln!(
                    output,
                    "{worker_id} was already draining; {apps} apps left on it"
                )?;
            } else if replicated {
                writeln!(
                    output,
                    "{worker_id} is draining: it takes no new app, and its {apps} apps move to other workers one at a time while it renews its lease"
                )?;
            } else {
                writeln!(
                    output,
                    "{worker_id} is draining: it takes no new app; it does not replicate to object storage, so its {apps} apps stay on it"
                )?;
            }
        }
        AdminCommand::Workers {
            command: Some(WorkersCommand::Undrain { worker_id, state }),
            ..
        } => {
            let worker = worker_id_arg(&worker_id)?;
            let store = open_existing(&state)?;
            if store.set_draining(&worker, false)?? {
                writeln!(output, "{worker_id} takes new apps again")?;
            } else {
                writeln!(output, "{worker_id} was not draining")?;
            }
        }
        AdminCommand::Apps {
            command: AppsCommand::Placement { json, state },
        } => {
            let store = open_existing(&state)?;
            for placement in store.placements()? {
                let (moving_to, reason) = placement
                    .moving
                    .as_ref()
                    .map_or((None, None), |(to, reason)| {
                        (Some(to), Some(reason.as_str()))
                    });
                if json {
                    let line = serde_json::json!({
                        "appId": placement.app_id,
                        "workerId": placement.worker_id,
                        "epoch": placement.epoch,
                        "movingTo": moving_to,
                        "moveReason": reason,
                    });
                    writeln!(output, "{line}")?;
                } else {
                    writeln!(
                        output,
                        "{}\t{}\tepoch {}\t{}",
                        placement.app_id,
                        placement.worker_id,
                        placement.epoch,
                        match (moving_to, reason) {
                            (Some(to), Some(reason)) => format!("moving to {to} ({reason})"),
                            _ => "-".to_owned(),
                        }
                    )?;
                }
            }
        }
        AdminCommand::Apps {
            command: AppsCommand::Move { app_id, to, state },
        } => {
            let app = sasha_contract::AppId::parse(&app_id)
                .map_err(|error| usage(format!("invalid app id {app_id:?}: {error}")))?;
            let target = worker_id_arg(&to)?;
            let store = open_existing(&state)?;
            match store.request_move(&app, &target)?? {
                Moved::Now { epoch } => writeln!(
                    output,
                    "{app_id} moved to {to} at epoch {epoch} (its owner's lease had lapsed)"
                )?,
                Moved::HandingOver => writeln!(
                    output,
                    "{app_id} is being handed over to {to}: its owner finishes the calls running, syncs and releases it on its next renewal (`sasha admin apps placement` shows when it has moved)"
                )?,
            }
        }
        AdminCommand::Suggestions { limit, state } => {
            let store = open_existing(&state)?;
            // JSON escapes every control character, so a line is one line
            // whatever the suggestion says.
            for suggestion in store.suggestions(limit)? {
                writeln!(output, "{}", serde_json::to_string(&suggestion)?)?;
            }
        }
    }
    Ok(())
}

/// Creates the development administrator in the database at `db_path` unless
/// a user of that name exists (its password is then left alone). `sasha up`
/// calls this; it is the same code path as `sasha admin user add`.
#[allow(
    dead_code,
    reason = "called by `sasha up` once it provisions the dev admin"
)]
pub(crate) fn ensure_dev_admin(
    database: &CoreDatabase,
    username: &str,
    password: &str,
) -> anyhow::Result<()> {
    let store = studio_core::open_store(database).map_err(|error| anyhow::anyhow!(error))?;
    if store.user_by_name(username)?.is_some() {
        return Ok(());
    }
    match add_user(&store, username, UserRole::Admin, password) {
        Ok(_) => Ok(()),
        // Another process created it between the check and the insert.
        Err(error)
            if matches!(
                error.downcast_ref::<StoreError>(),
                Some(StoreError::UsernameTaken)
            ) =>
        {
            Ok(())
        }
        Err(error) => Err(error),
    }
}

/// `user add` and the dev admin: one way to create a user.
fn add_user(store: &Store, username: &str, role: UserRole, password: &str) -> anyhow::Result<User> {
    store
        .create_user(username, role, password)
        .with_context(|| format!("cannot add the user {username}"))
}

/// The core database's path: `DB_PATH`, else `<state>/core.sqlite`, where the
/// state folder is `--state-dir`, else `SASHA_STATE_DIR`, else `./.sasha`
/// (exactly how the services find it).
fn db_path(state: &StateArgs) -> anyhow::Result<PathBuf> {
    Ok(storage_paths(state.state_dir.as_deref())?.db_path)
}

/// The state folder's storage paths (`DOCS_ROOT`, `DB_PATH`, `APP_DATA_ROOT`,
/// `UPLOADS_ROOT`), from `--state-dir` and the environment exactly as the
/// services read them.
pub(crate) fn storage_paths(state_dir: Option<&Path>) -> anyhow::Result<StoragePaths> {
    let mut env: HashMap<String, String> = [
        "SASHA_STATE_DIR",
        "DOCS_ROOT",
        "DB_PATH",
        "APP_DATA_ROOT",
        "UPLOADS_ROOT",
    ]
    .into_iter()
    .filter_map(|name| Some((name.to_owned(), ProcessEnv.var(name)?)))
    .collect();
    if let Some(dir) = state_dir {
        let dir = dir
            .to_str()
            .ok_or_else(|| usage(format!("--state-dir {} is not UTF-8", dir.display())))?;
        env.insert("SASHA_STATE_DIR".into(), dir.to_owned());
    }
    StoragePaths::from_env(&env).map_err(|error| usage(error.to_string()))
}

fn open_store(db_path: &Path) -> anyhow::Result<Store> {
    Store::open(db_path)
        .with_context(|| format!("cannot open the core database {}", db_path.display()))
}

/// Opens an existing database; a missing one is most likely a wrong
/// `--state-dir`, which must not silently create a new state folder.
fn open_existing(state: &StateArgs) -> anyhow::Result<Store> {
    match configured_postgres(state)? {
        Some(database) => open_postgres(&database),
        None => open_store(&existing(db_path(state)?)?),
    }
}

/// The PostgreSQL core database `DATABASE_URL` (or `DATABASE_URL_FILE`)
/// names, read exactly as studio-core reads it; `None` for the SQLite file.
fn configured_postgres(state: &StateArgs) -> anyhow::Result<Option<CoreDatabase>> {
    let storage = storage_paths(state.state_dir.as_deref())?;
    match CoreDatabase::from_env(&ProcessEnv, &storage).map_err(|error| usage(error.to_string()))? {
        database @ CoreDatabase::Postgres(_) => Ok(Some(database)),
        CoreDatabase::Sqlite(_) => Ok(None),
    }
}

fn open_postgres(database: &CoreDatabase) -> anyhow::Result<Store> {
    studio_core::open_store(database).map_err(|error| anyhow::anyhow!(error))
}

/// `db_path`, which must name a file.
fn existing(db_path: PathBuf) -> anyhow::Result<PathBuf> {
    if !db_path.exists() {
        anyhow::bail!(
            "no core database at {}: check --state-dir, or add a user first with `sasha admin user add`",
            db_path.display()
        );
    }
    Ok(db_path)
}

/// The PostgreSQL database `migrate-core` copies into: `--to` and
/// `--ca-file`, else the core database the environment names, read and
/// checked exactly as studio-core reads it. A refusal names the flag or the
/// variable, never the URL.
fn migration_target(
    env: &dyn Env,
    to: Option<String>,
    ca_file: Option<&Path>,
    storage: &StoragePaths,
) -> anyhow::Result<PostgresConfig> {
    let mut vars: HashMap<String, String> = [
        DATABASE_URL,
        DATABASE_URL_FILE,
        DATABASE_POOL_SIZE,
        DATABASE_CA_FILE,
    ]
    .into_iter()
    .filter_map(|name| Some((name.to_owned(), env.var(name)?)))
    .collect();
    let given_url = to.is_some();
    if let Some(url) = to {
        vars.remove(DATABASE_URL_FILE);
        vars.insert(DATABASE_URL.to_owned(), url);
    }
    if let Some(path) = ca_file {
        let path = path
            .to_str()
            .ok_or_else(|| usage(format!("--ca-file {} is not UTF-8", path.display())))?;
        vars.insert(DATABASE_CA_FILE.to_owned(), path.to_owned());
    }
    match CoreDatabase::from_env(&vars, storage) {
        Ok(CoreDatabase::Postgres(config)) => Ok(config),
        Ok(CoreDatabase::Sqlite(_)) => Err(usage(
            "name the PostgreSQL database to copy into: --to postgres://USER@HOST/DATABASE, or DATABASE_URL",
        )),
        Err(error) => Err(usage(match error.var {
            DATABASE_URL if given_url => format!("--to: {}", error.reason),
            DATABASE_CA_FILE if ca_file.is_some() => format!("--ca-file: {}", error.reason),
            _ => error.to_string(),
        })),
    }
}

/// A worker id named on the command line (exit 2 when it cannot be one).
fn worker_id_arg(text: &str) -> anyhow::Result<WorkerId> {
    WorkerId::parse(text)
        .map_err(|error| usage(format!("invalid data-worker id {text:?}: {error}")))
}

/// A duration as whole seconds with one decimal, e.g. `9.4s`.
fn seconds(duration: std::time::Duration) -> String {
    format!("{:.1}s", duration.as_secs_f64())
}

/// One worker as `workers --json` prints it.
fn worker_json(worker: &DataWorker) -> serde_json::Value {
    let millis =
        |duration: std::time::Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    serde_json::json!({
        "workerId": worker.worker_id,
        "url": worker.url,
        "replicated": worker.replicated,
        "leaseLeftMs": worker.lease_left.map(millis),
        "renewedAgoMs": millis(worker.renewed_ago),
        "draining": worker.draining,
        "apps": worker.apps,
    })
}

fn find_user(store: &Store, username: &str) -> anyhow::Result<User> {
    store
        .user_by_name(username)?
        .ok_or_else(|| anyhow::anyhow!("no such user {username}"))
}

fn unknown_user(error: StoreError, username: &str) -> anyhow::Error {
    match error {
        StoreError::UnknownUser => anyhow::anyhow!("no such user {username}"),
        other => other.into(),
    }
}

fn unknown_app(error: StoreError, app_id: &str) -> anyhow::Error {
    match error {
        StoreError::UnknownApp => {
            anyhow::anyhow!("no such app {app_id}: it has never been discovered as a valid package")
        }
        other => other.into(),
    }
}

/// One line of stdin without its line ending. On a terminal, asks first.
fn read_password(input: &mut dyn BufRead, prompt: bool) -> anyhow::Result<String> {
    if prompt {
        eprint!("Password (one line, shown as typed): ");
        std::io::stderr().flush().ok();
    }
    let mut line = String::new();
    let read = input
        .read_line(&mut line)
        .context("cannot read the password from stdin")?;
    if read == 0 {
        return Err(usage(
            "no password on stdin: pipe one line, e.g. printf '%s\\n' \"$PW\" | sasha admin …",
        ));
    }
    if let Some(rest) = line.strip_suffix('\n') {
        line.truncate(rest.strip_suffix('\r').unwrap_or(rest).len());
    }
    Ok(line)
}

/// `chat:use,apps:invoke` → the scope set. An empty list is left to the store
/// (which refuses it); an empty item or an unknown scope is refused here.
fn parse_scopes(text: &str) -> anyhow::Result<BTreeSet<Scope>> {
    if text.trim().is_empty() {
        return Ok(BTreeSet::new());
    }
    text.split(',')
        .map(|item| {
            let item = item.trim();
            if item.is_empty() {
                return Err(usage(format!(
                    "invalid --scopes {text:?}: an empty item between commas"
                )));
            }
            item.parse::<Scope>()
                .map_err(|error| usage(format!("invalid --scopes: {error}")))
        })
        .collect()
}

/// `90m`, `12h`, `30d`, `3600s` → seconds.
fn parse_ttl(text: &str) -> anyhow::Result<u64> {
    let invalid = || {
        usage(format!(
            "invalid --ttl {text:?}: use a number and a unit s, m, h or d, e.g. 90m, 12h or 30d"
        ))
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(invalid)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| invalid())?;
    let unit: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 60 * 60,
        "d" => 24 * 60 * 60,
        _ => return Err(invalid()),
    };
    number.checked_mul(unit).ok_or_else(invalid)
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (UTC, proleptic Gregorian).
fn rfc3339(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let seconds = unix.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        seconds / 3600,
        seconds % 3600 / 60,
        seconds % 60
    )
}

/// `sasha admin scim token …`, as the operator.
fn scim_token(command: ScimTokenCommand, output: &mut dyn Write) -> anyhow::Result<()> {
    match command {
        ScimTokenCommand::Mint { label, state } => {
            let store = open_existing(&state)?;
            let (secret, _) = store
                .mint_scim_token(&label, ACTOR_OPERATOR)
                .context("cannot mint a SCIM token")?;
            writeln!(output, "{secret}")?;
        }
        ScimTokenCommand::List { json, state } => {
            let store = open_existing(&state)?;
            for token in store.scim_tokens()? {
                if json {
                    writeln!(output, "{}", serde_json::to_string(&token)?)?;
                } else {
                    writeln!(
                        output,
                        "{}\t{}\tcreated {} by {}\tlast used {}\t{}",
                        token.id,
                        token.label,
                        rfc3339(token.created_at),
                        token.created_by,
                        token
                            .last_used_at
                            .map_or_else(|| "never".to_owned(), rfc3339),
                        if token.revoked_at.is_some() {
                            "revoked"
                        } else {
                            "active"
                        }
                    )?;
                }
            }
        }
        ScimTokenCommand::Revoke { id, state } => {
            let store = open_existing(&state)?;
            match store.revoke_scim_token(id, ACTOR_OPERATOR) {
                Ok(true) => writeln!(output, "SCIM token {id} is revoked")?,
                Ok(false) => writeln!(output, "SCIM token {id} already was revoked")?,
                Err(StoreError::UnknownToken) => {
                    anyhow::bail!("there is no SCIM token number {id}")
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_parse_with_units() {
        assert_eq!(parse_ttl("30d").unwrap(), 30 * 86_400);
        assert_eq!(parse_ttl("12h").unwrap(), 12 * 3600);
        assert_eq!(parse_ttl("90m").unwrap(), 90 * 60);
        assert_eq!(parse_ttl("45s").unwrap(), 45);
        for bad in [
            "",
            "30",
            "d",
            "30x",
            "1.5h",
            "-1d",
            "30 d",
            "99999999999999999999d",
        ] {
            let error = parse_ttl(bad).unwrap_err();
            assert_eq!(exit_status(&error), 2, "{bad}");
        }
    }

    #[test]
    fn scopes_parse_from_a_comma_separated_list() {
        assert_eq!(
            parse_scopes("chat:use, apps:invoke").unwrap(),
            BTreeSet::from([Scope::ChatUse, Scope::AppsInvoke])
        );
        assert!(parse_scopes("").unwrap().is_empty());
        for bad in ["chat:use,", "chat:use,,apps:invoke", "apps:admin"] {
            assert_eq!(exit_status(&parse_scopes(bad).unwrap_err()), 2, "{bad}");
        }
    }

    #[test]
    fn passwords_are_one_line_without_its_ending() {
        let read = |text: &str| read_password(&mut text.as_bytes(), false);
        assert_eq!(read("secret one two\n").unwrap(), "secret one two");
        assert_eq!(read("secret one two\r\nmore\n").unwrap(), "secret one two");
        assert_eq!(read("no newline").unwrap(), "no newline");
        assert_eq!(read("  spaced  \n").unwrap(), "  spaced  ");
        assert_eq!(exit_status(&read("").unwrap_err()), 2);
    }

    #[test]
    fn the_migration_target_is_the_flag_else_the_configured_database() {
        let storage = storage_paths(Some(Path::new("/tmp/state"))).unwrap();
        let env = |vars: &[(&str, &str)]| -> HashMap<String, String> {
            vars.iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
                .collect()
        };
        let target = |vars: &[(&str, &str)], to: Option<&str>| {
            migration_target(&env(vars), to.map(str::to_owned), None, &storage)
        };
        let configured = "postgres://sasha:pw@db.example.com/sasha";
        let given = "postgresql://other.example.com:5433/copy?sslmode=require";
        assert_eq!(target(&[], Some(given)).unwrap().url, given);
        assert_eq!(
            target(&[(DATABASE_URL, configured)], Some(given))
                .unwrap()
                .url,
            given
        );
        assert_eq!(
            target(&[(DATABASE_URL, configured)], None).unwrap().url,
            configured
        );
        for (vars, to, said) in [
            (&[][..], None, "name the PostgreSQL database"),
            (
                &[][..],
                Some("mysql://sasha:pw@db/sasha"),
                "--to: must be postgres://",
            ),
            (
                &[][..],
                Some("postgres://sasha:pw@db.example.com/"),
                "--to: must be",
            ),
            (
                &[(DATABASE_URL, "sqlite:///x?password=pw")][..],
                None,
                "DATABASE_URL: must be",
            ),
        ] {
            let error = target(vars, to).unwrap_err();
            assert_eq!(exit_status(&error), 2, "{to:?}");
            assert!(error.to_string().contains(said), "{error}");
            assert!(!error.to_string().contains("pw"), "{error}");
        }
    }

    #[test]
    fn timestamps_render_as_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_800_000_000), "2027-01-15T08:00:00Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
    }
}
