//! Password hashing and credential secrets: argon2id PHC strings for
//! passwords, random base64url secrets for sessions and tokens, and the sha256
//! form under which those secrets are stored.
//!
//! Nothing here touches the database or logs; a secret leaves this module only
//! as the return value handed to the one caller who shows it once.

use argon2::password_hash::{PasswordHasher as _, PasswordVerifier as _};
use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;
use sha2::{Digest as _, Sha256};

/// A well-formed argon2id PHC string with exactly the parameters [`hasher`]
/// uses and an arbitrary output that no known password produces. Verifying against it when the user does not
/// exist makes an unknown user cost the same time as a wrong password.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FzaGEtZHVtbXktc2FsdA$Cn4LhXlKFSgwxx2nc5ycGZVU0Q/fUz0ghXZkOpJRBEE";

/// The password hasher: argon2id v1.3 with the crate's (OWASP-recommended)
/// defaults, named explicitly so an upgrade cannot silently change them.
fn hasher() -> Argon2<'static> {
    Argon2::new(Algorithm::Argon2id, Version::V0x13, Params::DEFAULT)
}

/// How many passwords this process hashed: lets a test see that an
/// anonymous request costs no argon2 work.
#[cfg(test)]
pub(super) static PASSWORDS_HASHED: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Hashes `password` with a fresh random salt into a PHC string.
pub(super) fn hash_password(password: &str) -> Result<String, String> {
    #[cfg(test)]
    PASSWORDS_HASHED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    hasher()
        .hash_password(password.as_bytes())
        .map(|hash| hash.to_string())
        .map_err(|error| format!("cannot hash a password: {error}"))
}

/// Whether `password` matches the PHC string `hash`. A malformed stored hash
/// never matches.
pub(super) fn verify_password(password: &str, hash: &str) -> bool {
    hasher().verify_password(password.as_bytes(), hash).is_ok()
}

/// Spends the same work as [`verify_password`] and always fails.
pub(super) fn verify_dummy(password: &str) -> bool {
    let _ = verify_password(password, DUMMY_HASH);
    false
}

/// 32 random bytes from the thread-local CSPRNG (ChaCha, seeded from the OS),
/// base64url without padding: 43 characters.
pub(super) fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The stored form of a secret: lowercase hex sha256. A secret has 256 random
/// bits, so an unsalted fast hash is enough; a database copy cannot be
/// turned back into a usable credential.
pub(super) fn secret_sha256(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dummy_hash_uses_the_real_parameters() {
        let dummy = argon2::password_hash::phc::PasswordHash::new(DUMMY_HASH).unwrap();
        let real_hash = hash_password("correct horse battery").unwrap();
        let real = argon2::password_hash::phc::PasswordHash::new(&real_hash).unwrap();
        assert_eq!(dummy.algorithm, real.algorithm);
        assert_eq!(dummy.version, real.version);
        assert_eq!(dummy.params.to_string(), real.params.to_string());
        assert_eq!(
            dummy.hash.map(|output| output.len()),
            real.hash.map(|output| output.len())
        );
        assert!(!verify_dummy("correct horse battery"));
    }

    #[test]
    fn passwords_verify_and_salts_differ() {
        let first = hash_password("correct horse battery").unwrap();
        let second = hash_password("correct horse battery").unwrap();
        assert!(
            first.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{first}"
        );
        assert_ne!(first, second);
        assert!(verify_password("correct horse battery", &first));
        assert!(!verify_password("correct horse batterY", &first));
        assert!(!verify_password("correct horse battery", "not a hash"));
    }

    #[test]
    fn secrets_are_random_and_stored_as_sha256() {
        let secret = random_secret();
        assert_eq!(secret.len(), 43);
        assert_ne!(secret, random_secret());
        let stored = secret_sha256(&secret);
        assert_eq!(stored.len(), 64);
        assert!(!stored.contains(&secret));
    }
}
