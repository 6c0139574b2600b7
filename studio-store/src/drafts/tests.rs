//! The drafts store on a real core database, SQLite and PostgreSQL: starting
//! once, compare-and-set changes (racing writers among them), the audit
//! rows, and that ending a draft or pruning the ledger removes exactly the
//! blobs nothing else holds.

use super::*;
use crate::tests::{RACERS, handles, on_both, race};
use crate::{RevisionContent, RevisionOrigin, UserRole};

/// The crate's fixture (on the backend of the running test) with an admin
/// and the registered app `notes`.
struct Fixture {
    shared: crate::tests::Fixture,
    store: Store,
    user: String,
}

impl Fixture {
    fn new() -> Fixture {
        let shared = crate::tests::Fixture::new();
        let store = shared.store.clone();
        let user = shared.user("ada", UserRole::Admin).id;
        store
            .register_app("notes", "r1", None, "[]", &Default::default())
            .unwrap();
        Fixture {
            shared,
            store,
            user,
        }
    }

    fn blobs(&self) -> i64 {
        self.shared
            .raw()
            .query_row("SELECT count(*) FROM revision_blobs", (), |row| row.get(0))
            .unwrap()
    }

    fn write(&self, path: &str, bytes: &[u8]) -> Option<Result<Versions, String>> {
        self.store
            .change_draft_file("notes", path, &self.user, |_, _| {
                Ok::<_, String>(Some(bytes.to_vec()))
            })
            .unwrap()
    }
}

fn discarded(before: Option<&str>) -> Ending<'_> {
    Ending {
        action: draft_action::DRAFT_DISCARDED,
        subject: None,
        before,
        after: None,
    }
}

fn files(pairs: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
    pairs
        .iter()
        .map(|(path, text)| ((*path).to_owned(), text.as_bytes().to_vec()))
        .collect()
}

on_both! {
fn a_draft_starts_once_and_shares_unchanged_bytes() {
    let fixture = Fixture::new();
    let live = files(&[("APP.md", "manifest"), ("app.js", "let a = 1;")]);
    let (draft, started) = fixture
        .store
        .start_draft("notes", &fixture.user, "r1", &live)
        .unwrap();
    assert!(started);
    assert_eq!(draft.base_revision, "r1");
    assert_eq!(draft.preview_id.len(), 32);
    let (again, started) = fixture
        .store
        .start_draft("notes", &fixture.user, "r2", &[])
        .unwrap();
    assert!(!started);
    assert_eq!(again, draft);
    assert_eq!(fixture.blobs(), 2);
    let contents = fixture.store.draft_contents("notes").unwrap();
    assert_eq!(
        contents
            .iter()
            .map(|(file, bytes)| (file.path.as_str(), bytes.as_slice()))
            .collect::<Vec<_>>(),
        [("APP.md", &b"manifest"[..]), ("app.js", &b"let a = 1;"[..])]
    );
    // An app that was never registered has no draft.
    assert!(matches!(
        fixture.store.start_draft("ghost", &fixture.user, "", &[]),
        Err(StoreError::UnknownApp)
    ));
}
}

on_both! {
fn a_change_sees_the_current_file_and_its_rule_decides() {
    let fixture = Fixture::new();
    assert!(fixture.write("a.md", b"x").is_none(), "no draft yet");
    fixture
        .store
        .start_draft("notes", &fixture.user, "r1", &files(&[("a.md", "one")]))
        .unwrap();
    let seen = std::cell::RefCell::new(None);
    let refused = fixture
        .store
        .change_draft_file("notes", "a.md", &fixture.user, |current, shape| {
            *seen.borrow_mut() = Some((current.cloned(), shape.files.clone()));
            Err::<Decision, _>("no")
        })
        .unwrap()
        .unwrap();
    assert_eq!(refused, Err("no"));
    let (current, shape) = seen.into_inner().unwrap();
    let current = current.unwrap();
    assert_eq!(current.bytes, b"one");
    assert_eq!(current.version, sha256_hex(b"one"));
    assert_eq!(shape, [("a.md".to_owned(), 3)]);
    // A refusal wrote nothing.
    assert_eq!(
        fixture.store.draft_files("notes").unwrap()[0].sha256,
        sha256_hex(b"one")
    );

    let (before, after) = fixture.write("a.md", b"two").unwrap().unwrap();
    assert_eq!(before, Some(sha256_hex(b"one")));
    assert_eq!(after, Some(sha256_hex(b"two")));
    // The replaced bytes were only the draft's: gone.
    assert_eq!(fixture.blobs(), 1);
    let deleted = fixture
        .store
        .change_draft_file("notes", "a.md", &fixture.user, |_, _| Ok::<_, String>(None))
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(deleted, (Some(sha256_hex(b"two")), None));
    assert!(fixture.store.draft_files("notes").unwrap().is_empty());
    assert_eq!(fixture.blobs(), 0);
    let audited: Vec<String> = fixture
        .store
        .audit_entries(Some("notes"))
        .unwrap()
        .into_iter()
        .map(|entry| entry.action)
        .filter(|action| action.starts_with("app-draft."))
        .collect();
    assert_eq!(
        audited,
        [
            draft_action::DRAFT_STARTED,
            draft_action::DRAFT_CHANGED,
            draft_action::DRAFT_CHANGED
        ]
    );
}
}

