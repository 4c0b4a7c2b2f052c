//! The x86 kernels behind [`PackedWeight`](super::PackedWeight): AVX-512 VNNI products for
//! a few rows, AMX tile products in bfloat16 for many, and the quantization of the rows.
//!
//! Every function here is `unsafe` for the same two reasons: it runs instructions the CPU
//! must have (the caller checks with [`super::Support`]), and it reads tiles and rows through
//! pointers whose bounds the caller sized (`super` computes every length from the weight's
//! shape before calling).

#![allow(unsafe_code)]

use core::arch::x86_64::*;

use super::layout::{Q4_D, Q4_DMIN, Q4_MN, Q4_QS, Q4_SC, Q6_D, Q6_HI, Q6_LO, Q6_SC};
use super::{QK, RowBlock};

/// Most activation rows one call of a vector kernel keeps accumulators for.
pub(super) const MAX_ROWS: usize = 8;

/// Quantizes `x` (`blocks.len() * 256` values) to blocks of 256 signed bytes with one scale
/// each and the sums of every 16 bytes.
///
/// # Safety
/// The CPU has AVX-512 F and BW; `x` holds `blocks.len() * QK` values.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn quantize_row(x: &[f32], blocks: &mut [RowBlock]) {
    for (b, block) in blocks.iter_mut().enumerate() {
        let xs = x[b * QK..(b + 1) * QK].as_ptr();
        // SAFETY: `xs` points at QK values (the slice above); reads stay inside it.
        unsafe {
            let mut amax = _mm512_setzero_ps();
            for i in 0..QK / 16 {
                amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(xs.add(16 * i))));
            }
            let amax = _mm512_reduce_max_ps(amax);
            if amax.is_nan() || amax == 0.0 {
                *block = RowBlock::ZERO;
                continue;
            }
            let inverse = _mm512_set1_ps(127.0 / amax);
            block.d = amax / 127.0;
            for i in 0..QK / 16 {
                let q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xs.add(16 * i)), inverse));
                block.sums[i] = _mm512_reduce_add_epi32(q);
                _mm_storeu_si128(block.qs.as_mut_ptr().add(16 * i).cast(), _mm512_cvtsepi32_epi8(q));
            }
        }
    }
}

/// The four bytes of `row` from `offset`, in every 32-bit lane.
#[inline(always)]
unsafe fn broadcast4(row: &RowBlock, offset: usize) -> __m512i {
    // SAFETY: callers pass offsets below QK - 3.
    unsafe { _mm512_set1_epi32(std::ptr::read_unaligned(row.qs.as_ptr().add(offset).cast::<i32>())) }
}

/// The sixteen unsigned bytes at `p` as floats.
#[inline(always)]
unsafe fn bytes_as_floats(p: *const u8) -> __m512 {
    unsafe { _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(p.cast()))) }
}

/// The sixteen half-precision values at `p` as floats.
#[inline(always)]
unsafe fn halves_as_floats(p: *const u8) -> __m512 {
    unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) }
}

/// Sixteen weight rows (one column of Q4_K tiles, `kb` tiles of 256 values) times `R`
/// quantized rows: `out[r]` gets the sixteen products of row `r`.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI; `tiles` points at `kb` Q4_K tiles; each of `rows`
/// holds `kb` blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn q4k_rows<const R: usize>(tiles: *const u8, kb: usize, rows: [&[RowBlock]; R]) -> [[f32; 16]; R] {
    let mut acc = [_mm512_setzero_ps(); R];
    // SAFETY: every offset below lies inside the tile (see `layout`), and `b < kb`.
    unsafe {
        let nibble = _mm512_set1_epi8(0x0F);
        for b in 0..kb {
            let tile = tiles.add(b * super::layout::Q4_BYTES);
            let d = halves_as_floats(tile.add(Q4_D));
            let dmin = halves_as_floats(tile.add(Q4_DMIN));
            for sub in 0..8 {
                let mut sums = [_mm512_setzero_si512(); R];
                for g in sub * 4..sub * 4 + 4 {
                    let w = _mm512_loadu_si512(tile.add(Q4_QS + g * 64).cast());
                    let low = _mm512_and_si512(w, nibble);
                    let high = _mm512_and_si512(_mm512_srli_epi16::<4>(w), nibble);
                    for (sum, row) in sums.iter_mut().zip(&rows) {
                        *sum = _mm512_dpbusd_epi32(*sum, low, broadcast4(&row[b], g * 8));
                        *sum = _mm512_dpbusd_epi32(*sum, high, broadcast4(&row[b], g * 8 + 4));
                    }
                }
                let scale = _mm512_mul_ps(d, bytes_as_floats(tile.add(Q4_SC + sub * 16)));
                let min = _mm512_mul_ps(dmin, bytes_as_floats(tile.add(Q4_MN + sub * 16)));
                for ((acc, sum), row) in acc.iter_mut().zip(&sums).zip(&rows) {
                    let block = &row[b];
                    let total = (block.sums[2 * sub] + block.sums[2 * sub + 1]) as f32;
                    let scaled = _mm512_mul_ps(scale, _mm512_set1_ps(block.d));
                    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(*sum), scaled, *acc);
                    *acc = _mm512_fnmadd_ps(min, _mm512_set1_ps(block.d * total), *acc);
                }
            }
        }
        let mut out = [[0f32; 16]; R];
        for (o, a) in out.iter_mut().zip(acc) {
            _mm512_storeu_ps(o.as_mut_ptr(), a);
        }
        out
    }
}

