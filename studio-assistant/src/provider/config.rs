//! `SASHA_CHAT_*`: where the OpenAI-compatible chat provider is and how long a
//! turn may take. Read once at boot as part of studio-core's `Config`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use sasha_service::config::{self, ConfigError, Env};

/// The default whole-turn limit, in seconds.
pub const DEFAULT_TURN_TIMEOUT_SECS: usize = 120;
/// The default idle limit (first byte, and any gap in the stream), in seconds.
pub const DEFAULT_IDLE_TIMEOUT_SECS: usize = 30;
/// The largest accepted timeout, in seconds (one hour).
const MAX_TIMEOUT_SECS: usize = 3_600;

/// The chat provider: an OpenAI-compatible `/chat/completions` endpoint
/// (Ollama, llama.cpp's server, vLLM, a hosted API).
///
/// `Debug` never shows the API key.
#[derive(Clone, PartialEq, Eq)]
pub struct ChatConfig {
    /// `SASHA_CHAT_BASE_URL`: the API base, e.g. `http://127.0.0.1:11434/v1`;
    /// requests go to `<base>/chat/completions`. http or https, no trailing
    /// slash (one is removed), no credentials, query or fragment.
    pub base_url: String,
    /// `SASHA_CHAT_MODEL`: the `model` sent with every request.
    pub model: String,
    /// `SASHA_CHAT_API_KEY`, or the trimmed contents of `SASHA_CHAT_API_KEY_FILE`:
    /// sent as `Authorization: Bearer <key>`. `None` sends no Authorization
    /// header, which local servers accept.
    pub api_key: Option<String>,
    /// `SASHA_CHAT_TIMEOUT_SECS`: the limit on one whole turn (default 120 s).
    pub turn_timeout: Duration,
    /// `SASHA_CHAT_IDLE_SECS`: the limit on waiting for the connection, the
    /// response headers, the first byte and any later gap (default 30 s).
    pub idle_timeout: Duration,
}

impl fmt::Debug for ChatConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("turn_timeout", &self.turn_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

impl ChatConfig {
    /// A configuration for `base_url` and `model` with no key and the default
    /// limits; the base is checked as [`ChatConfig::from_env`] checks it.
    pub fn new(base_url: &str, model: &str) -> Result<ChatConfig, ConfigError> {
        Ok(ChatConfig {
            base_url: parse_base_url(base_url)?,
            model: model.to_owned(),
            api_key: None,
            turn_timeout: Duration::from_secs(DEFAULT_TURN_TIMEOUT_SECS as u64),
            idle_timeout: Duration::from_secs(DEFAULT_IDLE_TIMEOUT_SECS as u64),
        })
    }

    /// Reads the `SASHA_CHAT_*` variables. `Ok(None)` when `SASHA_CHAT_BASE_URL`
    /// is unset: chat is then unavailable and answers `APP_CHAT_UNAVAILABLE`.
    /// Reads the key file, if one is named.
    pub fn from_env(env: &dyn Env) -> Result<Option<ChatConfig>, ConfigError> {
        let Some(base_url) = env.var("SASHA_CHAT_BASE_URL") else {
            return Ok(None);
        };
        let base_url = parse_base_url(&base_url)?;
        let model = env.var("SASHA_CHAT_MODEL").ok_or_else(|| {
            ConfigError::new(
                "SASHA_CHAT_MODEL",
                "is required when SASHA_CHAT_BASE_URL is set: name the model to use, e.g. llama3.2",
            )
        })?;
        let model = model.trim().to_owned();
        let api_key = match (
            env.var("SASHA_CHAT_API_KEY"),
            env.var("SASHA_CHAT_API_KEY_FILE"),
        ) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(
                    "SASHA_CHAT_API_KEY_FILE",
                    "set either SASHA_CHAT_API_KEY or SASHA_CHAT_API_KEY_FILE, not both",
                ));
            }
            (Some(key), None) => Some(check_api_key("SASHA_CHAT_API_KEY", key.trim())?),
            (None, Some(path)) => Some(read_api_key_file(PathBuf::from(path))?),
            (None, None) => None,
        };
        Ok(Some(ChatConfig {
            base_url,
            model,
            api_key,
            turn_timeout: seconds(env, "SASHA_CHAT_TIMEOUT_SECS", DEFAULT_TURN_TIMEOUT_SECS)?,
            idle_timeout: seconds(env, "SASHA_CHAT_IDLE_SECS", DEFAULT_IDLE_TIMEOUT_SECS)?,
        }))
    }

    /// `<base>/chat/completions`.
    pub fn completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }
}

/// Checks the base URL and removes one trailing slash.
fn parse_base_url(text: &str) -> Result<String, ConfigError> {
    const VAR: &str = "SASHA_CHAT_BASE_URL";
    let url = url::Url::parse(text).map_err(|_| {
        ConfigError::new(
            VAR,
            format!("{text:?} is not an absolute URL such as http://127.0.0.1:11434/v1"),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::new(
            VAR,
            format!("{text:?} must use http or https"),
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ConfigError::new(VAR, format!("{text:?} has no host")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ConfigError::new(
            VAR,
            "must not contain credentials: put the key in SASHA_CHAT_API_KEY or SASHA_CHAT_API_KEY_FILE",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ConfigError::new(
            VAR,
            format!("{text:?} must not contain a query or fragment"),
        ));
    }
    Ok(text.strip_suffix('/').unwrap_or(text).to_owned())
}

/// Reads and trims the key file; the error names the file, never its contents.
fn read_api_key_file(path: PathBuf) -> Result<String, ConfigError> {
    const VAR: &str = "SASHA_CHAT_API_KEY_FILE";
    let text = std::fs::read_to_string(&path).map_err(|error| {
        ConfigError::new(VAR, format!("cannot read {}: {error}", path.display()))
    })?;
    check_api_key(VAR, text.trim())
}

/// A key must be non-empty and usable in an HTTP header; the error never
/// repeats the key.
fn check_api_key(var: &'static str, key: &str) -> Result<String, ConfigError> {
    if key.is_empty() {
        return Err(ConfigError::new(var, "the API key is empty"));
    }
    if !key.chars().all(|c| c.is_ascii_graphic()) {
        return Err(ConfigError::new(
            var,
            "the API key contains spaces, control or non-ASCII characters",
        ));
    }
    Ok(key.to_owned())
}

/// A whole number of seconds from 1 to an hour.
fn seconds(env: &dyn Env, var: &'static str, default: usize) -> Result<Duration, ConfigError> {
    let value = config::count(env, var, default, MAX_TIMEOUT_SECS)?;
    if value == 0 {
        return Err(ConfigError::new(
            var,
            format!("must be a whole number of seconds from 1 to {MAX_TIMEOUT_SECS}"),
        ));
    }
    Ok(Duration::from_secs(value as u64))
}
