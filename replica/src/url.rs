//! `SASHA_REPLICA_URL`: the one object-storage location every database's
//! replica lives under, parsed and checked once, and the URLs derived from it
//! (Litestream's replica URL of one database, the endpoint object requests
//! go to).
//!
//! The accepted shape is Litestream's own S3 URL,
//! `s3://BUCKET[/PREFIX]?endpoint=URL&region=NAME&force-path-style=BOOL`,
//! so an operator can hand the same text to `litestream` by hand. What it
//! must never do: accept credentials in the URL (they come from the standard
//! `AWS_*` variables and never reach a log line), or a query parameter it
//! does not understand (a typo would silently replicate somewhere else).

use url::Url;

/// Where replicas live: a bucket, a key prefix inside it and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaUrl {
    /// S3 bucket name (3 to 63 characters of `a-z0-9.-`).
    pub bucket: String,
    /// Key prefix inside the bucket, without leading or trailing `/`; empty
    /// for the bucket's root.
    pub prefix: String,
    /// `endpoint=`: an S3-compatible server; `None` means AWS itself.
    pub endpoint: Option<Url>,
    /// `region=` (default `us-east-1`).
    pub region: String,
    /// `force-path-style=`: bucket in the path rather than the host name;
    /// on by default with a custom endpoint (as Litestream does), off for AWS.
    pub force_path_style: bool,
}

/// The region when the URL names none.
pub const DEFAULT_REGION: &str = "us-east-1";