on_both! {
fn ending_a_draft_keeps_the_bytes_a_revision_holds() {
    let fixture = Fixture::new();
    let html = "<!doctype html><html lang=\"en\"><head><title>x</title></head><body></body></html>";
    let resource = crate::ledger::test_resource("notes", html);
    fixture
        .store
        .record_revision(
            &RevisionContent {
                resource: &resource,
                files: vec![("APP.md", b"shared".as_slice())],
            },
            &RevisionOrigin::found_on_disk(),
            50,
        )
        .unwrap();
    let (draft, _) = fixture
        .store
        .start_draft(
            "notes",
            &fixture.user,
            "r1",
            &files(&[("APP.md", "shared"), ("new.md", "only the draft's")]),
        )
        .unwrap();
    assert_eq!(fixture.blobs(), 2);
    // Another preview id is not this draft: nothing ends.
    assert!(
        !fixture
            .store
            .end_draft("notes", &"0".repeat(32), &fixture.user, discarded(None))
            .unwrap()
    );
    assert!(
        fixture
            .store
            .end_draft(
                "notes",
                &draft.preview_id,
                &fixture.user,
                discarded(Some("r1"))
            )
            .unwrap()
    );
    assert!(fixture.store.draft("notes").unwrap().is_none());
    assert!(fixture.store.draft_files("notes").unwrap().is_empty());
    // The revision's blob stays; the draft's own is gone.
    assert_eq!(fixture.blobs(), 1);
    assert!(
        !fixture
            .store
            .end_draft("notes", &draft.preview_id, &fixture.user, discarded(None))
            .unwrap()
    );
}
}

on_both! {
fn pruning_the_ledger_keeps_the_bytes_a_draft_holds() {
    let fixture = Fixture::new();
    fixture
        .store
        .start_draft(
            "notes",
            &fixture.user,
            "r1",
            &files(&[("APP.md", "kept by the draft")]),
        )
        .unwrap();
    let html = "<!doctype html><html lang=\"en\"><head><title>x</title></head><body></body></html>";
    for (index, text) in ["kept by the draft", "second"].iter().enumerate() {
        let resource = crate::ledger::test_resource("notes", &format!("{html}<!-- {index} -->"));
        fixture
            .store
            .record_revision(
                &RevisionContent {
                    resource: &resource,
                    files: vec![("APP.md", text.as_bytes())],
                },
                &RevisionOrigin::found_on_disk(),
                1,
            )
            .unwrap();
    }
    // Retention 1 removed the first revision, but not the blob the draft holds.
    assert_eq!(fixture.store.revisions("notes").unwrap().len(), 1);
    let contents = fixture.store.draft_contents("notes").unwrap();
    assert_eq!(contents[0].1, b"kept by the draft");
}
}

/// A racing writer's refusal: the file is no longer at the version it
/// expected; `current` is the one it has now.
#[derive(Debug, PartialEq, Eq)]
struct Conflict {
    current: Option<String>,
}

on_both! {
/// Eight replicas write one draft file at the same instant, each expecting
/// the version they all read: exactly one write wins, every other is told
/// the file changed and to what, and the file holds the winner's bytes.
fn racing_writers_with_one_expected_version_change_the_file_once() {
    let fixture = Fixture::new();
    fixture
        .store
        .start_draft("notes", &fixture.user, "r1", &files(&[("a.md", "base")]))
        .unwrap();
    let handles = handles(&fixture.shared, RACERS);
    let mut expected = sha256_hex(b"base");
    for round in 0..3 {
        let bytes = |n: usize| format!("round {round}, racer {n}").into_bytes();
        let answers = race(&handles, |n, store| {
            store
                .change_draft_file("notes", "a.md", &fixture.user, |current, _| {
                    let current = current.map(|file| file.version.clone());
                    if current.as_ref() == Some(&expected) {
                        Ok(Some(bytes(n)))
                    } else {
                        Err(Conflict { current })
                    }
                })
                .map_err(|error| error.to_string())
        });
        let won: Vec<usize> = (0..RACERS)
            .filter(|n| matches!(answers[*n], Ok(Some(Ok(_)))))
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {answers:?}");
        let winner = sha256_hex(&bytes(won[0]));
        for (n, answer) in answers.iter().enumerate() {
            let wanted = if n == won[0] {
                Ok((Some(expected.clone()), Some(winner.clone())))
            } else {
                Err(Conflict {
                    current: Some(winner.clone()),
                })
            };
            assert_eq!(answer, &Ok(Some(wanted)), "round {round}: racer {n}");
        }
        let contents = fixture.store.draft_contents("notes").unwrap();
        assert_eq!(contents.len(), 1);
        assert_eq!(contents[0].1, bytes(won[0]), "round {round}: the winner's bytes");
        expected = winner;
    }
    let changes = fixture
        .store
        .audit_entries(Some("notes"))
        .unwrap()
        .into_iter()
        .filter(|entry| entry.action == draft_action::DRAFT_CHANGED)
        .count();
    assert_eq!(changes, 3, "one change a round");
    assert_eq!(fixture.blobs(), 1, "only the last winner's bytes are kept");
}
}
