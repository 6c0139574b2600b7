//! Each draft's validation, kept by the content hash of its files
//! (`drafts::content_hash`), so a preview's many calls validate once per
//! change. Process memory, part of studio-core's shared state.
//!
//! What it must never do: answer for files other than the ones it was
//! validated from (a lookup names the content hash it expects).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use sasha_package::Diagnostic;
use sasha_package::validate::Package;

/// The validated package of each draft's exact files, by app id.
#[derive(Debug, Default)]
pub(crate) struct DraftCache(Mutex<HashMap<String, (String, Arc<Validated>)>>);

/// One draft's validation.
#[derive(Debug)]
pub(crate) struct Validated {
    pub(crate) package: Option<Arc<Package>>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

impl DraftCache {
    /// The validation of `app_id`'s draft if it was made from the files
    /// whose content hash is `content_hash`.
    pub(crate) fn get(&self, app_id: &str, content_hash: &str) -> Option<Arc<Validated>> {
        let cache = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .get(app_id)
            .filter(|(known, _)| known == content_hash)
            .map(|(_, validated)| Arc::clone(validated))
    }

    /// Keeps `validated` as the validation of `app_id`'s files `content_hash`.
    pub(crate) fn insert(&self, app_id: &str, content_hash: String, validated: Arc<Validated>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(app_id.to_owned(), (content_hash, validated));
    }

    /// Forgets `app_id`'s draft (it ended).
    pub(crate) fn remove(&self, app_id: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(app_id);
    }
}
