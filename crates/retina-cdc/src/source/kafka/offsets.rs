//! The Kafka source's position: for every partition it reads (data topics and the
//! transaction topic), the offset below which every record is applied, plus the
//! applied offsets above it (records of a transaction completed while an older one
//! in the same partition still waits).
//!
//! Kafka orders records only per partition, and transactions complete in the
//! transaction topic's order, not in any one partition's: a single number cannot say
//! where a restart resumes. This vector is recorded with every mirror transaction (so
//! each checkpoint holds it) and is what a restart seeks every partition to.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Where one partition resumes: `floor` is the first offset not known to be applied;
/// `applied_above` are offsets above it that are applied (skipped when read again).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionResume {
    pub floor: i64,
    pub applied_above: Vec<i64>,
}

/// A topic partition, `topic/partition` in text.
pub type TopicPartition = (String, i32);

/// The resume point of every partition, in the text recorded with each transaction:
/// `topic/partition=floor[+applied…]` joined by `,`. Kafka topic names are
/// `[A-Za-z0-9._-]`, so none of `/=+,` (nor a space, which ends a recorded
/// position's field) can appear in one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResumeOffsets(pub BTreeMap<TopicPartition, PartitionResume>);

impl ResumeOffsets {
    pub fn encode(&self) -> String {
        let mut out = String::new();
        for ((topic, partition), resume) in &self.0 {
            write_entry(&mut out, topic, *partition, resume.floor, resume.applied_above.iter().copied());
        }
        out
    }

    /// Parses [`Self::encode`]'s text; the error says which part is wrong.
    pub fn decode(text: &str) -> Result<Self, String> {
        let mut partitions = BTreeMap::new();
        for entry in text.split(',').filter(|e| !e.is_empty()) {
            let bad = || format!("bad partition offsets {entry:?} (expected topic/partition=offset[+offset…])");
            let (name, offsets) = entry.split_once('=').ok_or_else(bad)?;
            let (topic, partition) = name.rsplit_once('/').ok_or_else(bad)?;
            let partition: i32 = partition.parse().map_err(|_| bad())?;
            let mut numbers = offsets.split('+').map(|n| n.parse::<i64>().map_err(|_| bad()));
            let floor = numbers.next().ok_or_else(bad)??;
            let applied_above = numbers.collect::<Result<Vec<_>, _>>()?;
            if topic.is_empty() || applied_above.iter().any(|o| *o <= floor) {
                return Err(bad());
            }
            partitions.insert((topic.to_string(), partition), PartitionResume { floor, applied_above });
        }
        Ok(Self(partitions))
    }
}

/// What [`PartitionLedger::take`] says of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    New,
    /// A previous run applied it: skip it (it counts as finished).
    AppliedBefore,
    /// Read before in this run (a broker that answers a fetch with records it sent
    /// already): ignore it; its first copy is held or finished.
    Again,
}

/// Appends one partition's `topic/partition=floor[+applied…]` to `out` (with a `,`
/// before it unless it is the first).
pub fn write_entry(out: &mut String, topic: &str, partition: i32, floor: i64, applied_above: impl Iterator<Item = i64>) {
    // Once per partition and released transaction: itoa, not the formatting machinery.
    let mut number = itoa::Buffer::new();
    if !out.is_empty() {
        out.push(',');
    }
    out.push_str(topic);
    out.push('/');
    out.push_str(number.format(partition));
    out.push('=');
    out.push_str(number.format(floor));
    for offset in applied_above {
        out.push('+');
        out.push_str(number.format(offset));
    }
}

/// One partition's progress while the source runs. Every record taken in is either
/// held (its transaction is not complete) or finished (handed to the sink, or a
/// no-op such as a tombstone).
///
/// Invariants: every offset below `floor()` is finished. `window` holds, ascending,
/// the offsets from the lowest held one on that were held or finished, each marked
/// finished or not; its front is never finished (finished fronts are dropped), so
/// its finished entries are exactly the finished offsets above the lowest held one,
/// and it is empty when nothing is held. `held` counts its unfinished entries.
/// `skip` holds offsets a previous run applied that are at or after `next` (not read
/// again yet); records below `resumed_at` were applied before the restart (a fetch
/// may start earlier, at the start of the record batch holding it).
///
/// Records are taken in ascending offset order and a transaction's records finish
/// mostly in that order too, so the window is a queue: holding appends, finishing
/// marks, and the finished front is popped (ordered sets cost a tree walk and node
/// allocations per record, ~1% of a Kafka replay's source thread).
#[derive(Debug, Default)]
pub struct PartitionLedger {
    resumed_at: i64,
    next: i64,
    window: VecDeque<(i64, bool)>,
    held: usize,
    skip: BTreeSet<i64>,
}

