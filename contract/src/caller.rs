//! Who calls, with what, and from where, as closed words every process
//! spells the same: a user's [`Role`], a credential's [`Scope`]s, how a
//! principal authenticated ([`PrincipalKind`]), a grant on an app
//! ([`AppAccess`]), where a data call comes from ([`CallSource`]) and who
//! started it ([`Initiator`]). Each
//! has one spelling per value (`as_str`, `parse`, serde), used in the core
//! database, on the command line, in JSON and in the browser; the wire
//! carries them as proto enums (`sasha-proto`'s `convert`).
//!
//! This module must never decide a caller's access: it names the words and
//! the rules that follow from the words alone (which scopes a role may hold,
//! that `manage` covers `use`).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A text names no value of one of the closed vocabularies below.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownWord {
    /// What was being read, e.g. "scope".
    pub what: &'static str,
    /// The refused text.
    pub value: String,
    /// The accepted spellings, for the message.
    pub expected: &'static str,
}

impl fmt::Display for UnknownWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown {} {:?}; expected {}",
            self.what, self.value, self.expected
        )
    }
}

impl std::error::Error for UnknownWord {}

/// A closed vocabulary: an enum with one spelling per value.
macro_rules! closed_vocabulary {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal, $expected:literal {
            $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every value, in order.
            pub const ALL: &[$name] = &[$($name::$variant),+];

            /// The one spelling.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The value `text` spells.
            pub fn parse(text: &str) -> Result<$name, UnknownWord> {
                match text {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownWord {
                        what: $what,
                        value: text.to_owned(),
                        expected: $expected,
                    }),
                }
            }
        }

        impl FromStr for $name {
            type Err = UnknownWord;

            fn from_str(text: &str) -> Result<$name, UnknownWord> {
                $name::parse(text)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        #[cfg(feature = "sql-values")]
        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(rusqlite::types::ToSqlOutput::from(self.as_str()))
            }
        }

        #[cfg(feature = "sql-values")]
        impl rusqlite::types::FromSql for $name {
            fn column_result(
                value: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<$name> {
                $name::parse(value.as_str()?)
                    .map_err(|error| rusqlite::types::FromSqlError::Other(Box::new(error)))
            }
        }
    };
}

closed_vocabulary! {
    /// A user's role. Admin and staff may hold `apps:write` and are granted
    /// `manage` on an app's first discovery, and when they are made, on
    /// every app no one manages; members get nothing automatically.
    Role, "role", "admin, staff or member" {
        Admin => "admin",
        Staff => "staff",
        Member => "member",
    }
}

closed_vocabulary! {
    /// What a credential may be used for.
    Scope, "scope", "chat:use, apps:invoke, apps:write or apps:author" {
        /// The Studio chat and the app list.
        ChatUse => "chat:use",
        /// App data and action tools (MCP) and opening apps.
        AppsInvoke => "apps:invoke",
        /// App source tools; admin and staff only, and useless without
        /// `apps:invoke`.
        AppsWrite => "apps:write",
        /// Member app authoring (App Studio, the member app tools): any
        /// role; never the catalogue's source tools.
        AppsAuthor => "apps:author",
    }
}

closed_vocabulary! {
    /// How a principal authenticated.
    PrincipalKind, "principal kind", "session, access, api-key or chat-session" {
        /// A browser session cookie.
        Session => "session",
        /// An access token.
        Access => "access",
        /// An API key (a system principal): never invokes apps.
        ApiKey => "api-key",
        /// A chat-session token: a model drives its client, so nothing it
        /// asks for is confirmed through it.
        ChatSession => "chat-session",
    }
}

closed_vocabulary! {
    /// A user's access to one app. `Manage` implies `Use`.
    AppAccess, "access", "use or manage" {
        Use => "use",
        Manage => "manage",
    }
}

closed_vocabulary! {
    /// Where a data call comes from, recorded with every change in the app's
    /// audit ledger.
    CallSource, "call source", "ui, mcp, import, skill or automation" {
        /// The app's own view in Studio.
        Ui => "ui",
        /// An MCP client (a model).
        Mcp => "mcp",
        /// A CSV import.
        Import => "import",
        /// A skill.
        Skill => "skill",
        /// A script whose token an operator consented to write this app.
        Automation => "automation",
    }
}

closed_vocabulary! {
    /// Who started a data change and through what, recorded with every
    /// change in the app's audit ledger beside its [`CallSource`], with the
    /// initiator's id where one tells initiators of a kind apart (see
    /// [`Initiator::takes_id`]). Undo selects changes by it.
    Initiator, "initiator", "app-view, recovery-view, assistant, mcp-client, automation, import, undo or migration" {
        /// A person in the app's own view in Studio.
        AppView => "app-view",
        /// A person in Studio's recovery view of the app's rows.
        RecoveryView => "recovery-view",
        /// The Studio assistant; the id is its conversation's.
        Assistant => "assistant",
        /// An external MCP client; the id is `oauth:<client id>` for an OAuth
        /// connection or `token:<number>` for a personal access token.
        McpClient => "mcp-client",
        /// A script whose token an operator consented to write the app; the
        /// id is `token:<number>`.
        Automation => "automation",
        /// A CSV import, through whichever of the above sent it; the id is
        /// the import's idempotency key, so one import is undone as one.
        Import => "import",
        /// An undo or a restore; the id is the undo's.
        Undo => "undo",
        /// A publication's migration, which changed a table's shape (its
        /// columns, or the table itself) rather than its rows; the id is the
        /// migration file. Only data-worker records it: a caller never
        /// claims it.
        Migration => "migration",
    }
}

