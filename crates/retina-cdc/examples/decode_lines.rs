//! Decoder cost per line, without the rest of the pipeline: reads the first N lines of
//! a Debezium JSON file into memory and times their decoding, seven times on one
//! thread. With `--elided`, the lines are first read as the file source reads them
//! once their tables are bound (known schemas left out, see `debezium::elision`), and
//! `decode_elided` is timed instead of `decode_line_with`.
//!
//! `cargo run --release -p retina-cdc --example decode_lines -- FILE [N] [--elided]`

use std::io::BufRead;
use std::time::Instant;

use retina_cdc::debezium::{decode_elided, decode_line_with, KnownSchemas, Line, Message, SchemaElider};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let elided = args.iter().any(|a| a == "--elided");
    let mut positional = args.iter().filter(|a| !a.starts_with("--"));
    let path = positional.next().ok_or("usage: decode_lines FILE [LINES] [--elided]")?;
    let count: usize = positional.next().map(|n| n.parse()).transpose()?.unwrap_or(100_000);
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let texts = file.lines().take(count).collect::<Result<Vec<String>, _>>()?;
    let lines: Vec<Line> = if elided { read_elided(&texts)? } else { texts.into_iter().map(Line::plain).collect() };
    let left_out = lines.iter().filter(|line| !line.elided().is_empty()).count();
    for repetition in 0..7 {
        let start = Instant::now();
        let mut values = 0usize;
        for (number, line) in lines.iter().enumerate() {
            let decoded = if elided { decode_elided(line, None).ok_or("a line the fast path declines")? } else { decode_line_with(line.text(), None) };
            let message = decoded.map_err(|e| format!("line {}: {e}", number + 1))?;
            if let Message::Change(event) = message {
                values += [&event.before, &event.after].iter().filter_map(|image| image.as_ref()).map(|image| image.fields.len()).sum::<usize>();
            }
        }
        let micros = start.elapsed().as_secs_f64() * 1e6 / lines.len().max(1) as f64;
        println!("repetition {repetition}: {micros:.3} µs a line ({} lines, {left_out} with schemas left out, {values} image values)", lines.len());
    }
    Ok(())
}

/// The lines as the file source reads them once every table is bound: the schemas of
/// each line's event are interned (as binding its table does), then it is read.
fn read_elided(texts: &[String]) -> Result<Vec<Line>, Box<dyn std::error::Error>> {
    let known = KnownSchemas::default();
    for text in texts {
        if let Ok(Message::Change(event)) = decode_line_with(text, None) {
            event.schema.into_iter().chain(event.key_schema).for_each(|schema| {
                known.intern(schema);
            });
        }
    }
    let mut elider = SchemaElider::new(known);
    let mut lines = Vec::with_capacity(texts.len());
    for text in texts {
        let mut line = Line::default();
        elider.fill(&mut line, text.as_bytes()).map_err(|e| format!("not UTF-8 at byte {}", e.valid_up_to))?;
        lines.push(line);
    }
    Ok(lines)
}
