//! Who may read each declared table's rows, and which changes of that are
//! widenings: the one statement of the rule "no existing row becomes
//! readable by anyone who could not read it before, and no row's owner
//! changes, without the approval the design requires". studio-core compares
//! policies by name with [`widened_reads`] before a change is accepted;
//! data-worker compares the policy it recorded in the app's own data file
//! with the one it is asked to apply, and the owners of the rows themselves,
//! inside the migration's transaction, and words its refusal with the same
//! [`Widening::reason`].
//!
//! This module must never weigh who may approve a widening (studio-core
//! decides that: an admin for a catalogue app, nobody for a member app) nor
//! read a database.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Access, TableDeclaration};

/// Who reads the rows of one declared table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readers {
    /// `access: shared`: every grant holder reads every row.
    Everyone,
    /// `access: owner`: the user the owner field names reads a row; with
    /// `managers_read_all` (`managersReadAll`) every `manage` holder too.
    Owner {
        field: String,
        managers_read_all: bool,
    },
}

impl Readers {
    /// The readers a declaration gives its rows.
    pub fn of(declaration: &TableDeclaration) -> Readers {
        match (declaration.access, &declaration.owner_field) {
            (Access::Owner, Some(field)) => Readers::Owner {
                field: field.clone(),
                managers_read_all: declaration.managers_read_all,
            },
            // An owner table without a field is refused by the validator;
            // were one to get here, nobody could be told apart: everyone.
            _ => Readers::Everyone,
        }
    }

    /// The owner field, for an owner-scoped table.
    pub fn owner_field(&self) -> Option<&str> {
        match self {
            Readers::Everyone => None,
            Readers::Owner { field, .. } => Some(field),
        }
    }

    /// What reading rows under `after` instead of `self` shows to people who
    /// cannot read them under `self`, judged by names: a table made shared,
    /// scoped by another owner field, or read in full by managers. Several
    /// at once are all listed; narrowing and no change are none.
    pub fn widened_by(&self, after: &Readers) -> Vec<ReadChange> {
        let Readers::Owner {
            field,
            managers_read_all,
        } = self
        else {
            return Vec::new();
        };
        match after {
            Readers::Everyone => vec![ReadChange::Shared],
            Readers::Owner {
                field: now,
                managers_read_all: managers_now,
            } => {
                let mut changes = Vec::new();
                if now != field {
                    changes.push(ReadChange::OwnerField(now.clone()));
                }
                if *managers_now && !managers_read_all {
                    changes.push(ReadChange::ManagersReadAll);
                }
                changes
            }
        }
    }
}

