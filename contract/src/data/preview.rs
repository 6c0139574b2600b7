//! What a draft's previewer may read of the live data. A preview runs the
//! draft (its code, its migrations, its read policy) against a scratch copy
//! of the app's data, so the copy must hold nothing its previewer could not
//! read on the live app today: otherwise a draft that makes a table shared,
//! adds `managersReadAll` or moves the owner field would show its author
//! every user's rows, whatever review or approval publishing needs.
//!
//! [`PreviewScope::of_live`] is the one rule (studio-core applies it to the
//! live contract and the previewer's live grant; data-worker keeps exactly
//! those rows in the copy, before the draft's migrations run): the rows the
//! live read rule ([`TableDeclaration::reads_every_owner`]) shows the
//! previewer, and nothing of a table the live contract does not declare.
//!
//! It must never widen anything: no grant, no live contract, or a
//! declaration it cannot read keeps no row.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Access, TableDeclaration};

/// Which rows of one live table a preview's copy keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RowScope {
    /// Every row: a shared table, or an owner table whose rows the previewer
    /// reads in full live (a manager of a `managersReadAll` table).
    Every,
    /// The rows whose owner field (named here) holds the previewer's user id.
    OwnedBy(String),
}

/// The rows of the live data a preview's scratch copy keeps, by live table
/// name; a table not listed keeps no row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PreviewScope {
    pub tables: BTreeMap<String, RowScope>,
}

impl PreviewScope {
    /// What a previewer reads of the live app: `live` is the live contract's
    /// declared tables (`None`: no live data contract), `manages` whether the
    /// previewer's live grant is `manage` (`None`: no live grant, so
    /// nothing).
    pub fn of_live(
        live: Option<&BTreeMap<String, TableDeclaration>>,
        manages: Option<bool>,
    ) -> PreviewScope {
        let (Some(live), Some(manages)) = (live, manages) else {
            return PreviewScope::default();
        };
        let tables = live
            .iter()
            .filter_map(|(name, declaration)| {
                let scope = match (declaration.access, &declaration.owner_field) {
                    (Access::Shared, _) => RowScope::Every,
                    (Access::Owner, _) if declaration.reads_every_owner(manages) => RowScope::Every,
                    (Access::Owner, Some(field)) => RowScope::OwnedBy(field.clone()),
                    (Access::Owner, None) => return None,
                };
                Some((name.clone(), scope))
            })
            .collect();
        PreviewScope { tables }
    }

    /// How `table` of the live file is kept (its name compared as SQLite
    /// compares names, ignoring ASCII case); `None`: no row of it.
    pub fn table(&self, table: &str) -> Option<&RowScope> {
        self.tables
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(table))
            .map(|(_, scope)| scope)
    }

    /// A text that is equal exactly for equal scopes (a copy made for one
    /// scope is never reused for another).
    pub fn fingerprint(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::WritePolicy;

    #[test]
    fn a_previewer_keeps_exactly_what_the_live_read_rule_shows_them() {
        let declaration = |access, owner: Option<&str>, managers_read_all| TableDeclaration {
            access,
            owner_field: owner.map(str::to_owned),
            write: WritePolicy::Use,
            managers_read_all,
        };
        let live = BTreeMap::from([
            (
                "projects".to_owned(),
                declaration(Access::Shared, None, false),
            ),
            (
                "entries".to_owned(),
                declaration(Access::Owner, Some("created_by"), true),
            ),
            (
                "notes".to_owned(),
                declaration(Access::Owner, Some("author"), false),
            ),
            ("broken".to_owned(), declaration(Access::Owner, None, false)),
        ]);
        let owned = |field: &str| RowScope::OwnedBy(field.to_owned());
        let user = PreviewScope::of_live(Some(&live), Some(false));
        assert_eq!(
            user.tables,
            BTreeMap::from([
                ("entries".to_owned(), owned("created_by")),
                ("notes".to_owned(), owned("author")),
                ("projects".to_owned(), RowScope::Every),
            ])
        );
        // A manager reads a managersReadAll table in full live, and only that one.
        let manager = PreviewScope::of_live(Some(&live), Some(true));
        assert_eq!(manager.tables["entries"], RowScope::Every);
        assert_eq!(manager.tables["notes"], owned("author"));
        assert_eq!(manager.table("NOTES"), Some(&owned("author")));
        assert_eq!(manager.table("broken"), None);
        assert_ne!(manager.fingerprint(), user.fingerprint());
        // No live grant, or no live contract: nothing.
        assert!(PreviewScope::of_live(Some(&live), None).tables.is_empty());
        assert!(PreviewScope::of_live(None, Some(true)).tables.is_empty());
    }
}
