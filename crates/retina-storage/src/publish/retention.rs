//! How long published versions stay readable: every file a version references
//! (data files, checkpoint segments, DV files) stays in storage until the
//! retention has passed since the last version that listed it, even when Retina
//! itself no longer needs it (storage GC replaced it, its rows were flushed).
//!
//! A deletion asked for meanwhile is deferred and done once the file expires;
//! both are saved with the publication state, so a restart keeps them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Retention {
    /// Lake-relative paths an older published version references, with the time
    /// (ms since the epoch) until which they must stay.
    kept_until: BTreeMap<String, i64>,
    /// Kept paths whose deletion was asked for: deleted when they expire.
    deferred: BTreeSet<String>,
}

impl Retention {
    /// `path` left the published set now: older versions need it until `until`.
    /// `owned`: publication's own file (a DV file), deleted when it expires.
    pub fn keep(&mut self, path: String, until: i64, owned: bool) {
        let entry = self.kept_until.entry(path.clone()).or_insert(until);
        *entry = (*entry).max(until);
        if owned {
            self.deferred.insert(path);
        }
    }

    /// Whether a version still within retention references `path`.
    pub fn is_kept(&self, path: &str, now_ms: i64) -> bool {
        self.kept_until.get(path).is_some_and(|&until| until > now_ms)
    }

    /// Asks to delete a path once it expires (a path the latest version lists
    /// expires once a newer version leaves it out).
    pub fn defer(&mut self, path: &str) {
        self.deferred.insert(path.to_string());
    }

    /// Forgets expired paths; returns those whose deletion is due now (never one
    /// the latest version still `listed`).
    pub fn expire(&mut self, now_ms: i64, listed: impl Fn(&str) -> bool) -> Vec<String> {
        let expired: Vec<String> = self.kept_until.iter().filter(|(_, &until)| until <= now_ms).map(|(p, _)| p.clone()).collect();
        let mut due = Vec::new();
        for path in expired {
            self.kept_until.remove(&path);
            if self.deferred.remove(&path) {
                due.push(path);
            }
        }
        // A deferred path neither kept nor listed (a deletion asked for after its
        // version expired, or with its entry lost) is due too.
        let orphans: Vec<String> =
            self.deferred.iter().filter(|p| !self.kept_until.contains_key(*p) && !listed(p)).cloned().collect();
        for path in orphans {
            self.deferred.remove(&path);
            due.push(path);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_paths_are_deleted_only_when_asked_and_expired() {
        let mut retention = Retention::default();
        retention.keep("a".into(), 100, false);
        retention.keep("dv".into(), 100, true);
        retention.keep("a".into(), 50, false); // an earlier expiry does not shorten it
        assert!(retention.is_kept("a", 99) && !retention.is_kept("a", 100) && !retention.is_kept("b", 0));
        let unlisted = |_: &str| false;
        assert!(retention.expire(99, unlisted).is_empty());
        retention.defer("a");
        assert_eq!(retention.expire(100, unlisted), vec!["a".to_string(), "dv".to_string()]);
        assert!(retention.expire(1_000, unlisted).is_empty());
        retention.keep("c".into(), 10, false);
        assert_eq!(retention.expire(20, unlisted), Vec::<String>::new(), "never asked: not deleted by publication");
        retention.defer("current");
        assert!(retention.expire(30, |p| p == "current").is_empty(), "the latest version lists it");
        assert_eq!(retention.expire(30, unlisted), vec!["current".to_string()]);
    }
}
