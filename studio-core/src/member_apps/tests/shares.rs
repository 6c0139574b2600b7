//! Sharing a member app: by user name, `use` only, answered alike for every
//! name, never changed by admin or staff, and from a model only with the
//! person's yes.

use super::*;

#[tokio::test]
async fn sharing_is_by_user_name_and_gives_use_never_manage() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(true).await;
    let ola = world.user("ola", UserRole::Member);
    let (status, shared) = mia
        .call(
            "POST",
            &format!("/api/member-apps/{id}/shares"),
            json!({"username": "ola"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{shared}");
    assert_eq!(shared["app"]["shares"], json!(["ola"]));
    assert_eq!(world.page(&ola).app_ids().await, std::slice::from_ref(&id));
    assert_eq!(
        world.store().access(&id, &ola.id).unwrap(),
        Some(AppAccess::Use)
    );
    // Only the author shares.
    let (status, _) = world
        .page(&ola)
        .call(
            "POST",
            &format!("/api/member-apps/{id}/shares"),
            json!({"username": "sam"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Nobody else gains manage, by any path, and the author's own grant
    // cannot change.
    for (user, access) in [
        (&ola.id, Some(AppAccess::Manage)),
        (&world.admin.id, Some(AppAccess::Manage)),
        (&world.member.id, Some(AppAccess::Use)),
        (&world.member.id, None),
    ] {
        let outcome = match access {
            Some(access) => world
                .store()
                .grant(&id, user, access, Some(&world.admin.id)),
            None => world
                .store()
                .revoke(&id, user, Some(&world.admin.id))
                .map(|_| ()),
        };
        assert!(
            matches!(outcome, Err(studio_store::StoreError::MemberAppGrant(_))),
            "{user} {access:?}: {outcome:?}"
        );
    }
    let (status, unshared) = mia
        .call(
            "DELETE",
            &format!("/api/member-apps/{id}/shares/ola"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{unshared}");
    assert!(world.page(&ola).app_ids().await.is_empty());
}

#[tokio::test]
async fn a_share_answers_alike_whether_or_not_an_account_holds_the_name() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(true).await;
    let ola = world.user("ola", UserRole::Member);
    let dan = world.user("dan", UserRole::Member);
    world
        .store()
        .set_disabled("dan", true, &world.admin.id)
        .unwrap();
    let share = |name: &'static str, remove: bool| {
        let (mia, id) = (&mia, id.clone());
        async move {
            let (status, answer) = if remove {
                mia.call(
                    "DELETE",
                    &format!("/api/member-apps/{id}/shares/{name}"),
                    Value::Null,
                )
                .await
            } else {
                mia.call(
                    "POST",
                    &format!("/api/member-apps/{id}/shares"),
                    json!({"username": name}),
                )
                .await
            };
            assert_eq!(status, StatusCode::OK, "{name}: {answer}");
            let said = answer["shared"].as_str().unwrap().replace(name, "NAME");
            (said, answer["app"]["shares"].clone())
        }
    };
    // An account, no account, a disabled account: the same answer, and the
    // name among the shares each time.
    let mut said = Vec::new();
    for name in ["ola", "nobody", "dan"] {
        let (text, shares) = share(name, false).await;
        assert!(
            shares.as_array().unwrap().contains(&json!(name)),
            "{shares}"
        );
        said.push(json!(text));
    }
    alike(&said);
    let (_, listed) = mia.get("/api/member-apps").await;
    assert_eq!(listed["apps"][0]["shares"], json!(["dan", "nobody", "ola"]));
    let listed = world
        .rpc(
            &world.member,
            pb::member_apps_request::Operation::List(pb::MemberListRequest {}),
        )
        .await
        .unwrap();
    let Some(pb::member_apps_reply::Result::Apps(list)) = listed.result else {
        panic!("{listed:?}");
    };
    assert_eq!(list.apps[0].shares, ["dan", "nobody", "ola"]);
    // Only a name with an account became a grant.
    assert_eq!(world.page(&ola).app_ids().await, std::slice::from_ref(&id));
    let mut granted: Vec<String> = world
        .store()
        .grants(&id)
        .unwrap()
        .into_iter()
        .map(|grant| grant.user_id)
        .collect();
    granted.sort();
    let mut expected = vec![world.member.id.clone(), ola.id.clone(), dan.id.clone()];
    expected.sort();
    assert_eq!(granted, expected);

    // Stopping answers alike too, for a name shared or never shared.
    let mut said = Vec::new();
    for name in ["ola", "nobody", "zed"] {
        said.push(json!(share(name, true).await.0));
    }
    alike(&said);
    assert!(world.page(&ola).app_ids().await.is_empty());
    let (_, listed) = mia.get("/api/member-apps").await;
    assert_eq!(listed["apps"][0]["shares"], json!(["dan"]));

    // Only the spelling is judged, and one's own name.
    for (name, field) in [("Not a name!", "username"), ("mia", "username")] {
        let (status, refused) = mia
            .call(
                "POST",
                &format!("/api/member-apps/{id}/shares"),
                json!({"username": name}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
        assert_eq!(refused["details"]["field"], field);
    }
    // An app is shared with at most MAX_MEMBER_APP_SHARES names.
    for n in 1..crate::member_apps::MAX_MEMBER_APP_SHARES {
        world
            .store()
            .share_member_app(
                &id,
                &world.member.id,
                &format!("name{n}"),
                false,
                crate::member_apps::MAX_MEMBER_APP_SHARES,
            )
            .unwrap()
            .unwrap();
    }
    let (status, refused) = mia
        .call(
            "POST",
            &format!("/api/member-apps/{id}/shares"),
            json!({"username": "one-too-many"}),
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{refused}");
    assert_eq!(refused["details"]["cap"], "shares");
}

#[tokio::test]
async fn admins_and_staff_never_change_who_uses_a_member_app() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(true).await;
    let ola = world.user("ola", UserRole::Member);
    let eve = world.user("eve", UserRole::Member);
    mia.call(
        "POST",
        &format!("/api/member-apps/{id}/shares"),
        json!({"username": "ola"}),
    )
    .await;
    let audit = world.store().audit_entries(None).unwrap().len();
    // The access panel's grant and revoke: every change is a refusal saying
    // why, never an internal error, and nothing changes.
    for (page, method, user, body) in [
        (
            world.page(&world.staff),
            "PUT",
            &eve.id,
            json!({"access": "use"}),
        ),
        (
            world.page(&world.admin),
            "PUT",
            &eve.id,
            json!({"access": "use"}),
        ),
        (
            world.page(&world.admin),
            "PUT",
            &ola.id,
            json!({"access": "manage"}),
        ),
        (
            world.page(&world.staff),
            "PUT",
            &world.member.id,
            json!({"access": "use"}),
        ),
        (
            world.page(&world.admin),
            "DELETE",
            &world.member.id,
            Value::Null,
        ),
        (world.page(&world.staff), "DELETE", &ola.id, Value::Null),
    ] {
        let (status, refused) = page
            .call(
                method,
                &format!("/api/apps/{id}/access/{user}"),
                body.clone(),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{method} {user} {body}: {refused}"
        );
        assert_eq!(refused["code"], "APP_ACCESS_DENIED");
    }
    assert_eq!(world.store().access(&id, &eve.id).unwrap(), None);
    assert_eq!(world.page(&eve).app_ids().await, Vec::<String>::new());
    let (status, _) = world
        .page(&eve)
        .get(&format!(
            "/api/apps/{id}/resource?revision={}",
            world.revision(&id)
        ))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "eve cannot read its source");
    assert_eq!(
        world.store().access(&id, &ola.id).unwrap(),
        Some(AppAccess::Use)
    );
    assert_eq!(
        world.store().access(&id, &world.member.id).unwrap(),
        Some(AppAccess::Manage)
    );
    assert_eq!(world.store().audit_entries(None).unwrap().len(), audit);
    // The operator's CLI still may.
    world
        .store()
        .grant(
            &id,
            &eve.id,
            AppAccess::Use,
            Some(studio_store::ACTOR_OPERATOR),
        )
        .unwrap();
    assert_eq!(
        world.store().access(&id, &eve.id).unwrap(),
        Some(AppAccess::Use)
    );
}

/// Sharing and deleting take someone else's data or reach: from a
/// model-driven client (the member app tools through the gateway) each needs
/// the person's yes, like a deploy. Unapproved, nothing changes and the
/// question comes back (naming the sharees whose rows a delete takes, and
/// saying nothing of whether a user name exists); App Studio's click is the
/// approval.
#[tokio::test]
async fn sharing_and_deleting_from_a_model_need_the_persons_yes() {
    use pb::member_apps_request::Operation;
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(false).await;
    world.user("ola", UserRole::Member);
    let share = |username: &str, approval: pb::DraftApproval| {
        Operation::Share(pb::MemberShareRequest {
            app_id: id.clone(),
            username: username.into(),
            remove: false,
            approval: approval as i32,
        })
    };
    let delete = |approval: pb::DraftApproval| {
        Operation::Delete(pb::MemberDeleteRequest {
            app_id: id.clone(),
            approval: approval as i32,
        })
    };

    let asked = world
        .rpc(&world.member, share("ola", pb::DraftApproval::Unspecified))
        .await
        .unwrap_err();
    assert_eq!(asked.code.as_str(), "APP_CONFIRMATION_REQUIRED");
    let question = asked.details.unwrap()["summary"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        question.contains("Habits") && question.contains("\"ola\""),
        "{question}"
    );
    assert!(
        world
            .store()
            .member_app(&id)
            .unwrap()
            .unwrap()
            .shares
            .is_empty()
    );
    // A name nobody has is asked about the same way: the question is no
    // oracle of who exists.
    let unknown = world
        .rpc(
            &world.member,
            share("nobody", pb::DraftApproval::Unspecified),
        )
        .await
        .unwrap_err();
    assert_eq!(unknown.code.as_str(), "APP_CONFIRMATION_REQUIRED");
    // Someone else's app is the one refusal, approved or not.
    for approval in [
        pb::DraftApproval::Unspecified,
        pb::DraftApproval::Elicitation,
    ] {
        let refused = world
            .rpc(&world.staff, share("ola", approval))
            .await
            .unwrap_err();
        assert_eq!(refused.code.as_str(), "APP_ACCESS_DENIED");
    }
    world
        .rpc(&world.member, share("ola", pb::DraftApproval::Elicitation))
        .await
        .unwrap();
    assert_eq!(
        world.store().member_app(&id).unwrap().unwrap().shares,
        ["ola"]
    );

    let asked = world
        .rpc(&world.member, delete(pb::DraftApproval::Unspecified))
        .await
        .unwrap_err();
    assert_eq!(asked.code.as_str(), "APP_CONFIRMATION_REQUIRED");
    let question = asked.details.unwrap()["summary"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        question.contains("Delete") && question.contains("ola"),
        "{question}"
    );
    assert!(
        world.store().member_app(&id).unwrap().is_some(),
        "nothing was deleted"
    );
    world
        .rpc(&world.member, delete(pb::DraftApproval::Elicitation))
        .await
        .unwrap();
    assert!(world.store().member_app(&id).unwrap().is_none());

    // App Studio's buttons are the person's own click.
    let journal = mia.deploy(false).await;
    let (status, shared) = mia
        .call(
            "POST",
            &format!("/api/member-apps/{journal}/shares"),
            json!({"username": "ola"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{shared}");
    let (status, deleted) = mia
        .call(
            "DELETE",
            &format!("/api/member-apps/{journal}"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
}

/// User names ignore case, so a share does too, without telling which
/// names exist: "OLA" (an account's name in another case) and "NOBODY" (no
/// account) are each kept and listed once, folded alike, so the list never
/// shows an account's own spelling beside the typed one; sharing "ola" after
/// "OLA" adds no second entry, and stopping "Ola" ends the one share and its
/// grant.
#[tokio::test]
async fn a_share_in_another_case_is_one_share_and_shows_no_account() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(true).await;
    let ola = world.user("ola", UserRole::Member);
    let shares = |typed: &'static str, remove: bool| {
        let (mia, id) = (&mia, id.clone());
        async move {
            let (status, answer) = if remove {
                let uri = format!("/api/member-apps/{id}/shares/{typed}");
                mia.call("DELETE", &uri, Value::Null).await
            } else {
                let uri = format!("/api/member-apps/{id}/shares");
                mia.call("POST", &uri, json!({"username": typed})).await
            };
            assert_eq!(status, StatusCode::OK, "{typed}: {answer}");
            answer["app"]["shares"].clone()
        }
    };
    assert_eq!(shares("OLA", false).await, json!(["ola"]));
    assert_eq!(shares("NOBODY", false).await, json!(["nobody", "ola"]));
    assert_eq!(world.page(&ola).app_ids().await, std::slice::from_ref(&id));
    assert_eq!(
        shares("ola", false).await,
        json!(["nobody", "ola"]),
        "one share per name"
    );
    let (_, listed) = mia.get("/api/member-apps").await;
    assert_eq!(listed["apps"][0]["shares"], json!(["nobody", "ola"]));
    assert_eq!(shares("Ola", true).await, json!(["nobody"]));
    assert!(world.page(&ola).app_ids().await.is_empty());
}