/// Where a token came from, recorded with the data changes made through it
/// so they can be found (and undone) together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenOrigin {
    /// Minted for one turn of this Studio assistant conversation.
    Conversation(String),
    /// Issued under an OAuth connection of this client.
    OAuthClient(String),
    /// Any other token (personal, operator-minted, chat-session): its number.
    Token(i64),
}

impl TokenOrigin {
    /// Who started a change made through a token of this origin, unless the
    /// app's own view or a consented script did, and the initiator's id.
    pub fn initiator(&self) -> (Initiator, String) {
        match self {
            TokenOrigin::Conversation(id) => (Initiator::Assistant, id.clone()),
            TokenOrigin::OAuthClient(client) => (Initiator::McpClient, format!("oauth:{client}")),
            TokenOrigin::Token(number) => (Initiator::McpClient, format!("token:{number}")),
        }
    }

    /// The id of the token itself, for an automation's changes.
    pub fn token_id(&self) -> Option<i64> {
        match self {
            TokenOrigin::Token(number) => Some(*number),
            _ => None,
        }
    }
}

/// Longest initiator id: a conversation, `oauth:<client id>`, `token:<n>`, an
/// import's idempotency key or an undo id.
pub const MAX_INITIATOR_ID: usize = 200;

impl Initiator {
    /// Whether a change of this kind carries the id of its initiator (a
    /// conversation, a client, a token, an undo).
    pub const fn takes_id(self) -> bool {
        matches!(
            self,
            Initiator::Assistant
                | Initiator::McpClient
                | Initiator::Automation
                | Initiator::Import
                | Initiator::Undo
                | Initiator::Migration
        )
    }
}

impl Role {
    /// Whether a user with this role may hold `scope` at all.
    pub fn allows(self, scope: Scope) -> bool {
        match scope {
            Scope::ChatUse | Scope::AppsInvoke | Scope::AppsAuthor => true,
            Scope::AppsWrite => self.is_privileged(),
        }
    }

    /// The scopes a browser session of this role carries: `chat:use`,
    /// `apps:invoke` and `apps:author`, plus `apps:write` for admin and staff.
    pub fn session_scopes(self) -> BTreeSet<Scope> {
        Scope::ALL
            .iter()
            .copied()
            .filter(|scope| self.allows(*scope))
            .collect()
    }

    /// Admin and staff: seeded with `manage` at first discovery, allowed to
    /// administer grants and to hold `apps:write`.
    pub fn is_privileged(self) -> bool {
        matches!(self, Role::Admin | Role::Staff)
    }
}

impl Scope {
    /// The scopes an MCP client may be given (OAuth consent, the protected
    /// resource and authorization server metadata), in the order offered.
    pub const MCP_CLIENT: [Scope; 3] = [Scope::AppsInvoke, Scope::AppsWrite, Scope::AppsAuthor];
}

impl AppAccess {
    /// Whether this access level covers `needed` (`manage` covers `use`).
    pub fn allows(self, needed: AppAccess) -> bool {
        self >= needed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each value's spelling reads back as the value, serde spells it the
    /// same, and nothing else parses.
    fn round_trips<T>(
        all: &[T],
        as_str: fn(T) -> &'static str,
        parse: fn(&str) -> Result<T, UnknownWord>,
    ) where
        T: Copy + PartialEq + fmt::Debug + Serialize + for<'de> Deserialize<'de>,
    {
        for value in all {
            let text = as_str(*value);
            assert_eq!(parse(text), Ok(*value));
            assert_eq!(serde_json::to_value(value).unwrap(), text);
            assert_eq!(serde_json::from_value::<T>(text.into()).unwrap(), *value);
            assert!(parse(&text.to_uppercase()).is_err(), "{text}");
        }
        assert!(parse("").is_err());
    }

    #[test]
    fn every_word_has_one_spelling() {
        round_trips(Role::ALL, Role::as_str, Role::parse);
        round_trips(Scope::ALL, Scope::as_str, Scope::parse);
        round_trips(
            PrincipalKind::ALL,
            PrincipalKind::as_str,
            PrincipalKind::parse,
        );
        round_trips(AppAccess::ALL, AppAccess::as_str, AppAccess::parse);
        round_trips(CallSource::ALL, CallSource::as_str, CallSource::parse);
        round_trips(Initiator::ALL, Initiator::as_str, Initiator::parse);
    }

    #[test]
    fn a_refusal_names_what_it_read_and_what_it_takes() {
        assert_eq!(
            Scope::parse("apps:admin").unwrap_err().to_string(),
            "unknown scope \"apps:admin\"; expected chat:use, apps:invoke, apps:write or apps:author"
        );
        assert_eq!(
            CallSource::parse("model").unwrap_err().to_string(),
            "unknown call source \"model\"; expected ui, mcp, import, skill or automation"
        );
    }

    #[test]
    fn only_admin_and_staff_write_apps() {
        assert_eq!(
            Role::Member
                .session_scopes()
                .into_iter()
                .collect::<Vec<_>>(),
            [Scope::ChatUse, Scope::AppsInvoke, Scope::AppsAuthor]
        );
        for role in [Role::Admin, Role::Staff] {
            assert_eq!(role.session_scopes().len(), Scope::ALL.len());
        }
        assert!(!Role::Member.is_privileged());
    }

    #[test]
    fn manage_covers_use() {
        assert!(AppAccess::Manage.allows(AppAccess::Use));
        assert!(AppAccess::Manage.allows(AppAccess::Manage));
        assert!(AppAccess::Use.allows(AppAccess::Use));
        assert!(!AppAccess::Use.allows(AppAccess::Manage));
    }
}
