//! Parquet's RLE / bit-packed hybrid encoding, decoded: the definition levels and
//! dictionary indices of data pages read by [`crate::kept_decode`]. parquet-rs has a
//! decoder but exports it only behind its `experimental` feature (no stability
//! promise), and no other crate decodes this format, so the scan carries its own.
//!
//! A stream is a sequence of runs, each led by a ULEB128 header: an odd header is
//! `header >> 1` groups of 8 bit-packed values (`bit_width` bytes a group, least
//! significant bit first), an even one repeats one value (`ceil(bit_width / 8)` bytes,
//! little-endian) `header >> 1` times.

use std::fmt;

/// A stream that ended early or names a bit width over 32.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HybridError(String);

impl fmt::Display for HybridError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HybridError {}

/// Appends `count` values of `bit_width` bits decoded from `data` to `out`.
pub(crate) fn decode(data: &[u8], bit_width: u8, count: usize, out: &mut Vec<u32>) -> Result<(), HybridError> {
    if bit_width > 32 {
        return Err(HybridError(format!("bit width {bit_width} is over 32")));
    }
    let width = usize::from(bit_width);
    let target = out.len() + count;
    out.reserve(count);
    let mut at = 0;
    while out.len() < target {
        let header = read_uleb128(data, &mut at)?;
        let wanted = target - out.len();
        if header & 1 == 1 {
            let groups = usize::try_from(header >> 1).map_err(|_| HybridError("bit-packed run too long".into()))?;
            let bytes = groups.saturating_mul(width);
            // A writer may leave out the padding bytes of a stream's last group.
            let available = bytes.min(data.len() - at);
            let values = if width == 0 { groups.saturating_mul(8) } else { available * 8 / width };
            if values == 0 {
                return Err(HybridError(format!("bit-packed run at byte {at} holds no values")));
            }
            unpack(&data[at..at + available], width, values.min(wanted), out);
            at += available;
        } else {
            let run = usize::try_from(header >> 1).map_err(|_| HybridError("run too long".into()))?;
            let value_bytes = width.div_ceil(8);
            let bytes = data
                .get(at..at + value_bytes)
                .ok_or_else(|| HybridError(format!("a repeated value at byte {at} runs past the stream's {} bytes", data.len())))?;
            let mut le = [0u8; 4];
            le[..value_bytes].copy_from_slice(bytes);
            at += value_bytes;
            if run == 0 {
                return Err(HybridError(format!("an empty run at byte {at}")));
            }
            out.resize(out.len() + run.min(wanted), u32::from_le_bytes(le));
        }
    }
    Ok(())
}

fn read_uleb128(data: &[u8], at: &mut usize) -> Result<u64, HybridError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *data.get(*at).ok_or_else(|| HybridError(format!("the stream ends inside a run header at byte {at}")))?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(HybridError(format!("a run header longer than 10 bytes before byte {at}")))
}

/// Appends the first `count` values bit-packed in `packed`; `packed` holds at least
/// `count * width` bits.
fn unpack(packed: &[u8], width: usize, count: usize, out: &mut Vec<u32>) {
    if width == 0 {
        out.resize(out.len() + count, 0);
        return;
    }
    let mask = if width == 32 { u32::MAX } else { (1u32 << width) - 1 };
    let full_groups = count / 8;
    // A group of 8 values is `width` bytes: one load for widths up to 16, with the
    // width a constant so the load and shifts compile to straight-line code (a
    // run-time width cost a `memcpy` call per group).
    match width {
        1 => unpack_groups::<1>(packed, full_groups, out),
        2 => unpack_groups::<2>(packed, full_groups, out),
        3 => unpack_groups::<3>(packed, full_groups, out),
        4 => unpack_groups::<4>(packed, full_groups, out),
        5 => unpack_groups::<5>(packed, full_groups, out),
        6 => unpack_groups::<6>(packed, full_groups, out),
        7 => unpack_groups::<7>(packed, full_groups, out),
        8 => unpack_groups::<8>(packed, full_groups, out),
        9 => unpack_groups::<9>(packed, full_groups, out),
        10 => unpack_groups::<10>(packed, full_groups, out),
        11 => unpack_groups::<11>(packed, full_groups, out),
        12 => unpack_groups::<12>(packed, full_groups, out),
        13 => unpack_groups::<13>(packed, full_groups, out),
        14 => unpack_groups::<14>(packed, full_groups, out),
        15 => unpack_groups::<15>(packed, full_groups, out),
        16 => unpack_groups::<16>(packed, full_groups, out),
        _ => out.extend((0..full_groups * 8).map(|index| value_at(packed, width, index) & mask)),
    }
    out.extend((full_groups * 8..count).map(|index| value_at(packed, width, index) & mask));
}

