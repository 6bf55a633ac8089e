//! A throwaway certificate authority made with the `openssl` command, for the TLS
//! tests: a CA, server certificates with chosen names, client certificates.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A CA's key and certificate in a folder of its own.
pub struct TestCa {
    dir: PathBuf,
    pub certificate: PathBuf,
    key: PathBuf,
}

/// A certificate and its private key (PEM files).
#[derive(Debug, Clone)]
pub struct Issued {
    pub certificate: PathBuf,
    pub key: PathBuf,
}

impl TestCa {
    /// A new self-signed CA named `name` in `dir`.
    pub fn new(dir: &Path, name: &str) -> TestCa {
        std::fs::create_dir_all(dir).unwrap_or_else(|error| panic!("cannot create {}: {error}", dir.display()));
        let certificate = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        openssl(&[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "2",
            "-subj", &format!("/CN={name}"),
            "-keyout", &text(&key), "-out", &text(&certificate),
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        TestCa { dir: dir.to_path_buf(), certificate, key }
    }

    /// A certificate for `common_name`, valid for the `subject_alt_names`
    /// (`DNS:localhost`, `IP:127.0.0.1`; none for a client certificate).
    pub fn issue(&self, file_name: &str, common_name: &str, subject_alt_names: &[&str]) -> Issued {
        let key = self.dir.join(format!("{file_name}.key"));
        let request = self.dir.join(format!("{file_name}.csr"));
        let certificate = self.dir.join(format!("{file_name}.crt"));
        let extensions = self.dir.join(format!("{file_name}.ext"));
        openssl(&[
            "req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-subj", &format!("/CN={common_name}"),
            "-keyout", &text(&key), "-out", &text(&request),
        ]);
        let mut ext = String::from("basicConstraints=CA:FALSE\n");
        if !subject_alt_names.is_empty() {
            ext.push_str(&format!("subjectAltName={}\n", subject_alt_names.join(",")));
        }
        std::fs::write(&extensions, ext).unwrap_or_else(|error| panic!("cannot write {}: {error}", extensions.display()));
        openssl(&[
            "x509", "-req", "-in", &text(&request), "-CA", &text(&self.certificate), "-CAkey", &text(&self.key),
            "-CAcreateserial", "-days", "2", "-sha256", "-extfile", &text(&extensions), "-out", &text(&certificate),
        ]);
        set_private(&key);
        Issued { certificate, key }
    }
}

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Keys must not be readable by others: PostgreSQL and libpq refuse them otherwise.
pub fn set_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .unwrap_or_else(|error| panic!("cannot chmod {}: {error}", path.display()));
}

fn openssl(args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run openssl ({error}): install it (apt-get install openssl)"));
    assert!(
        output.status.success(),
        "openssl {} failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}