/// The policy is stored as JSON in the core database (`app_registry`): an
/// owner table as its owner field's name, a shared one as `null`, exactly as
/// before `managersReadAll` was part of it, so a stored policy reads the
/// same; only a table with `managersReadAll` is an object.
impl Serialize for Readers {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Readers::Everyone => serializer.serialize_none(),
            Readers::Owner {
                field,
                managers_read_all: false,
            } => serializer.serialize_str(field),
            Readers::Owner {
                field,
                managers_read_all: true,
            } => StoredOwner {
                owner_field: field.clone(),
                managers_read_all: true,
            }
            .serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Readers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Readers, D::Error> {
        Ok(match Stored::deserialize(deserializer)? {
            Stored::Everyone(()) => Readers::Everyone,
            Stored::Field(field) => Readers::Owner {
                field,
                managers_read_all: false,
            },
            Stored::Owner(owner) => Readers::Owner {
                field: owner.owner_field,
                managers_read_all: owner.managers_read_all,
            },
        })
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Stored {
    Everyone(()),
    Field(String),
    Owner(StoredOwner),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct StoredOwner {
    owner_field: String,
    #[serde(default)]
    managers_read_all: bool,
}

/// Who may read each declared table's rows, by table name.
pub type ReadPolicy = BTreeMap<String, Readers>;

/// The read policy `tables` declare.
pub fn read_policy(tables: &BTreeMap<String, TableDeclaration>) -> ReadPolicy {
    tables
        .iter()
        .map(|(name, declaration)| (name.clone(), Readers::of(declaration)))
        .collect()
}

/// How a change would let more people read a table's existing rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadChange {
    /// The table becomes `access: shared`.
    Shared,
    /// The table is scoped by another owner field (renamed, or another
    /// column), whose values may name other people.
    OwnerField(String),
    /// `managersReadAll` is turned on: every `manage` holder reads every row.
    ManagersReadAll,
    /// The rows' owners themselves change: the owner field's values are
    /// not what they were. Found only in the data, by data-worker.
    Owners,
    /// Rows appear that the app's users did not write (copied or made by a
    /// migration), or rows go while others stay. Found only in the data.
    Rows,
    /// The table holds rows no recorded policy ever covered (only a
    /// migration could have put them there). Found only in the data.
    Unrecorded,
}

/// A table whose existing rows a change would show to people who cannot
/// read them now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Widening {
    pub table: String,
    /// The owner field the rows are scoped by today; `None` for a table
    /// that is shared (or was never recorded).
    pub owner_field: Option<String>,
    pub change: ReadChange,
}

impl Widening {
    /// What the change would expose, for the person who asked for it.
    pub fn reason(&self) -> String {
        let field = self.owner_field.as_deref().unwrap_or("its owner field");
        let (change, who) = match &self.change {
            ReadChange::Shared => ("make it access: shared".to_owned(), "every user"),
            ReadChange::OwnerField(field) => (format!("scope it by {field} instead"), "every user"),
            ReadChange::ManagersReadAll => (
                "let every manager of the app read all of its rows (managersReadAll)".to_owned(),
                "every manager",
            ),
            ReadChange::Owners => (
                format!("give its rows other owners (the values of {field} would change)"),
                "someone",
            ),
            ReadChange::Rows => (
                "add rows its users never wrote (copied or made by a migration) or remove some of them"
                    .to_owned(),
                "someone",
            ),
            ReadChange::Unrecorded => (
                "make rows readable that no read policy of this app ever covered (its users could not \
                 have written them)"
                    .to_owned(),
                "someone",
            ),
        };
        let holds = match &self.owner_field {
            Some(field) => format!("holds rows that each user sees only when {field} names them"),
            None => "holds rows".to_owned(),
        };
        format!(
            "table {} {holds}; this change would {change}, so {who} with access to the app could read \
             rows that belong to others",
            self.table
        )
    }

    /// The diagnostic code of the change: `DATA_OWNER_CHANGED` when the rows
    /// get other owners, `DATA_READ_WIDENED` otherwise.
    pub fn code(&self) -> &'static str {
        match self.change {
            ReadChange::Owners => DATA_OWNER_CHANGED,
            ReadChange::Rows => DATA_ROWS_CHANGED,
            _ => DATA_READ_WIDENED,
        }
    }
}

/// The diagnostic of a change that widens who reads existing rows.
pub const DATA_READ_WIDENED: &str = "DATA_READ_WIDENED";
/// The diagnostic of a change that gives existing rows other owners.
pub const DATA_OWNER_CHANGED: &str = "DATA_OWNER_CHANGED";
/// The diagnostic of a change that adds rows the app's users never wrote.
pub const DATA_ROWS_CHANGED: &str = "DATA_ROWS_CHANGED";

