//! The copy from SQLite into PostgreSQL, on a real SQLite file in a
//! temporary folder and a fresh database on the shared test PostgreSQL: a
//! database touching every table arrives whole and answers the same, and
//! every refusal and failed verification leaves the target without a row.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::*;
use crate::ledger::test_resource;
use crate::{
    ACTOR_OPERATOR, AppAccess, AppChatLimits, Approval, ClientAuthMethod, CodeExchange,
    ConfirmedCall, Consent, Conversation, Decision, MemberCaps, MemberDeploy, ParkedRequest,
    RevisionContent, RevisionOrigin, RevisionSurface, Scope, Suggestion, SuggestionKind,
    SuggestionSeverity, TokenKind, UserRole,
};

const PASSWORD: &str = "correct horse battery";
const START: i64 = 1_800_000_000;
const RESOURCE: &str = "https://studio.example.com/mcp";
const REDIRECT: &str = "http://127.0.0.1:4567/callback";
/// RFC 7636 appendix B's verifier and its S256 challenge.
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

/// A SQLite core database in a temporary folder, with a manual clock.
struct Source {
    dir: tempfile::TempDir,
    clock: Arc<AtomicI64>,
    store: Store,
}

impl Source {
    fn new() -> Source {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(AtomicI64::new(START));
        let store =
            Store::open_with_clock(&dir.path().join("core.sqlite"), clock_of(&clock)).unwrap();
        Source { dir, clock, store }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("core.sqlite")
    }

    fn advance(&self, seconds: i64) {
        self.clock.fetch_add(seconds, Ordering::SeqCst);
    }

    /// The store on the copy, at the source's time.
    fn open_target(&self, url: &str) -> Store {
        Store::connect(url, 2, None, clock_of(&self.clock)).unwrap()
    }

    /// The bytes SQLite keeps the database in (the `-shm` index aside,
    /// which every reader maps).
    fn file_bytes(&self) -> Vec<Vec<u8>> {
        ["core.sqlite", "core.sqlite-wal"]
            .iter()
            .map(|name| std::fs::read(self.dir.path().join(name)).unwrap_or_default())
            .collect()
    }
}

fn clock_of(clock: &Arc<AtomicI64>) -> crate::Clock {
    let clock = clock.clone();
    Arc::new(move || clock.load(Ordering::SeqCst))
}

fn scopes(list: &[Scope]) -> BTreeSet<Scope> {
    list.iter().copied().collect()
}

/// A raw connection on the PostgreSQL database at `url`.
fn postgres(url: &str) -> Conn<'static> {
    let (pool, _) = crate::db::connect_postgres(url, 1, None, crate::BUSY_TIMEOUT).unwrap();
    Conn::postgres(&pool).unwrap()
}

/// How many tables the PostgreSQL database at `url` has.
fn postgres_tables(url: &str) -> i64 {
    postgres(url)
        .query_row(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()",
            (),
            |row| row.get(0),
        )
        .unwrap()
}

/// The secrets and ids [`populate`] made, to ask both stores with.
struct Seeded {
    ada: String,
    bob: String,
    session: String,
    access_token: String,
    oauth_access_token: String,
    oauth_client: String,
    invitation: String,
    parked_request: String,
    confirmation: String,
    conversations: Vec<Conversation>,
    revisions: Vec<String>,
}

