//! Which Sasha role the organisation's groups give a person: the one mapping
//! both OpenID Connect sign-in (the groups claim) and SCIM provisioning
//! (group memberships) read, from `SASHA_SSO_ADMIN_GROUPS`,
//! `SASHA_SSO_STAFF_GROUPS` and `SASHA_SSO_MEMBER_GROUPS`.
//!
//! What it must never do: match a group loosely (names and ids are compared
//! exactly, case included, since a provider's group ids are case-sensitive
//! and a near miss must give nothing), or give a role to a person none of
//! whose groups maps, unless the member list says `*`.

use std::collections::BTreeSet;

use sasha_service::config::{ConfigError, Env};
use studio_store::UserRole;

/// The member-list entry that admits everyone the provider vouches for.
pub const EVERYONE: &str = "*";

/// The groups that map to each role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupRoles {
    admin: BTreeSet<String>,
    staff: BTreeSet<String>,
    member: BTreeSet<String>,
}

/// The variables, highest role first.
const VARIABLES: [(&str, UserRole); 3] = [
    ("SASHA_SSO_ADMIN_GROUPS", UserRole::Admin),
    ("SASHA_SSO_STAFF_GROUPS", UserRole::Staff),
    ("SASHA_SSO_MEMBER_GROUPS", UserRole::Member),
];

impl GroupRoles {
    /// The mapping of the three variables: comma-separated group names or
    /// ids, each trimmed. `*` is allowed only in the member list.
    pub fn from_env(env: &dyn Env) -> Result<GroupRoles, ConfigError> {
        let mut roles = GroupRoles::default();
        for (var, role) in VARIABLES {
            let Some(text) = env.var(var) else { continue };
            let mut groups = BTreeSet::new();
            for group in text.split(',').map(str::trim) {
                if group.is_empty() {
                    return Err(ConfigError::new(
                        var,
                        "an empty group name (two commas, or one at an end)",
                    ));
                }
                if group == EVERYONE && role != UserRole::Member {
                    return Err(ConfigError::new(
                        var,
                        "`*` (everyone the provider signs in) may only be in SASHA_SSO_MEMBER_GROUPS",
                    ));
                }
                groups.insert(group.to_owned());
            }
            *roles.groups_mut(role) = groups;
        }
        Ok(roles)
    }

    /// A mapping for tests and callers that know their groups.
    pub fn new(admin: &[&str], staff: &[&str], member: &[&str]) -> GroupRoles {
        let set = |groups: &[&str]| groups.iter().map(|group| (*group).to_owned()).collect();
        GroupRoles {
            admin: set(admin),
            staff: set(staff),
            member: set(member),
        }
    }

    fn groups_mut(&mut self, role: UserRole) -> &mut BTreeSet<String> {
        match role {
            UserRole::Admin => &mut self.admin,
            UserRole::Staff => &mut self.staff,
            UserRole::Member => &mut self.member,
        }
    }

    /// The highest role one of `groups` maps to; `None` when none does (and
    /// the member list has no `*`): the person gets no access.
    pub fn role_for<'a>(&self, groups: impl IntoIterator<Item = &'a str>) -> Option<UserRole> {
        let groups: BTreeSet<&str> = groups.into_iter().collect();
        let holds =
            |mapped: &BTreeSet<String>| mapped.iter().any(|group| groups.contains(group.as_str()));
        if holds(&self.admin) {
            Some(UserRole::Admin)
        } else if holds(&self.staff) {
            Some(UserRole::Staff)
        } else if holds(&self.member) || self.member.contains(EVERYONE) {
            Some(UserRole::Member)
        } else {
            None
        }
    }

    /// Whether any group maps to a role at all.
    pub fn is_configured(&self) -> bool {
        !(self.admin.is_empty() && self.staff.is_empty() && self.member.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_highest_mapped_role_wins_and_matching_is_exact() {
        let roles = GroupRoles::from_env(&env(&[
            ("SASHA_SSO_ADMIN_GROUPS", " Sasha Admins , 6f1c-ops "),
            ("SASHA_SSO_STAFF_GROUPS", "/staff"),
            ("SASHA_SSO_MEMBER_GROUPS", "everyone"),
        ]))
        .unwrap();
        assert!(roles.is_configured());
        assert_eq!(
            roles.role_for(["everyone", "6f1c-ops"]),
            Some(UserRole::Admin)
        );
        assert_eq!(
            roles.role_for(["/staff", "everyone"]),
            Some(UserRole::Staff)
        );
        assert_eq!(roles.role_for(["everyone"]), Some(UserRole::Member));
        assert_eq!(roles.role_for(["Sasha Admins"]), Some(UserRole::Admin));
        // Case, spacing and prefixes are different groups.
        assert_eq!(
            roles.role_for(["sasha admins", "6F1C-OPS", "staff", "Everyone "]),
            None
        );
        assert_eq!(roles.role_for([]), None);
    }

    #[test]
    fn a_star_member_list_admits_everyone_the_provider_vouches_for() {
        let roles = GroupRoles::new(&["admins"], &[], &[EVERYONE]);
        assert_eq!(roles.role_for([]), Some(UserRole::Member));
        assert_eq!(roles.role_for(["admins"]), Some(UserRole::Admin));
        assert_eq!(GroupRoles::new(&[], &[], &[]).role_for([]), None);
        assert!(!GroupRoles::default().is_configured());
    }

    #[test]
    fn bad_lists_name_their_variable() {
        for (var, value) in [
            ("SASHA_SSO_ADMIN_GROUPS", "*"),
            ("SASHA_SSO_STAFF_GROUPS", "a,*"),
            ("SASHA_SSO_MEMBER_GROUPS", "a,,b"),
            ("SASHA_SSO_ADMIN_GROUPS", "a,"),
        ] {
            let error = GroupRoles::from_env(&env(&[(var, value)])).unwrap_err();
            assert_eq!(error.var, var, "{value}");
        }
    }
}
