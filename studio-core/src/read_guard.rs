//! The one check studio-core makes before a change of an app's package that
//! would let more people read rows that exist (`sasha_contract::data::
//! widened_reads`: an owner table made shared, scoped by another owner
//! field, or read in full by managers): every live source change, a revert,
//! a member app's redeploy and a draft's review call [`ReadGuard`].
//!
//! The change is compared with the read policy of the app's last registered
//! valid revision (kept in the core database, so breaking the package first
//! hides nothing), and only tables data-worker says hold rows count. What is
//! found is refused here, except in a catalogue draft's review, which marks
//! it for an admin instead: a catalogue app's widening needs a publication an
//! admin approves, a member app's is never allowed. data-worker checks the
//! same rule again on the data, inside the migration's own transaction
//! (`data-worker` engine `guard`), so this check is the early, named answer,
//! not the only one.
//!
//! It must never decide on the policy of the package being judged alone: a
//! widening is always relative to what the rows were written under.

use std::collections::BTreeSet;
use std::sync::Arc;

use sasha_contract::data::{DataContract, ReadPolicy, Widening, widened_reads};
use sasha_package::validate::Package;
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

use crate::catalogue::AppEntry;
use crate::data_worker;
use crate::state::Core;
use studio_store::blocking;

/// What rows of one app a change could expose, loaded once before the
/// change (the source tools vet under the app's lock with it).
#[derive(Debug, Default)]
pub(crate) struct ReadGuard {
    /// The policy rows were written under; empty when there is nothing to
    /// protect.
    registered: ReadPolicy,
    /// The registered owner-scoped tables that hold rows now.
    with_rows: BTreeSet<String>,
    /// A member app: a widening is never allowed, not even by an admin.
    member: bool,
}

impl ReadGuard {
    /// The registered policy of `app_id` and which of its owner-scoped
    /// tables hold rows (data-worker's answer; `APP_NOT_READY` when it
    /// cannot give one, since guessing "no rows" would let a widening pass).
    /// For a check made later, under the app's lock (the source tools).
    pub(crate) async fn load(core: &Arc<Core>, app_id: &str) -> Result<ReadGuard, AppError> {
        ReadGuard::load_asking(core, app_id, None).await
    }

    /// [`ReadGuard::load`] for one known package with `after` as its data:
    /// data-worker is asked only about the tables it widens by name, so a
    /// change that widens nothing needs no answer.
    pub(crate) async fn load_for(
        core: &Arc<Core>,
        app_id: &str,
        after: Option<&DataContract>,
    ) -> Result<ReadGuard, AppError> {
        ReadGuard::load_asking(core, app_id, Some(after)).await
    }

    async fn load_asking(
        core: &Arc<Core>,
        app_id: &str,
        after: Option<Option<&DataContract>>,
    ) -> Result<ReadGuard, AppError> {
        let (store, app) = (core.store.clone(), app_id.to_owned());
        let stored = blocking(move || store.read_policy(&app)).await?;
        // A registry row from before the policy was kept: the live package's.
        let registered = stored
            .or_else(|| match core.catalogue.current().apps.get(app_id) {
                Some(AppEntry::Valid(package)) => {
                    package.data.as_ref().map(|data| data.read_policy())
                }
                _ => None,
            })
            .unwrap_or_default();
        let member = core.catalogue.is_member(app_id);
        let asked: BTreeSet<String> = match after {
            None => registered
                .iter()
                .filter(|(_, readers)| readers.owner_field().is_some())
                .map(|(table, _)| table.clone())
                .collect(),
            Some(after) => {
                let after = after.map(DataContract::read_policy).unwrap_or_default();
                widened_reads(&registered, &after)
                    .into_iter()
                    .map(|widening| widening.table)
                    .collect()
            }
        };
        if asked.is_empty() {
            return Ok(ReadGuard {
                member,
                ..ReadGuard::default()
            });
        }
        let with_rows = data_worker::tables_with_rows(&core.data, app_id, asked)
            .await
            .map_err(|error| {
                AppError::new(
                    ErrorCode::NotReady,
                    "cannot check which tables hold rows right now; try again",
                )
                .with_details(json!({"cause": error.code.as_str()}))
            })?;
        Ok(ReadGuard {
            registered,
            with_rows,
            member,
        })
    }

    /// What a package with `after` as its data (`None`: no data at all)
    /// would widen, on tables holding rows.
    pub(crate) fn widenings(&self, after: Option<&DataContract>) -> Vec<Widening> {
        if self.with_rows.is_empty() {
            return Vec::new();
        }
        let after = after.map(DataContract::read_policy).unwrap_or_default();
        widened_reads(&self.registered, &after)
            .into_iter()
            .filter(|widening| self.with_rows.contains(&widening.table))
            .collect()
    }

    /// Whether any owner-scoped table holds rows: without one, no change
    /// can expose anything and nothing needs checking.
    pub(crate) fn protects_rows(&self) -> bool {
        !self.with_rows.is_empty()
    }

    /// Whether the app is a member app, whose widenings nobody may approve.
    pub(crate) fn is_member(&self) -> bool {
        self.member
    }

    /// Refuses `after` when it widens anything, saying what and who could
    /// approve it; `doing` names the refused step ("this source change").
    pub(crate) fn check(&self, after: Option<&DataContract>, doing: &str) -> Result<(), AppError> {
        let widened = self.widenings(after);
        let Some(first) = widened.first() else {
            return Ok(());
        };
        let approval = if self.member {
            "a member app's tables stay owner-scoped, so this is never allowed in a member app"
        } else {
            "a change that widens who can read existing rows needs a publication approved by an admin"
        };
        Err(AppError::new(
            ErrorCode::AccessDenied,
            format!("{}; {approval}, so {doing} is refused", first.reason()),
        )
        .with_details(json!({"diagnostics": diagnostics(&widened)})))
    }
}

/// Refuses a revert (or a member app's redeploy) that would widen who reads
/// a table holding rows: the one read guard ([`ReadGuard`]).
pub(crate) async fn check_reads(
    core: &Arc<Core>,
    app_id: &str,
    old: &Package,
    doing: &str,
) -> Result<(), AppError> {
    ReadGuard::load_for(core, app_id, old.data.as_ref())
        .await?
        .check(old.data.as_ref(), doing)
}

/// The diagnostics of `widened`, one per change, against `APP.md` (where the
/// policy is declared).
pub(crate) fn diagnostics(widened: &[Widening]) -> Vec<Value> {
    widened
        .iter()
        .map(
            |w| json!({"file": "APP.md", "code": w.code(), "reason": w.reason(), "table": w.table}),
        )
        .collect()
}

#[cfg(test)]
mod tests;