/// The four 64-byte vectors of six-bit values of one Q6_K sub-block (16 values) of sixteen
/// rows: vector `t` holds values `4t..4t + 4` of each row (lane `4 * row + j`).
#[inline(always)]
unsafe fn q6k_values(tile: *const u8, h: usize) -> [__m512i; 4] {
    // SAFETY: h < 16; the offsets lie inside the tile (see `layout`).
    unsafe {
        let nibble = _mm512_set1_epi8(0x0F);
        let two = _mm512_set1_epi8(0x03);
        let high = _mm512_loadu_si512(tile.add(Q6_HI + h * 64).cast());
        let l0 = _mm512_loadu_si512(tile.add(Q6_LO + 2 * h * 64).cast());
        let l1 = _mm512_loadu_si512(tile.add(Q6_LO + (2 * h + 1) * 64).cast());
        let top = |bits: __m512i| _mm512_slli_epi16::<4>(_mm512_and_si512(bits, two));
        [
            _mm512_or_si512(_mm512_and_si512(l0, nibble), top(high)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16::<4>(l0), nibble), top(_mm512_srli_epi16::<2>(high))),
            _mm512_or_si512(_mm512_and_si512(l1, nibble), top(_mm512_srli_epi16::<4>(high))),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16::<4>(l1), nibble), top(_mm512_srli_epi16::<6>(high))),
        ]
    }
}

/// As [`q4k_rows`], for Q6_K tiles.
///
/// # Safety
/// As [`q4k_rows`], with `tiles` pointing at `kb` Q6_K tiles.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn q6k_rows<const R: usize>(tiles: *const u8, kb: usize, rows: [&[RowBlock]; R]) -> [[f32; 16]; R] {
    let mut acc = [_mm512_setzero_ps(); R];
    // SAFETY: every offset below lies inside the tile (see `layout`), and `b < kb`.
    unsafe {
        for b in 0..kb {
            let tile = tiles.add(b * super::layout::Q6_BYTES);
            let d = halves_as_floats(tile.add(Q6_D));
            for h in 0..16 {
                let values = q6k_values(tile, h);
                let mut sums = [_mm512_setzero_si512(); R];
                for (t, w) in values.iter().enumerate() {
                    for (sum, row) in sums.iter_mut().zip(&rows) {
                        *sum = _mm512_dpbusd_epi32(*sum, *w, broadcast4(&row[b], 16 * h + 4 * t));
                    }
                }
                let scale = _mm512_mul_ps(
                    d,
                    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(tile.add(Q6_SC + h * 16).cast()))),
                );
                for ((acc, sum), row) in acc.iter_mut().zip(&sums).zip(&rows) {
                    let block = &row[b];
                    // The values are stored 32 up: take 32 times the row's sum back off.
                    let centred = _mm512_sub_ps(_mm512_cvtepi32_ps(*sum), _mm512_set1_ps(32.0 * block.sums[h] as f32));
                    *acc = _mm512_fmadd_ps(centred, _mm512_mul_ps(scale, _mm512_set1_ps(block.d)), *acc);
                }
            }
        }
        let mut out = [[0f32; 16]; R];
        for (o, a) in out.iter_mut().zip(acc) {
            _mm512_storeu_ps(o.as_mut_ptr(), a);
        }
        out
    }
}

