//! Products of activation rows with 4-bit and 6-bit quantized weights (GGUF's Q4_K and Q6_K),
//! from one compact copy of the weights, on CPUs with AVX-512 VNNI; with AMX tiles where the
//! CPU has them.
//!
//! Two costs bound a local model's turn on a small machine, and they call for different
//! kernels. Writing an answer is one pass per token over a few rows, and a pass streams every
//! weight from memory: it is bound by the bytes read (on two cores of the reference machine
//! about 16 GB/s, so about 80 ms for the default model's 1.3 GB of repacked weights). The
//! vector kernels here read tiles that keep each value in its file's bits and the scales in
//! their stored precision ([`layout`]): 4.6 bits a Q4_K value and 6.6 a Q6_K one, where tiles
//! with the scales widened to floats take 6 and 10. Reading a prompt is many rows per pass,
//! and it is bound by arithmetic: there the AMX tiles multiply bfloat16 blocks of 16 x 32 by
//! 32 x 16 in one instruction. The weights are expanded to bfloat16 a strip at a time, with
//! their scales applied, and the strip is used for every row of the prompt before the next
//! is made, so no second copy of the weights is kept.
//!
//! The rows are quantized to 8 bits per block of 256 (with one scale each) for the vector
//! kernels, and rounded to bfloat16 for the tiles; the sums are in 32-bit floats. Results
//! agree with the file's values times the rows to within those roundings (tests below).

// Unsafe here: calls into the kernels of `simd` (after checking the CPU and sizing every
// buffer), and the result rows tasks share while each writes its own part (`Shared`,
// `Product`).
#![allow(unsafe_code)]

mod layout;
#[cfg(target_arch = "x86_64")]
mod simd;

use std::sync::OnceLock;

use rayon::prelude::*;

/// Values of k in one quantized block.
pub const QK: usize = 256;
/// Weight rows in one tile.
const STRIP: usize = 16;
/// Rows from which a product goes through the AMX tiles instead of the vector kernels: below
/// it, expanding the weights costs more than the tiles save.
const AMX_MIN_ROWS: usize = 24;
/// Most rows the AMX tiles multiply in one sweep over the weights.
const TILE_ROWS: usize = 128;

/// The quantized formats [`PackedWeight`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantFormat {
    /// GGUF's Q4_K: blocks of 256 values in 8 sub-blocks with 6-bit scales and minimums.
    Q4K,
    /// GGUF's Q6_K: blocks of 256 values in 16 sub-blocks with 8-bit scales.
    Q6K,
}

impl QuantFormat {
    fn block_bytes(self) -> usize {
        match self {
            Self::Q4K => layout::Q4_BLOCK,
            Self::Q6K => layout::Q6_BLOCK,
        }
    }

    fn tile_bytes(self) -> usize {
        match self {
            Self::Q4K => layout::Q4_BYTES,
            Self::Q6K => layout::Q6_BYTES,
        }
    }
}

/// What the CPU and the system let these kernels use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// AVX-512 F, BW, VNNI and BF16: the vector kernels (and the expansion for the tiles).
    pub vectors: bool,
    /// AMX tiles for bfloat16, with the system's permission to use them.
    pub tiles: bool,
}

/// What this CPU supports, checked once (asking Linux for AMX permission the first time).
pub fn support() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let vectors = std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vnni")
                && std::is_x86_feature_detected!("avx512bf16");
            // CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE.
            let leaf = std::arch::x86_64::__cpuid_count(7, 0);
            let amx = leaf.edx & (1 << 22) != 0 && leaf.edx & (1 << 24) != 0;
            let tiles = vectors && amx && std::env::var_os("GUIDEPOST_LOCAL_NO_TILES").is_none() && simd::request_amx();
            Support { vectors, tiles }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Support { vectors: false, tiles: false }
    })
}

/// Why a weight cannot be packed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackError {
    /// The CPU lacks the instructions the kernels need.
    Unsupported,
    /// The shape does not fit the tiles: rows a multiple of 16, values a multiple of 256.
    Shape {
        /// Weight rows (outputs).
        rows: usize,
        /// Values per row (inputs).
        columns: usize,
    },
    /// Rows to multiply that are not as many values as the weight's inputs say.
    Rows {
        /// Values expected (rows times inputs).
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// The blocks are not as many bytes as the shape needs.
    Size {
        /// Bytes expected.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
}

impl std::fmt::Display for PackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unsupported => write!(f, "the CPU lacks AVX-512 VNNI and BF16"),
            Self::Shape { rows, columns } => {
                write!(f, "a weight of {rows} x {columns} does not fill tiles of 16 rows by 256 values")
            }
            Self::Size { expected, got } => write!(f, "expected {expected} bytes of blocks, got {got}"),
            Self::Rows { expected, got } => write!(f, "expected {expected} values of rows to multiply, got {got}"),
        }
    }
}