/// Fills every core table through the store's own calls, several rows
/// sharing a second where statements break ties by `rowid`.
fn populate(source: &Source) -> Seeded {
    let store = &source.store;
    let ada = store
        .create_user("ada", UserRole::Admin, PASSWORD)
        .unwrap()
        .id;
    let bob = store
        .create_user("bob", UserRole::Staff, PASSWORD)
        .unwrap()
        .id;
    store
        .create_user("dee", UserRole::Member, PASSWORD)
        .unwrap();
    store.set_disabled("dee", true, ACTOR_OPERATOR).unwrap();
    let session = store.create_session(&ada).unwrap();
    assert!(store.verify_login("ada", PASSWORD).unwrap().is_some());
    // Sign-in through the identity provider: a person bound to a subject,
    // and a sign-in under way.
    store
        .sso_sign_in(&crate::SsoPerson {
            issuer: "https://idp.example",
            subject: "subject-of-eve",
            username: "eve@example.com",
            role: Some(UserRole::Member),
        })
        .unwrap();
    assert!(
        store
            .begin_sso_attempt(
                "a state",
                "a browser",
                &crate::SsoAttempt {
                    nonce: "a nonce".into(),
                    pkce_verifier: "a verifier".into(),
                    return_to: "/#/apps".into(),
                },
            )
            .unwrap()
    );

    // The directory's token, a person it provisioned and their group.
    let (_, scim_token) = store.mint_scim_token("Entra ID", ACTOR_OPERATOR).unwrap();
    let scim_actor = format!("{}{}", crate::SCIM_ACTOR_PREFIX, scim_token.id);
    let everyone = |_: &[&str]| Some(UserRole::Member);
    let lin = store
        .scim_create_user(
            &crate::ScimAttributes {
                user_name: "lin@example.org".into(),
                external_id: Some("e-lin".into()),
                display_name: Some("Lin".into()),
                active: true,
                ..Default::default()
            },
            &scim_actor,
            &everyone,
        )
        .unwrap();
    store
        .scim_create_group(
            &crate::ScimGroupAttributes {
                display_name: "Sasha Users".into(),
                external_id: Some("g-users".into()),
                members: [lin.user.id.clone()].into(),
            },
            &scim_actor,
            &everyone,
        )
        .unwrap();

    // The catalogue: two apps, two revisions of one, a withdrawn one.
    let first = test_resource("notes", "<p>1</p>");
    let second = test_resource("notes", "<p>2</p>");
    let tasks = test_resource("tasks", "<p>tasks</p>");
    store
        .register_app(
            "notes",
            &first.revision,
            Some("h1"),
            "[]",
            &Default::default(),
        )
        .unwrap();
    store
        .register_app("tasks", &tasks.revision, None, "[]", &Default::default())
        .unwrap();
    for (resource, files) in [
        (
            &first,
            vec![("APP.md", &b"---\none"[..]), ("app.js", b"one()")],
        ),
        (
            &second,
            vec![("APP.md", &b"---\ntwo"[..]), ("app.js", b"one()")],
        ),
        (&tasks, vec![("APP.md", &b"---\ntasks"[..])]),
    ] {
        let content = RevisionContent { resource, files };
        store
            .record_revision(&content, &RevisionOrigin::found_on_disk(), 50)
            .unwrap();
        source.advance(1);
    }
    store
        .register_app(
            "notes",
            &second.revision,
            Some("h2"),
            "[]",
            &Default::default(),
        )
        .unwrap();
    store.withdraw_app("tasks", &ada).unwrap().unwrap();
    store
        .grant("notes", &bob, AppAccess::Use, Some(ACTOR_OPERATOR))
        .unwrap();
    store
        .record_source_change("notes", "app.js", &ada, None, Some("abc"))
        .unwrap();

    // A draft with a changed file.
    store
        .start_draft(
            "notes",
            &ada,
            &second.revision,
            &[("app.js".to_owned(), b"one()".to_vec())],
        )
        .unwrap();
    store
        .change_draft_file("notes", "style.css", &ada, |_, _| {
            Ok::<Decision, String>(Some(b"p { color: red }".to_vec()))
        })
        .unwrap()
        .unwrap()
        .unwrap();

    // Tokens: an operator's token with write consent, a labelled personal
    // one, an API key.
    let access_token = store
        .mint_token(
            &ada,
            TokenKind::Access,
            &scopes(&[Scope::AppsInvoke]),
            Some(3600),
        )
        .unwrap();
    store
        .consent_writes(&access_token, "notes", ACTOR_OPERATOR)
        .unwrap();
    store
        .create_personal_token(&bob, "laptop", &scopes(&[Scope::ChatUse]), None)
        .unwrap();
    store
        .mint_token(&bob, TokenKind::ApiKey, &scopes(&[Scope::AppsInvoke]), None)
        .unwrap();

    // OAuth: a client, a connection with a used code and a refresh token, a
    // request waiting for its decision.
    let client = store
        .oauth_register_client("Desk", &[REDIRECT.to_owned()], ClientAuthMethod::None)
        .unwrap()
        .unwrap()
        .client;
    let code = store
        .oauth_consent(&Consent {
            client_id: &client.client_id,
            user_id: &bob,
            scopes: &scopes(&[Scope::AppsInvoke]),
            resource: RESOURCE,
            redirect_uri: REDIRECT,
            code_challenge: CHALLENGE,
        })
        .unwrap();
    let issued = store
        .oauth_exchange_code(&CodeExchange {
            client_id: &client.client_id,
            code: &code,
            redirect_uri: REDIRECT,
            code_verifier: VERIFIER,
            resource: Some(RESOURCE),
        })
        .unwrap()
        .unwrap();
    let parked_request = store
        .park_oauth_request(
            &ParkedRequest {
                client_id: client.client_id.clone(),
                client_name: client.client_name.clone(),
                redirect_uri: REDIRECT.to_owned(),
                state: Some("xyz".to_owned()),
                code_challenge: CHALLENGE.to_owned(),
                requested: scopes(&[Scope::AppsInvoke]),
                expires_at: 0,
            },
            600,
            100,
        )
        .unwrap()
        .unwrap();

    // People: an invitation that gives an app.
    let invitation = store
        .invite_user_with_apps(
            "cyd",
            UserRole::Member,
            &BTreeMap::from([("notes".to_owned(), AppAccess::Use)]),
            &ada,
        )
        .unwrap()
        .secret;

    // A member app, shared; the switch changed and changed back.
    let memo = test_resource("bobs-memo", "<p>memo</p>");
    store
        .deploy_member_app(
            "bobs-memo",
            &MemberDeploy {
                name: "Memo",
                author_id: &bob,
                expected_revision: None,
                content: RevisionContent {
                    resource: &memo,
                    files: vec![("APP.md", b"---\nmemo")],
                },
                origin: RevisionOrigin::authored(RevisionSurface::Studio, &bob, "deploy", START),
                schema_hash: None,
                actions_json: "[]",
                read_policy_json: "{}",
                caps: MemberCaps {
                    instance: 10,
                    per_author: 10,
                    author_bytes: u64::MAX,
                },
                retention: 8,
            },
        )
        .unwrap()
        .unwrap();
    store
        .share_member_app("bobs-memo", &bob, "ada", false, 10)
        .unwrap()
        .unwrap();
    store
        .set_member_apps_enabled(false, ACTOR_OPERATOR)
        .unwrap();
    store.set_member_apps_enabled(true, ACTOR_OPERATOR).unwrap();
    // The one studio-core that ran on the SQLite file.
    store.note_replica("replica-1").unwrap();
    store
        .take_throttle_slots(&[(
            "sign-in-address:somewhere",
            crate::Tier {
                burst: 5,
                period: std::time::Duration::from_secs(10),
            },
        )])
        .unwrap()
        .unwrap();

    // Uploaded documents, with names and text beyond ASCII.
    store
        .store_uploads(
            &ada,
            vec![
                crate::NewUpload {
                    names: vec!["brief.md".to_owned()],
                    markdown: "# Brief\n\né, 日本, and a\ttab\n",
                },
                crate::NewUpload {
                    names: vec!["Ärger.md".to_owned()],
                    markdown: "| a | b |\n| --- | --- |\n",
                },
            ],
        )
        .unwrap();

    // The assistant: conversations and approvals made within one second, so
    // only rowid orders them.
    source.advance(60);
    let conversations: Vec<Conversation> = (0..8)
        .map(|n| {
            store
                .create_conversation(&ada, &format!("question {n}"))
                .unwrap()
        })
        .collect();
    let talked = &conversations[7];
    store
        .append_messages(
            &ada,
            &talked.id,
            &[
                serde_json::json!({"role": "user", "content": "hello"}),
                serde_json::json!({"role": "assistant", "content": "hi"}),
            ],
        )
        .unwrap();
    for n in 0..3 {
        let approval = Approval {
            id: format!("{n:032x}"),
            user_id: ada.clone(),
            conversation_id: talked.id.clone(),
            call_id: format!("call-{n}"),
            tool: "createApp".to_owned(),
            card: serde_json::json!({"sentence": format!("Creates app {n}.")}),
            created_at: 0,
            expires_at: 0,
        };
        store
            .hold_approval(&approval, 600, "replica-1")
            .unwrap()
            .unwrap();
    }

    // A package head: the working copy of notes that replicas share.
    let head_files = std::collections::BTreeMap::from([
        ("APP.md".to_owned(), "# Notes é\n".as_bytes().to_vec()),
        ("ui/logo.png".to_owned(), vec![0x89, b'P', b'N', b'G', 0, 1]),
    ]);
    assert_eq!(
        store
            .advance_package_head("notes", 0, "digest-1", Some(&head_files))
            .unwrap(),
        crate::Advanced::To(1)
    );

    // The data plane's placement: notes on w1, being moved to w2, and w1
    // draining.
    let (w1, w2) = (
        crate::WorkerId::parse("w1").unwrap(),
        crate::WorkerId::parse("w2").unwrap(),
    );
    let lease = std::time::Duration::from_secs(600);
    let notes = sasha_contract::AppId::parse("notes").unwrap();
    for (worker, port) in [(&w1, 3013), (&w2, 3023)] {
        let url = crate::WorkerUrl::parse(&format!("https://127.0.0.1:{port}")).unwrap();
        store.renew(worker, &url, true, &[], lease).unwrap();
        // Placed while w1 is the only worker.
        store.locate(&notes).unwrap().unwrap();
    }
    store.request_move(&notes, &w2).unwrap().unwrap();
    store.set_draining(&w1, true).unwrap().unwrap();

    // App chat: one conversation in the notes app.
    store
        .record_app_chat(
            &ada,
            "notes",
            "Summarise é",
            "Done, 日本",
            false,
            &AppChatLimits::default(),
        )
        .unwrap();

    let confirmation = store
        .issue_confirmation(
            &ConfirmedCall {
                user_id: &ada,
                tool: "app__notes__notes__create",
                arguments_json: r#"{"text":"x"}"#,
            },
            "key-1",
        )
        .unwrap()
        .unwrap()
        .token;
    store
        .record_suggestion(
            &ada,
            &Suggestion {
                kind: SuggestionKind::Docs,
                severity: SuggestionSeverity::Low,
                summary: "The grants page could say more".to_owned(),
                detail: Some("é, 日本, and a\ttab".to_owned()),
                metadata: Default::default(),
            },
        )
        .unwrap()
        .unwrap();

    Seeded {
        ada,
        bob,
        session,
        access_token,
        oauth_access_token: issued.access_token,
        oauth_client: client.client_id,
        invitation,
        parked_request,
        confirmation,
        conversations,
        revisions: vec![first.revision, second.revision],
    }
}

