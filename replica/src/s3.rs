//! The few object-storage requests the platform makes itself (Litestream
//! moves every byte of the databases' replication): prove at boot that the
//! bucket answers with these credentials, list the replica layout
//! (databases and their generations), delete a deleted app's replica, and
//! store and read the plain files mirrored beside it ([`crate::files`]). Requests are signed
//! with `rusty-s3` (AWS SigV4, no SDK) and sent with reqwest over rustls.
//!
//! What it must never do: put a credential, a signed URL or a response body
//! in an error or a log line; errors say which of the operator's settings to
//! look at.

use std::sync::Arc;
use std::time::Duration;

use rusty_s3::actions::{ListObjectsV2, S3Action as _};
use rusty_s3::{Bucket, UrlStyle};

use crate::config::Credentials;
use crate::url::ReplicaUrl;

/// How long a signed request stays valid.
const SIGNED_FOR: Duration = Duration::from_secs(60);
/// The metadata of a mirrored file ([`ObjectStore::put_file`]): when it was
/// stored, to the nanosecond (a listing says whole seconds).
pub const STORED_AT: &str = "x-amz-meta-sasha-stored-at";
/// Connect and whole-request bounds of one request.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why object storage could not be used. Each message names what the
/// operator should check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    #[error(
        "object storage at {location} does not answer ({detail}); check the endpoint in SASHA_REPLICA_URL and that the server runs"
    )]
    Unreachable { location: String, detail: String },
    #[error(
        "object storage refused the credentials ({code}); check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    )]
    Credentials { code: String },
    #[error("the bucket {bucket:?} does not exist; create it or fix SASHA_REPLICA_URL")]
    NoBucket { bucket: String },
    #[error("object storage answered {status} ({code}) to {what}")]
    Refused {
        what: &'static str,
        status: u16,
        code: String,
    },
    #[error("object storage sent a listing that cannot be read")]
    Listing,
}

impl StorageError {
    /// Whether the same request could succeed later without anyone changing
    /// a setting (the server down or busy).
    pub fn is_transient(&self) -> bool {
        match self {
            StorageError::Unreachable { .. } => true,
            StorageError::Refused { status, .. } => *status >= 500,
            _ => false,
        }
    }
}

/// One object of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The whole key, prefix included.
    pub key: String,
    pub size: u64,
    /// As listed: whole seconds on most servers.
    pub last_modified: Option<time::OffsetDateTime>,
}

/// A signed-request client of the replica bucket.
#[derive(Clone)]
pub struct ObjectStore {
    inner: Arc<Inner>,
}

struct Inner {
    bucket: Bucket,
    credentials: rusty_s3::Credentials,
    http: reqwest::Client,
    url: ReplicaUrl,
}

impl std::fmt::Debug for ObjectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStore")
            .field("location", &self.inner.url.describe())
            .finish_non_exhaustive()
    }
}

