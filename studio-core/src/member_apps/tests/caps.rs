//! The caps on member apps: per author and per instance under concurrent
//! deploys, an author's bytes in the ledger, and the deploy throttle.

use super::*;
use crate::test_world::on_both_databases;

on_both_databases! {
/// More deploys than one author may hold, all at once through the router:
/// exactly the cap's worth are created, the rest refused with the cap named.
#[tokio::test]
async fn concurrent_deploys_never_pass_the_per_author_cap(database) {
    let world = World::on(database);
    let mia = world.page(&world.member);
    let attempts = crate::member_apps::MAX_MEMBER_APPS_PER_AUTHOR + 5;
    let deploys = (0..attempts).map(|_| {
        let mia = &mia;
        async move { mia.create(package(false, false)).await }
    });
    let answers = futures::future::join_all(deploys).await;
    let created = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::CREATED)
        .count();
    assert_eq!(created, crate::member_apps::MAX_MEMBER_APPS_PER_AUTHOR);
    for (status, refused) in answers
        .iter()
        .filter(|(status, _)| *status != StatusCode::CREATED)
    {
        assert_eq!(*status, StatusCode::PAYLOAD_TOO_LARGE, "{refused}");
        assert_eq!(refused["code"], "APP_RESOURCE_LIMIT");
        assert_eq!(refused["details"]["cap"], "per-author");
        assert!(
            refused["message"].as_str().unwrap().contains("40"),
            "{refused}"
        );
    }
    assert_eq!(
        off_runtime(|| world.store().member_apps(Some(&world.member.id)).unwrap()).len(),
        crate::member_apps::MAX_MEMBER_APPS_PER_AUTHOR
    );
    // Deleting one frees a place.
    let first = answers
        .iter()
        .find(|(status, _)| *status == StatusCode::CREATED)
        .map(|(_, created)| created["app"]["id"].as_str().unwrap().to_owned())
        .unwrap();
    let (status, _) = mia
        .call("DELETE", &format!("/api/member-apps/{first}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK);
    mia.deploy(false).await;
}
}

on_both_databases! {
/// The store's one transaction, raced by threads: several authors deploy at
/// once against small caps.
#[tokio::test]
async fn the_instance_cap_holds_across_concurrent_authors(database) {
    let world = World::on(database);
    let store = world.store().clone();
    let authors: Vec<User> = (0..4)
        .map(|n| world.user(&format!("author{n}"), UserRole::Member))
        .collect();
    let caps = studio_store::MemberCaps {
        instance: 5,
        per_author: 3,
        author_bytes: u64::MAX,
    };
    let threads: Vec<_> = authors
        .iter()
        .flat_map(|author| (0..3).map(move |n| (author.id.clone(), n)))
        .map(|(author, n)| {
            let store = store.clone();
            std::thread::spawn(move || {
                let id = format!("app-{}-{n}", &author[author.len() - 6..]);
                let resource = ledger_resource(&id, "<p>hi</p>");
                let deploy = studio_store::MemberDeploy {
                    name: "App",
                    author_id: &author,
                    expected_revision: None,
                    content: studio_store::RevisionContent {
                        resource: &resource,
                        files: vec![("APP.md", b"---\n".as_slice())],
                    },
                    origin: studio_store::RevisionOrigin::authored(
                        studio_store::RevisionSurface::Studio,
                        &author,
                        "deploy",
                        0,
                    ),
                    schema_hash: None,
                    actions_json: "[]",
                    read_policy_json: "{}",
                    caps,
                    retention: 8,
                };
                store.deploy_member_app(&id, &deploy).unwrap()
            })
        })
        .collect();
    let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 5);
    for refusal in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert!(
            matches!(
                refusal,
                studio_store::MemberRefusal::InstanceCap(5)
                    | studio_store::MemberRefusal::AuthorCap(3)
            ),
            "{refusal:?}"
        );
    }
    let apps = off_runtime(|| store.member_apps(None).unwrap());
    assert_eq!(apps.len(), 5);
    for author in &authors {
        assert!(
            apps.iter()
                .filter(|a| a.author_id.as_deref() == Some(author.id.as_str()))
                .count()
                <= 3
        );
    }
}
}