/// Sixteen per-row factors spread over the 64 lanes of four vectors, each row four times in
/// a row (lane `4 * row + j` of the sixteen rows `4i..4i + 4` in vector `i`).
#[inline(always)]
unsafe fn per_lane(v: __m512) -> [__m512; 4] {
    unsafe {
        let spread = |i: i32| {
            _mm512_permutexvar_ps(
                _mm512_setr_epi32(
                    4 * i,
                    4 * i,
                    4 * i,
                    4 * i,
                    4 * i + 1,
                    4 * i + 1,
                    4 * i + 1,
                    4 * i + 1,
                    4 * i + 2,
                    4 * i + 2,
                    4 * i + 2,
                    4 * i + 2,
                    4 * i + 3,
                    4 * i + 3,
                    4 * i + 3,
                    4 * i + 3,
                ),
                v,
            )
        };
        [spread(0), spread(1), spread(2), spread(3)]
    }
}

/// Writes two rows of an AMX B tile (pairs of bfloat16 along k, one pair per weight row)
/// from the 64 unsigned values `w` (lane `4 * row + j`: value `j` of four along k) times
/// `scale` plus `offset` (per lane, from [`per_lane`]): the pairs of values 0-1 at `dst`,
/// of values 2-3 at `dst + 64`.
#[inline(always)]
unsafe fn emit_pairs(w: __m512i, scale: &[__m512; 4], offset: &[__m512; 4], dst: *mut u8) {
    unsafe {
        let value =
            |q: __m128i, i: usize| _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q)), scale[i], offset[i]);
        let v0 = value(_mm512_extracti32x4_epi32::<0>(w), 0);
        let v1 = value(_mm512_extracti32x4_epi32::<1>(w), 1);
        let v2 = value(_mm512_extracti32x4_epi32::<2>(w), 2);
        let v3 = value(_mm512_extracti32x4_epi32::<3>(w), 3);
        // bfloat16 words 4 * row + j; as 32-bit words, 2 * row + j / 2.
        let first: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(v1, v0));
        let second: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(v3, v2));
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        _mm512_storeu_si512(dst.cast(), _mm512_permutex2var_epi32(first, even, second));
        _mm512_storeu_si512(dst.add(64).cast(), _mm512_permutex2var_epi32(first, odd, second));
    }
}

/// Expands one Q4_K tile into eight AMX B tiles of bfloat16 (one per 32 values of k, 1 KiB
/// each), the one of step `s` at `dst + s * stride`.
///
/// # Safety
/// The CPU has AVX-512 F, BW and BF16; `tile` is a Q4_K tile; `dst` has room for eight
/// tiles `stride` bytes apart.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(super) unsafe fn q4k_expand(tile: *const u8, dst: *mut u8, stride: usize) {
    unsafe {
        let nibble = _mm512_set1_epi8(0x0F);
        let d = halves_as_floats(tile.add(Q4_D));
        let dmin = halves_as_floats(tile.add(Q4_DMIN));
        for sub in 0..8 {
            let scale = per_lane(_mm512_mul_ps(d, bytes_as_floats(tile.add(Q4_SC + sub * 16))));
            let min =
                _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(dmin, bytes_as_floats(tile.add(Q4_MN + sub * 16))));
            let offset = per_lane(min);
            let out = dst.add(sub * stride);
            for g in 0..4 {
                let w = _mm512_loadu_si512(tile.add(Q4_QS + (sub * 4 + g) * 64).cast());
                emit_pairs(_mm512_and_si512(w, nibble), &scale, &offset, out.add(4 * g * 64));
                emit_pairs(
                    _mm512_and_si512(_mm512_srli_epi16::<4>(w), nibble),
                    &scale,
                    &offset,
                    out.add((4 * g + 2) * 64),
                );
            }
        }
    }
}

/// As [`q4k_expand`], for a Q6_K tile.
///
/// # Safety
/// As [`q4k_expand`], with `tile` a Q6_K tile.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(super) unsafe fn q6k_expand(tile: *const u8, dst: *mut u8, stride: usize) {
    unsafe {
        let d = halves_as_floats(tile.add(Q6_D));
        for h in 0..16 {
            let factor = _mm512_mul_ps(
                d,
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(tile.add(Q6_SC + h * 16).cast()))),
            );
            let scale = per_lane(factor);
            let offset = per_lane(_mm512_mul_ps(factor, _mm512_set1_ps(-32.0)));
            // Sub-block h is values 16h..16h + 16: pairs 8(h % 2).. of k-step h / 2.
            let out = dst.add((h / 2) * stride + (h % 2) * 8 * 64);
            for (t, w) in q6k_values(tile, h).iter().enumerate() {
                emit_pairs(*w, &scale, &offset, out.add(2 * t * 64));
            }
        }
    }
}

