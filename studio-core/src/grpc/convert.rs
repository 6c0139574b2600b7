//! The one place `CoreService`'s wire messages meet studio-core's domain
//! types: each request's principal and operation into the domain's, each
//! answer into its reply, and (through `sasha_proto::client_json`, the JSON
//! both surfaces serve) an answer into the JSON Studio's routes send, field
//! for field what the gateway puts in `structuredContent`.
//!
//! What it must never do: decide anything (a conversion is total and
//! lossless both ways it is used), or guess a principal: no principal, or
//! one without a user, is `APP_UNAUTHENTICATED`, and a role, kind or scope
//! the platform does not name is left out ([`Actor`]).

use std::collections::BTreeMap;

use sasha_package::Diagnostic;
use sasha_package::assemble::resource_uri;
use sasha_proto::convert::{FromWire, ToWire, scopes_to_wire};
use sasha_proto::pb::{
    self, draft_reply, draft_request, history_reply, history_request, member_apps_reply,
    member_apps_request,
};
use sasha_proto::{AppError, ErrorCode};
use serde_json::Value;
use studio_identity::actor::Actor;
use studio_store::{MemberApp, Principal, PrincipalKind, Scope, UserRole};

use crate::create::Created;
use crate::diff::{Diff, FileChange};
use crate::drafts::{self, Approval, DraftInfo, DraftReview, Published};
use crate::history::{self, Reverted, Revision, RevisionFileContent};
use crate::lifecycle::{self, Outcome};
use crate::member_apps::{self, MemberFile};
use crate::source::FileEntry;
use crate::source_tools::SourceReply;
use crate::status::PackageStatus;

// --- who asks ------------------------------------------------------------------

/// The actor a request names (the principal `Authenticate` gave the
/// gateway): no principal, or one without a user, is `APP_UNAUTHENTICATED`.
pub(crate) fn actor(principal: Option<&pb::Principal>) -> Result<Actor, AppError> {
    let principal = principal
        .filter(|principal| !principal.user_id.is_empty())
        .ok_or_else(|| AppError::new(ErrorCode::Unauthenticated, "no principal"))?;
    Ok(Actor {
        user_id: principal.user_id.clone(),
        username: principal.username.clone(),
        role: UserRole::from_wire(principal.role).ok(),
        kind: PrincipalKind::from_wire(principal.kind).ok(),
        scopes: principal
            .scopes
            .iter()
            .filter_map(|scope| Scope::from_wire(*scope).ok())
            .collect(),
    })
}

/// A principal as `Authenticate` hands it to the gateway.
pub(crate) fn principal(principal: &Principal) -> pb::Principal {
    pb::Principal {
        user_id: principal.user.id.clone(),
        role: principal.user.role.to_wire(),
        scopes: scopes_to_wire(&principal.scopes),
        kind: principal.kind.to_wire(),
        username: principal.user.username.clone(),
        member_apps_off: false,
        origin: principal
            .origin
            .as_ref()
            .map(sasha_proto::convert::origin_to_wire),
    }
}

/// Whether a request's approval is the person's yes to the gateway's
/// question.
fn approved(approval: i32) -> bool {
    approval == pb::DraftApproval::Elicitation as i32
}

// --- packages ------------------------------------------------------------------

fn diagnostic(diagnostic: &Diagnostic) -> pb::Diagnostic {
    pb::Diagnostic {
        file: diagnostic.file.clone(),
        line: diagnostic.line,
        code: diagnostic.code.clone(),
        reason: diagnostic.reason.clone(),
    }
}

pub(crate) fn status(status: &PackageStatus) -> pb::PackageStatus {
    pb::PackageStatus {
        ok: status.ok,
        revision: status.revision.clone(),
        diagnostics: status.diagnostics.iter().map(diagnostic).collect(),
    }
}

fn file_entry(file: FileEntry) -> pb::SourceFileEntry {
    pb::SourceFileEntry {
        path: file.path,
        bytes: file.bytes,
        version: file.version,
        editable: file.editable,
    }
}