#[tokio::test]
async fn an_authors_apps_keep_at_most_their_bytes_in_the_ledger() {
    let limit = 1024 * 1024;
    let world = World::with_member_caps(MemberCaps {
        author_bytes: limit,
        ..crate::member_apps::MEMBER_CAPS
    });
    let mia = world.page(&world.member);
    let script = |n: usize| with_script(&format!("/* {n} {} */\n", "z".repeat(150 * 1024)));
    let (status, created) = mia.create(script(0)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["app"]["id"].as_str().unwrap().to_owned();
    // Revisions until the bytes her apps keep would pass the limit.
    let mut refused = None;
    for n in 1..20 {
        let revision = world.revision(&id);
        let kept = world.store().member_ledger_bytes(&world.member.id).unwrap();
        let (status, answer) = mia.update(&id, script(n)).await;
        if status == StatusCode::OK {
            continue;
        }
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
        // Refused, nothing was kept of it.
        assert_eq!(world.revision(&id), revision);
        assert_eq!(
            world.store().member_ledger_bytes(&world.member.id).unwrap(),
            kept
        );
        refused = Some(answer);
        break;
    }
    let refused = refused.expect("the bytes were never refused");
    assert_eq!(refused["code"], "APP_RESOURCE_LIMIT");
    assert_eq!(refused["details"]["cap"], "author-bytes");
    assert_eq!(refused["details"]["limit"], limit);
    assert!(refused["details"]["used"].as_u64().unwrap() > limit);
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("delete an app"),
        "{refused}"
    );
    assert!(world.store().member_ledger_bytes(&world.member.id).unwrap() <= limit);
    let (status, _) = mia.create(script(99)).await;
    assert_eq!(
        status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "a new app counts too"
    );
    // It is one person's budget: another author deploys.
    let ola = world.user("ola", UserRole::Member);
    world.page(&ola).deploy(false).await;
    // Deleting an app gives its bytes back.
    let (status, _) = mia
        .call("DELETE", &format!("/api/member-apps/{id}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, again) = mia.create(script(100)).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
}

#[tokio::test]
async fn each_authors_deploys_are_throttled() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(false).await;
    for n in 1..crate::state::deploy_throttle::MEMBER_DEPLOY_BURST {
        let (status, answer) = mia
            .update(&id, with_script(&format!("document.title = '{n}';\n")))
            .await;
        assert_eq!(status, StatusCode::OK, "{n}: {answer}");
    }
    let revision = world.revision(&id);
    let body = json!({"files": with_script("document.title = 'one more';\n"), "expectedRevision": revision}).to_string();
    let cookie = world.session(&world.member);
    let (status, headers, refused) = world
        .exchange(
            "PUT",
            &format!("/api/member-apps/{id}"),
            &[
                ("cookie", &cookie),
                ("origin", STUDIO),
                ("content-type", "application/json"),
            ],
            &body,
        )
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{refused}");
    assert_eq!(refused["code"], "APP_BUSY");
    assert_eq!(refused["retryable"], true);
    assert_eq!(refused["details"]["reason"], "deploy-rate");
    assert_eq!(refused["details"]["retryAfterSeconds"], 60);
    assert_eq!(headers.get("retry-after").unwrap(), "60");
    assert_eq!(world.revision(&id), revision, "nothing was deployed");
    let (status, _) = mia.create(package(false, false)).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "a new app counts too"
    );
    // Another author is not slowed, and a minute later she deploys again.
    let ola = world.user("ola", UserRole::Member);
    world.page(&ola).deploy(false).await;
    world.advance(60);
    let (status, answer) = mia
        .update(&id, with_script("document.title = 'a minute on';\n"))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

/// A resource the revision ledger accepts (its revision is its bytes'), as
/// the catalogue would assemble one for `html`.
fn ledger_resource(app_id: &str, html: &str) -> sasha_package::assemble::Resource {
    use sasha_package::assemble::{Resource, resource_uri, revision_of};
    const MIME: &str = "text/html;profile=mcp-app";
    let meta = serde_json::json!({
        "csp": {"connectDomains": []},
        "prefersBorder": false,
        "sasha": {"sourceDigest": sasha_contract::data::sha256_hex(html.as_bytes())},
    });
    let csp = "default-src 'none'".to_owned();
    let revision = revision_of(MIME, &csp, &meta, html);
    Resource {
        app_id: app_id.to_owned(),
        uri: resource_uri(app_id, &revision),
        revision,
        mime_type: MIME.to_owned(),
        html: html.to_owned(),
        csp,
        meta,
    }
}
