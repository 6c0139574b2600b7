//! `sasha certs --out DIR [--force]`: the internal PKI of a deployment as PEM
//! files in a fixed layout (see [`DeploymentPki`]): one CA, and for each role
//! that speaks mTLS a certificate whose only SAN is `<role>.sasha.internal`,
//! usable for both TLS server and client auth, with its key.
//!
//! It is meant to run on every start of a deployment (a one-shot service), so a
//! complete set already in DIR is kept and the command succeeds; `--force`
//! mints a new set. A partial set is refused: its missing leaves cannot be
//! signed by a CA whose key was never written.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use sasha_service::identity::{DeploymentPki, Identity};

/// What became of the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Minted,
    Kept,
}

pub(crate) fn main(out: &Path, force: bool) -> ExitCode {
    match run(out, force) {
        Ok(outcome) => {
            print_layout(out, outcome);
            ExitCode::SUCCESS
        }
        Err(error) => {
            let message = format!("{error:#}").replace(['\n', '\r'], " ");
            eprintln!("sasha certs: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(out: &Path, force: bool) -> anyhow::Result<Outcome> {
    let pki = DeploymentPki::at(out);
    let paths = pki.paths();
    let present: Vec<_> = paths.iter().filter(|path| path.exists()).collect();
    if !force && present.len() == paths.len() {
        // Kept as they are, but only if they still load: a broken set would
        // otherwise surface later as a role refusing to boot.
        for role in DeploymentPki::ROLES {
            Identity::load(&pki.files(role))
                .with_context(|| format!("the existing set in {} is unusable", out.display()))?;
        }
        return Ok(Outcome::Kept);
    }
    if !force && !present.is_empty() {
        let names: Vec<String> = present
            .iter()
            .map(|path| path.display().to_string())
            .collect();
        anyhow::bail!(
            "{} holds part of a certificate set ({}); remove it or pass --force to mint a new set",
            out.display(),
            names.join(", ")
        );
    }
    pki.mint()
        .with_context(|| format!("cannot write the certificates to {}", out.display()))?;
    Ok(Outcome::Minted)
}

fn print_layout(out: &Path, outcome: Outcome) {
    match outcome {
        Outcome::Minted => println!(
            "Minted a new internal CA and role certificates in {}:",
            out.display()
        ),
        Outcome::Kept => println!(
            "Certificates in {} already present, kept (--force mints a new set):",
            out.display()
        ),
    }
    let pki = DeploymentPki::at(out);
    let ca = pki.files(DeploymentPki::ROLES[0]).ca;
    println!("  {}  SASHA_TLS_CA of every role", ca.display());
    for role in DeploymentPki::ROLES {
        let files = pki.files(role);
        println!("  {}  SASHA_TLS_CERT of {role}", files.cert.display());
        println!(
            "  {}  SASHA_TLS_KEY of {role} (mode 0600)",
            files.key.display()
        );
    }
}
