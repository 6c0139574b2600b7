//! Uploaded documents: each takes the first free name of its own, an upload
//! is stored whole or not at all, replicas racing for one name never both
//! take it, an import keeps every stored name and changes nothing the second
//! time, and a removed user's documents go with them.

use super::*;

/// `stem.md`, `stem-2.md`, … `stem-<count>.md`, as studio-uploads offers
/// them (its `names::candidate`).
fn names(stem: &str, count: usize) -> Vec<String> {
    (1..=count)
        .map(|n| {
            if n == 1 {
                format!("{stem}.md")
            } else {
                format!("{stem}-{n}.md")
            }
        })
        .collect()
}

fn upload<'a>(stem: &str, markdown: &'a str) -> NewUpload<'a, Vec<String>> {
    NewUpload {
        names: names(stem, 100),
        markdown,
    }
}

fn stored(outcome: UploadOutcome) -> Vec<String> {
    match outcome {
        UploadOutcome::Stored(names) => names,
        other => panic!("not stored: {other:?}"),
    }
}

on_both! {
    /// A name is never reused: `brief.md`, then `brief-2.md`, within one
    /// upload and across uploads; each document reads back as stored, and
    /// only by its own user.
    fn each_document_takes_the_first_free_name_and_reads_back() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        let ada = fixture.user("ada", UserRole::Member);
        let bob = fixture.user("bob", UserRole::Member);
        let first = store
            .store_uploads(&ada.id, vec![upload("brief", "# One"), upload("brief", "# Two")])
            .unwrap();
        assert_eq!(stored(first), ["brief.md", "brief-2.md"]);
        let again = store
            .store_uploads(&ada.id, vec![upload("brief", "# Three"), upload("notes", "é 日本\n")])
            .unwrap();
        assert_eq!(stored(again), ["brief-3.md", "notes.md"]);
        // Another user's names are their own.
        let bobs = store.store_uploads(&bob.id, vec![upload("brief", "# Bob's")]).unwrap();
        assert_eq!(stored(bobs), ["brief.md"]);

        assert_eq!(store.upload(&ada.id, "brief.md").unwrap().as_deref(), Some("# One"));
        assert_eq!(store.upload(&ada.id, "brief-3.md").unwrap().as_deref(), Some("# Three"));
        assert_eq!(store.upload(&ada.id, "notes.md").unwrap().as_deref(), Some("é 日本\n"));
        assert_eq!(store.upload(&bob.id, "brief.md").unwrap().as_deref(), Some("# Bob's"));
        assert_eq!(store.upload(&bob.id, "notes.md").unwrap(), None, "not bob's");
        assert_eq!(store.upload(&ada.id, "BRIEF.md").unwrap(), None, "names are exact");
        assert_eq!(
            store.upload_names(&ada.id).unwrap(),
            ["brief-2.md", "brief-3.md", "brief.md", "notes.md"]
        );
        assert_eq!(store.upload_names("nobody").unwrap(), Vec::<String>::new());
    }
}

on_both! {
    /// A document that finds no free name stores nothing of its upload, and
    /// an upload for a user who does not exist stores nothing either.
    fn an_upload_is_stored_whole_or_not_at_all() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        let ada = fixture.user("ada", UserRole::Member);
        stored(store.store_uploads(&ada.id, vec![upload("full", "x")]).unwrap());
        let outcome = store
            .store_uploads(
                &ada.id,
                vec![
                    upload("fresh", "stored only with the rest"),
                    NewUpload { names: names("full", 1), markdown: "no room" },
                ],
            )
            .unwrap();
        assert_eq!(outcome, UploadOutcome::NoFreeName(1));
        assert_eq!(store.upload_names(&ada.id).unwrap(), ["full.md"]);
        assert_eq!(store.upload(&ada.id, "full.md").unwrap().as_deref(), Some("x"));

        let error = store.store_uploads("nobody", vec![upload("a", "x")]).unwrap_err();
        assert!(matches!(error, StoreError::UnknownUser), "{error}");
        let rows: i64 = fixture
            .raw()
            .query_row("SELECT count(*) FROM uploads", (), |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 1);
    }
}

