//! Live progress on a terminal (hidden when stderr is not one).

use indicatif::{ProgressBar, ProgressStyle};

/// One bar that follows a benchmark's phases.
pub struct TerminalProgress {
    bar: ProgressBar,
    phase: String,
}

impl TerminalProgress {
    pub fn new() -> Self {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{msg:>32} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})")
                .expect("the template is valid")
                .progress_chars("=> "),
        );
        Self { bar, phase: String::new() }
    }

    pub fn update(&mut self, phase: &str, done: u64, total: u64) {
        if phase != self.phase {
            self.phase = phase.to_string();
            self.bar.set_message(self.phase.clone());
            self.bar.reset();
        }
        self.bar.set_length(total);
        self.bar.set_position(done);
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