impl std::error::Error for PackError {}

/// A weight matrix (`rows` outputs by `columns` inputs) in tiles, multiplied by activation
/// rows with [`PackedWeight::matmul`].
pub struct PackedWeight {
    format: QuantFormat,
    rows: usize,
    columns: usize,
    /// Tiles strip by strip (16 weight rows), each strip's k-blocks in order.
    tiles: Vec<u8>,
}

impl std::fmt::Debug for PackedWeight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackedWeight({:?}, {} x {}, {} bytes)", self.format, self.rows, self.columns, self.tiles.len())
    }
}

/// One row's block of 256 values quantized to bytes: `d` times each byte is the value, and
/// `sums` holds the sum of every 16 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
struct RowBlock {
    d: f32,
    sums: [i32; 16],
    qs: [i8; QK],
}

impl RowBlock {
    const ZERO: Self = Self { d: 0.0, sums: [0; 16], qs: [0; QK] };
}

impl PackedWeight {
    /// Packs `blocks` (the weight's bytes as a GGUF file stores them, row after row) of a
    /// weight of `rows` outputs by `columns` inputs.
    pub fn pack(format: QuantFormat, blocks: &[u8], rows: usize, columns: usize) -> Result<Self, PackError> {
        if !support().vectors {
            return Err(PackError::Unsupported);
        }
        if rows == 0 || !rows.is_multiple_of(STRIP) || columns == 0 || !columns.is_multiple_of(QK) {
            return Err(PackError::Shape { rows, columns });
        }
        let kb = columns / QK;
        let expected = rows * kb * format.block_bytes();
        if blocks.len() != expected {
            return Err(PackError::Size { expected, got: blocks.len() });
        }
        let size = format.tile_bytes();
        let mut tiles = vec![0u8; rows / STRIP * kb * size];
        tiles.par_chunks_mut(size * kb).enumerate().for_each(|(t, strip)| {
            for (b, tile) in strip.chunks_mut(size).enumerate() {
                match format {
                    QuantFormat::Q4K => layout::pack_q4k_tile(tile, blocks, t, b, kb),
                    QuantFormat::Q6K => layout::pack_q6k_tile(tile, blocks, t, b, kb),
                }
            }
        });
        Ok(Self { format, rows, columns, tiles })
    }

    /// Weight rows (outputs).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per weight row (inputs).
    pub fn columns(&self) -> usize {
        self.columns
    }

    /// Bytes the tiles take.
    pub fn bytes(&self) -> usize {
        self.tiles.len()
    }

    /// `x` (`m` rows of [`columns`](Self::columns) values, row-major) times the weight's
    /// transpose: `m` rows of [`rows`](Self::rows) values. `x` of another length is an error.
    pub fn matmul(&self, x: &[f32], m: usize) -> Result<Vec<f32>, PackError> {
        if x.len() != m * self.columns {
            return Err(PackError::Rows { expected: m * self.columns, got: x.len() });
        }
        let mut out = vec![0f32; m * self.rows];
        if m == 0 {
            return Ok(out);
        }
        #[cfg(target_arch = "x86_64")]
        {
            if m >= AMX_MIN_ROWS && support().tiles {
                // Windows of at most TILE_ROWS rows: the rows of a window are read once per
                // pair of weight strips, and more stop fitting the core's cache.
                let windows = m.div_ceil(TILE_ROWS);
                let size = m.div_ceil(windows);
                for (rows, out) in x.chunks(size * self.columns).zip(out.chunks_mut(size * self.rows)) {
                    self.product_of_tiles(rows, rows.len() / self.columns, out);
                }
            } else {
                self.matmul_vectors(x, m, &mut out);
            }
        }
        Ok(out)
    }

    #[cfg(target_arch = "x86_64")]
    fn strip(&self, t: usize) -> &[u8] {
        let size = self.format.tile_bytes() * (self.columns / QK);
        &self.tiles[t * size..(t + 1) * size]
    }