impl PartitionLedger {
    /// A ledger resuming at `resume`.
    pub fn resuming(resume: &PartitionResume) -> Self {
        Self {
            resumed_at: resume.floor,
            next: resume.floor,
            skip: resume.applied_above.iter().copied().collect(),
            ..Self::default()
        }
    }

    /// The offset the next record is expected at.
    pub fn next(&self) -> i64 {
        self.next
    }

    /// A record at `offset` was read: is it new?
    pub fn take(&mut self, offset: i64) -> Taken {
        if offset < self.resumed_at {
            return Taken::AppliedBefore;
        }
        if offset < self.next && self.next > self.resumed_at {
            return Taken::Again;
        }
        self.next = offset + 1;
        if self.skip.remove(&offset) { Taken::AppliedBefore } else { Taken::New }
    }

    /// Holds a record just taken (new records come in ascending order).
    pub fn hold(&mut self, offset: i64) {
        match self.window.back() {
            Some(&(last, _)) if last >= offset => match self.window.binary_search_by_key(&offset, |(o, _)| *o) {
                Ok(_) => return, // held or finished already
                Err(at) => self.window.insert(at, (offset, false)),
            },
            _ => self.window.push_back((offset, false)),
        }
        self.held += 1;
    }

    /// A record that was taken (and perhaps held) is finished.
    pub fn finish(&mut self, offset: i64) {
        let Some(&(lowest, _)) = self.window.front() else { return }; // nothing held: nothing to remember
        if offset < lowest {
            return; // below the floor already
        }
        match self.window.binary_search_by_key(&offset, |(o, _)| *o) {
            Ok(at) => {
                if !std::mem::replace(&mut self.window[at].1, true) {
                    self.held -= 1;
                }
            }
            // Finished without being held (a tombstone, a record applied before):
            // remembered while something below it is held.
            Err(at) => self.window.insert(at, (offset, true)),
        }
        while self.window.front().is_some_and(|(_, finished)| *finished) {
            self.window.pop_front();
        }
    }

    pub fn held(&self) -> usize {
        self.held
    }

    /// The first offset not known to be finished.
    pub fn floor(&self) -> i64 {
        self.window.front().map_or(self.next, |(offset, _)| *offset)
    }

    /// Where a restart resumes if everything finished so far is applied.
    pub fn resume(&self) -> PartitionResume {
        PartitionResume { floor: self.floor(), applied_above: self.applied_above().collect() }
    }

