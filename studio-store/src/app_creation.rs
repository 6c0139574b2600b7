//! The audit entry of an app created through the platform (`createApp`,
//! Studio's New app). The registration that follows (`app.registered`, the
//! first-discovery `grant.changed` entries) is [`Store::register_app`]'s, as
//! for any package.

use super::{Store, StoreError, audit};

/// Audit actions of app creation.
pub mod creation_action {
    /// A user created an app: `actor` is the user, `after` the revision of
    /// the package as written.
    pub const APP_CREATED: &str = "app.created";
}

impl Store {
    /// Records that `actor` created `app_id`, whose package as written has
    /// `revision`.
    pub fn record_app_created(
        &self,
        app_id: &str,
        actor: &str,
        revision: &str,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        audit(
            &transaction,
            now,
            actor,
            creation_action::APP_CREATED,
            Some(app_id),
            None,
            None,
            Some(revision),
        )?;
        transaction.commit()?;
        Ok(())
    }
}