    /// The vector kernels: the rows quantized to bytes, each strip of weights read once for
    /// every eight rows.
    #[cfg(target_arch = "x86_64")]
    fn matmul_vectors(&self, x: &[f32], m: usize, out: &mut [f32]) {
        let kb = self.columns / QK;
        let mut quantized = vec![RowBlock::ZERO; m * kb];
        let quantize = |blocks: &mut [RowBlock], row: &[f32]| {
            // SAFETY: the CPU has the vector instructions (checked at packing); `row` has
            // kb * QK values for kb blocks.
            unsafe { simd::quantize_row(row, blocks) }
        };
        if m <= simd::MAX_ROWS {
            quantized.chunks_mut(kb).zip(x.chunks(self.columns)).for_each(|(blocks, row)| quantize(blocks, row));
        } else {
            let shared = Shared::new(&mut quantized);
            parallel(m, |range| {
                for r in range {
                    // SAFETY: each row's blocks are written by the task given that row only.
                    let blocks = unsafe { shared.slice(r * kb, kb) };
                    quantize(blocks, &x[r * self.columns..(r + 1) * self.columns]);
                }
            });
        }
        let rows: Vec<&[RowBlock]> = quantized.chunks(kb).collect();
        let product = Product::new(out, self.rows);
        parallel(self.rows / STRIP, |strips| {
            for t in strips {
                let tiles = self.strip(t).as_ptr();
                for (g, group) in rows.chunks(simd::MAX_ROWS).enumerate() {
                    let first = g * simd::MAX_ROWS;
                    macro_rules! run {
                        ($rows:literal) => {{
                            let rows: [&[RowBlock]; $rows] = std::array::from_fn(|i| group[i]);
                            // SAFETY: `tiles` is a whole strip of kb tiles of this format and each row has kb
                            // blocks; the CPU has the vector instructions. This task alone writes the strip's
                            // 16 columns, of rows below m.
                            unsafe {
                                let results = match self.format {
                                    QuantFormat::Q4K => simd::q4k_rows::<$rows>(tiles, kb, rows),
                                    QuantFormat::Q6K => simd::q6k_rows::<$rows>(tiles, kb, rows),
                                };
                                product.put_rows(first, t * STRIP, &results)
                            }
                        }};
                    }
                    match group.len() {
                        1 => run!(1),
                        2 => run!(2),
                        3 => run!(3),
                        4 => run!(4),
                        5 => run!(5),
                        6 => run!(6),
                        7 => run!(7),
                        _ => run!(8),
                    }
                }
            }
        });
    }

    /// The AMX tiles: the rows rounded to bfloat16 (padded to a multiple of 32 with zeros),
    /// then for each pair of weight strips, the strips expanded to bfloat16 B tiles and
    /// multiplied by every block of 32 rows.
    #[cfg(target_arch = "x86_64")]
    fn product_of_tiles(&self, x: &[f32], m: usize, out: &mut [f32]) {
        let k = self.columns;
        let kb = k / QK;
        let padded = m.div_ceil(32) * 32;
        let steps = k / 32;
        // The rows as A tiles: per block of 16 rows, per 32 values of k, 16 rows of 32 words
        // (1 KiB, read in one piece).
        let mut a = vec![0u16; padded * k];
        let shared = Shared::new(&mut a);
        parallel(m.div_ceil(16), |blocks| {
            for block in blocks {
                let rows = &x[block * 16 * k..x.len().min((block + 1) * 16 * k)];
                for (r, row) in rows.chunks(k).enumerate() {
                    // SAFETY: the CPU has AVX-512 BF16 (checked at packing); k is a multiple of
                    // 32; the block (written by this task only) holds `steps` tiles of 512
                    // words, row r at 32 r in each.
                    unsafe { simd::to_bf16(row, shared.slice(block * 16 * k, 16 * k)[32 * r..].as_mut_ptr(), 512) }
                }
            }
        });
        let a = &a;
        let strips = self.rows / STRIP;
        let tile_bytes = self.format.tile_bytes();
        let product = Product::new(out, self.rows);
        parallel(strips.div_ceil(2), |pairs| {
            PANEL.with_borrow_mut(|panel| {
                if panel.len() < steps * 2048 {
                    panel.resize(steps * 2048, 0);
                }
                // SAFETY: the process has AMX permission (support().tiles).
                unsafe { simd::configure_tiles() };
                for p in pairs {
                    // SAFETY: the panel holds two KiB per step of k; each tile is a whole tile of
                    // this format; the rows hold `padded` rows of k values. This task alone
                    // writes the pair's columns.
                    unsafe {
                        for half in 0..2 {
                            // An odd last strip is expanded twice and its second copy dropped.
                            let strip = self.strip((2 * p + half).min(strips - 1));
                            for b in 0..kb {
                                let tile = strip[b * tile_bytes..].as_ptr();
                                let at = panel.as_mut_ptr().add((b * 16 + half) * 1024);
                                match self.format {
                                    QuantFormat::Q4K => simd::q4k_expand(tile, at, 2048),
                                    QuantFormat::Q6K => simd::q6k_expand(tile, at, 2048),
                                }
                            }
                        }
                        let mut sums = [0f32; 1024];
                        for block in 0..padded / 32 {
                            let a0 = a[block * 32 * k..].as_ptr().cast::<u8>();
                            let a1 = a[(block * 32 + 16) * k..].as_ptr().cast::<u8>();
                            simd::amx_block(a0, a1, panel.as_ptr(), steps, &mut sums);
                            for quarter in 0..4 {
                                let (row_half, strip) = (quarter / 2, 2 * p + quarter % 2);
                                if strip >= strips {
                                    continue;
                                }
                                for r in 0..16 {
                                    let row = block * 32 + row_half * 16 + r;
                                    if row < m {
                                        let from = quarter * 256 + r * 16;
                                        product.put(row, strip * STRIP, &sums[from..from + 16]);
                                    }
                                }
                            }
                        }
                    }
                }
            });
        });
    }
}

