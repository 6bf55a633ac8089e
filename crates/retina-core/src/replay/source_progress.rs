//! Which source position each source has reached in what is visible: the position a
//! checkpoint may persist and a source may be told to discard up to.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::types::Ts;

/// The position (LSN, stream sequence, file offset, ...) of the newest transaction of
/// one source that is visible, i.e. below HWM. Opaque to the engine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcePosition {
    pub source: String,
    pub ts: Ts,
    pub position: String,
}

#[derive(Default)]
struct SourceState {
    /// Submitted, maybe not yet visible, in ts order.
    pending: VecDeque<(Ts, String)>,
    visible: Option<(Ts, String)>,
}

/// Invariant: `record` is called in ts order (under the engine's submission lock), so
/// every source's pending queue is sorted and the visible prefix is a queue prefix.
#[derive(Default)]
pub(crate) struct SourceProgress {
    sources: Mutex<HashMap<String, SourceState>>,
}

impl SourceProgress {
    pub(crate) fn record(&self, source: &str, ts: Ts, position: String) {
        let mut sources = self.sources.lock();
        let state = match sources.get_mut(source) {
            Some(state) => state,
            None => sources.entry(source.to_string()).or_default(),
        };
        state.pending.push_back((ts, position));
    }

    /// Positions of the newest visible transaction of every source, given HWM.
    pub(crate) fn visible(&self, hwm: Ts) -> Vec<SourcePosition> {
        let mut sources = self.sources.lock();
        let mut out = Vec::with_capacity(sources.len());
        for (source, state) in sources.iter_mut() {
            while state.pending.front().is_some_and(|(ts, _)| *ts < hwm) {
                state.visible = state.pending.pop_front();
            }
            if let Some((ts, position)) = &state.visible {
                out.push(SourcePosition { source: source.clone(), ts: *ts, position: position.clone() });
            }
        }
        out.sort_by(|a, b| a.source.cmp(&b.source));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_positions_below_hwm_are_reported() {
        let progress = SourceProgress::default();
        progress.record("file:a", Ts(1), "line 1".into());
        progress.record("file:b", Ts(2), "line 7".into());
        progress.record("file:a", Ts(3), "line 2".into());
        assert!(progress.visible(Ts(1)).is_empty());
        let at_3 = progress.visible(Ts(3));
        assert_eq!(at_3.len(), 2);
        assert_eq!(at_3[0].position, "line 1");
        assert_eq!(at_3[1].position, "line 7");
        assert_eq!(progress.visible(Ts(10))[0].position, "line 2");
        assert_eq!(progress.visible(Ts(4))[0].ts, Ts(3), "stays at the newest visible");
    }
}
