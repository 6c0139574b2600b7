//! Debian's nginx on loopback running `deploy/nginx/sasha.conf.template`
//! rendered the way the official image's envsubst renders it, with a
//! self-signed public certificate for the hostnames, and a client that
//! resolves them to it. Shared by the deploy process test and the chaos soak
//! (`benches/soak.rs` includes this file by path), so both run the production
//! proxy configuration, never a copy of it.
//!
//! This module must never edit the template's rules: it only fills in its
//! placeholders and the process-level lines nginx needs outside a container.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Debian's nginx (`SASHA_NGINX`, else `nginx` on PATH or /usr/sbin/nginx).
pub fn binary() -> PathBuf {
    if let Ok(path) = std::env::var("SASHA_NGINX") {
        return PathBuf::from(path);
    }
    for candidate in ["/usr/sbin/nginx", "/usr/bin/nginx"] {
        if Path::new(candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    panic!(
        "nginx is not installed: ./scripts/test.sh installs Debian's nginx-light \
         (or point SASHA_NGINX at an nginx binary)"
    );
}

/// nginx running the rendered template; stopped when dropped.
pub struct Nginx {
    child: std::process::Child,
    dir: PathBuf,
}

impl Drop for Nginx {
    /// SIGTERM, so the master stops its workers too (SIGKILL would orphan
    /// them), then SIGKILL if it has not exited within five seconds.
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

/// Renders `${NAME}` placeholders as envsubst does (only the given names).
fn render(template: &str, values: &BTreeMap<&str, String>) -> String {
    let mut text = template.to_owned();
    for (name, value) in values {
        text = text.replace(&format!("${{{name}}}"), value);
    }
    assert!(
        !values
            .keys()
            .any(|name| text.contains(&format!("${{{name}}}"))),
        "every placeholder is rendered"
    );
    text
}

/// Starts nginx in `dir` with `template` (the deploy template) rendered from
/// `values`, after `nginx -t` accepts it.
pub fn start(dir: &Path, template: &Path, values: BTreeMap<&str, String>) -> Nginx {
    let template = std::fs::read_to_string(template).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("sasha.conf"), render(&template, &values)).unwrap();
    let mut temp_paths = String::new();
    for name in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        let path = dir.join(format!("tmp-{name}"));
        std::fs::create_dir_all(&path).unwrap();
        // Workers may run as another user when nginx starts as root.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        temp_paths.push_str(&format!("    {name}_temp_path {};\n", path.display()));
    }
    let conf = format!(
        "worker_processes 1;\npid {dir}/nginx.pid;\nerror_log {dir}/error.log info;\ndaemon off;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    access_log {dir}/access.log;\n{temp_paths}    include {dir}/sasha.conf;\n}}\n",
        dir = dir.display()
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let test = std::process::Command::new(binary())
        .args(["-t", "-q", "-p"])
        .arg(dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .output()
        .unwrap();
    assert!(
        test.status.success(),
        "nginx -t refuses the rendered deploy config:\n{}",
        String::from_utf8_lossy(&test.stderr)
    );
    let child = std::process::Command::new(binary())
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Nginx {
        child,
        dir: dir.to_owned(),
    }
}

/// A self-signed certificate for `hosts`, written as `cert.pem` and
/// `key.pem` into `dir`; returns the certificate's PEM.
pub fn public_tls(dir: &Path, hosts: &[&str]) -> String {
    let certified = rcgen::generate_simple_self_signed(
        hosts
            .iter()
            .map(|host| (*host).to_owned())
            .collect::<Vec<String>>(),
    )
    .unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let cert_pem = certified.cert.pem();
    std::fs::write(dir.join("cert.pem"), &cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), certified.signing_key.serialize_pem()).unwrap();
    cert_pem
}

/// The template's TLS values for the files [`public_tls`] wrote in `dir`.
pub fn tls_values(dir: &Path) -> [(&'static str, String); 2] {
    [
        (
            "SASHA_TLS_CERT_FILE",
            dir.join("cert.pem").display().to_string(),
        ),
        (
            "SASHA_TLS_KEY_FILE",
            dir.join("key.pem").display().to_string(),
        ),
    ]
}

/// A client that resolves every one of `hosts` to nginx on `port`, trusts
/// `ca` and follows no redirect.
pub fn client(port: u16, ca: &str, hosts: &[&str]) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let nginx = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut builder = reqwest::Client::builder();
    for host in hosts {
        builder = builder.resolve(host, nginx);
    }
    builder
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}