impl ObjectStore {
    pub fn new(url: &ReplicaUrl, credentials: &Credentials) -> Result<ObjectStore, String> {
        let style = if url.force_path_style {
            UrlStyle::Path
        } else {
            UrlStyle::VirtualHost
        };
        let bucket = Bucket::new(
            url.endpoint_url(),
            style,
            url.bucket.clone(),
            url.region.clone(),
        )
        .map_err(|error| format!("the bucket cannot be addressed: {error}"))?;
        let credentials = match &credentials.session_token {
            Some(token) => rusty_s3::Credentials::new_with_token(
                credentials.access_key_id.clone(),
                credentials.secret_access_key.clone(),
                token.clone(),
            ),
            None => rusty_s3::Credentials::new(
                credentials.access_key_id.clone(),
                credentials.secret_access_key.clone(),
            ),
        };
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config()?)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|error| format!("cannot build the object storage client: {error}"))?;
        Ok(ObjectStore {
            inner: Arc::new(Inner {
                bucket,
                credentials,
                http,
                url: url.clone(),
            }),
        })
    }

    /// The replica location this store writes under.
    pub fn url(&self) -> &ReplicaUrl {
        &self.inner.url
    }

    /// Proves the bucket exists and the credentials may list it: one listing
    /// of at most one key under the prefix.
    pub async fn check(&self) -> Result<(), StorageError> {
        self.list_page(&self.inner.url.key(""), None, None, Some(1))
            .await
            .map(|_| ())
    }

    /// The names directly below `under` (a path below the prefix, ending in
    /// `/`): the common prefixes of a delimited listing, without `under` and
    /// the trailing `/`.
    pub async fn list_children(&self, under: &str) -> Result<Vec<String>, StorageError> {
        let prefix = self.inner.url.key(under);
        let mut names = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .list_page(&prefix, Some("/"), token.as_deref(), None)
                .await?;
            for common in page.common_prefixes {
                if let Some(name) = common
                    .prefix
                    .strip_prefix(&prefix)
                    .map(|rest| rest.trim_end_matches('/'))
                    .filter(|name| !name.is_empty())
                {
                    names.push(name.to_owned());
                }
            }
            match page.next_continuation_token {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        names.sort();
        Ok(names)
    }

    /// Every object below `under` (a path below the prefix).
    pub async fn list_keys(&self, under: &str) -> Result<Vec<Object>, StorageError> {
        let prefix = self.inner.url.key(under);
        let mut keys = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .list_page(&prefix, None, token.as_deref(), None)
                .await?;
            keys.extend(page.contents.into_iter().map(|content| Object {
                size: content.size.unwrap_or(0),
                last_modified: content.last_modified.as_deref().and_then(|text| {
                    time::OffsetDateTime::parse(
                        text,
                        &time::format_description::well_known::Rfc3339,
                    )
                    .ok()
                }),
                key: content.key,
            }));
            match page.next_continuation_token {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        Ok(keys)
    }

    /// Deletes every object below `under` (a path below the prefix, ending in
    /// `/`), then the folders they were in; says how many objects.
    ///
    /// The folders matter on stores with real directories (SeaweedFS's
    /// filer): there an emptied folder is still listed as a common prefix,
    /// so a deleted app would look replicated. Deleting a folder key where
    /// no such object exists (AWS S3) is a harmless 204.
    pub async fn delete_below(&self, under: &str) -> Result<usize, StorageError> {
        let prefix = self.inner.url.key(under);
        let keys = self.list_keys(under).await?;
        let names: Vec<&str> = keys.iter().map(|object| object.key.as_str()).collect();
        for key in names
            .iter()
            .copied()
            .chain(folders_below(&prefix, &names).iter().map(String::as_str))
        {
            self.delete_key(key).await?;
        }
        Ok(keys.len())
    }

    async fn delete_key(&self, key: &str) -> Result<(), StorageError> {
        let url = self
            .inner
            .bucket
            .delete_object(Some(&self.inner.credentials), key)
            .sign(SIGNED_FOR);
        let response = self.send(self.inner.http.delete(url)).await?;
        let status = response.status();
        if !status.is_success() && status != reqwest::StatusCode::NOT_FOUND {
            return Err(self.refusal("a delete", response).await);
        }
        Ok(())
    }

    /// The exact instant Litestream recorded for one of its files (the
    /// `litestream-timestamp` metadata; a listing's times are whole seconds).
    pub async fn litestream_timestamp(
        &self,
        key: &str,
    ) -> Result<Option<time::OffsetDateTime>, StorageError> {
        self.metadata_time(key, "x-amz-meta-litestream-timestamp")
            .await
    }

    /// The exact instant a file mirrored by [`ObjectStore::put_file`] was
    /// stored (its [`STORED_AT`] metadata).
    pub async fn stored_at(&self, key: &str) -> Result<Option<time::OffsetDateTime>, StorageError> {
        self.metadata_time(key, STORED_AT).await
    }

    async fn metadata_time(
        &self,
        key: &str,
        header: &str,
    ) -> Result<Option<time::OffsetDateTime>, StorageError> {
        let url = self
            .inner
            .bucket
            .head_object(Some(&self.inner.credentials), key)
            .sign(SIGNED_FOR);
        let response = self.send(self.inner.http.head(url)).await?;
        if !response.status().is_success() {
            return Err(self.refusal("reading a file's time", response).await);
        }
        Ok(response
            .headers()
            .get(header)
            .and_then(|value| value.to_str().ok())
            .and_then(|text| {
                time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                    .ok()
            }))
    }

    /// Stores `bytes` at `under` (a path below the prefix), recording the
    /// instant in its [`STORED_AT`] metadata (signed with the request).
    pub async fn put_file(&self, under: &str, bytes: Vec<u8>) -> Result<(), StorageError> {
        let key = self.inner.url.key(under);
        let now = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let mut action = self
            .inner
            .bucket
            .put_object(Some(&self.inner.credentials), &key);
        action.headers_mut().insert(STORED_AT, now.clone());
        let url = action.sign(SIGNED_FOR);
        let response = self
            .send(
                self.inner
                    .http
                    .put(url)
                    .header(STORED_AT, now)
                    .header(reqwest::header::CONTENT_LENGTH, bytes.len())
                    .body(bytes),
            )
            .await?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(self.refusal("storing a file", response).await)
        }
    }

    /// The bytes of the object `key` (a whole key, as listed).
    pub async fn get_file(&self, key: &str) -> Result<Vec<u8>, StorageError> {
        let url = self
            .inner
            .bucket
            .get_object(Some(&self.inner.credentials), key)
            .sign(SIGNED_FOR);
        let response = self.send(self.inner.http.get(url)).await?;
        if !response.status().is_success() {
            return Err(self.refusal("reading a file", response).await);
        }
        response
            .bytes()
            .await
            .map(|bytes| bytes.to_vec())
            .map_err(|error| self.unreachable(&error))
    }

    /// Creates the bucket (tests and first-time setups; the roles never do).
    pub async fn create_bucket(&self) -> Result<(), StorageError> {
        let action = self.inner.bucket.create_bucket(&self.inner.credentials);
        let url = action.sign(SIGNED_FOR);
        let response = self
            .send(self.inner.http.put(url).body(action.body()))
            .await?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(self.refusal("creating the bucket", response).await)
        }
    }

    async fn list_page(
        &self,
        prefix: &str,
        delimiter: Option<&str>,
        token: Option<&str>,
        max_keys: Option<usize>,
    ) -> Result<rusty_s3::actions::ListObjectsV2Response, StorageError> {
        let mut action: ListObjectsV2<'_> = self
            .inner
            .bucket
            .list_objects_v2(Some(&self.inner.credentials));
        action.with_prefix(prefix.to_owned());
        if let Some(delimiter) = delimiter {
            action.with_delimiter(delimiter.to_owned());
        }
        if let Some(token) = token {
            action.with_continuation_token(token.to_owned());
        }
        if let Some(max_keys) = max_keys {
            action.with_max_keys(max_keys);
        }
        let response = self
            .send(self.inner.http.get(action.sign(SIGNED_FOR)))
            .await?;
        if !response.status().is_success() {
            return Err(self.refusal("a listing", response).await);
        }
        let body = response
            .text()
            .await
            .map_err(|error| self.unreachable(&error))?;
        ListObjectsV2::parse_response(&body).map_err(|_| StorageError::Listing)
    }

    async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, StorageError> {
        request
            .send()
            .await
            .map_err(|error| self.unreachable(&error))
    }

    fn unreachable(&self, error: &reqwest::Error) -> StorageError {
        let detail = if error.is_timeout() {
            "timed out".to_owned()
        } else if error.is_connect() {
            "connection refused or no route".to_owned()
        } else {
            "the connection failed".to_owned()
        };
        StorageError::Unreachable {
            location: self.inner.url.describe(),
            detail,
        }
    }

    /// Turns an error answer into what the operator must fix, by its S3 code.
    async fn refusal(&self, what: &'static str, response: reqwest::Response) -> StorageError {
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        let code = error_code(&body).unwrap_or_else(|| "no error code".to_owned());
        match code.as_str() {
            "NoSuchBucket" => StorageError::NoBucket {
                bucket: self.inner.url.bucket.clone(),
            },
            "InvalidAccessKeyId"
            | "SignatureDoesNotMatch"
            | "AccessDenied"
            | "InvalidToken"
            | "ExpiredToken" => StorageError::Credentials { code },
            _ if status == 403 => StorageError::Credentials { code },
            _ => StorageError::Refused { what, status, code },
        }
    }
}

