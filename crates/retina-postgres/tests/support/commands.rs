//! Finding the PostgreSQL server binaries and running them, as the `postgres` OS user
//! when the tests run as root (PostgreSQL refuses to run as root).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The three server programs the harness needs, from one installation.
#[derive(Debug, Clone)]
pub struct ServerBinaries {
    pub initdb: PathBuf,
    pub pg_ctl: PathBuf,
    pub bin_dir: PathBuf,
}

impl ServerBinaries {
    /// `initdb`, `pg_ctl` and `postgres` from the first `PATH` directory that has all
    /// three, else from the highest version under `/usr/lib/postgresql/*/bin` (where
    /// Debian puts them, off `PATH`). Panics with the install command if there are
    /// none: a missing server must fail the tests, not skip them silently.
    pub fn locate() -> ServerBinaries {
        let on_path = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
            .unwrap_or_default();
        if let Some(dir) = on_path.into_iter().find(|dir| has_server_binaries(dir)) {
            return ServerBinaries::in_dir(dir);
        }
        if let Some(dir) = highest_debian_installation() {
            return ServerBinaries::in_dir(dir);
        }
        panic!(
            "PostgreSQL server binaries (initdb, pg_ctl, postgres) are not installed: neither on PATH nor in \
             /usr/lib/postgresql/*/bin. Install them with `apt-get install -y postgresql` to run these tests."
        );
    }

    fn in_dir(dir: PathBuf) -> ServerBinaries {
        ServerBinaries { initdb: dir.join("initdb"), pg_ctl: dir.join("pg_ctl"), bin_dir: dir }
    }
}

fn has_server_binaries(dir: &Path) -> bool {
    ["initdb", "pg_ctl", "postgres"].iter().all(|name| dir.join(name).is_file())
}

/// `/usr/lib/postgresql/<version>/bin` with the highest numeric version that holds the
/// server binaries.
fn highest_debian_installation() -> Option<PathBuf> {
    let entries = std::fs::read_dir("/usr/lib/postgresql").ok()?;
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version: Vec<u32> = entry
                .file_name()
                .to_str()?
                .split('.')
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            let bin = entry.path().join("bin");
            has_server_binaries(&bin).then_some((version, bin))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, bin)| bin)
}

/// Whether this process runs as root (uid 0), read from `/proc/self/status` so the
/// tests need no libc binding.
pub fn running_as_root() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().next())
        .is_some_and(|real_uid| real_uid == "0")
}

/// Runs server programs, through `runuser -u postgres --` when we are root.
#[derive(Debug, Clone)]
pub struct Runner {
    as_postgres_user: bool,
    /// The working directory of every command: one the `postgres` user can enter
    /// (initdb and postgres complain if they cannot read the current directory).
    work_dir: PathBuf,
}

impl Runner {
    pub fn new(work_dir: &Path) -> Runner {
        Runner { as_postgres_user: running_as_root(), work_dir: work_dir.to_path_buf() }
    }

    pub fn as_postgres_user(&self) -> bool {
        self.as_postgres_user
    }

    /// Runs `program args..` to completion and returns its output (not checked).
    pub fn run(&self, program: &Path, args: &[&str]) -> Output {
        let mut command = if self.as_postgres_user {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        };
        command.args(args).current_dir(&self.work_dir);
        // Keep a developer's PG* environment (PGPORT, PGDATA, ...) out of the cluster.
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_some_and(|name| name.starts_with("PG")) {
                command.env_remove(name);
            }
        }
        command.output().unwrap_or_else(|error| panic!("cannot run {}: {error}", program.display()))
    }

    /// Runs the command and panics with its output (and `extra`, e.g. the server log)
    /// if it fails.
    pub fn run_checked(&self, program: &Path, args: &[&str], extra: impl FnOnce() -> String) -> Output {
        let output = self.run(program, args);
        if !output.status.success() {
            panic!(
                "{} {} failed ({}):\nstdout:\n{}\nstderr:\n{}\n{}",
                program.display(),
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
                extra()
            );
        }
        output
    }

    /// Makes `path` (recursively) owned by the `postgres` user when commands run as it.
    pub fn hand_over(&self, path: &Path) {
        if !self.as_postgres_user {
            return;
        }
        let output = Command::new("chown")
            .arg("-R")
            .arg("postgres:")
            .arg(path)
            .output()
            .unwrap_or_else(|error| panic!("cannot run chown: {error}"));
        assert!(
            output.status.success(),
            "chown -R postgres: {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
