//! Decoder cost per line, without the rest of the pipeline: reads the first N lines of
//! a Debezium JSON file into memory and times `decode_line_with` over them, seven
//! times on one thread.
//!
//! `cargo run --release -p retina-cdc --example decode_lines -- FILE [N]`

use std::io::BufRead;
use std::time::Instant;

use retina_cdc::debezium::{decode_line_with, Message};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: decode_lines FILE [LINES]")?;
    let count: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(100_000);
    let file = std::io::BufReader::new(std::fs::File::open(&path)?);
    let lines = file.lines().take(count).collect::<Result<Vec<String>, _>>()?;
    for repetition in 0..7 {
        let start = Instant::now();
        let mut values = 0usize;
        for (number, line) in lines.iter().enumerate() {
            let message = decode_line_with(line, None).map_err(|e| format!("line {}: {e}", number + 1))?;
            if let Message::Change(event) = message {
                values += [&event.before, &event.after].iter().filter_map(|image| image.as_ref()).map(|image| image.fields.len()).sum::<usize>();
            }
        }
        let micros = start.elapsed().as_secs_f64() * 1e6 / lines.len().max(1) as f64;
        println!("repetition {repetition}: {micros:.3} µs a line ({} lines, {values} image values)", lines.len());
    }
    Ok(())
}
