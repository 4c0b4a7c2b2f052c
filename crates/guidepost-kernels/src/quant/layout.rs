//! Where things sit in a packed tile: sixteen weight rows by 256 values of k, the rows
//! interleaved four values at a time so that one 64-byte load holds four values of each of the
//! sixteen rows (the operand of one AVX-512 VNNI instruction), and the scales beside them in
//! their stored precision (no wider copy: a tile is read whole on every product, and a token's
//! pass is bounded by the bytes it reads).
//!
//! Q4_K (2,368 bytes, 4.6 bits a value): `QS` holds 32 groups of 8 values, each as 16 rows by
//! 4 bytes, byte `j` = value `8g + j` in its low nibble and value `8g + 4 + j` in its high one;
//! `SC` and `MN` the 6-bit scale and minimum of each of the 8 sub-blocks of 32, per row (a
//! byte each); `D` and `DMIN` each row's two half-precision factors.
//!
//! Q6_K (3,360 bytes, 6.6 bits a value): `LO` the low four bits of every value, laid out as
//! Q4_K's `QS`; `HI` the top two bits, 16 groups of 16 values as 16 rows by 4 bytes, byte `j`
//! holding values `16h + j`, `+ 4`, `+ 8`, `+ 12` two bits each from the lowest; `SC` the
//! signed 8-bit scale of each of the 16 sub-blocks of 16, per row; `D` each row's factor.

#[cfg(test)]
use half::f16;

use super::QK;

pub(super) const Q4_QS: usize = 0;
pub(super) const Q4_SC: usize = 2048;
pub(super) const Q4_MN: usize = Q4_SC + 128;
pub(super) const Q4_D: usize = Q4_MN + 128;
pub(super) const Q4_DMIN: usize = Q4_D + 32;
pub(super) const Q4_BYTES: usize = Q4_DMIN + 32;

pub(super) const Q6_LO: usize = 0;
pub(super) const Q6_HI: usize = 2048;
pub(super) const Q6_SC: usize = Q6_HI + 1024;
pub(super) const Q6_D: usize = Q6_SC + 256;
pub(super) const Q6_BYTES: usize = Q6_D + 32;

/// Bytes of a Q4_K block in a GGUF file: `d`, `dmin` (f16), 12 bytes of packed 6-bit scales
/// and minimums, 128 bytes of nibbles.
pub(super) const Q4_BLOCK: usize = 144;
/// Bytes of a Q6_K block: 128 bytes of low nibbles, 64 of high bits, 16 signed scales, `d`.
pub(super) const Q6_BLOCK: usize = 210;

/// The scale and minimum of sub-block `j` (of 8) of a Q4_K block's packed 6-bit fields.
fn scale_min(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// The 256 four-bit values of a Q4_K block, in order along k.
fn q4k_values(block: &[u8]) -> [u8; QK] {
    let qs = &block[16..Q4_BLOCK];
    let mut values = [0u8; QK];
    for c in 0..4 {
        for j in 0..32 {
            values[64 * c + j] = qs[32 * c + j] & 0x0F;
            values[64 * c + 32 + j] = qs[32 * c + j] >> 4;
        }
    }
    values
}

/// The 256 six-bit values (stored 32 up) of a Q6_K block, in order along k.
fn q6k_values(block: &[u8]) -> [u8; QK] {
    let (ql, qh) = (&block[..128], &block[128..192]);
    let mut values = [0u8; QK];
    for half in 0..2 {
        let (ql, qh) = (&ql[64 * half..], &qh[32 * half..]);
        for l in 0..32 {
            let y = &mut values[128 * half..];
            y[l] = (ql[l] & 0x0F) | ((qh[l] & 3) << 4);
            y[l + 32] = (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4);
            y[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            y[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
    }
    values
}

/// Writes the nibbles `value(k) & 15` of row `r` into a `QS`/`LO` area.
fn put_nibbles(area: &mut [u8], r: usize, values: &[u8; QK]) {
    for g in 0..32 {
        for j in 0..4 {
            area[(g * 16 + r) * 4 + j] = (values[8 * g + j] & 0x0F) | ((values[8 * g + 4 + j] & 0x0F) << 4);
        }
    }
}

/// Fills the tile for rows `16t..16t + 16` and k-block `b` from `blocks` (row-major, `kb`
/// blocks a row, each `Q4_BLOCK` bytes).
pub(super) fn pack_q4k_tile(tile: &mut [u8], blocks: &[u8], t: usize, b: usize, kb: usize) {
    for r in 0..16 {
        let at = ((t * 16 + r) * kb + b) * Q4_BLOCK;
        let block = &blocks[at..at + Q4_BLOCK];
        put_nibbles(&mut tile[Q4_QS..Q4_SC], r, &q4k_values(block));
        for sub in 0..8 {
            let (scale, min) = scale_min(sub, &block[4..16]);
            tile[Q4_SC + sub * 16 + r] = scale;
            tile[Q4_MN + sub * 16 + r] = min;
        }
        tile[Q4_D + 2 * r..Q4_D + 2 * r + 2].copy_from_slice(&block[0..2]);
        tile[Q4_DMIN + 2 * r..Q4_DMIN + 2 * r + 2].copy_from_slice(&block[2..4]);
    }
}

/// As [`pack_q4k_tile`], for Q6_K blocks.
pub(super) fn pack_q6k_tile(tile: &mut [u8], blocks: &[u8], t: usize, b: usize, kb: usize) {
    for r in 0..16 {
        let at = ((t * 16 + r) * kb + b) * Q6_BLOCK;
        let block = &blocks[at..at + Q6_BLOCK];
        let values = q6k_values(block);
        put_nibbles(&mut tile[Q6_LO..Q6_HI], r, &values);
        for h in 0..16 {
            let mut byte = [0u8; 4];
            for (j, b) in byte.iter_mut().enumerate() {
                for s in 0..4 {
                    *b |= (values[16 * h + j + 4 * s] >> 4) << (2 * s);
                }
            }
            tile[Q6_HI + (h * 16 + r) * 4..Q6_HI + (h * 16 + r) * 4 + 4].copy_from_slice(&byte);
            tile[Q6_SC + h * 16 + r] = block[192 + h];
        }
        tile[Q6_D + 2 * r..Q6_D + 2 * r + 2].copy_from_slice(&block[208..210]);
    }
}

/// The values of a Q4_K block as floats, as the file defines them (what the tests hold the
/// kernels to).
#[cfg(test)]
pub(super) fn dequantize_q4k(block: &[u8], out: &mut [f32]) {
    let d = f16::from_le_bytes([block[0], block[1]]).to_f32();
    let dmin = f16::from_le_bytes([block[2], block[3]]).to_f32();
    let values = q4k_values(block);
    for (i, (o, v)) in out.iter_mut().zip(values).enumerate() {
        let (scale, min) = scale_min(i / 32, &block[4..16]);
        *o = d * f32::from(scale) * f32::from(v) - dmin * f32::from(min);
    }
}

/// As [`dequantize_q4k`], for a Q6_K block.
#[cfg(test)]
pub(super) fn dequantize_q6k(block: &[u8], out: &mut [f32]) {
    let d = f16::from_le_bytes([block[208], block[209]]).to_f32();
    let values = q6k_values(block);
    for (i, (o, v)) in out.iter_mut().zip(values).enumerate() {
        let scale = block[192 + i / 16] as i8;
        *o = d * f32::from(scale) * (f32::from(v) - 32.0);
    }
}