on_both! {
    /// Eight replicas storing `brief` for one user at the same instant take
    /// eight different names, and every document is kept.
    fn racing_replicas_never_take_one_name() {
        let fixture = Fixture::new();
        let ada = fixture.user("ada", UserRole::Member);
        let handles = handles(&fixture, RACERS);
        let texts: Vec<String> = (0..RACERS).map(|n| format!("document {n}")).collect();
        let taken = race(&handles, |n, store| {
            stored(store.store_uploads(&ada.id, vec![upload("brief", &texts[n])]).unwrap())
                .remove(0)
        });
        let distinct: BTreeSet<&String> = taken.iter().collect();
        assert_eq!(distinct.len(), RACERS, "{taken:?}");
        let expected: BTreeSet<String> = names("brief", RACERS).into_iter().collect();
        assert_eq!(distinct, expected.iter().collect());
        for (n, name) in taken.iter().enumerate() {
            assert_eq!(fixture.store.upload(&ada.id, name).unwrap(), Some(texts[n].clone()));
        }
    }
}

on_both! {
    /// A stored document is never replaced, whoever wrote it: the next
    /// upload of its name takes the next one.
    fn a_taken_name_is_never_replaced() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        let ada = fixture.user("ada", UserRole::Member);
        fixture
            .raw()
            .execute(
                "INSERT INTO uploads (user_id, name, markdown, created_at)
                 VALUES (?1, 'brief.md', 'first', 1)",
                [&ada.id],
            )
            .unwrap();
        let taken = store.store_uploads(&ada.id, vec![upload("brief", "second")]).unwrap();
        assert_eq!(stored(taken), ["brief-2.md"]);
        assert_eq!(store.upload(&ada.id, "brief.md").unwrap().as_deref(), Some("first"));
    }
}

on_both! {
    /// An import keeps the name it is given, leaves a document already
    /// stored under that name as it is, skips a user who is gone, and a
    /// second import changes nothing.
    fn an_import_keeps_each_name_and_is_idempotent() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        let ada = fixture.user("ada", UserRole::Member);
        assert_eq!(store.import_upload(&ada.id, "brief-7.md", "old").unwrap(), Imported::Stored);
        assert_eq!(
            store.import_upload(&ada.id, "brief-7.md", "changed").unwrap(),
            Imported::NameTaken
        );
        assert_eq!(
            store.import_upload("gone", "brief.md", "x").unwrap(),
            Imported::UnknownUser
        );
        assert_eq!(store.upload(&ada.id, "brief-7.md").unwrap().as_deref(), Some("old"));
        // New uploads go around the imported name.
        let next = store.store_uploads(&ada.id, vec![NewUpload {
            names: vec!["brief-7.md".to_owned(), "brief-8.md".to_owned()],
            markdown: "new",
        }]).unwrap();
        assert_eq!(stored(next), ["brief-8.md"]);
    }
}

on_both! {
    /// Removing a user removes their documents, and nobody else's.
    fn a_removed_users_documents_go_with_them() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        fixture.user("root", UserRole::Admin);
        let ada = fixture.user("ada", UserRole::Member);
        let bob = fixture.user("bob", UserRole::Member);
        stored(store.store_uploads(&ada.id, vec![upload("brief", "a"), upload("notes", "b")]).unwrap());
        stored(store.store_uploads(&bob.id, vec![upload("brief", "c")]).unwrap());
        store.remove_user("ada", ACTOR_OPERATOR).unwrap();
        let left: Vec<String> = fixture
            .raw()
            .query_map("SELECT user_id FROM uploads", (), |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(left, [bob.id]);
        assert_eq!(store.upload_names(&ada.id).unwrap(), Vec::<String>::new());
    }
}