/// What a store answers about `seeded`, each answer labelled.
fn answers(store: &Store, seeded: &Seeded) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = Vec::new();
    let mut say = |label, answer: String| out.push((label, answer));
    say("users", format!("{:?}", store.users().unwrap()));
    say("people", format!("{:?}", store.people().unwrap()));
    say(
        "scim people",
        format!(
            "{:?}",
            store.scim_users(&crate::ScimQuery::All, 0, 100).unwrap()
        ),
    );
    say(
        "scim groups",
        format!(
            "{:?}",
            store.scim_groups(&crate::ScimQuery::All, 0, 100).unwrap()
        ),
    );
    say("scim tokens", format!("{:?}", store.scim_tokens().unwrap()));
    say(
        "scim directory",
        format!("{:?}", store.scim_directory().unwrap()),
    );
    say(
        "login",
        format!("{:?}", store.verify_login("ada", PASSWORD).unwrap()),
    );
    say(
        "session",
        format!("{:?}", store.session(&seeded.session).unwrap()),
    );
    say(
        "token",
        format!("{:?}", store.token(&seeded.access_token).unwrap()),
    );
    say(
        "oauth token",
        format!("{:?}", store.token(&seeded.oauth_access_token).unwrap()),
    );
    say(
        "tokens of ada",
        format!("{:?}", store.tokens_of("ada").unwrap()),
    );
    say(
        "tokens of bob",
        format!("{:?}", store.tokens_of("bob").unwrap()),
    );
    say(
        "write consent",
        format!(
            "{:?}",
            store.write_consent(&seeded.access_token, "notes").unwrap()
        ),
    );
    say(
        "connections",
        format!("{:?}", store.oauth_connections(&seeded.bob).unwrap()),
    );
    say(
        "client",
        format!("{:?}", store.oauth_client(&seeded.oauth_client).unwrap()),
    );
    say(
        "parked request",
        format!(
            "{:?}",
            store.peek_oauth_request(&seeded.parked_request).unwrap()
        ),
    );
    say("apps", format!("{:?}", store.registered_apps().unwrap()));
    say("grants", format!("{:?}", store.grants("notes").unwrap()));
    say(
        "access of bob",
        format!("{:?}", store.access_by_app(&seeded.bob).unwrap()),
    );
    say(
        "lifecycle",
        format!("{:?}", store.lifecycle("tasks").unwrap()),
    );
    say("audit", format!("{:?}", store.audit_entries(None).unwrap()));
    say(
        "revisions",
        format!("{:?}", store.revisions("notes").unwrap()),
    );
    for revision in &seeded.revisions {
        say(
            "revision files",
            format!("{:?}", store.revision_files("notes", revision).unwrap()),
        );
        say(
            "revision resource",
            format!("{:?}", store.revision_resource("notes", revision).unwrap()),
        );
    }
    say("draft", format!("{:?}", store.draft("notes").unwrap()));
    say(
        "draft contents",
        format!("{:?}", store.draft_contents("notes").unwrap()),
    );
    say(
        "member apps",
        format!("{:?}", store.member_apps(None).unwrap()),
    );
    say(
        "member sources",
        format!("{:?}", store.member_sources().unwrap()),
    );
    say(
        "member switch",
        format!("{:?}", store.member_apps_enabled().unwrap()),
    );
    say(
        "conversations",
        format!("{:?}", store.conversations(&seeded.ada).unwrap()),
    );
    say(
        "messages",
        format!(
            "{:?}",
            store
                .conversation_messages(&seeded.ada, &seeded.conversations[7].id)
                .unwrap()
        ),
    );
    say(
        "app chat",
        format!(
            "{:?}",
            store
                .app_chat_history(&seeded.ada, "notes", &AppChatLimits::default())
                .unwrap()
        ),
    );
    say(
        "approvals",
        format!("{:?}", store.waiting_approvals(&seeded.ada).unwrap()),
    );
    say(
        "invitation",
        format!("{:?}", store.invitation(&seeded.invitation).unwrap()),
    );
    say(
        "suggestions",
        format!("{:?}", store.suggestions(100).unwrap()),
    );
    say(
        "package heads",
        format!(
            "{:?} {:?}",
            store.package_head_generations().unwrap(),
            store.package_head("notes").unwrap()
        ),
    );
    // A lease's remaining time moves with the clock: the rest must match.
    let workers: Vec<_> = store
        .workers()
        .unwrap()
        .into_iter()
        .map(|w| (w.worker_id, w.url, w.replicated, w.draining, w.apps))
        .collect();
    say("data-workers", format!("{workers:?}"));
    say("placements", format!("{:?}", store.placements().unwrap()));
    say(
        "placement events",
        format!(
            "{:?}",
            store
                .placement_events(&sasha_contract::AppId::parse("notes").unwrap())
                .unwrap()
        ),
    );
    let uploads = store.upload_names(&seeded.ada).unwrap();
    say("upload names", format!("{uploads:?}"));
    for name in &uploads {
        say(
            "upload",
            format!("{:?}", store.upload(&seeded.ada, name).unwrap()),
        );
    }
    out
}

