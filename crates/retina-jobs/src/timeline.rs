//! The run as a Gantt chart in SVG: one row per task, one bar per attempt
//! (committed green, aborted by a conflict red, failed grey), arrivals marked,
//! re-plans as dashed lines.

use std::fmt::Write as _;

use crate::report::{AttemptOutcome, RunReport};

const ROW: f64 = 26.0;
const LABEL: f64 = 260.0;
const PLOT: f64 = 760.0;
const TOP: f64 = 48.0;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The SVG document of `report`.
pub fn svg(report: &RunReport) -> String {
    let span = report.tasks.iter().flat_map(|t| t.attempt_log.iter().map(|a| a.end_s)).fold(report.makespan_s, f64::max).max(0.001);
    let x = |s: f64| LABEL + s / span * PLOT;
    // Below the rows: tick labels, the axis title, then the legend.
    let height = TOP + ROW * report.tasks.len() as f64 + 76.0;
    let width = LABEL + PLOT + 30.0;
    let mut out = String::new();
    let _ = writeln!(out, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#);
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">schedule {}: makespan {:.2} s, {} aborted attempts{}, {:.2} task-s wasted, {} re-plans</text>"#,
        report.schedule.name(),
        report.makespan_s,
        report.aborted_attempts,
        match report.undone_commits {
            0 => String::new(),
            1 => " (1 commit undone)".to_string(),
            n => format!(" ({n} commits undone)"),
        },
        report.wasted_task_s,
        report.replans
    );
    // Row stripes first, so that grid and re-plan lines run over them.
    for row in (1..report.tasks.len()).step_by(2) {
        let _ = writeln!(out, r##"<rect x="0" y="{}" width="{width}" height="{ROW}" fill="#f7f7f7"/>"##, TOP + ROW * row as f64);
    }
    // Time axis: about eight ticks at a round step.
    let raw_step = span / 8.0;
    let magnitude = 10f64.powf(raw_step.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= raw_step).unwrap_or(raw_step);
    let bottom = TOP + ROW * report.tasks.len() as f64;
    let mut tick = 0.0;
    while tick <= span + 1e-9 {
        let _ = writeln!(out, r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{bottom}" stroke="#e4e4e4"/>"##, x(tick));
        let _ = writeln!(out, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#, x(tick), bottom + 16.0, format_seconds(tick, step));
        tick += step;
    }
    let _ = writeln!(out, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds since the run started</text>"#, LABEL + PLOT / 2.0, bottom + 34.0);
    for replan in &report.replan_log {
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{bottom}" stroke="#7a4fbf" stroke-dasharray="4 3"><title>re-plan at {2:.2} s: {3}</title></line>"##,
            x(replan.at_s),
            TOP - 6.0,
            replan.at_s,
            escape(&replan.reason)
        );
    }
    for (row, task) in report.tasks.iter().enumerate() {
        let y = TOP + ROW * row as f64;
        let _ = writeln!(out, r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#, LABEL - 8.0, y + ROW * 0.65, escape(&task.task));
        let _ = writeln!(out, r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="#555"><title>arrived at {:.2} s</title></circle>"##, x(task.arrived_s), y + ROW / 2.0, task.arrived_s);
        for (n, attempt) in task.attempt_log.iter().enumerate() {
            let (fill, what) = match &attempt.outcome {
                AttemptOutcome::Committed => ("#3c9a5f", "committed".to_string()),
                AttemptOutcome::Conflict { kind, statement } => ("#d64545", format!("aborted: {kind} at statement {statement}")),
                AttemptOutcome::Failed { error } => ("#8a8a8a", format!("failed: {error}")),
            };
            let what = match attempt.undone_commits {
                0 => what,
                1 => format!("{what}; its earlier commit undone"),
                n => format!("{what}; its {n} earlier commits undone"),
            };
            let (x0, x1) = (x(attempt.start_s), x(attempt.end_s));
            let bar = (x1 - x0).max(1.5);
            // A white edge keeps back-to-back attempts (an abort, then its retry) apart.
            let _ = writeln!(
                out,
                r#"<rect x="{x0:.1}" y="{:.1}" width="{bar:.1}" height="{:.1}" fill="{fill}" stroke="white" stroke-width="1" rx="2"><title>{} attempt {}: {:.2}–{:.2} s, {}</title></rect>"#,
                y + 5.0,
                ROW - 10.0,
                escape(&task.task),
                n + 1,
                attempt.start_s,
                attempt.end_s,
                escape(&what)
            );
            // An aborted attempt wide enough says why on the bar itself.
            if let AttemptOutcome::Conflict { kind, statement } = &attempt.outcome {
                let long = format!("{kind:?} at statement {statement}");
                let short = format!("{kind:?}");
                if let Some(label) = [long, short].into_iter().find(|l| bar > l.len() as f64 * 6.2 + 8.0) {
                    let _ = writeln!(out, r#"<text x="{:.1}" y="{:.1}" fill="white" font-size="11" pointer-events="none">{}</text>"#, x0 + 4.0, y + ROW * 0.62, escape(&label));
                }
            }
        }
    }
    let legend_y = height - 10.0;
    for (i, (fill, label)) in [("#3c9a5f", "committed"), ("#d64545", "aborted by a conflict"), ("#8a8a8a", "failed"), ("#7a4fbf", "re-plan")].iter().enumerate() {
        let lx = 10.0 + i as f64 * 170.0;
        let _ = writeln!(out, r#"<rect x="{lx}" y="{:.1}" width="12" height="12" fill="{fill}"/><text x="{:.1}" y="{legend_y}">{label}</text>"#, legend_y - 10.0, lx + 16.0);
    }
    out.push_str("</svg>\n");
    out
}

fn format_seconds(value: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{value:.0}")
    } else if step >= 0.1 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}
