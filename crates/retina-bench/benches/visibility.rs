//! Micro-benchmarks of tile visibility: the per-query bitmap, the writer's append and
//! memory GC. Run with `cargo bench -p retina-bench --bench visibility`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use retina_core::visibility::{RgWriter, TileWriter, TILE_ROWS, TILE_WORDS};
use retina_core::Ts;

/// A tile with `pending` delete entries above its base (spread over the rows).
fn tile_with(pending: usize) -> TileWriter {
    let mut writer = TileWriter::new();
    for i in 0..pending {
        writer.delete(((i * 37) % TILE_ROWS) as u16, Ts(i as u64 + 1));
    }
    writer
}

fn bitmap_at(c: &mut Criterion) {
    let mut group = c.benchmark_group("tile_bitmap_at");
    for pending in [0usize, 8, 64, 512] {
        let writer = tile_with(pending);
        let tile = writer.tile();
        let mut out = [0u64; TILE_WORDS];
        group.bench_with_input(BenchmarkId::from_parameter(pending), &pending, |b, &pending| {
            b.iter(|| {
                tile.bitmap_at(Ts(pending as u64 + 1), &mut out);
                black_box(&out);
            })
        });
    }
    group.finish();
}

fn row_group_bitmap(c: &mut Criterion) {
    // A 64K-row row group (16 tiles) with 1% of its rows deleted above the base.
    let rows = 16 * TILE_ROWS;
    let mut writer = RgWriter::new(rows);
    for (i, offset) in (0..rows as u32).step_by(100).enumerate() {
        writer.delete(offset, Ts(i as u64 + 1));
    }
    let rg = writer.visibility();
    c.bench_function("row_group_bitmap_at_64k_rows_1pct", |b| b.iter(|| black_box(rg.bitmap_at(Ts(u64::from(u32::MAX)), rows))));
}

fn append_and_gc(c: &mut Criterion) {
    c.bench_function("tile_delete_append_4096", |b| {
        b.iter(|| black_box(tile_with(TILE_ROWS)));
    });
    c.bench_function("tile_gc_fold_4096", |b| {
        b.iter_batched(|| tile_with(TILE_ROWS), |writer| black_box(writer.tile().collect_garbage(Ts(TILE_ROWS as u64))), criterion::BatchSize::SmallInput);
    });
}

criterion_group!(benches, bitmap_at, row_group_bitmap, append_and_gc);
criterion_main!(benches);