#[test]
fn every_table_arrives_whole_and_the_copy_answers_as_the_source_did() {
    let source = Source::new();
    let seeded = populate(&source);
    let expected = answers(&source.store, &seeded);
    let untouched = source.file_bytes();
    let url = sasha_testkit::postgres_database();

    let report = copy_to_postgres(&source.path(), &url, None).unwrap();

    assert_eq!(
        source.file_bytes(),
        untouched,
        "the SQLite file was not written"
    );
    let database = url.rsplit('/').next().unwrap();
    assert!(
        report.target.starts_with("postgresql://127.0.0.1:")
            && report.target.ends_with(&format!("/{database}")),
        "{}",
        report.target
    );
    // Every core table was copied, and the fixture gave each a row: a table
    // the copy skipped would show here.
    let copied: BTreeSet<&str> = report.tables.iter().map(|t| t.table.as_str()).collect();
    assert_eq!(
        i64::try_from(copied.len()).unwrap(),
        postgres_tables(&url) - 1,
        "every table but schema_migrations: {copied:?}"
    );
    let empty: Vec<&str> = report
        .tables
        .iter()
        .filter(|t| t.rows == 0)
        .map(|t| t.table.as_str())
        .collect();
    assert_eq!(empty, Vec::<&str>::new(), "the fixture fills every table");
    // Parents before children.
    let at = |name: &str| report.tables.iter().position(|t| t.table == name).unwrap();
    assert!(at("users") < at("tokens"));
    assert!(at("oauth_grants") < at("tokens"));
    assert!(at("revision_resources") < at("app_revisions"));
    assert!(at("app_revisions") < at("app_revision_files"));
    assert!(at("assistant_conversations") < at("assistant_approvals"));

    let target = source.open_target(&url);
    let found = answers(&target, &seeded);
    for ((label, want), (_, got)) in expected.iter().zip(&found) {
        assert_eq!(got, want, "{label}");
    }
    assert!(target.token(&seeded.access_token).unwrap().is_some());
    assert!(target.session(&seeded.session).unwrap().is_some());
    // The conversations really did tie: only the copied rowid order tells
    // them apart, newest first.
    let listed: Vec<String> = target
        .conversations(&seeded.ada)
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    let newest_first: Vec<String> = seeded
        .conversations
        .iter()
        .rev()
        .map(|c| c.id.clone())
        .collect();
    assert_eq!(listed, newest_first);

    // The copy keeps working: a confirmation issued on SQLite is redeemed
    // first there, new ids follow the copied ones, and the audit log stays
    // append-only.
    let call = ConfirmedCall {
        user_id: &seeded.ada,
        tool: "app__notes__notes__create",
        arguments_json: r#"{"text":"x"}"#,
    };
    let redeem = || {
        target
            .redeem_confirmation(&call, &seeded.confirmation)
            .unwrap()
            .unwrap()
            .first_redemption
    };
    assert!(redeem());
    assert!(!redeem());
    let highest_token = target
        .tokens_of("ada")
        .unwrap()
        .iter()
        .chain(&target.tokens_of("bob").unwrap())
        .map(|t| t.id)
        .max()
        .unwrap();
    target
        .mint_token(
            &seeded.ada,
            TokenKind::Access,
            &scopes(&[Scope::ChatUse]),
            None,
        )
        .unwrap();
    let newest = target
        .tokens_of("ada")
        .unwrap()
        .iter()
        .map(|t| t.id)
        .max()
        .unwrap();
    assert_eq!(newest, highest_token + 1);
    let audited = target.audit_entries(None).unwrap();
    let highest_audit = audited.iter().map(|e| e.id).max().unwrap();
    target
        .revoke("notes", &seeded.bob, Some(ACTOR_OPERATOR))
        .unwrap();
    let after = target.audit_entries(None).unwrap();
    assert_eq!(after.iter().map(|e| e.id).max().unwrap(), highest_audit + 1);
    let raw = postgres(&url);
    for refused in [
        "UPDATE authorization_audit_log SET actor = 'x'",
        "DELETE FROM authorization_audit_log",
    ] {
        let error = raw.execute(refused, ()).unwrap_err();
        assert!(
            format!("{error:?}").contains("append-only"),
            "{refused}: {error:?}"
        );
    }
    let next_revision: i64 = raw
        .query_row(
            "SELECT nextval(pg_get_serial_sequence('app_revisions', 'id'))",
            (),
            |row| row.get(0),
        )
        .unwrap();
    let copied_revisions = report.tables[at("app_revisions")].rows;
    assert_eq!(next_revision, i64::try_from(copied_revisions).unwrap() + 1);

    // A second copy into the same database is refused, naming what holds rows.
    let error = copy_to_postgres(&source.path(), &url, None).unwrap_err();
    assert!(error.is_refused_input(), "{error}");
    let CopyError::TargetNotEmpty { tables } = &error else {
        panic!("{error}");
    };
    assert!(tables.contains(&"users".to_owned()), "{tables:?}");
    assert!(error.to_string().contains("not empty"), "{error}");
}

