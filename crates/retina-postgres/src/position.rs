//! The source position every mirror transaction of the PostgreSQL source records,
//! and what a restart reads back from it: `copy` while the initial copy runs,
//! `lsn=X` (the commit end LSN of the last applied source transaction) after, with
//! the marks of tables that joined the publication later ([`SyncMarks`], see
//! [`crate::table_sync`]) after a `;`.

use retina_core::{SourceChange, TableId};

use crate::initial_copy::COPY_POSITION;
use crate::lsn::Lsn;

/// The position text recorded with a streamed transaction.
pub fn lsn_position(lsn: Lsn) -> String {
    format!("lsn={lsn}")
}

/// Where a recorded position says to resume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResumePoint {
    /// The copy had not finished: copy again.
    Copy,
    /// Everything up to this commit end LSN is applied.
    Lsn(Lsn),
}

impl ResumePoint {
    pub fn parse(text: &str) -> Option<Self> {
        if text == COPY_POSITION {
            return Some(Self::Copy);
        }
        // Table-sync marks may follow (`;sync=…`, see `table_sync`).
        text.split(';').next()?.strip_prefix("lsn=")?.parse().ok().map(Self::Lsn)
    }
}

const COPYING: &str = "copying=";
const SYNC: &str = "sync=";
const PAUSED: &str = "paused=";

/// The table syncs a position records (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncMarks {
    /// `(table, C)`: changes of `table` in transactions ending at or before `C` are
    /// already in its copy.
    pub skips: Vec<(String, Lsn)>,
    /// A table whose copy was under way.
    pub copying: Option<String>,
    /// Tables paused after an error of theirs (`on_table_error=pause`): none of
    /// their changes apply until they are copied again (`resync=`).
    pub paused: Vec<String>,
}

impl SyncMarks {
    /// The marks after `lsn=X` in a recorded position.
    pub fn parse(position: &str) -> SyncMarks {
        let mut marks = SyncMarks::default();
        for part in position.split(';').skip(1) {
            if let Some(name) = part.strip_prefix(COPYING) {
                marks.copying = Some(unescape(name));
            } else if let Some(name) = part.strip_prefix(PAUSED) {
                marks.paused.push(unescape(name));
            } else if let Some((name, lsn)) = part.strip_prefix(SYNC).and_then(|rest| rest.rsplit_once('@')) {
                if let Ok(lsn) = lsn.parse() {
                    marks.skips.push((unescape(name), lsn));
                }
            }
        }
        marks
    }

    /// The position text for a transaction ending at `lsn`.
    pub fn position(&self, lsn: Lsn) -> String {
        let mut text = lsn_position(lsn);
        for (table, until) in &self.skips {
            text.push_str(&format!(";{SYNC}{}@{until}", escape(table)));
        }
        if let Some(table) = &self.copying {
            text.push_str(&format!(";{COPYING}{}", escape(table)));
        }
        for table in &self.paused {
            text.push_str(&format!(";{PAUSED}{}", escape(table)));
        }
        text
    }

    /// Drops from a transaction ending at `end_lsn` the changes its tables' copies
    /// already hold and those of paused tables, and forgets the syncs the stream has
    /// now passed.
    pub fn filter(&mut self, end_lsn: Lsn, changes: &mut Vec<SourceChange>, table_id: impl Fn(&str) -> Option<TableId>) {
        if self.skips.is_empty() && self.paused.is_empty() {
            return;
        }
        let covered: Vec<TableId> = self
            .skips
            .iter()
            .filter(|(_, until)| end_lsn <= *until)
            .map(|(table, _)| table)
            .chain(&self.paused)
            .filter_map(|table| table_id(table))
            .collect();
        if !covered.is_empty() {
            changes.retain(|change| !covered.contains(&change.table()));
        }
        self.skips.retain(|(_, until)| end_lsn <= *until);
    }
}

/// Table names may hold any character; the position's separators are escaped.
fn escape(name: &str) -> String {
    name.replace('%', "%25").replace(';', "%3B").replace('@', "%40")
}

fn unescape(name: &str) -> String {
    name.replace("%40", "@").replace("%3B", ";").replace("%25", "%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_through_the_position_text() {
        let marks = SyncMarks {
            skips: vec![("public.a;b@c%".into(), Lsn(0x1_0000_0010))],
            copying: Some("s.t".into()),
            paused: vec!["public.bad".into()],
        };
        let text = marks.position(Lsn(0x20));
        assert!(text.starts_with("lsn=0/20;"), "{text}");
        assert_eq!(SyncMarks::parse(&text), marks);
        assert_eq!(SyncMarks::parse("lsn=0/20"), SyncMarks::default());
    }

    #[test]
    fn changes_the_copy_holds_are_dropped_until_the_stream_passes_it() {
        let table = TableId(7);
        let other = TableId(8);
        let mut marks = SyncMarks { skips: vec![("public.u".into(), Lsn(100))], ..SyncMarks::default() };
        let lookup = |name: &str| (name == "public.u").then_some(table);
        let mut changes = vec![SourceChange::Truncate(table), SourceChange::Truncate(other)];
        marks.filter(Lsn(100), &mut changes, lookup);
        assert_eq!(changes.len(), 1, "the copy at 0/64 holds this transaction's change of u");
        assert_eq!(changes[0].table(), other);
        assert_eq!(marks.skips.len(), 1, "still at the copy's position");
        let mut changes = vec![SourceChange::Truncate(table)];
        marks.filter(Lsn(101), &mut changes, lookup);
        assert_eq!(changes.len(), 1, "after the copy's position every change applies");
        assert!(marks.skips.is_empty());
    }
}