/// One source tool's answer about `app`.
pub(crate) fn source_reply(app: &str, reply: SourceReply) -> pb::SourceFilesReply {
    let base = pb::SourceFilesReply {
        app: app.to_owned(),
        ..pb::SourceFilesReply::default()
    };
    match reply {
        SourceReply::List {
            status: package,
            files,
            draft,
        } => pb::SourceFilesReply {
            status: Some(status(&package)),
            files: files.into_iter().map(file_entry).collect(),
            draft: draft.as_ref().map(draft_info),
            kind: pb::SourceReplyKind::List as i32,
            ..base
        },
        SourceReply::Read {
            path,
            content,
            bytes,
            version,
            encoding,
            draft,
        } => pb::SourceFilesReply {
            path,
            content: Some(content),
            bytes,
            version: Some(version),
            encoding,
            draft: draft.as_ref().map(draft_info),
            kind: pb::SourceReplyKind::Read as i32,
            ..base
        },
        SourceReply::Check {
            status: package,
            draft,
        } => pb::SourceFilesReply {
            status: Some(status(&package)),
            draft: draft.as_ref().map(draft_info),
            kind: pb::SourceReplyKind::Check as i32,
            ..base
        },
        SourceReply::Change {
            status: package,
            path,
            version,
            previous_version,
            draft,
        } => pb::SourceFilesReply {
            status: Some(status(&package)),
            path,
            version,
            previous_version,
            draft: draft.as_ref().map(draft_info),
            kind: pb::SourceReplyKind::Change as i32,
            ..base
        },
    }
}

pub(crate) fn created(created: Created) -> pb::CreateAppReply {
    pb::CreateAppReply {
        app: created.app,
        status: Some(status(&created.status)),
    }
}

// --- history -------------------------------------------------------------------

pub(crate) fn history_operation(
    operation: Option<history_request::Operation>,
) -> Option<history::Operation> {
    Some(match operation? {
        history_request::Operation::List(_) => history::Operation::List,
        history_request::Operation::Read(read) => history::Operation::Read {
            revision: read.revision,
            path: read.path,
        },
        history_request::Operation::Diff(diff) => history::Operation::Diff {
            from: diff.from,
            to: diff.to,
        },
        history_request::Operation::Revert(revert) => history::Operation::Revert {
            revision: revert.revision,
            expected_revision: revert.expected_revision,
        },
    })
}

fn revisions(revisions: Vec<Revision>) -> pb::HistoryRevisions {
    pb::HistoryRevisions {
        revisions: revisions
            .into_iter()
            .map(|revision| pb::HistoryRevision {
                revision: revision.revision,
                uri: revision.uri,
                recorded_at: revision.recorded_at,
                user_id: revision.user_id,
                username: revision.username,
                surface: revision.surface,
                summary: revision.summary,
                files: revision.files,
                bytes: revision.bytes,
                current: revision.current,
            })
            .collect(),
    }
}

fn revision_file(file: RevisionFileContent) -> pb::HistoryFile {
    pb::HistoryFile {
        revision: file.revision,
        path: file.path,
        content: file.content,
        bytes: file.bytes,
        version: file.version,
        encoding: file.encoding,
    }
}

fn file_change(change: &FileChange) -> pb::HistoryFileChange {
    pb::HistoryFileChange {
        path: change.path.clone(),
        change: change.change.to_owned(),
        from_version: change.from_version.clone(),
        to_version: change.to_version.clone(),
        unified: change.unified.clone(),
        binary: change.binary,
        truncated: change.truncated,
    }
}

fn diff(diff: Diff) -> pb::HistoryDiff {
    pb::HistoryDiff {
        files: diff.files.iter().map(file_change).collect(),
        from: diff.from,
        to: diff.to,
        truncated: diff.truncated,
    }
}

fn reverted(reverted: Reverted) -> pb::HistoryReverted {
    pb::HistoryReverted {
        revision: reverted.revision,
        previous_revision: reverted.previous_revision,
        status: Some(status(&reverted.status)),
    }
}

pub(crate) fn history_reply(app: &str, answer: history::Answer) -> pb::HistoryReply {
    let result = match answer {
        history::Answer::Revisions(list) => history_reply::Result::Revisions(revisions(list)),
        history::Answer::File(file) => history_reply::Result::File(revision_file(file)),
        history::Answer::Diff(changes) => history_reply::Result::Diff(diff(changes)),
        history::Answer::Reverted(done) => history_reply::Result::Reverted(reverted(done)),
    };
    pb::HistoryReply {
        app: app.to_owned(),
        result: Some(result),
    }
}

/// A history answer as Studio's History panel reads it.
pub(crate) fn history_json(app: &str, answer: history::Answer) -> Option<Value> {
    sasha_proto::client_json::history(&history_reply(app, answer))
}

// --- drafts --------------------------------------------------------------------