/// The owner-scoped tables of `before` whose rows `after` would show more
/// widely, judged by names ([`Readers::widened_by`]), one entry per change.
/// A table `after` no longer declares is not widened: nothing reads it.
pub fn widened_reads(before: &ReadPolicy, after: &ReadPolicy) -> Vec<Widening> {
    let mut widenings = Vec::new();
    for (table, readers) in before {
        let (Some(owner_field), Some(now)) = (readers.owner_field(), after.get(table)) else {
            continue;
        };
        for change in readers.widened_by(now) {
            widenings.push(Widening {
                table: table.clone(),
                owner_field: Some(owner_field.to_owned()),
                change,
            });
        }
    }
    widenings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(field: &str, managers_read_all: bool) -> Readers {
        Readers::Owner {
            field: field.to_owned(),
            managers_read_all,
        }
    }

    fn policy(entries: &[(&str, Readers)]) -> ReadPolicy {
        entries
            .iter()
            .map(|(table, readers)| ((*table).to_owned(), readers.clone()))
            .collect()
    }

    #[test]
    fn widening_is_shared_another_owner_field_or_managers_reading_all() {
        let before = policy(&[
            ("entries", owner("created_by", false)),
            ("projects", Readers::Everyone),
        ]);
        assert_eq!(widened_reads(&before, &before), []);
        // Narrowing a shared table, dropping a table: nothing more is readable.
        let narrower = policy(&[
            ("entries", owner("created_by", false)),
            ("projects", owner("created_by", false)),
        ]);
        assert_eq!(widened_reads(&before, &narrower), []);
        assert_eq!(
            widened_reads(&before, &policy(&[("projects", Readers::Everyone)])),
            []
        );
        let shared = widened_reads(
            &before,
            &policy(&[
                ("entries", Readers::Everyone),
                ("projects", Readers::Everyone),
            ]),
        );
        assert_eq!(
            shared,
            [Widening {
                table: "entries".to_owned(),
                owner_field: Some("created_by".to_owned()),
                change: ReadChange::Shared,
            }]
        );
        assert!(shared[0].reason().contains("access: shared"));
        let renamed = widened_reads(&before, &policy(&[("entries", owner("author", false))]));
        assert_eq!(
            renamed[0].change,
            ReadChange::OwnerField("author".to_owned())
        );
        assert!(renamed[0].reason().contains("scope it by author"));

        // managersReadAll turned on is a widening, turned off a narrowing.
        let managers = policy(&[("entries", owner("created_by", true))]);
        let widened = widened_reads(&before, &managers);
        assert_eq!(widened.len(), 1);
        assert_eq!(widened[0].change, ReadChange::ManagersReadAll);
        assert_eq!(widened[0].code(), DATA_READ_WIDENED);
        assert!(
            widened[0].reason().contains("managersReadAll")
                && widened[0].reason().contains("table entries"),
            "{}",
            widened[0].reason()
        );
        assert_eq!(widened_reads(&managers, &before), []);
        assert_eq!(widened_reads(&managers, &managers), []);
        // Both at once are both reported.
        let both = widened_reads(&before, &policy(&[("entries", owner("author", true))]));
        assert_eq!(
            both.iter().map(|w| w.change.clone()).collect::<Vec<_>>(),
            [
                ReadChange::OwnerField("author".to_owned()),
                ReadChange::ManagersReadAll
            ]
        );
        // From managers reading all to shared is still wider.
        assert_eq!(
            widened_reads(&managers, &policy(&[("entries", Readers::Everyone)]))[0].change,
            ReadChange::Shared
        );
    }

    #[test]
    fn a_stored_policy_reads_back_and_older_stored_policies_still_read() {
        let current = policy(&[
            ("entries", owner("created_by", false)),
            ("notes", owner("author", true)),
            ("projects", Readers::Everyone),
        ]);
        let text = serde_json::to_string(&current).unwrap();
        assert_eq!(
            text,
            r#"{"entries":"created_by","notes":{"ownerField":"author","managersReadAll":true},"projects":null}"#
        );
        assert_eq!(serde_json::from_str::<ReadPolicy>(&text).unwrap(), current);
        // What the core database holds from before managersReadAll counted.
        let older: ReadPolicy =
            serde_json::from_str(r#"{"entries":"created_by","projects":null}"#).unwrap();
        assert_eq!(older["entries"], owner("created_by", false));
        assert_eq!(older["projects"], Readers::Everyone);
        assert!(serde_json::from_str::<ReadPolicy>(r#"{"x":{"ownerField":1}}"#).is_err());
    }

    #[test]
    fn what_only_the_data_shows_is_worded_by_table_and_field() {
        let widening = Widening {
            table: "notes".to_owned(),
            owner_field: Some("owner".to_owned()),
            change: ReadChange::Owners,
        };
        assert_eq!(widening.code(), DATA_OWNER_CHANGED);
        assert!(
            widening.reason().contains("other owners") && widening.reason().contains("owner"),
            "{}",
            widening.reason()
        );
        let rows = Widening {
            table: "tags".to_owned(),
            owner_field: None,
            change: ReadChange::Rows,
        };
        assert_eq!(rows.code(), DATA_ROWS_CHANGED);
        assert!(
            rows.reason()
                .starts_with("table tags holds rows; this change would add rows"),
            "{}",
            rows.reason()
        );
    }
}
