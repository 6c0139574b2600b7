//! Member apps' caps under racing deploys: the instance's and each author's
//! are counted in the deploy's own transaction, so deploys from many
//! replicas at once never pass them.

use super::*;

/// Deploys the new member app `app_id` of `author` against `caps`.
fn deploy(
    store: &Store,
    app_id: &str,
    author: &str,
    caps: MemberCaps,
) -> Result<Result<Recorded, MemberRefusal>, String> {
    let resource = crate::ledger::test_resource(app_id, &format!("<p>{app_id}</p>"));
    store
        .deploy_member_app(
            app_id,
            &MemberDeploy {
                name: "App",
                author_id: author,
                expected_revision: None,
                content: RevisionContent {
                    resource: &resource,
                    files: vec![("APP.md", b"---\n".as_slice())],
                },
                origin: RevisionOrigin::authored(RevisionSurface::Studio, author, "deploy", START),
                schema_hash: None,
                actions_json: "[]",
                read_policy_json: "{}",
                caps,
                retention: 8,
            },
        )
        .map_err(|error| error.to_string())
}

/// The racers' deploys that went through; every other must be `refusal`.
fn deployed(
    answers: &[Result<Result<Recorded, MemberRefusal>, String>],
    refusal: &MemberRefusal,
) -> usize {
    for answer in answers {
        assert!(
            matches!(answer, Ok(Ok(_)))
                || answer.as_ref().ok().and_then(|a| a.as_ref().err()) == Some(refusal),
            "{answer:?}"
        );
    }
    answers
        .iter()
        .filter(|answer| matches!(answer, Ok(Ok(_))))
        .count()
}

on_both! {
/// Eight replicas deploy a new app of one author at the same instant, the
/// author holding none: exactly the per-author cap's worth go through.
fn racing_deploys_never_pass_the_per_author_cap() {
    let fixture = Fixture::new();
    let caps = MemberCaps {
        instance: 100,
        per_author: 3,
        author_bytes: u64::MAX,
    };
    let handles = handles(&fixture, RACERS);
    for round in 0..3 {
        let author = fixture.user(&format!("author{round}"), UserRole::Member);
        let answers = race(&handles, |n, store| {
            deploy(store, &format!("app-{round}-{n}"), &author.id, caps)
        });
        assert_eq!(
            deployed(&answers, &MemberRefusal::AuthorCap(3)),
            3,
            "round {round}: {answers:?}"
        );
        assert_eq!(
            fixture.store.member_apps(Some(&author.id)).unwrap().len(),
            3
        );
    }
    // A refused deploy left nothing behind: no registry row, no revision.
    assert_eq!(fixture.store.registered_apps().unwrap().len(), 9);
}
}

on_both! {
/// Eight authors deploy a new app each at the same instant, from eight
/// replicas: exactly as many as the instance has room for go through.
fn racing_deploys_never_pass_the_instance_cap() {
    let fixture = Fixture::new();
    let authors: Vec<User> = (0..RACERS)
        .map(|n| fixture.user(&format!("author{n}"), UserRole::Member))
        .collect();
    let handles = handles(&fixture, RACERS);
    for round in 1..=3 {
        // Room for five more each round.
        let caps = MemberCaps {
            instance: 5 * round,
            per_author: 100,
            author_bytes: u64::MAX,
        };
        let answers = race(&handles, |n, store| {
            deploy(store, &format!("app-{round}-{n}"), &authors[n].id, caps)
        });
        assert_eq!(
            deployed(&answers, &MemberRefusal::InstanceCap(5 * round)),
            5,
            "round {round}: {answers:?}"
        );
        assert_eq!(fixture.store.member_apps(None).unwrap().len(), 5 * round);
    }
    assert_eq!(fixture.store.registered_apps().unwrap().len(), 15);
}
}
