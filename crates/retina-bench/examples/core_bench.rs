//! Issue 2's whole-system figures without building the SQL binary: the same code
//! `retina bench replay|scan` runs, with the same allocator (mimalloc), printing the
//! same JSON object.
//!
//! `cargo run --release -p retina-bench --example core_bench -- replay|scan`

use retina_bench::{replay, scan};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let which = std::env::args().nth(1).unwrap_or_else(|| "replay".into());
    let dir = tempfile::tempdir()?;
    let mut quiet = |_: &str, _: u64, _: u64| {};
    let json = match which.as_str() {
        "replay" => serde_json::to_string(&replay::run(&replay::ReplayBenchConfig::default(), dir.path(), &mut quiet)?)?,
        "scan" => serde_json::to_string(&scan::run(&scan::ScanBenchConfig::default(), dir.path(), &mut quiet)?)?,
        other => return Err(format!("unknown benchmark {other:?}: expected replay or scan").into()),
    };
    println!("{json}");
    Ok(())
}