/// Converts the row `x` (`k` values) to bfloat16 at `dst`, 32 values every `stride` words
/// (the row's place in each step's A tile).
///
/// # Safety
/// The CPU has AVX-512 F, BW and BF16; `k` is a multiple of 32; `dst` has room for `k / 32`
/// pieces of 32 words `stride` words apart.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(super) unsafe fn to_bf16(x: &[f32], dst: *mut u16, stride: usize) {
    unsafe {
        for (i, chunk) in x.chunks_exact(32).enumerate() {
            let low = _mm512_loadu_ps(chunk.as_ptr());
            let high = _mm512_loadu_ps(chunk.as_ptr().add(16));
            let words: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(high, low));
            _mm512_storeu_si512(dst.add(i * stride).cast(), words);
        }
    }
}

/// The AMX tile layout every product uses: tiles 0-3 hold the 16 x 16 sums, 4-5 two blocks
/// of 16 rows by 32 bfloat16 values, 6-7 two B tiles of 16 pairs by 16 columns.
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    bytes_per_row: [u16; 16],
    rows: [u8; 16],
}

/// Loads the tile layout on this thread.
///
/// # Safety
/// The process has permission to use AMX tile data ([`super::Support`] asked for it).
pub(super) unsafe fn configure_tiles() {
    let mut config = TileConfig { palette: 1, start_row: 0, reserved: [0; 14], bytes_per_row: [0; 16], rows: [0; 16] };
    for t in 0..8 {
        config.bytes_per_row[t] = 64;
        config.rows[t] = 16;
    }
    // SAFETY: the configuration is a valid palette-1 layout of eight 16 x 64-byte tiles.
    unsafe { core::arch::asm!("ldtilecfg [{}]", in(reg) &config, options(nostack, readonly)) };
}

/// Sums of 32 activation rows (two blocks of 16, `a0` and `a1`: per 32 values of k, a 1 KiB
/// A tile of bfloat16) times two 16-row strips of expanded weights (`panel`: per 32 values of
/// k, two 1 KiB B tiles), over `steps` steps of 32 values; the four 16 x 16 blocks of sums go
/// to `out` (rows 0-15 by strip 0, rows 0-15 by strip 1, rows 16-31 by strip 0, rows 16-31
/// by strip 1).
///
/// # Safety
/// [`configure_tiles`] ran on this thread; `a0`, `a1` hold `steps` KiB each; `panel` holds
/// `steps * 2` KiB.
pub(super) unsafe fn amx_block(a0: *const u8, a1: *const u8, panel: *const u8, steps: usize, out: &mut [f32; 1024]) {
    // SAFETY: the tile loads read 16 rows of 64 bytes inside `a` and `panel` as sized above.
    unsafe {
        core::arch::asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack));
        for s in 0..steps {
            let a0 = a0.add(s * 1024);
            let a1 = a1.add(s * 1024);
            let b0 = panel.add(s * 2048);
            let b1 = b0.add(1024);
            core::arch::asm!(
                "tileloadd tmm4, [{a0} + {sa}*1]",
                "tileloadd tmm6, [{b0} + {sb}*1]",
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tileloadd tmm7, [{b1} + {sb}*1]",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tileloadd tmm5, [{a1} + {sa}*1]",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                a0 = in(reg) a0,
                a1 = in(reg) a1,
                b0 = in(reg) b0,
                b1 = in(reg) b1,
                sa = in(reg) 64usize,
                sb = in(reg) 64usize,
                options(nostack, readonly),
            );
        }
        let c = out.as_mut_ptr();
        core::arch::asm!(
            "tilestored [{c} + {s}*1], tmm0",
            "tilestored [{c} + {s}*1 + 1024], tmm1",
            "tilestored [{c} + {s}*1 + 2048], tmm2",
            "tilestored [{c} + {s}*1 + 3072], tmm3",
            c = in(reg) c,
            s = in(reg) 64usize,
            options(nostack),
        );
    }
}

/// Asks Linux for this process's permission to use AMX tile data (needed once, before the
/// first tile instruction); false when refused or on another system.
pub(super) fn request_amx() -> bool {
    #[cfg(target_os = "linux")]
    {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: arch_prctl with ARCH_REQ_XCOMP_PERM only changes which register state the
        // kernel lets this process use; it reads and writes no memory of ours.
        unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    false
}
