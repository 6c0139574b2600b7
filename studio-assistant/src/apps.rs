//! What the assistant knows of apps: the view of studio-core's catalogue it
//! asks, at the moment it asks. App chat and uploads check that the app is
//! valid at the revision the page has open and declares the capability; the
//! Studio assistant's system message lists the apps a person can use.
//!
//! What it must never do: hold an answer past the call that asked (the
//! catalogue changes under it), or carry an app's text an author wrote
//! beyond its name.

/// One app as the catalogue holds it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogueApp {
    /// Valid: served at `revision`.
    Valid(ValidApp),
    /// Invalid: not served; it has this many problems (`checkApp` shows
    /// them).
    Invalid { problems: usize },
}

/// A valid app: its name, current revision and declared capabilities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidApp {
    /// The manifest's `name` (its author's words).
    pub name: String,
    /// The current resource's revision.
    pub revision: String,
    /// `chat: true` in the manifest.
    pub chat: bool,
    /// `files: true` in the manifest.
    pub files: bool,
}

/// The catalogue as the assistant reads it; studio-core's catalogue
/// implements it.
pub trait AppCatalogue: std::fmt::Debug + Send + Sync {
    /// The app `app_id` now; `None` when the catalogue has no such app.
    fn app(&self, app_id: &str) -> Option<CatalogueApp>;

    /// Each of `app_ids` as [`AppCatalogue::app`] answers it, all read from
    /// one moment of the catalogue.
    fn apps(&self, app_ids: &[&str]) -> Vec<Option<CatalogueApp>>;

    /// Whether `app_id` is a member app (its author's, shared by name).
    fn is_member(&self, app_id: &str) -> bool;
}
