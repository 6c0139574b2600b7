//! Ids as the spec writes them: "IDs use lowercase kebab-case, up to 60
//! characters" (app ids, action ids, a migration's name), and [`AppId`], the
//! one app id type. [`is_kebab_id`] is the rule, written once: the package
//! validator, data-worker (an app id names its SQLite file), the gateway
//! (tool names, `Sasha-App`, resource URIs), studio-core and the seeder read
//! it, the JSON Schemas of the tools that take an app id carry
//! [`KEBAB_ID_PATTERN`] and [`MAX_ID_CHARS`], and the Studio page's copy is
//! generated from them ([`crate::browser`]).
//!
//! A kebab id starts with a letter: a leading digit, `--`, a leading or
//! trailing `-` and `_` are refused, so `-` ↔ `_` maps an id into a tool name
//! and back one to one ([`crate::tools`]), and no id is built from anything a
//! path could be made of.
//!
//! A data-worker's id ([`check_worker_id`]) is a looser name (an operator's
//! or a StatefulSet's pod name), checked by the one rule here wherever one
//! is read.
//!
//! This module must never say whether an app exists or who may use it: an
//! [`AppId`] is a well-formed name, nothing more.

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Most characters of a kebab id (an app or action id).
pub const MAX_ID_CHARS: usize = 60;

/// [`is_kebab_id`] as a regular expression (JSON Schema's and JavaScript's
/// dialect alike), without the length bound, which travels as
/// [`MAX_ID_CHARS`] (`maxLength`).
pub const KEBAB_ID_PATTERN: &str = "^[a-z][a-z0-9]*(-[a-z0-9]+)*$";

/// Why a text is not a kebab id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdError {
    /// Nothing at all.
    Empty,
    /// More than [`MAX_ID_CHARS`] characters.
    TooLong { chars: usize },
    /// Not `a-z0-9` words joined by single `-`, starting with a letter.
    NotKebabCase,
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdError::Empty => f.write_str("an id may not be empty"),
            IdError::TooLong { chars } => write!(
                f,
                "an id has at most {MAX_ID_CHARS} characters; this one has {chars}"
            ),
            IdError::NotKebabCase => f.write_str(
                "an id is lowercase kebab-case: words of a-z and 0-9 joined by single '-', starting with a letter",
            ),
        }
    }
}

impl std::error::Error for IdError {}

/// Checks `id` against the kebab id rule.
pub fn check_kebab_id(id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty);
    }
    // Counted in bytes first: any id longer than the bound in bytes is
    // either too long or not ASCII, which the word check refuses anyway.
    if id.len() > MAX_ID_CHARS {
        return Err(if id.is_ascii() {
            IdError::TooLong { chars: id.len() }
        } else {
            IdError::NotKebabCase
        });
    }
    let word = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    if !id.starts_with(|c: char| c.is_ascii_lowercase()) || !id.split('-').all(word) {
        return Err(IdError::NotKebabCase);
    }
    Ok(())
}

/// Whether `id` is lowercase kebab-case: `a-z0-9` words joined by single
/// `-`, starting with a letter, at most [`MAX_ID_CHARS`] characters.
pub fn is_kebab_id(id: &str) -> bool {
    check_kebab_id(id).is_ok()
}

/// An app id: a kebab id ([`is_kebab_id`]), checked once when made, so
/// whoever holds one may join it to a path, a tool name or a URI.
///
/// Serialised as its text; deserialising checks it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AppId(String);

impl AppId {
    /// `id` as an app id, or why it is not one.
    pub fn parse(id: &str) -> Result<AppId, IdError> {
        check_kebab_id(id)?;
        Ok(AppId(id.to_owned()))
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id's text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl TryFrom<String> for AppId {
    type Error = IdError;

    fn try_from(id: String) -> Result<AppId, IdError> {
        check_kebab_id(&id)?;
        Ok(AppId(id))
    }
}

impl FromStr for AppId {
    type Err = IdError;

    fn from_str(id: &str) -> Result<AppId, IdError> {
        AppId::parse(id)
    }
}

impl From<AppId> for String {
    fn from(id: AppId) -> String {
        id.0
    }
}

impl AsRef<str> for AppId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for AppId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for AppId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for AppId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Most characters of a data-worker's id (`SASHA_DATA_WORKER_ID`): a DNS
/// label's length, so a StatefulSet's pod name (`data-worker-0`) fits.
pub const MAX_WORKER_ID_CHARS: usize = 63;

/// Why a text is not a data-worker id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerIdError {
    /// Nothing, or more than [`MAX_WORKER_ID_CHARS`] characters.
    Length,
    /// A character other than a letter, a digit, '-', '.' or '_'.
    Character,
}