#[test]
fn a_target_holding_any_row_is_refused_and_keeps_only_what_it_held() {
    let source = Source::new();
    populate(&source);
    let url = sasha_testkit::postgres_database();
    let target = source.open_target(&url);
    target
        .set_member_apps_enabled(false, ACTOR_OPERATOR)
        .unwrap();

    let error = copy_to_postgres(&source.path(), &url, None).unwrap_err();

    let CopyError::TargetNotEmpty { tables } = &error else {
        panic!("{error}");
    };
    assert_eq!(tables, &["authorization_audit_log", "settings"]);
    assert!(error.is_refused_input());
    assert_eq!(
        error.to_string(),
        "the target database is not empty (these tables hold rows: authorization_audit_log, \
         settings); nothing was written: copy into a new, empty database"
    );
    assert!(target.users().unwrap().is_empty());
    assert_eq!(target.audit_entries(None).unwrap().len(), 1);
}

#[test]
fn a_source_at_another_schema_version_is_refused_before_the_target_is_touched() {
    let source = Source::new();
    source
        .store
        .create_user("ada", UserRole::Admin, PASSWORD)
        .unwrap();
    let url = sasha_testkit::postgres_database();
    let latest = crate::schema::latest_version();
    let raw = rusqlite::Connection::open(source.path()).unwrap();
    raw.execute(
        "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, 'newer', 0)",
        [latest + 1],
    )
    .unwrap();

    let error = copy_to_postgres(&source.path(), &url, None).unwrap_err();
    let CopyError::SourceVersion { found, expected } = error else {
        panic!("{error}");
    };
    assert_eq!((found, expected), (latest + 1, latest));
    assert!(error.is_refused_input());
    assert!(
        error
            .to_string()
            .contains(&format!("newer than this build's {latest}")),
        "{error}"
    );
    assert_eq!(postgres_tables(&url), 0, "not even the schema was made");

    raw.execute(
        "DELETE FROM schema_migrations WHERE version >= ?1",
        [latest],
    )
    .unwrap();
    let error = copy_to_postgres(&source.path(), &url, None).unwrap_err();
    let CopyError::SourceVersion { found, expected } = error else {
        panic!("{error}");
    };
    assert_eq!((found, expected), (latest - 1, latest));
    assert!(error.to_string().contains("upgrade it first"), "{error}");
    assert_eq!(postgres_tables(&url), 0);
}

