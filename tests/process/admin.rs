//! `sasha admin`, run as the real binary against temporary state folders: every
//! form, its output contract (the token alone on stdout, one error line on
//! stderr, exit 2 for refused input and 1 otherwise), and working on a
//! database another process holds open.

use crate::common;

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use common::core_database::CoreStore;
use studio_store::{
    AppAccess, ClientAuthMethod, CodeExchange, Consent, PrincipalKind, Scope, Store, UserRole,
};

const PASSWORD: &str = "correct horse battery";

/// One finished `sasha admin` run.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `sasha admin ARGS` with a clean environment plus `env`, feeding
/// `stdin` (or nothing).
fn admin_with_env(args: &[&str], env: &[(&str, &Path)], stdin: Option<&str>) -> Run {
    let mut child = Command::new(common::sasha_bin())
        .arg("admin")
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(key, value)| (key, value.as_os_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sasha admin");
    {
        let mut pipe = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            pipe.write_all(text.as_bytes()).unwrap();
        }
    }
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().expect("exit code"),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Runs `sasha admin ARGS --state-dir STATE`, on the state's core database
/// (`common::core_database`).
fn admin(state: &Path, args: &[&str], stdin: Option<&str>) -> Run {
    let mut args = args.to_vec();
    let state = state.to_str().unwrap();
    args.extend(["--state-dir", state]);
    let core = common::core_database::core_env(Path::new(state));
    let env: Vec<(&str, &Path)> = core
        .iter()
        .map(|(key, value)| (*key, Path::new(value)))
        .collect();
    admin_with_env(&args, &env, stdin)
}

/// Asserts a failed run: its status, nothing on stdout, and exactly one line
/// on stderr that contains `needle`.
fn assert_refused(run: &Run, code: i32, needle: &str) {
    assert_eq!(run.code, code, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert_eq!(run.stderr.lines().count(), 1, "{run:?}");
    assert!(run.stderr.starts_with("sasha admin: "), "{run:?}");
    assert!(run.stderr.contains(needle), "{run:?}");
}

fn store(state: &Path) -> CoreStore {
    common::core_database::core_store(state)
}

#[test]
fn user_add_and_passwd_take_passwords_from_the_flag_or_stdin() {
    let state = tempfile::tempdir().unwrap();
    let state = state.path();

    let run = admin(
        state,
        &[
            "user",
            "add",
            "ada",
            "--role",
            "admin",
            "--password",
            PASSWORD,
        ],
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    let id = run.stdout.trim_end();
    assert_eq!(run.stdout, format!("{id}\n"));
    assert_eq!(id.len(), 36, "a uuid: {id}");

    let run = admin(
        state,
        &["user", "add", "mia", "--role", "member"],
        Some(&format!("{PASSWORD}\n")),
    );
    assert_eq!(run.code, 0, "{run:?}");

    let store = store(state);
    let ada = store.verify_login("ada", PASSWORD).unwrap().unwrap();
    assert_eq!(ada.id, id);
    assert_eq!(ada.role, UserRole::Admin);
    let mia = store.verify_login("mia", PASSWORD).unwrap().unwrap();
    assert_eq!(mia.role, UserRole::Member);

    // A new password ends the user's sessions.
    let session = store.create_session(&mia.id).unwrap();
    let run = admin(
        state,
        &["user", "passwd", "mia"],
        Some("a new password for mia\r\n"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(store.verify_login("mia", PASSWORD).unwrap(), None);
    assert!(
        store
            .verify_login("mia", "a new password for mia")
            .unwrap()
            .is_some()
    );
    assert_eq!(store.session(&session).unwrap(), None);

    assert_refused(
        &admin(
            state,
            &[
                "user",
                "add",
                "ada",
                "--role",
                "staff",
                "--password",
                PASSWORD,
            ],
            None,
        ),
        1,
        "already taken",
    );
    assert_refused(
        &admin(
            state,
            &[
                "user",
                "add",
                "Bad Name",
                "--role",
                "staff",
                "--password",
                PASSWORD,
            ],
            None,
        ),
        2,
        "invalid username",
    );
    assert_refused(
        &admin(
            state,
            &[
                "user",
                "add",
                "sam",
                "--role",
                "staff",
                "--password",
                "short",
            ],
            None,
        ),
        2,
        "at least 12 characters",
    );
    assert_refused(
        &admin(state, &["user", "add", "sam", "--role", "staff"], Some("")),
        2,
        "no password on stdin",
    );
    assert_refused(
        &admin(
            state,
            &["user", "passwd", "nobody"],
            Some("long enough password\n"),
        ),
        1,
        "no such user nobody",
    );
    assert_eq!(store.user_by_name("sam").unwrap(), None);

    // An unknown role is a usage error from the parser.
    let run = admin(
        state,
        &[
            "user",
            "add",
            "sam",
            "--role",
            "owner",
            "--password",
            PASSWORD,
        ],
        None,
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("invalid value 'owner'"), "{run:?}");
}

#[test]
fn a_minted_token_may_be_consented_to_write_an_app_as_a_script() {
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    let store = store(state);
    store.create_user("sam", UserRole::Staff, PASSWORD).unwrap();
    store
        .register_app(
            "expense-log",
            "r1",
            None,
            r#"{"actions":[]}"#,
            &Default::default(),
        )
        .unwrap();
    let mint = |apps: &[&str]| {
        let mut args = vec!["token", "mint", "sam", "--scopes", "apps:invoke"];
        for app in apps {
            args.extend(["--write-app", app]);
        }
        admin(state, &args, None)
    };
    let run = mint(&["expense-log"]);
    assert_eq!(run.code, 0, "{run:?}");
    let token = run.stdout.trim_end();
    assert!(store.write_consent(token, "expense-log").unwrap());
    // An app never discovered: refused, and no usable token is left behind.
    let tokens_before: i64 = common::core_database::core_sql(state)
        .count("SELECT count(*) FROM tokens WHERE revoked_at IS NULL");
    assert_refused(
        &mint(&["expense-log", "never-seen"]),
        1,
        "no such app never-seen",
    );
    let tokens_after: i64 = common::core_database::core_sql(state)
        .count("SELECT count(*) FROM tokens WHERE revoked_at IS NULL");
    assert_eq!(tokens_after, tokens_before);
}

#[test]
fn token_mint_prints_only_a_token_with_exactly_its_scopes() {
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    let store = store(state);
    store.create_user("sam", UserRole::Staff, PASSWORD).unwrap();

    let run = admin(
        state,
        &[
            "token",
            "mint",
            "sam",
            "--scopes",
            "apps:invoke,apps:write",
            "--ttl",
            "90m",
        ],
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stderr, "");
    let token = run.stdout.strip_suffix('\n').expect("one line");
    assert!(!token.contains(char::is_whitespace), "{token:?}");
    assert!(token.starts_with("sasha_at_"), "{token}");

    let principal = store.token(token).unwrap().expect("the token works");
    assert_eq!(principal.kind, PrincipalKind::Access);
    assert_eq!(principal.user.username, "sam");
    assert_eq!(
        principal.scopes,
        BTreeSet::from([Scope::AppsInvoke, Scope::AppsWrite])
    );
    let now = studio_store::system_clock();
    assert!(
        (now + 90 * 60 - 5..=now + 90 * 60).contains(&principal.expires_at),
        "{principal:?}"
    );

    // The default lifetime is 30 days.
    let run = admin(
        state,
        &["token", "mint", "sam", "--scopes", "chat:use"],
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    let principal = store.token(run.stdout.trim_end()).unwrap().unwrap();
    assert_eq!(principal.scopes, BTreeSet::from([Scope::ChatUse]));
    assert!(principal.expires_at > now + 29 * 86_400);
}

#[test]
fn a_member_cannot_mint_apps_write_and_bad_input_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    let store = store(state);
    store
        .create_user("mia", UserRole::Member, PASSWORD)
        .unwrap();

    assert_refused(
        &admin(
            state,
            &["token", "mint", "mia", "--scopes", "apps:invoke,apps:write"],
            None,
        ),
        2,
        "a member user cannot hold the apps:write scope",
    );
    assert_refused(
        &admin(
            state,
            &["token", "mint", "mia", "--scopes", "apps:admin"],
            None,
        ),
        2,
        "unknown scope \"apps:admin\"",
    );
    assert_refused(
        &admin(state, &["token", "mint", "mia", "--scopes", ""], None),
        2,
        "at least one scope",
    );
    assert_refused(
        &admin(
            state,
            &[
                "token", "mint", "mia", "--scopes", "chat:use", "--ttl", "soon",
            ],
            None,
        ),
        2,
        "invalid --ttl",
    );
    assert_refused(
        &admin(
            state,
            &[
                "token", "mint", "mia", "--scopes", "chat:use", "--ttl", "366d",
            ],
            None,
        ),
        2,
        "at most 365 days",
    );
    assert_refused(
        &admin(
            state,
            &["token", "mint", "nobody", "--scopes", "chat:use"],
            None,
        ),
        1,
        "no such user nobody",
    );
}

#[test]
fn grant_revoke_and_grants_round_trip() {
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    let store = store(state);
    let ada = store.create_user("ada", UserRole::Admin, PASSWORD).unwrap();
    let mia = store
        .create_user("mia", UserRole::Member, PASSWORD)
        .unwrap();
    store
        .register_app("time-sheet", "rev-1", None, "[]", &Default::default())
        .unwrap();

    let run = admin(state, &["grant", "time-sheet", "mia", "use"], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        store.access("time-sheet", &mia.id).unwrap(),
        Some(AppAccess::Use)
    );

    let run = admin(state, &["grants", "time-sheet"], None);
    assert_eq!(run.code, 0, "{run:?}");
    let lines: Vec<Vec<&str>> = run
        .stdout
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    assert_eq!(
        lines[0],
        ["USERNAME", "ACCESS", "GRANTED", "AT", "GRANTED", "BY"]
    );
    assert_eq!(lines[1][..2], ["ada", "manage"]);
    assert_eq!(lines[1][3], "system");
    assert_eq!(lines[2][..2], ["mia", "use"]);
    assert!(lines[2][2].ends_with('Z'), "{:?}", lines[2]);
    assert_eq!(lines[2][3], "operator");

    let run = admin(state, &["grant", "time-sheet", "mia", "manage"], None);
    assert_eq!(run.code, 0, "{run:?}");
    let run = admin(state, &["grants", "time-sheet", "--json"], None);
    assert_eq!(run.code, 0, "{run:?}");
    let grants: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(grants.len(), 2);
    assert_eq!(grants[0]["username"], "ada");
    assert_eq!(grants[0]["userId"], ada.id.as_str());
    assert_eq!(grants[1]["username"], "mia");
    assert_eq!(grants[1]["access"], "manage");
    assert!(grants[1]["grantedAt"].as_i64().unwrap() > 0);

    let run = admin(state, &["revoke", "time-sheet", "mia"], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(store.access("time-sheet", &mia.id).unwrap(), None);
    let run = admin(state, &["revoke", "time-sheet", "mia"], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("had no access"), "{run:?}");
    let run = admin(state, &["grants", "time-sheet", "--json"], None);
    assert_eq!(run.stdout.lines().count(), 1, "{run:?}");

    // Every change is audited under the operator.
    let operator_changes: Vec<_> = store
        .audit_entries(Some("time-sheet"))
        .unwrap()
        .into_iter()
        .filter(|entry| entry.actor == "operator")
        .map(|entry| (entry.before, entry.after))
        .collect();
    assert_eq!(
        operator_changes,
        [
            (None, Some("use".to_owned())),
            (Some("use".to_owned()), Some("manage".to_owned())),
            (Some("manage".to_owned()), None),
        ]
    );

    for args in [
        &["grant", "no-such-app", "mia", "use"][..],
        &["revoke", "no-such-app", "mia"],
        &["grants", "no-such-app"],
    ] {
        assert_refused(&admin(state, args, None), 1, "no such app no-such-app");
    }
    assert_refused(
        &admin(state, &["grant", "time-sheet", "nobody", "use"], None),
        1,
        "no such user nobody",
    );
    let run = admin(state, &["grant", "time-sheet", "mia", "own"], None);
    assert_eq!(run.code, 2, "{run:?}");
}

#[test]
fn it_works_while_another_process_holds_the_database_open() {
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    // The "running stack": a store opened first and used throughout.
    let running = store(state);
    running
        .create_user("ada", UserRole::Admin, PASSWORD)
        .unwrap();
    running
        .register_app("time-sheet", "rev-1", None, "[]", &Default::default())
        .unwrap();

    let run = admin(
        state,
        &["user", "add", "mia", "--role", "member"],
        Some(&format!("{PASSWORD}\n")),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let mia = running.user_by_name("mia").unwrap().expect("seen at once");
    let run = admin(state, &["grant", "time-sheet", "mia", "use"], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        running.access("time-sheet", &mia.id).unwrap(),
        Some(AppAccess::Use)
    );
    let run = admin(state, &["revoke", "time-sheet", "mia"], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(running.access("time-sheet", &mia.id).unwrap(), None);
    let run = admin(
        state,
        &["token", "mint", "ada", "--scopes", "chat:use"],
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(running.token(run.stdout.trim_end()).unwrap().is_some());
}

#[test]
fn the_database_is_found_like_the_services_find_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let add = [
        "user",
        "add",
        "ada",
        "--role",
        "admin",
        "--password",
        PASSWORD,
    ];

    // SASHA_STATE_DIR without --state-dir.
    let run = admin_with_env(&add, &[("SASHA_STATE_DIR", &state)], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(state.join("core.sqlite").exists());

    // DB_PATH names the database instead of <state>/core.sqlite.
    let elsewhere = dir.path().join("db/other.sqlite");
    let run = admin_with_env(
        &[
            "user",
            "add",
            "bob",
            "--role",
            "member",
            "--password",
            PASSWORD,
        ],
        &[("SASHA_STATE_DIR", &state), ("DB_PATH", &elsewhere)],
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    let other = Store::open(&elsewhere).unwrap();
    assert!(other.user_by_name("bob").unwrap().is_some());
    assert!(store(&state).user_by_name("bob").unwrap().is_none());

    // Only `user add` creates a database; elsewhere a missing one is a mistake.
    let missing = dir.path().join("typo");
    assert_refused(
        &admin(&missing, &["grants", "time-sheet"], None),
        1,
        "no core database at",
    );
    assert!(!missing.exists());
}

#[test]
fn help_shows_every_form() {
    let help = |args: &[&str]| {
        let output = Command::new(common::sasha_bin())
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(output.status.success());
        String::from_utf8(output.stdout).unwrap()
    };
    let top = help(&["admin"]);
    for form in [
        "user",
        "token",
        "grant",
        "revoke",
        "grants",
        "connections",
        "disconnect",
        "member-apps",
        "import",
        "export-packages",
    ] {
        assert!(top.contains(form), "{top}");
    }
    let user = help(&["admin", "user"]);
    for form in ["passwd", "list", "role", "disable", "enable", "remove"] {
        assert!(user.contains(form), "{user}");
    }
    let add = help(&["admin", "user", "add"]);
    for needle in ["--role", "--password", "--state-dir", "printf"] {
        assert!(add.contains(needle), "{add}");
    }
    let mint = help(&["admin", "token", "mint"]);
    for needle in ["--scopes", "--ttl", "apps:write", "30d"] {
        assert!(mint.contains(needle), "{mint}");
    }
}

#[test]
fn connections_are_listed_and_ended_by_the_operator() {
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    let store = store(state);
    let sam = store.create_user("sam", UserRole::Staff, PASSWORD).unwrap();
    store
        .create_user("mia", UserRole::Member, PASSWORD)
        .unwrap();
    let redirect = "http://127.0.0.1:4567/callback";
    let verifier = "v".repeat(43);
    let challenge = {
        use base64::Engine as _;
        use sha2::Digest as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(&verifier))
    };
    let client = store
        .oauth_register_client(
            "Desk Client",
            &[redirect.to_owned()],
            ClientAuthMethod::None,
        )
        .unwrap()
        .unwrap()
        .client;
    let scopes: BTreeSet<Scope> = [Scope::AppsInvoke].into();
    let code = store
        .oauth_consent(&Consent {
            client_id: &client.client_id,
            user_id: &sam.id,
            scopes: &scopes,
            resource: "http://localhost:3007/mcp",
            redirect_uri: redirect,
            code_challenge: &challenge,
        })
        .unwrap();
    let tokens = store
        .oauth_exchange_code(&CodeExchange {
            client_id: &client.client_id,
            code: &code,
            redirect_uri: redirect,
            code_verifier: &verifier,
            resource: None,
        })
        .unwrap()
        .unwrap();

    let table = admin(state, &["connections", "sam"], None);
    assert_eq!(table.code, 0, "{table:?}");
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{table:?}");
    assert!(lines[0].starts_with("ID"));
    assert!(lines[1].contains("Desk Client") && lines[1].contains("apps:invoke"));
    let json = admin(state, &["connections", "sam", "--json"], None);
    let connection: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(connection["clientName"], "Desk Client");
    assert_eq!(connection["scopes"], serde_json::json!(["apps:invoke"]));
    let id = connection["id"].as_str().unwrap();
    assert!(lines[1].starts_with(id));
    assert_eq!(
        admin(state, &["connections", "mia"], None)
            .stdout
            .lines()
            .count(),
        1
    );

    // Another user's connection id is not theirs to end.
    assert_refused(
        &admin(state, &["disconnect", "mia", id], None),
        2,
        "no live connection",
    );
    assert!(store.token(&tokens.access_token).unwrap().is_some());
    let ended = admin(state, &["disconnect", "sam", id], None);
    assert_eq!(ended.code, 0, "{ended:?}");
    assert!(ended.stdout.contains("ended"));
    assert!(store.token(&tokens.access_token).unwrap().is_none());
    assert_refused(
        &admin(state, &["disconnect", "sam", id], None),
        2,
        "no live connection",
    );
    assert_refused(
        &admin(state, &["connections", "nobody"], None),
        1,
        "no such user nobody",
    );
    let audit = store.audit_entries(None).unwrap();
    let revoked = audit
        .iter()
        .find(|entry| entry.action == "oauth.revoked")
        .unwrap();
    assert_eq!(revoked.actor, "operator");
}

#[test]
fn the_member_apps_switch_is_turned_and_audited_by_the_operator() {
    let state = tempfile::tempdir().unwrap();
    let store = store(state.path());
    let status = admin(state.path(), &["member-apps", "status"], None);
    assert_eq!(status.code, 0, "{status:?}");
    assert_eq!(status.stdout, "member apps: on\n", "on by default");
    let off = admin(state.path(), &["member-apps", "off"], None);
    assert_eq!(
        (off.code, off.stdout.as_str()),
        (0, "member apps are now off\n"),
        "{off:?}"
    );
    assert!(!store.member_apps_enabled().unwrap());
    let again = admin(state.path(), &["member-apps", "off"], None);
    assert_eq!(again.stdout, "member apps were already off\n", "{again:?}");
    let on = admin(state.path(), &["member-apps", "on"], None);
    assert_eq!(on.stdout, "member apps are now on\n", "{on:?}");
    let changes: Vec<_> = store
        .audit_entries(None)
        .unwrap()
        .into_iter()
        .filter(|entry| entry.action == "setting.changed")
        .map(|entry| (entry.actor, entry.before, entry.after))
        .collect();
    assert_eq!(
        changes,
        [
            (
                "operator".to_owned(),
                Some("true".to_owned()),
                Some("false".to_owned())
            ),
            (
                "operator".to_owned(),
                Some("false".to_owned()),
                Some("true".to_owned())
            ),
        ]
    );
    let refused = admin(state.path(), &["member-apps", "maybe"], None);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused.stderr.contains("on, off, status") || refused.stderr.contains("possible values"),
        "{refused:?}"
    );
}

#[test]
fn users_are_listed_given_roles_and_disabled_by_the_operator() {
    let state = tempfile::tempdir().unwrap();
    let store = store(state.path());
    let maria = store
        .create_user("maria", UserRole::Member, PASSWORD)
        .unwrap();
    store.create_user("sam", UserRole::Staff, PASSWORD).unwrap();
    store.create_session(&maria.id).unwrap();
    let scopes = [Scope::AppsInvoke].into_iter().collect();
    let token = store
        .mint_token(&maria.id, studio_store::TokenKind::Access, &scopes, None)
        .unwrap();

    let listed = admin(state.path(), &["user", "list"], None);
    assert_eq!(listed.code, 0, "{listed:?}");
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{listed:?}");
    assert!(lines[0].starts_with("maria\tmember\t"), "{listed:?}");
    assert!(lines[0].ends_with("\tactive"), "{listed:?}");
    assert!(
        lines[1].starts_with("sam\tstaff\t-\tactive"),
        "never signed in: {listed:?}"
    );
    let json = admin(state.path(), &["user", "list", "--json"], None);
    let first: serde_json::Value =
        serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["username"], "maria");
    assert!(first["lastSignInAt"].is_i64(), "{first}");
    assert_eq!(first["disabled"], false);

    let promoted = admin(state.path(), &["user", "role", "maria", "staff"], None);
    assert_eq!(promoted.stdout, "maria is now staff\n", "{promoted:?}");
    assert_eq!(
        store.user_by_name("maria").unwrap().unwrap().role,
        UserRole::Staff
    );
    let again = admin(state.path(), &["user", "role", "maria", "staff"], None);
    assert_eq!(again.stdout, "maria already was staff\n", "{again:?}");

    // Disabled: no sign-in with the right password, the token is dead.
    let disabled = admin(state.path(), &["user", "disable", "maria"], None);
    assert_eq!(disabled.code, 0, "{disabled:?}");
    assert!(store.verify_login("maria", PASSWORD).unwrap().is_none());
    assert!(store.token(&token).unwrap().is_none());
    let json = admin(state.path(), &["user", "list", "--json"], None);
    assert!(
        json.stdout
            .lines()
            .next()
            .unwrap()
            .contains("\"disabled\":true"),
        "{json:?}"
    );
    let enabled = admin(state.path(), &["user", "enable", "maria"], None);
    assert_eq!(enabled.stdout, "maria may sign in again\n", "{enabled:?}");
    assert!(store.verify_login("maria", PASSWORD).unwrap().is_some());
    assert!(
        store.token(&token).unwrap().is_none(),
        "enabling does not revive a revoked token"
    );

    let actions: Vec<String> = store
        .audit_entries(None)
        .unwrap()
        .into_iter()
        .map(|entry| entry.action)
        .filter(|action| action.starts_with("user."))
        .collect();
    assert_eq!(
        actions,
        [
            "user.role-changed",
            "user.status-changed",
            "user.status-changed"
        ]
    );
    assert_refused(
        &admin(state.path(), &["user", "disable", "nobody"], None),
        1,
        "no such user nobody",
    );
}

#[test]
fn a_removed_user_loses_grants_and_credentials_and_an_invited_one_is_listed_so() {
    let state = tempfile::tempdir().unwrap();
    let store = store(state.path());
    let maria = store
        .create_user("maria", UserRole::Member, PASSWORD)
        .unwrap();
    store
        .invite_user("nadia", UserRole::Staff, "operator")
        .unwrap();
    let scopes = [Scope::AppsInvoke].into_iter().collect();
    let token = store
        .mint_token(&maria.id, studio_store::TokenKind::Access, &scopes, None)
        .unwrap();
    let session = store.create_session(&maria.id).unwrap();

    let listed = admin(state.path(), &["user", "list"], None);
    assert!(
        listed.stdout.lines().nth(1).unwrap().ends_with("\tinvited"),
        "{listed:?}"
    );

    let removed = admin(state.path(), &["user", "remove", "maria"], None);
    assert_eq!(
        removed.stdout, "maria is removed; 0 grants ended, 0 member apps now have no author\n",
        "{removed:?}"
    );
    assert!(store.user_by_name("maria").unwrap().is_none());
    assert!(store.token(&token).unwrap().is_none());
    assert!(store.session(&session).unwrap().is_none());
    assert!(
        store
            .audit_entries(None)
            .unwrap()
            .iter()
            .any(|entry| entry.action == "user.removed" && entry.actor == "operator")
    );
    assert_refused(
        &admin(state.path(), &["user", "remove", "maria"], None),
        1,
        "no such user maria",
    );
}

#[test]
fn tokens_are_listed_without_secrets_and_revoked_by_number() {
    let state = tempfile::tempdir().unwrap();
    let store = store(state.path());
    let maria = store
        .create_user("maria", UserRole::Member, PASSWORD)
        .unwrap();
    let other = store
        .create_user("olga", UserRole::Member, PASSWORD)
        .unwrap();
    let scopes = [Scope::AppsInvoke].into_iter().collect();
    let kind = studio_store::TokenKind::Access;
    let first = store.mint_token(&maria.id, kind, &scopes, None).unwrap();
    let second = store.mint_token(&maria.id, kind, &scopes, None).unwrap();
    let olgas = store.mint_token(&other.id, kind, &scopes, None).unwrap();

    let listed = admin(state.path(), &["token", "list", "maria"], None);
    assert_eq!(listed.code, 0, "{listed:?}");
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{listed:?}");
    assert!(
        lines
            .iter()
            .all(|line| line.contains("\taccess\tapps:invoke\t")
                && line.ends_with("\toperator\tactive")),
        "{listed:?}"
    );
    for secret in [&first, &second] {
        assert!(
            !listed.stdout.contains(secret.as_str()),
            "a secret was printed"
        );
    }
    let newest: serde_json::Value = serde_json::from_str(
        admin(state.path(), &["token", "list", "maria", "--json"], None)
            .stdout
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let newest_id = newest["id"].as_i64().unwrap().to_string();

    // Olga's token is not maria's to name.
    let olga_id = serde_json::from_str::<serde_json::Value>(
        admin(state.path(), &["token", "list", "olga", "--json"], None)
            .stdout
            .trim(),
    )
    .unwrap()["id"]
        .as_i64()
        .unwrap()
        .to_string();
    assert_refused(
        &admin(state.path(), &["token", "revoke", "maria", &olga_id], None),
        1,
        "maria has no token number",
    );
    assert!(store.token(&olgas).unwrap().is_some());

    let revoked = admin(
        state.path(),
        &["token", "revoke", "maria", &newest_id],
        None,
    );
    assert_eq!(
        revoked.stdout,
        format!("token {newest_id} of maria is revoked\n"),
        "{revoked:?}"
    );
    assert!(
        store.token(&second).unwrap().is_none(),
        "the newest token stops working"
    );
    assert!(
        store.token(&first).unwrap().is_some(),
        "the other one still works"
    );
    let again = admin(
        state.path(),
        &["token", "revoke", "maria", &newest_id],
        None,
    );
    assert!(again.stdout.contains("already was revoked"), "{again:?}");
    assert!(
        admin(state.path(), &["token", "list", "maria"], None)
            .stdout
            .lines()
            .next()
            .unwrap()
            .ends_with("\trevoked")
    );
    let audited = store
        .audit_entries(None)
        .unwrap()
        .into_iter()
        .filter(|entry| entry.action == "token.revoked")
        .count();
    assert_eq!(audited, 1);
}

#[test]
fn migrate_core_copies_the_state_folder_into_an_empty_postgresql_once() {
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    let run = admin(
        state,
        &[
            "user",
            "add",
            "ada",
            "--role",
            "admin",
            "--password",
            PASSWORD,
        ],
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    // The test server trusts loopback and ignores the password: it is there
    // to show it is never printed.
    let secret = "hunter2-never-shown";
    let url = sasha_testkit::postgres_database().replacen(
        "postgres://postgres@",
        &format!("postgres://postgres:{secret}@"),
        1,
    );
    assert!(url.contains(secret), "{url}");

    let run = admin(state, &["migrate-core", "--to", &url], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    assert!(!run.stdout.contains(secret), "{run:?}");
    let lines: Vec<Vec<&str>> = run
        .stdout
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert!(lines[0].starts_with(&["copied"]), "{run:?}");
    assert!(
        lines[0]
            .last()
            .unwrap()
            .starts_with("postgresql://127.0.0.1:"),
        "{run:?}"
    );
    assert_eq!(lines[1], ["TABLE", "ROWS"], "{run:?}");
    for table in ["users", "authorization_audit_log", "tokens"] {
        assert!(
            lines.iter().any(|line| line.len() == 2 && line[0] == table),
            "{table}: {run:?}"
        );
    }
    assert!(lines.contains(&vec!["users", "1"]), "{run:?}");
    assert!(lines.contains(&vec!["tokens", "0"]), "{run:?}");
    let last = run.stdout.lines().last().unwrap();
    assert!(last.starts_with("verified: in all "), "{run:?}");
    // The copy is the installation: ada signs in against PostgreSQL.
    let copy = Store::connect(
        &url,
        1,
        None,
        std::sync::Arc::new(studio_store::system_clock),
    )
    .unwrap();
    assert!(copy.verify_login("ada", PASSWORD).unwrap().is_some());

    // Again, through DATABASE_URL: refused, nothing written, and the
    // password still unsaid.
    let run = admin_with_env(
        &["migrate-core", "--state-dir", state.to_str().unwrap()],
        &[("DATABASE_URL", Path::new(&url))],
        None,
    );
    assert_refused(&run, 2, "not empty");
    assert!(run.stderr.contains("nothing was written"), "{run:?}");
    assert!(!run.stderr.contains(secret), "{run:?}");
    assert_eq!(copy.users().unwrap().len(), 1);

    // A database that cannot be reached: a fault, named without its password.
    let unreachable = format!("postgres://postgres:{secret}@127.0.0.1:1/nowhere");
    let run = admin(state, &["migrate-core", "--to", &unreachable], None);
    assert_refused(&run, 1, "cannot copy");
    assert!(run.stderr.contains("refused"), "{run:?}");
    assert!(!run.stderr.contains(secret), "{run:?}");

    // Another kind of URL is refused before anything is opened.
    let run = admin(state, &["migrate-core", "--to", "sqlite:///tmp/x"], None);
    assert_refused(&run, 2, "--to: must be postgres://");
    let run = admin(state, &["migrate-core"], None);
    assert_refused(&run, 2, "name the PostgreSQL database to copy into");

    // The help says what it does and never shows DATABASE_URL's value.
    let help = Command::new(common::sasha_bin())
        .args(["admin", "migrate-core", "--help"])
        .env("DATABASE_URL", &url)
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    for needle in [
        "--to",
        "DATABASE_URL_FILE",
        "must be empty",
        "nothing is written",
        "--state-dir",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
    assert!(!help.contains(secret), "{help}");
}

/// With `DATABASE_URL`, every admin command works on the PostgreSQL core
/// database studio-core's replicas share, not on the state folder's file.
#[test]
fn admin_commands_work_on_the_postgresql_core_database_the_environment_names() {
    let state = tempfile::tempdir().unwrap();
    let url = sasha_testkit::postgres_database();
    let env = [
        ("DATABASE_URL", Path::new(&url)),
        ("SASHA_STATE_DIR", state.path()),
    ];
    let run = admin_with_env(
        &[
            "user",
            "add",
            "ada",
            "--role",
            "admin",
            "--password",
            PASSWORD,
        ],
        &env,
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    let run = admin_with_env(&["user", "list"], &env, None);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.starts_with("ada"), "{run:?}");
    assert!(
        !state.path().join("core.sqlite").exists(),
        "no SQLite file is made"
    );
    let copy = Store::connect(
        &url,
        1,
        None,
        std::sync::Arc::new(studio_store::system_clock),
    )
    .unwrap();
    assert!(copy.verify_login("ada", PASSWORD).unwrap().is_some());
    // A wrong URL is refused naming the variable.
    let run = admin_with_env(
        &["user", "list"],
        &[("DATABASE_URL", Path::new("mysql://x@h/db"))],
        None,
    );
    assert_refused(&run, 2, "DATABASE_URL");
}

/// `import` makes each package folder its package's head in the core
/// database (the folder wins), imports the documents an earlier build kept
/// as files, and says what it did per package; `export-packages` writes the
/// heads back out as folders; a folder that cannot be read in full is named
/// and refused, and nothing of it is taken.
#[test]
fn packages_and_documents_are_imported_into_the_core_database_and_exported_again() {
    let state = tempfile::tempdir().unwrap();
    let ada = store(state.path())
        .create_user("ada", UserRole::Admin, PASSWORD)
        .unwrap();
    let apps = state.path().join("docs/apps");
    std::fs::create_dir_all(apps.join("notes/ui")).unwrap();
    std::fs::write(apps.join("notes/APP.md"), "# Notes\n").unwrap();
    std::fs::write(apps.join("notes/ui/index.html"), "<p>notes</p>").unwrap();
    std::fs::create_dir_all(state.path().join(format!("uploads/{}", ada.id))).unwrap();
    std::fs::write(
        state.path().join(format!("uploads/{}/brief.md", ada.id)),
        "# Brief\n",
    )
    .unwrap();

    let run = admin(state.path(), &["import"], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "notes\timported (generation 1)\ndocuments: 1 imported, 0 already there, 0 of users who are gone, 0 skipped\n"
    );
    let head = store(state.path()).package_head("notes").unwrap().unwrap();
    assert_eq!(head.files.unwrap()["ui/index.html"], b"<p>notes</p>");
    assert_eq!(
        store(state.path()).upload_names(&ada.id).unwrap(),
        ["brief.md"]
    );

    // Again: nothing new; then a changed folder wins over the head.
    let again = admin(state.path(), &["import"], None);
    assert!(
        again
            .stdout
            .starts_with("notes\tunchanged\ndocuments: 0 imported, 1 already there"),
        "{again:?}"
    );
    std::fs::write(apps.join("notes/APP.md"), "# Notes, changed\n").unwrap();
    let changed = admin(state.path(), &["import"], None);
    assert!(
        changed
            .stdout
            .starts_with("notes\timported (generation 2)\n"),
        "{changed:?}"
    );

    // Exported: exactly the head's files, in a folder of its own.
    let out = tempfile::tempdir().unwrap();
    let exported = admin(
        state.path(),
        &["export-packages", "--to", out.path().to_str().unwrap()],
        None,
    );
    assert_eq!(exported.code, 0, "{exported:?}");
    assert!(
        exported.stdout.ends_with("1 packages written\n"),
        "{exported:?}"
    );
    assert_eq!(
        std::fs::read_to_string(out.path().join("apps/notes/APP.md")).unwrap(),
        "# Notes, changed\n"
    );
    assert_eq!(
        std::fs::read_to_string(out.path().join("apps/notes/ui/index.html")).unwrap(),
        "<p>notes</p>"
    );
    // Never over a folder that is there.
    let refused = admin(
        state.path(),
        &["export-packages", "--to", out.path().to_str().unwrap()],
        None,
    );
    assert_refused(&refused, 1, "cannot export the packages");

    // A folder holding a link is not read in full: named, not imported.
    std::os::unix::fs::symlink("/etc/passwd", apps.join("notes/linked.md")).unwrap();
    let unreadable = admin(state.path(), &["import"], None);
    assert_eq!(unreadable.code, 1, "{unreadable:?}");
    assert!(
        unreadable.stdout.starts_with("notes\tnot imported: "),
        "{unreadable:?}"
    );
    assert!(
        unreadable
            .stderr
            .contains("1 package folders could not be read in full"),
        "{unreadable:?}"
    );
    assert_eq!(
        store(state.path())
            .package_head("notes")
            .unwrap()
            .unwrap()
            .generation,
        2
    );
}

/// The data-workers' leases and each app's placement, as the operator
/// reads and changes them: listing (a table, or JSON), draining and
/// undraining a worker, moving an app (handed over by a live owner, at
/// once from a lapsed one), and every refusal one line with its status.
#[test]
fn workers_and_placements_are_listed_drained_and_moved_by_the_operator() {
    use std::time::Duration;
    use studio_store::{WorkerId, WorkerUrl};

    let state = tempfile::tempdir().unwrap();
    let store = store(state.path());
    let empty = admin(state.path(), &["workers"], None);
    assert_eq!((empty.code, empty.stdout.as_str()), (0, ""), "{empty:?}");

    let worker = |id: &str| WorkerId::parse(id).unwrap();
    let renew = |id: &str, port: u16, replicated: bool, lease: Duration| {
        let url = WorkerUrl::parse(&format!("https://127.0.0.1:{port}")).unwrap();
        store.with(|store| {
            store
                .renew(&worker(id), &url, replicated, &[], lease)
                .unwrap()
        });
    };
    let place = |app_id: &str| {
        let app = sasha_contract::AppId::parse(app_id).unwrap();
        store.with(|store| store.locate(&app).unwrap().unwrap().worker_id)
    };
    let long = Duration::from_secs(600);
    // `gone` alone holds `archive`; `w1` alone takes `notes` and
    // `time-sheet` while `gone` drains.
    renew("gone", 4001, true, long);
    assert_eq!(place("archive"), "gone");
    let drain = |id: &str, on: bool| {
        store.with(|store| store.set_draining(&worker(id), on).unwrap().unwrap());
    };
    drain("gone", true);
    renew("w1", 4011, true, long);
    assert_eq!(place("notes"), "w1");
    assert_eq!(place("time-sheet"), "w1");
    drain("gone", false);
    renew("w2", 4012, true, long);
    renew("w3", 4013, false, long);
    // `gone`'s lease ends: a renewal never shortens one, so the test ends
    // it in the table, as its last renewal running out would.
    let ended = common::core_database::core_sql(state.path()).execute(
        "UPDATE data_workers SET lease_until_ms = $1 WHERE worker_id = 'gone'",
        0,
    );
    assert_eq!(ended, 1);

    let listed = admin(state.path(), &["workers"], None);
    assert_eq!(listed.code, 0, "{listed:?}");
    let lines: Vec<Vec<&str>> = listed
        .stdout
        .lines()
        .map(|line| line.split('\t').collect())
        .collect();
    assert_eq!(lines.len(), 4, "{listed:?}");
    let row = |id: &str| lines.iter().find(|line| line[0] == id).unwrap().clone();
    let w1 = row("w1");
    assert_eq!(w1[1], "https://127.0.0.1:4011");
    assert_eq!(w1[2], "replicated");
    assert!(
        w1[3].starts_with("lease ") && w1[3].ends_with("s left"),
        "{w1:?}"
    );
    assert_eq!(w1[4..], ["active", "2 apps"]);
    assert_eq!(row("w3")[2], "not replicated");
    let gone = row("gone");
    assert!(gone[3].starts_with("lapsed (renewed "), "{gone:?}");
    assert_eq!(gone[5], "1 apps");
    let json = admin(state.path(), &["workers", "--json"], None);
    let workers: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let w1 = workers.iter().find(|w| w["workerId"] == "w1").unwrap();
    assert!(w1["leaseLeftMs"].as_u64().unwrap() > 0, "{w1}");
    assert_eq!(
        (w1["apps"].as_u64(), w1["draining"].as_bool()),
        (Some(2), Some(false))
    );
    let gone = workers.iter().find(|w| w["workerId"] == "gone").unwrap();
    assert!(gone["leaseLeftMs"].is_null(), "{gone}");

    let placement = admin(state.path(), &["apps", "placement"], None);
    assert_eq!(
        placement.stdout,
        "archive\tgone\tepoch 1\t-\nnotes\tw1\tepoch 1\t-\ntime-sheet\tw1\tepoch 1\t-\n",
        "{placement:?}"
    );

    // Moves.
    let moved = admin(state.path(), &["apps", "move", "notes", "--to", "w2"], None);
    assert_eq!(moved.code, 0, "{moved:?}");
    assert!(
        moved
            .stdout
            .starts_with("notes is being handed over to w2: "),
        "{moved:?}"
    );
    let placement = admin(state.path(), &["apps", "placement"], None);
    assert!(
        placement
            .stdout
            .contains("notes\tw1\tepoch 1\tmoving to w2 (move)\n"),
        "{placement:?}"
    );
    let json = admin(state.path(), &["apps", "placement", "--json"], None);
    let notes: serde_json::Value =
        serde_json::from_str(json.stdout.lines().nth(1).unwrap()).unwrap();
    assert_eq!(
        notes,
        serde_json::json!({"appId": "notes", "workerId": "w1", "epoch": 1, "movingTo": "w2", "moveReason": "move"})
    );
    let at_once = admin(
        state.path(),
        &["apps", "move", "archive", "--to", "w2"],
        None,
    );
    assert_eq!(
        at_once.stdout, "archive moved to w2 at epoch 2 (its owner's lease had lapsed)\n",
        "{at_once:?}"
    );
    for (args, code, needle) in [
        (
            &["apps", "move", "time-sheet", "--to", "gone"][..],
            1,
            "data-worker gone's lease has lapsed",
        ),
        (
            &["apps", "move", "time-sheet", "--to", "w3"],
            1,
            "data-worker w3 does not replicate",
        ),
        (
            &["apps", "move", "time-sheet", "--to", "nobody"],
            1,
            "no data-worker nobody has ever renewed a lease",
        ),
        (
            &["apps", "move", "time-sheet", "--to", "w1"],
            1,
            "app time-sheet is already on data-worker w1",
        ),
        (
            &["apps", "move", "unplaced", "--to", "w2"],
            1,
            "app unplaced has no placement yet",
        ),
        (
            &["apps", "move", "Not_An_App", "--to", "w2"],
            2,
            "invalid app id \"Not_An_App\"",
        ),
        (
            &["apps", "move", "notes", "--to", "a b"],
            2,
            "invalid data-worker id \"a b\"",
        ),
        (
            &["workers", "drain", "nobody"],
            1,
            "no data-worker nobody has ever renewed a lease",
        ),
        (&["workers", "undrain", "a/b"], 2, "invalid data-worker id"),
    ] {
        assert_refused(&admin(state.path(), args, None), code, needle);
    }

    // Drains.
    let drained = admin(state.path(), &["workers", "drain", "w1"], None);
    assert_eq!(
        drained.stdout,
        "w1 is draining: it takes no new app, and its 2 apps move to other workers one at a time while it renews its lease\n",
        "{drained:?}"
    );
    let again = admin(state.path(), &["workers", "drain", "w1"], None);
    assert_eq!(again.stdout, "w1 was already draining; 2 apps left on it\n");
    let local = admin(state.path(), &["workers", "drain", "w3"], None);
    assert!(local.stdout.contains("does not replicate"), "{local:?}");
    let listed = admin(state.path(), &["workers"], None);
    assert!(listed.stdout.contains("\tdraining\t2 apps\n"), "{listed:?}");
    let undrained = admin(state.path(), &["workers", "undrain", "w1"], None);
    assert_eq!(undrained.stdout, "w1 takes new apps again\n");
    let again = admin(state.path(), &["workers", "undrain", "w1"], None);
    assert_eq!(again.stdout, "w1 was not draining\n");

    let help = |args: &[&str]| {
        let output = Command::new(common::sasha_bin())
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        String::from_utf8(output.stdout).unwrap()
    };
    let workers = help(&["admin", "workers"]);
    assert!(
        workers.contains("drain") && workers.contains("undrain"),
        "{workers}"
    );
    let apps = help(&["admin", "apps"]);
    assert!(
        apps.contains("placement") && apps.contains("move"),
        "{apps}"
    );
}

#[test]
fn scim_tokens_are_minted_listed_and_revoked_and_printed_once() {
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    let core = store(state);

    let run = admin(state, &["scim", "token", "mint", "Entra ID"], None);
    assert_eq!(run.code, 0, "{run:?}");
    let secret = run.stdout.trim_end().to_owned();
    assert_eq!(run.stdout, format!("{secret}\n"), "only the token");
    assert!(
        core.with(|store| store.scim_token_actor(&secret).unwrap())
            .is_some(),
        "it works"
    );

    let run = admin(state, &["scim", "token", "list", "--json"], None);
    assert_eq!(run.code, 0, "{run:?}");
    let listed: serde_json::Value = serde_json::from_str(run.stdout.trim_end()).unwrap();
    assert_eq!(listed["label"], "Entra ID");
    assert_eq!(listed["createdBy"], "operator");
    assert!(!run.stdout.contains(&secret), "never printed again");
    let id = listed["id"].as_i64().unwrap().to_string();

    let run = admin(state, &["scim", "token", "revoke", &id], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        core.with(|store| store.scim_token_actor(&secret).unwrap())
            .is_none(),
        "revoked"
    );
    assert_refused(
        &admin(state, &["scim", "token", "revoke", "99"], None),
        1,
        "no SCIM token number 99",
    );
    assert_refused(
        &admin(state, &["scim", "token", "mint", " "], None),
        2,
        "give it a name",
    );
}