impl ReplicaUrl {
    /// Parses `text`; the error says what is wrong in words an operator can
    /// act on, without repeating the text (it may hold a typo'd secret).
    pub fn parse(text: &str) -> Result<ReplicaUrl, String> {
        let url = Url::parse(text).map_err(|error| {
            format!("not a URL ({error}); expected s3://BUCKET/PREFIX?endpoint=…&region=…")
        })?;
        if url.scheme() != "s3" {
            return Err(format!(
                "the scheme is {:?}; only s3:// (any S3-compatible store) is supported",
                url.scheme()
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(
                "credentials do not belong in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
                    .to_owned(),
            );
        }
        if url.fragment().is_some() {
            return Err("a fragment (#…) has no meaning here".to_owned());
        }
        if url.port().is_some() {
            return Err("the bucket cannot have a port; put the server in endpoint=".to_owned());
        }
        let bucket = url.host_str().unwrap_or_default().to_owned();
        check_bucket(&bucket)?;
        let prefix = url.path().trim_matches('/').to_owned();
        if !prefix.is_empty() {
            for segment in prefix.split('/') {
                let valid = !segment.is_empty()
                    && segment != "."
                    && segment != ".."
                    && segment
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
                if !valid {
                    return Err(format!(
                        "the prefix segment {segment:?} is not allowed; use letters, digits, '-', '_' and '.'"
                    ));
                }
            }
        }
        let mut endpoint = None;
        let mut region = None;
        let mut force_path_style = None;
        for (key, value) in url.query_pairs() {
            match key.as_ref() {
                "endpoint" if endpoint.is_none() => endpoint = Some(parse_endpoint(&value)?),
                "region" if region.is_none() => {
                    let valid = !value.is_empty()
                        && value
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
                    if !valid {
                        return Err(format!("region={value:?} is not a region name"));
                    }
                    region = Some(value.into_owned());
                }
                "force-path-style" if force_path_style.is_none() => {
                    force_path_style = Some(match value.as_ref() {
                        "true" => true,
                        "false" => false,
                        _ => return Err("force-path-style must be true or false".to_owned()),
                    });
                }
                "endpoint" | "region" | "force-path-style" => {
                    return Err(format!("{key}= is given twice"));
                }
                other => {
                    return Err(format!(
                        "unknown parameter {other:?}; accepted: endpoint, region, force-path-style"
                    ));
                }
            }
        }
        let force_path_style = force_path_style.unwrap_or(endpoint.is_some());
        Ok(ReplicaUrl {
            bucket,
            prefix,
            endpoint,
            region: region.unwrap_or_else(|| DEFAULT_REGION.to_owned()),
            force_path_style,
        })
    }

    /// The object key of `rest` under the prefix (`rest` without a leading `/`).
    pub fn key(&self, rest: &str) -> String {
        if self.prefix.is_empty() {
            rest.to_owned()
        } else if rest.is_empty() {
            format!("{}/", self.prefix)
        } else {
            format!("{}/{rest}", self.prefix)
        }
    }

    /// The URL Litestream replicates one database to: the same bucket and
    /// server, the key prefix `<prefix>/<path>`, every parameter explicit.
    pub fn litestream_url(&self, path: &str) -> String {
        let mut url = format!("s3://{}/{}", self.bucket, self.key(path));
        url.push('?');
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        if let Some(endpoint) = &self.endpoint {
            query.append_pair("endpoint", endpoint.as_str().trim_end_matches('/'));
        }
        query.append_pair("region", &self.region);
        query.append_pair(
            "force-path-style",
            if self.force_path_style {
                "true"
            } else {
                "false"
            },
        );
        url.push_str(&query.finish());
        url
    }

    /// Where object requests go: the custom endpoint, else AWS's regional one.
    pub fn endpoint_url(&self) -> Url {
        match &self.endpoint {
            Some(endpoint) => endpoint.clone(),
            None => Url::parse(&format!("https://s3.{}.amazonaws.com", self.region))
                .unwrap_or_else(|_| unreachable_endpoint()),
        }
    }

    /// The location for messages and logs: bucket, prefix and server, never
    /// a credential (the URL holds none).
    pub fn describe(&self) -> String {
        let server = self
            .endpoint
            .as_ref()
            .map_or_else(|| "AWS".to_owned(), |endpoint| endpoint.to_string());
        format!("s3://{}/{} at {server}", self.bucket, self.prefix)
    }
}

/// A region name is checked to be `[a-z0-9-]+`, so the AWS endpoint built
/// from it always parses; this is never reached.
fn unreachable_endpoint() -> Url {
    Url::parse("https://s3.amazonaws.com").expect("a constant URL")
}

fn check_bucket(bucket: &str) -> Result<(), String> {
    let bytes = bucket.as_bytes();
    let valid = (3..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-'))
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric();
    if valid {
        Ok(())
    } else {
        Err(format!(
            "the bucket name {bucket:?} is not valid: 3 to 63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit"
        ))
    }
}

fn parse_endpoint(value: &str) -> Result<Url, String> {
    let endpoint =
        Url::parse(value).map_err(|error| format!("endpoint= is not a URL ({error})"))?;
    if !matches!(endpoint.scheme(), "http" | "https")
        || endpoint.host_str().is_none()
        || endpoint.path() != "/"
        || endpoint.query().is_some()
        || !endpoint.username().is_empty()
    {
        return Err(
            "endpoint= must be an http(s) origin such as http://127.0.0.1:8333, with no path, query or credentials"
                .to_owned(),
        );
    }
    Ok(endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seaweedfs_url_parses_with_path_style() {
        let url = ReplicaUrl::parse(
            "s3://sasha-replicas/prod/eu?endpoint=http://127.0.0.1:8333&region=us-east-1",
        )
        .unwrap();
        assert_eq!(url.bucket, "sasha-replicas");
        assert_eq!(url.prefix, "prod/eu");
        assert!(url.force_path_style);
        assert_eq!(url.endpoint_url().as_str(), "http://127.0.0.1:8333/");
        assert_eq!(
            url.litestream_url("apps/time-sheet/g1"),
            "s3://sasha-replicas/prod/eu/apps/time-sheet/g1?endpoint=http%3A%2F%2F127.0.0.1%3A8333&region=us-east-1&force-path-style=true"
        );
        assert_eq!(url.key("apps/"), "prod/eu/apps/");
    }

    #[test]
    fn aws_is_the_default_server() {
        let url = ReplicaUrl::parse("s3://my-bucket?region=eu-west-1").unwrap();
        assert_eq!(url.prefix, "");
        assert!(!url.force_path_style);
        assert_eq!(
            url.endpoint_url().as_str(),
            "https://s3.eu-west-1.amazonaws.com/"
        );
        assert_eq!(url.key("core/"), "core/");
    }

    #[test]
    fn bad_urls_are_refused_with_a_reason() {
        for (text, says) in [
            ("not a url", "not a URL"),
            ("http://bucket/prefix", "only s3://"),
            ("s3://key:secret@bucket/p", "credentials do not belong"),
            ("s3://b/p", "bucket name"),
            ("s3://Bucket/p", "bucket name"),
            ("s3://bucket/a//b", "prefix segment"),
            ("s3://bucket/a%20b", "prefix segment"),
            ("s3://bucket/p?endpoint=ftp://x", "endpoint= must be"),
            ("s3://bucket/p?endpoint=http://x/path", "endpoint= must be"),
            ("s3://bucket/p?regoin=us-east-1", "unknown parameter"),
            ("s3://bucket/p?force-path-style=yes", "true or false"),
            ("s3://bucket/p?region=a&region=b", "given twice"),
            ("s3://bucket:9000/p", "port"),
        ] {
            let error = ReplicaUrl::parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