/// A change made to the target between the copy and its verification.
type Change<'a> = dyn Fn(&Tx<'_>) -> Result<(), DbError> + 'a;

#[test]
fn a_copy_that_does_not_verify_is_rolled_back_and_names_its_table() {
    let source = Source::new();
    let seeded = populate(&source);
    let moved = &seeded.conversations[0];
    let cases: [(&str, &str, Box<Change<'_>>); 3] = [
        (
            "users",
            "its rows differ",
            Box::new(|tx| {
                tx.execute(
                    "UPDATE users SET role = 'member' WHERE username = 'ada'",
                    (),
                )
                .map(drop)
            }),
        ),
        (
            "authorization_audit_log",
            "SQLite holds",
            Box::new(|tx| {
                // An id of its own: the sequence moves only after verifying.
                tx.execute(
                    "INSERT INTO authorization_audit_log (id, at, actor, action)
                     SELECT max(id) + 1, 1, 'x', 'y' FROM authorization_audit_log",
                    (),
                )
                .map(drop)
            }),
        ),
        // Same rows, another order: deleted and put back, it is last by rowid.
        (
            "assistant_conversations",
            "another order by rowid",
            Box::new(|tx| {
                tx.execute(
                    "DELETE FROM assistant_conversations WHERE id = ?1",
                    [&moved.id],
                )?;
                tx.execute(
                    "INSERT INTO assistant_conversations (id, user_id, title, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    (&moved.id, &seeded.ada, &moved.title, moved.created_at, moved.updated_at),
                )
                .map(drop)
            }),
        ),
    ];
    for (table, detail, change) in cases {
        let url = sasha_testkit::postgres_database();
        let error = copy_verified(&source.path(), &url, None, change).unwrap_err();
        let CopyError::Mismatch {
            table: named,
            detail: said,
        } = &error
        else {
            panic!("{table}: {error}");
        };
        assert_eq!(named, table, "{error}");
        assert!(said.contains(detail), "{table}: {error}");
        assert!(!error.is_refused_input());
        assert!(error.to_string().contains("rolled back"), "{error}");
        let target = source.open_target(&url);
        assert!(target.users().unwrap().is_empty(), "{table}");
        assert!(target.audit_entries(None).unwrap().is_empty(), "{table}");
        // Nothing moved a sequence either: the first id is still 1.
        let first: i64 = postgres(&url)
            .query_row(
                "SELECT nextval(pg_get_serial_sequence('app_revisions', 'id'))",
                (),
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(first, 1, "{table}");
    }
}

#[test]
fn tables_come_after_the_tables_their_foreign_keys_name() {
    let table = |name: &str, parents: &[&str]| Table {
        name: name.to_owned(),
        columns: vec!["id".to_owned()],
        key: vec!["id".to_owned()],
        parents: parents.iter().map(|p| (*p).to_owned()).collect(),
        by_rowid: false,
        identities: Vec::new(),
    };
    let names = |tables: Vec<Table>| tables.into_iter().map(|t| t.name).collect::<Vec<_>>();
    let ordered = in_foreign_key_order(vec![
        table("tokens", &["users", "oauth_grants"]),
        table("oauth_grants", &["users", "oauth_clients"]),
        table("users", &[]),
        table("oauth_clients", &[]),
        table("tree", &["tree"]),
    ])
    .unwrap();
    assert_eq!(
        names(ordered),
        ["oauth_clients", "tree", "users", "oauth_grants", "tokens"]
    );
    let error = in_foreign_key_order(vec![
        table("a", &["b"]),
        table("b", &["a"]),
        table("c", &[]),
    ])
    .unwrap_err();
    assert!(
        matches!(&error, CopyError::Schema { table, .. } if table == "a, b"),
        "{error}"
    );
}

#[test]
fn only_plain_catalogue_names_go_into_sql() {
    for name in ["users", "app_revision_files", "_x1"] {
        plain_name("t", name).unwrap();
    }
    for name in ["", "Users", "1st", "a b", "a\"b", "x;DROP", "é"] {
        assert!(plain_name("t", name).is_err(), "{name:?}");
    }
    assert_eq!(quoted("before"), "\"before\"");
    assert_eq!(quoted("rowid"), "rowid");
}

#[test]
fn pages_hold_about_a_page_of_bytes() {
    let rows = |bytes: usize, count: usize| vec![vec![OwnedValue::Blob(vec![0; bytes])]; count];
    assert_eq!(next_page_rows(&rows(1 << 20, 4), MAX_PAGE_ROWS), 8);
    assert_eq!(next_page_rows(&rows(64 << 20, 1), MAX_PAGE_ROWS), 1);
    assert_eq!(next_page_rows(&rows(10, 16), MAX_PAGE_ROWS), MAX_PAGE_ROWS);
    assert_eq!(next_page_rows(&rows(10, 16), 7), 7);
}