impl fmt::Display for WorkerIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerIdError::Length => write!(
                f,
                "a data-worker id has 1 to {MAX_WORKER_ID_CHARS} characters"
            ),
            WorkerIdError::Character => {
                f.write_str("a data-worker id holds only letters, digits, '-', '.' and '_'")
            }
        }
    }
}

impl std::error::Error for WorkerIdError {}

/// Checks a data-worker id: 1 to [`MAX_WORKER_ID_CHARS`] ASCII letters,
/// digits, '-', '.' and '_'. The one rule: data-worker reads it for
/// `SASHA_DATA_WORKER_ID`, the core database's placement for every worker it
/// records, and the operator CLI for the worker it names.
pub fn check_worker_id(id: &str) -> Result<(), WorkerIdError> {
    if id.is_empty() || id.len() > MAX_WORKER_ID_CHARS {
        return Err(if id.is_ascii() || id.is_empty() {
            WorkerIdError::Length
        } else {
            WorkerIdError::Character
        });
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(WorkerIdError::Character);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn kebab_ids() {
        for ok in ["a", "time-sheet", "app2", "a-b-c", "a1-2b", "x-1"] {
            assert_eq!(check_kebab_id(ok), Ok(()), "{ok}");
            assert_eq!(AppId::parse(ok).unwrap().as_str(), ok);
        }
        assert_eq!(check_kebab_id(&"a".repeat(60)), Ok(()));
        for (bad, why) in [
            ("", IdError::Empty),
            ("A", IdError::NotKebabCase),
            ("time_sheet", IdError::NotKebabCase),
            ("-a", IdError::NotKebabCase),
            ("a-", IdError::NotKebabCase),
            ("a--b", IdError::NotKebabCase),
            ("1app", IdError::NotKebabCase),
            ("é", IdError::NotKebabCase),
            ("a.b", IdError::NotKebabCase),
            ("a/b", IdError::NotKebabCase),
            (&"a".repeat(61), IdError::TooLong { chars: 61 }),
            (&"é".repeat(31), IdError::NotKebabCase),
        ] {
            assert_eq!(check_kebab_id(bad), Err(why), "{bad}");
            assert!(AppId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn worker_ids() {
        for ok in [
            "w",
            "data-worker-0",
            "node_7.example",
            "W1",
            &"a".repeat(63),
        ] {
            assert_eq!(check_worker_id(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("", WorkerIdError::Length),
            (&"a".repeat(64) as &str, WorkerIdError::Length),
            ("a b", WorkerIdError::Character),
            ("a/b", WorkerIdError::Character),
            ("a:b", WorkerIdError::Character),
            ("é", WorkerIdError::Character),
            (&"é".repeat(40), WorkerIdError::Character),
        ] {
            assert_eq!(check_worker_id(bad), Err(why), "{bad}");
        }
    }

    #[test]
    fn an_app_id_travels_as_its_text_and_is_checked_coming_back() {
        let id = AppId::parse("time-sheet").unwrap();
        assert_eq!(serde_json::to_value(&id).unwrap(), "time-sheet");
        assert_eq!(
            serde_json::from_value::<AppId>("time-sheet".into()).unwrap(),
            id
        );
        assert!(serde_json::from_value::<AppId>("a--b".into()).is_err());
        assert_eq!(id.to_string(), "time-sheet");
        assert_eq!("time-sheet".parse::<AppId>(), Ok(id));
    }

    proptest! {
        /// The rule and its published pattern agree on every text made of
        /// the characters that matter.
        #[test]
        fn the_pattern_says_what_the_rule_says(id in prop_oneof![
            "[a-z0-9_A-Z-]{0,70}",
            "[a-z0-9-]{1,64}",
            "[a-z0-9]{1,12}(-[a-z0-9]{0,12}){0,6}",
        ]) {
            let pattern = regex::Regex::new(KEBAB_ID_PATTERN).unwrap();
            let by_pattern = pattern.is_match(&id) && id.chars().count() <= MAX_ID_CHARS;
            prop_assert_eq!(is_kebab_id(&id), by_pattern);
        }
    }
}