pub(crate) fn draft_operation(
    operation: Option<draft_request::Operation>,
) -> Option<drafts::Operation> {
    Some(match operation? {
        draft_request::Operation::Review(_) => drafts::Operation::Review,
        draft_request::Operation::Publish(publish) => drafts::Operation::Publish {
            approval: approved(publish.approval).then_some(Approval::Elicitation),
            expected_revision: publish.expected_revision,
            content_hash: publish.content_hash,
        },
        draft_request::Operation::Discard(_) => drafts::Operation::Discard,
    })
}

fn draft_review(review: &DraftReview) -> pb::DraftReview {
    pb::DraftReview {
        migrations: review
            .migrations
            .iter()
            .map(|migration| pb::DraftMigration {
                file: migration.file.clone(),
                sql: migration.sql.clone(),
            })
            .collect(),
        drift: review.drift.iter().map(diagnostic).collect(),
        tables: review
            .tables
            .iter()
            .map(|table| pb::DraftTableChange {
                table: table.table.clone(),
                change: table.change.clone(),
                columns: table
                    .columns
                    .iter()
                    .map(|column| pb::DraftColumnChange {
                        column: column.column.clone(),
                        change: column.change.clone(),
                        before: column.before.clone(),
                        after: column.after.clone(),
                    })
                    .collect(),
                declaration: table.declaration.clone(),
            })
            .collect(),
        read_widened: review.read_widened.clone(),
        needs_admin: review.needs_admin,
    }
}

fn draft_info(info: &DraftInfo) -> pb::DraftInfo {
    pb::DraftInfo {
        preview_id: info.preview_id.clone(),
        base_revision: info.base_revision.clone(),
        live_revision: info.live_revision.clone(),
        status: Some(status(&info.status)),
        created_by: info.created_by.clone(),
        created_at: info.created_at,
        updated_at: info.updated_at,
        changes: info.changes.iter().map(file_change).collect(),
        review: info.review.as_ref().map(draft_review),
        content_hash: info.content_hash.clone(),
    }
}

fn published(published: Published) -> pb::DraftPublished {
    pb::DraftPublished {
        revision: published.revision,
        previous_revision: published.previous_revision,
        migrations_applied: published.migrations_applied,
        status: Some(status(&published.status)),
    }
}

pub(crate) fn draft_reply(app: &str, answer: drafts::Answer) -> pb::DraftReply {
    let result = match answer {
        drafts::Answer::Draft(info) => draft_reply::Result::Draft(draft_info(&info)),
        drafts::Answer::Published(done) => draft_reply::Result::Published(published(done)),
        drafts::Answer::Discarded => {
            draft_reply::Result::Discarded(pb::DraftDiscarded { discarded: true })
        }
    };
    pb::DraftReply {
        app: app.to_owned(),
        result: Some(result),
    }
}

/// A draft answer as Studio's Draft page reads it.
pub(crate) fn draft_json(app: &str, answer: drafts::Answer) -> Option<Value> {
    sasha_proto::client_json::draft_reply(&draft_reply(app, answer))
}

// --- the lifecycle -------------------------------------------------------------

pub(crate) fn lifecycle_operation(
    request: &pb::AppLifecycleRequest,
) -> Option<lifecycle::Operation> {
    match request.operation() {
        pb::AppLifecycleOperation::Withdraw => Some(lifecycle::Operation::Withdraw),
        pb::AppLifecycleOperation::Restore => Some(lifecycle::Operation::Restore),
        pb::AppLifecycleOperation::Delete => Some(lifecycle::Operation::Delete {
            delete_data: request.delete_data,
            confirm_app_id: request.confirm_app_id.clone(),
        }),
        pb::AppLifecycleOperation::Unspecified => None,
    }
}

pub(crate) fn lifecycle_reply(outcome: Outcome) -> pb::AppLifecycleReply {
    pb::AppLifecycleReply {
        app: outcome.app,
        changed: outcome.changed,
        withdrawn: outcome.withdrawn,
        package_deleted: outcome.package_deleted,
        data_deleted: outcome.data_deleted,
        data_backup: outcome.data_backup,
    }
}

/// A lifecycle answer as Studio's controls read it.
pub(crate) fn lifecycle_json(outcome: Outcome) -> Value {
    sasha_proto::client_json::lifecycle(&lifecycle_reply(outcome))
}

// --- member apps ---------------------------------------------------------------