/// Appends the first `groups` groups of 8 values of `WIDTH` (1 to 16) bits.
fn unpack_groups<const WIDTH: usize>(packed: &[u8], groups: usize, out: &mut Vec<u32>) {
    let mask = (1u32 << WIDTH) - 1;
    for group in packed.chunks_exact(WIDTH).take(groups) {
        let mut le = [0u8; 16];
        le[..WIDTH].copy_from_slice(group);
        // Up to 8 bits a value, a group fits a u64 (cheaper shifts than a u128).
        let values: [u32; 8] = if WIDTH <= 8 {
            let word = u64::from_le_bytes([le[0], le[1], le[2], le[3], le[4], le[5], le[6], le[7]]);
            std::array::from_fn(|k| (word >> (k * WIDTH)) as u32 & mask)
        } else {
            let word = u128::from_le_bytes(le);
            std::array::from_fn(|k| (word >> (k * WIDTH)) as u32 & mask)
        };
        out.extend_from_slice(&values);
    }
}

/// Value `index` of a bit-packed sequence (unmasked).
fn value_at(packed: &[u8], width: usize, index: usize) -> u32 {
    let bit = index * width;
    let mut le = [0u8; 8];
    let start = bit / 8;
    let end = (start + 8).min(packed.len());
    le[..end - start].copy_from_slice(&packed[start..end]);
    (u64::from_le_bytes(le) >> (bit % 8)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A bit-packed run of `values` (padded to whole groups), as a writer lays it out.
    fn bit_packed(values: &[u32], width: usize) -> Vec<u8> {
        let groups = values.len().div_ceil(8);
        let mut out = vec![(groups as u8) << 1 | 1];
        let mut bits = vec![0u8; groups * width];
        for (index, &value) in values.iter().enumerate() {
            for bit in 0..width {
                if value >> bit & 1 == 1 {
                    let at = index * width + bit;
                    bits[at / 8] |= 1 << (at % 8);
                }
            }
        }
        out.extend(bits);
        out
    }

    /// `times` below 64, so its header is one byte.
    fn repeated(value: u32, times: u8, width: usize) -> Vec<u8> {
        assert!(times < 64);
        let mut out = vec![times << 1];
        out.extend(&value.to_le_bytes()[..width.div_ceil(8)]);
        out
    }

    proptest! {
        #[test]
        fn bit_packed_runs_read_back(width in 0usize..=32, raw in proptest::collection::vec(any::<u32>(), 1..100)) {
            let mask = if width == 32 { u32::MAX } else { (1u32 << width) - 1 };
            let values: Vec<u32> = raw.iter().map(|v| v & mask).collect();
            // A bit-packed run's padding is values too, so it ends the stream.
            let mut stream = repeated(values[0], 3, width);
            stream.extend(bit_packed(&values, width));
            let mut out = Vec::new();
            decode(&stream, width as u8, values.len() + 3, &mut out).expect("decodes");
            let mut expected = vec![values[0]; 3];
            expected.extend(&values);
            prop_assert_eq!(out, expected);
        }
    }

    #[test]
    fn a_run_past_the_count_is_cut() {
        let mut out = vec![9];
        decode(&repeated(5, 60, 3), 3, 4, &mut out).expect("decodes");
        assert_eq!(out, [9, 5, 5, 5, 5]);
    }

    #[test]
    fn truncated_streams_and_wide_values_are_errors() {
        let mut out = Vec::new();
        let error = decode(&repeated(5, 10, 3), 3, 11, &mut out).expect_err("ends early");
        assert!(error.to_string().contains("ends inside a run header"), "{error}");
        assert!(decode(&[4], 9, 2, &mut out).expect_err("value cut").to_string().contains("runs past"));
        assert!(decode(&[], 33, 1, &mut out).expect_err("too wide").to_string().contains("over 32"));
        assert!(decode(&[0x80; 12], 1, 1, &mut out).expect_err("header").to_string().contains("longer than 10"));
    }
}
