//! Times Guidepost's quantized products against candle's on the default model's two largest
//! weight shapes (Qwen2.5-1.5B: `ffn_up` 8960 x 1536 in Q4_K, `ffn_down` 1536 x 8960 in Q6_K),
//! for 1 to 256 rows, and prints both and their ratio.
//!
//! ```text
//! cargo run --release -p guidepost-kernels --example quant_bench
//! ```
//!
//! Threads follow `CANDLE_NUM_THREADS` / `RAYON_NUM_THREADS` (both pools). The weights of one
//! shape (10-12 MB) stay in the CPU's cache here, where a model's 1 GB does not: the figures
//! for one row say more about arithmetic than about a real token's pass.

use std::time::Instant;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use guidepost_kernels::quant::{PackedWeight, QuantFormat, support};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = Device::Cpu;
    println!("support: {:?}", support());
    println!("| weight | rows | candle ms | Guidepost ms | ratio |");
    println!("|---|---|---|---|---|");
    for (dtype, format, n, k) in
        [(GgmlDType::Q4K, QuantFormat::Q4K, 8960, 1536), (GgmlDType::Q6K, QuantFormat::Q6K, 1536, 8960)]
    {
        let values = Tensor::randn(0f32, 0.05, (n, k), &device)?;
        let q = QTensor::quantize(&values, dtype)?;
        let packed = PackedWeight::pack(format, &q.data()?, n, k)?;
        let product = QMatMul::from_qtensor(q)?;
        for m in [1usize, 2, 4, 9, 16, 31, 64, 128, 256] {
            let x: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.731).cos()).collect();
            let rows = Tensor::from_vec(x.clone(), (m, k), &device)?;
            // Once each first: candle repacks its tiles on first use.
            product.forward(&rows)?;
            packed.matmul(&x, m)?;
            let reps = (400 / m).max(5);
            let start = Instant::now();
            for _ in 0..reps {
                std::hint::black_box(product.forward(&rows)?);
            }
            let theirs = start.elapsed().as_secs_f64() / reps as f64;
            let start = Instant::now();
            for _ in 0..reps {
                std::hint::black_box(packed.matmul(&x, m)?);
            }
            let ours = start.elapsed().as_secs_f64() / reps as f64;
            println!("| {format:?} {n} x {k} | {m} | {:.2} | {:.2} | {:.2} |", theirs * 1e3, ours * 1e3, ours / theirs);
        }
    }
    Ok(())
}