    /// Finished offsets above the floor, ascending (the window's finished entries and
    /// `skip` never share an offset: a skipped one is removed from `skip` before it
    /// finishes).
    fn applied_above(&self) -> impl Iterator<Item = i64> + '_ {
        let floor = self.floor();
        let finished = self.window.iter().filter(|(_, finished)| *finished).map(|(offset, _)| *offset);
        let mut merged: Vec<i64> = finished.chain(self.skip.iter().copied().filter(|o| *o > floor)).collect();
        merged.sort_unstable();
        merged.into_iter()
    }

    /// Appends this partition's resume entry to `out` without building a
    /// [`PartitionResume`]: this runs once per released transaction.
    pub fn write_resume(&self, out: &mut String, topic: &str, partition: i32) {
        if self.window.len() == self.held && self.skip.is_empty() {
            write_entry(out, topic, partition, self.floor(), std::iter::empty());
        } else {
            write_entry(out, topic, partition, self.floor(), self.applied_above());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_offsets_round_trip_and_reject_garbage() {
        let mut offsets = ResumeOffsets::default();
        offsets.0.insert(("srv.public.stock".into(), 0), PartitionResume { floor: 17, applied_above: vec![19, 20] });
        offsets.0.insert(("srv.transaction".into(), 0), PartitionResume { floor: 4, applied_above: vec![] });
        let text = offsets.encode();
        assert_eq!(text, "srv.public.stock/0=17+19+20,srv.transaction/0=4");
        assert_eq!(ResumeOffsets::decode(&text), Ok(offsets));
        assert_eq!(ResumeOffsets::decode(""), Ok(ResumeOffsets::default()));
        for bad in ["t/0", "t=1", "t/x=1", "t/0=1+1", "t/0=a", "/0=1", "t/0=1+"] {
            assert!(ResumeOffsets::decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_floor_stays_below_held_records_and_remembers_what_finished_above() {
        let mut ledger = PartitionLedger::default();
        for offset in 0..5 {
            assert_eq!(ledger.take(offset), Taken::New);
            ledger.hold(offset);
        }
        assert_eq!(ledger.take(3), Taken::Again, "a record sent twice is taken once");
        ledger.finish(0);
        ledger.finish(2); // completed while 1 still waits
        assert_eq!(ledger.resume(), PartitionResume { floor: 1, applied_above: vec![2] });
        ledger.finish(1);
        assert_eq!(ledger.resume(), PartitionResume { floor: 3, applied_above: vec![] });
        ledger.finish(3);
        ledger.finish(4);
        assert_eq!(ledger.resume(), PartitionResume { floor: 5, applied_above: vec![] });
    }

    #[test]
    fn a_resumed_ledger_skips_what_the_previous_run_applied() {
        let mut ledger = PartitionLedger::resuming(&PartitionResume { floor: 10, applied_above: vec![12] });
        assert_eq!(ledger.take(8), Taken::AppliedBefore, "before the floor: the fetch started at its record batch's start");
        assert_eq!(ledger.take(10), Taken::New);
        ledger.hold(10);
        assert_eq!(ledger.take(11), Taken::New);
        ledger.hold(11);
        // Until it is read again, the skipped offset stays part of the position.
        assert_eq!(ledger.resume(), PartitionResume { floor: 10, applied_above: vec![12] });
        assert_eq!(ledger.take(12), Taken::AppliedBefore, "applied by the previous run");
        ledger.finish(12);
        assert_eq!(ledger.resume(), PartitionResume { floor: 10, applied_above: vec![12] });
        ledger.finish(10);
        ledger.finish(11);
        assert_eq!(ledger.resume(), PartitionResume { floor: 13, applied_above: vec![] });
    }

    /// The ledger as first written, with ordered sets: what the queue must agree with.
    #[derive(Default)]
    struct SetLedger {
        held: BTreeSet<i64>,
        applied_above: BTreeSet<i64>,
    }

    impl SetLedger {
        fn finish(&mut self, offset: i64) {
            self.held.remove(&offset);
            match self.held.first() {
                Some(&lowest) => {
                    if offset > lowest {
                        self.applied_above.insert(offset);
                    }
                    self.applied_above = self.applied_above.split_off(&lowest);
                }
                None => self.applied_above.clear(),
            }
        }
    }

    proptest::proptest! {
        /// Any order of holding, finishing at once and finishing held records later
        /// leaves the same floor, applied offsets and held count as ordered sets do.
        #[test]
        fn the_queue_ledger_agrees_with_ordered_sets(steps in proptest::collection::vec((0u8..4, 1i64..3, proptest::num::usize::ANY), 1..200)) {
            let mut ledger = PartitionLedger::default();
            let mut model = SetLedger::default();
            let mut next = 0i64; // offsets start at 1: 0 is the floor until one is taken
            for (action, gap, pick) in steps {
                match action {
                    // A new record, held (its transaction is not complete).
                    0 | 1 => {
                        next += gap;
                        proptest::prop_assert_eq!(ledger.take(next), Taken::New);
                        ledger.hold(next);
                        model.held.insert(next);
                    }
                    // A new record finished at once (a tombstone).
                    2 => {
                        next += gap;
                        proptest::prop_assert_eq!(ledger.take(next), Taken::New);
                        ledger.finish(next);
                        model.finish(next);
                    }
                    // A held record finishes (any of them: transactions complete out of order).
                    _ => {
                        if let Some(&offset) = model.held.iter().nth(pick % model.held.len().max(1)) {
                            ledger.finish(offset);
                            model.finish(offset);
                        }
                    }
                }
                let floor = model.held.first().copied().unwrap_or(if next == 0 { 0 } else { next + 1 });
                let expected = PartitionResume { floor, applied_above: model.applied_above.iter().copied().collect() };
                proptest::prop_assert_eq!(ledger.resume(), expected.clone());
                proptest::prop_assert_eq!(ledger.held(), model.held.len());
                let mut written = String::new();
                ledger.write_resume(&mut written, "t", 0);
                let mut reference = String::new();
                write_entry(&mut reference, "t", 0, expected.floor, expected.applied_above.into_iter());
                proptest::prop_assert_eq!(written, reference);
            }
        }
    }
}