thread_local! {
    /// Each thread's strips of weights expanded for the AMX tiles, kept between products.
    static PANEL: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `work` over `0..items` on candle's pool of inference threads (the caller's thread
/// among them), in ranges the threads take as they finish. Its threads wait for work spinning
/// before they sleep, so the many short products of a generated token do not pay a wake-up
/// each.
fn parallel(items: usize, work: impl Fn(std::ops::Range<usize>) + Sync) {
    if items <= 1 {
        work(0..items);
        return;
    }
    candle_core::utils::barrier_pool().execute_chunked(items, work);
}

/// A slice that tasks share, each writing its own part.
#[derive(Clone, Copy)]
struct Shared<T> {
    values: *mut T,
    len: usize,
}

// SAFETY: tasks write disjoint parts through it (see `slice`), while the slice it was made
// from is borrowed for the whole product.
unsafe impl<T: Send> Send for Shared<T> {}
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    fn new(values: &mut [T]) -> Self {
        Self { values: values.as_mut_ptr(), len: values.len() }
    }

    /// The part `start..start + len` (cut to the slice).
    ///
    /// # Safety
    /// No other task uses that part at the same time.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice(&self, start: usize, len: usize) -> &mut [T] {
        let start = start.min(self.len);
        let len = len.min(self.len - start);
        // SAFETY: inside the slice (cut above); exclusive by the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.values.add(start), len) }
    }
}

/// The rows of a product, shared by the tasks that each write their own columns of them.
#[derive(Clone, Copy)]
struct Product {
    values: *mut f32,
    rows: usize,
    width: usize,
}

// SAFETY: tasks write disjoint columns through it (see `put`), while the slice it was made
// from is borrowed for the whole product.
unsafe impl Send for Product {}
unsafe impl Sync for Product {}

impl Product {
    fn new(out: &mut [f32], width: usize) -> Self {
        Self { values: out.as_mut_ptr(), rows: out.len() / width.max(1), width }
    }

    /// Writes `values` into row `row` from column `column`.
    ///
    /// # Safety
    /// No other task writes those places at the same time.
    unsafe fn put(&self, row: usize, column: usize, values: &[f32]) {
        if row < self.rows && column + values.len() <= self.width {
            // SAFETY: inside the slice (checked above); exclusive by the caller's promise.
            unsafe {
                std::ptr::copy_nonoverlapping(values.as_ptr(), self.values.add(row * self.width + column), values.len())
            }
        }
    }

    /// Writes a vector kernel's rows of 16 into rows `first..` from column `column`.
    ///
    /// # Safety
    /// As [`put`](Self::put).
    unsafe fn put_rows<const R: usize>(&self, first: usize, column: usize, results: &[[f32; 16]; R]) {
        for (r, values) in results.iter().enumerate() {
            // SAFETY: the caller's promise covers these rows.
            unsafe { self.put(first + r, column, values) };
        }
    }
}

/// The values of row `row` of a weight stored as `blocks` (GGUF bytes, `columns` values a row),
/// as the file defines them: what the tests hold the kernels to.
#[cfg(test)]
fn dequantize_row(format: QuantFormat, blocks: &[u8], columns: usize, row: usize) -> Vec<f32> {
    let kb = columns / QK;
    let size = format.block_bytes();
    let mut out = vec![0f32; kb * QK];
    for b in 0..kb {
        let at = (row * kb + b) * size;
        let Some(block) = blocks.get(at..at + size) else { break };
        match format {
            QuantFormat::Q4K => layout::dequantize_q4k(block, &mut out[b * QK..(b + 1) * QK]),
            QuantFormat::Q6K => layout::dequantize_q6k(block, &mut out[b * QK..(b + 1) * QK]),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
