//! Which source position each source has reached in what is visible: the position a
//! checkpoint persists and a source may be told to discard up to.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::types::Ts;

/// The position (LSN, stream sequence, file offset, ...) of one source transaction
/// and its mirror ts. The position is opaque to the engine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcePosition {
    pub source: String,
    pub ts: Ts,
    pub position: String,
}

/// Per source, the submitted transactions' positions in ts order.
///
/// Invariants: `record` is called in ts order (under the engine's submission lock),
/// so each queue is sorted by ts; `trim(c)` keeps the newest entry at or below `c`,
/// so a later query for any ts at or above `c` still finds its answer.
#[derive(Default)]
pub(crate) struct SourceProgress {
    sources: Mutex<HashMap<String, VecDeque<(Ts, String)>>>,
}

impl SourceProgress {
    /// Progress that starts from recovered positions.
    pub(crate) fn restored(positions: &[SourcePosition]) -> Self {
        let sources = positions.iter().map(|p| (p.source.clone(), VecDeque::from([(p.ts, p.position.clone())]))).collect();
        Self { sources: Mutex::new(sources) }
    }

    pub(crate) fn record(&self, source: &str, ts: Ts, position: String) {
        let mut sources = self.sources.lock();
        match sources.get_mut(source) {
            Some(queue) => queue.push_back((ts, position)),
            None => {
                sources.insert(source.to_string(), VecDeque::from([(ts, position)]));
            }
        }
    }

    /// For every source, its newest transaction with a ts at or below `ts`.
    pub(crate) fn at(&self, ts: Ts) -> Vec<SourcePosition> {
        let sources = self.sources.lock();
        let mut out: Vec<SourcePosition> = sources
            .iter()
            .filter_map(|(source, queue)| {
                let index = queue.partition_point(|(t, _)| *t <= ts).checked_sub(1)?;
                let (ts, position) = &queue[index];
                Some(SourcePosition { source: source.clone(), ts: *ts, position: position.clone() })
            })
            .collect();
        out.sort_by(|a, b| a.source.cmp(&b.source));
        out
    }

    /// Forgets entries no query at or above `ts` needs.
    pub(crate) fn trim(&self, ts: Ts) {
        for queue in self.sources.lock().values_mut() {
            let keep_from = queue.partition_point(|(t, _)| *t <= ts).saturating_sub(1);
            queue.drain(..keep_from);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_at_a_ts_and_trimming() {
        let progress = SourceProgress::default();
        progress.record("file:a", Ts(1), "line 1".into());
        progress.record("file:b", Ts(2), "line 7".into());
        progress.record("file:a", Ts(3), "line 2".into());
        assert!(progress.at(Ts(0)).is_empty());
        let at_2 = progress.at(Ts(2));
        assert_eq!(at_2.len(), 2);
        assert_eq!((at_2[0].position.as_str(), at_2[1].position.as_str()), ("line 1", "line 7"));
        assert_eq!(progress.at(Ts(9))[0].position, "line 2");
        progress.trim(Ts(3));
        assert_eq!(progress.at(Ts(3))[0].position, "line 2");
        assert_eq!(progress.at(Ts(3))[1].position, "line 7", "the newest entry at or below survives trimming");
        let restored = SourceProgress::restored(&progress.at(Ts(3)));
        assert_eq!(restored.at(Ts(100)), progress.at(Ts(3)));
    }
}