/// Every folder (ending in `/`) the `keys` lie in, from `prefix` down,
/// deepest first, `prefix` itself last.
fn folders_below(prefix: &str, keys: &[&str]) -> Vec<String> {
    let mut folders = std::collections::BTreeSet::new();
    for key in keys {
        let Some(rest) = key.strip_prefix(prefix) else {
            continue;
        };
        for (at, _) in rest.match_indices('/') {
            folders.insert(format!("{prefix}{}", &rest[..=at]));
        }
    }
    if !prefix.is_empty() && prefix.ends_with('/') {
        folders.insert(prefix.to_owned());
    }
    let mut folders: Vec<String> = folders.into_iter().collect();
    folders.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    folders
}

/// The `<Code>` of an S3 error document, read with quick-xml.
fn error_code(body: &str) -> Option<String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(body);
    let mut in_code = false;
    loop {
        match reader.read_event().ok()? {
            Event::Start(start) if start.name().as_ref() == "Code" => in_code = true,
            Event::Text(text) if in_code => {
                let code = text.into_inner().into_owned();
                // Only a plain code word is repeated in a message.
                return code
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric())
                    .then_some(code);
            }
            Event::End(_) => in_code = false,
            Event::Eof => return None,
            _ => {}
        }
    }
}

/// rustls with the ring provider and the webpki roots, as studio-core's
/// chat client: no platform verifier, no process-wide default provider.
fn tls_config() -> Result<rustls::ClientConfig, String> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|error| error.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tls)
}

#[cfg(test)]
mod tests {
    #[test]
    fn emptied_folders_are_deleted_deepest_first() {
        let folders = super::folders_below(
            "p/apps/x/",
            &[
                "p/apps/x/g1/ltx/0/a.ltx",
                "p/apps/x/g1/ltx/1/b.ltx",
                "p/apps/x/g2/c",
            ],
        );
        assert_eq!(
            folders,
            [
                "p/apps/x/g1/ltx/0/",
                "p/apps/x/g1/ltx/1/",
                "p/apps/x/g1/ltx/",
                "p/apps/x/g1/",
                "p/apps/x/g2/",
                "p/apps/x/",
            ]
        );
        assert_eq!(super::folders_below("p/apps/x/", &[]), ["p/apps/x/"]);
    }

    #[test]
    fn error_codes_are_read_from_the_document() {
        let body = "<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>gone</Message></Error>";
        assert_eq!(super::error_code(body).as_deref(), Some("NoSuchBucket"));
        assert_eq!(super::error_code("not xml"), None);
        assert_eq!(
            super::error_code("<Error><Code>a b</Code></Error>"),
            None,
            "only a code word is repeated"
        );
    }
}