fn member_files(files: Vec<pb::MemberFile>) -> Vec<MemberFile> {
    files
        .into_iter()
        .map(|file| MemberFile {
            path: file.path,
            content: file.content,
            encoding: file.encoding,
        })
        .collect()
}

pub(crate) fn member_operation(
    operation: Option<member_apps_request::Operation>,
) -> Option<member_apps::Operation> {
    use member_apps_request::Operation as Wire;
    Some(match operation? {
        Wire::List(_) => member_apps::Operation::List,
        Wire::Read(read) => member_apps::Operation::Read {
            app_id: read.app_id,
        },
        Wire::Check(check) => member_apps::Operation::Check {
            app_id: check.app_id,
            files: member_files(check.files),
        },
        Wire::Deploy(deploy) => member_apps::Operation::Deploy {
            approved: approved(deploy.approval),
            app_id: deploy.app_id,
            expected_revision: deploy.expected_revision,
            name: deploy.name,
            files: member_files(deploy.files),
            from_revision: deploy.from_revision,
        },
        Wire::Draft(draft) => member_apps::Operation::Draft {
            app_id: draft.app_id,
            files: member_files(draft.files),
        },
        Wire::Delete(delete) => member_apps::Operation::Delete {
            approved: approved(delete.approval),
            app_id: delete.app_id,
        },
        Wire::Share(share) => member_apps::Operation::Share {
            approved: approved(share.approval),
            app_id: share.app_id,
            username: share.username,
            remove: share.remove,
        },
        Wire::Revisions(revisions) => member_apps::Operation::Revisions {
            app_id: revisions.app_id,
        },
    })
}

fn member_app(app: &MemberApp) -> pb::MemberAppInfo {
    pb::MemberAppInfo {
        id: app.id.clone(),
        name: app.name.clone(),
        author_id: app.author_id.clone(),
        author_name: app.author_name.clone(),
        revision: app.revision.clone(),
        size: app.size,
        created_at: app.created_at,
        updated_at: app.updated_at,
        disabled: app.disabled,
        shares: app.shares.clone(),
        resource_uri: resource_uri(&app.id, &app.revision),
    }
}

fn member_source(app: &MemberApp, files: BTreeMap<String, Vec<u8>>) -> pb::MemberSource {
    pb::MemberSource {
        app: Some(member_app(app)),
        files: files
            .into_iter()
            .map(|(path, content)| pb::MemberFile {
                path,
                content,
                encoding: String::new(),
            })
            .collect(),
    }
}

pub(crate) fn member_reply(reply: member_apps::Reply) -> pb::MemberAppsReply {
    use member_apps::Answer;
    let result = match reply.result {
        Answer::Apps(apps) => member_apps_reply::Result::Apps(pb::MemberAppList {
            apps: apps.iter().map(member_app).collect(),
        }),
        Answer::Source { app, files } => {
            member_apps_reply::Result::Source(member_source(&app, files))
        }
        Answer::Status(package) => member_apps_reply::Result::Status(status(&package)),
        Answer::App(app) => member_apps_reply::Result::App(member_app(&app)),
        Answer::Drafted {
            app_id,
            preview_id,
            status: package,
        } => member_apps_reply::Result::Drafted(pb::MemberDrafted {
            app_id,
            preview_id,
            status: Some(status(&package)),
        }),
        Answer::Deleted { app_id } => {
            member_apps_reply::Result::Deleted(pb::MemberDeleted { app_id })
        }
        Answer::Revisions(list) => member_apps_reply::Result::Revisions(revisions(list)),
    };
    pb::MemberAppsReply {
        enabled: reply.enabled,
        result: Some(result),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_role_kind_or_scope_never_reaches_the_actor() {
        let wire = pb::Principal {
            user_id: "u1".into(),
            username: "ada".into(),
            role: 99,
            kind: 0,
            scopes: vec![Scope::AppsInvoke.to_wire(), 0, 99],
            member_apps_off: false,
            origin: None,
        };
        let actor = actor(Some(&wire)).unwrap();
        assert_eq!(actor.role, None);
        assert_eq!(actor.kind, None);
        assert_eq!(
            actor.scopes.into_iter().collect::<Vec<_>>(),
            [studio_store::Scope::AppsInvoke]
        );
        for missing in [None, Some(pb::Principal::default())] {
            let error = super::actor(missing.as_ref()).unwrap_err();
            assert_eq!(error.code, ErrorCode::Unauthenticated);
        }
    }
}
