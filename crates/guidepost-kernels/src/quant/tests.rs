use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use super::*;

/// A weight of `rows` x `columns` quantized by candle, its GGUF bytes, and its values as
/// candle dequantizes them.
fn weight(dtype: GgmlDType, rows: usize, columns: usize, seed: f32) -> (Vec<u8>, Vec<f32>) {
    let device = Device::Cpu;
    let values = Tensor::arange(0f32, (rows * columns) as f32, &device).unwrap().reshape((rows, columns)).unwrap();
    // Irregular values with an offset per row, so scales and minimums differ everywhere.
    let values = (((values * (0.37 + seed as f64)).unwrap().sin().unwrap() * 0.8).unwrap() + 0.1).unwrap();
    let q = QTensor::quantize(&values, dtype).unwrap();
    let bytes = q.data().unwrap().into_owned();
    let dequantized = q.dequantize(&device).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    (bytes, dequantized)
}

fn rows(m: usize, k: usize) -> Vec<f32> {
    (0..m * k).map(|i| ((i as f32 * 0.731).cos() * 1.5) + if i % 97 == 0 { 4.0 } else { 0.0 }).collect()
}

/// The product in f64 from the dequantized values.
fn reference(w: &[f32], x: &[f32], n: usize, k: usize, m: usize) -> Vec<f64> {
    let mut out = vec![0f64; m * n];
    for r in 0..m {
        for c in 0..n {
            out[r * n + c] = (0..k).map(|i| f64::from(w[c * k + i]) * f64::from(x[r * k + i])).sum();
        }
    }
    out
}

/// The largest error relative to the largest magnitude of the expected values.
fn relative_error(got: &[f32], expected: &[f64]) -> f64 {
    let scale = expected.iter().fold(0f64, |a, v| a.max(v.abs()));
    got.iter().zip(expected).fold(0f64, |a, (g, e)| a.max((f64::from(*g) - e).abs())) / scale
}

#[test]
fn the_blocks_read_as_candle_reads_them() {
    for (dtype, format) in [(GgmlDType::Q4K, QuantFormat::Q4K), (GgmlDType::Q6K, QuantFormat::Q6K)] {
        let (bytes, values) = weight(dtype, 16, 512, 0.0);
        for row in [0, 7, 15] {
            let ours = dequantize_row(format, &bytes, 512, row);
            assert_eq!(ours, values[row * 512..(row + 1) * 512], "{format:?} row {row}");
        }
    }
}

/// Candle's own product of the same quantized weight (its 8-bit rows), for comparison.
fn candle_product(dtype: GgmlDType, values: &[f32], x: &[f32], n: usize, k: usize, m: usize) -> Vec<f32> {
    use candle_core::Module;
    let device = Device::Cpu;
    let q = QTensor::quantize(&Tensor::from_vec(values.to_vec(), (n, k), &device).unwrap(), dtype).unwrap();
    let product = candle_core::quantized::QMatMul::from_qtensor(q).unwrap();
    let x = Tensor::from_vec(x.to_vec(), (m, k), &device).unwrap();
    product.forward(&x).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap()
}

#[test]
fn products_are_as_close_to_the_exact_ones_as_candles_for_few_and_many_rows() {
    if !support().vectors {
        eprintln!("skipped: the CPU lacks AVX-512 VNNI and BF16");
        return;
    }
    // 48 weight rows: three strips, so the tiles' last pair of strips is a single one. The
    // rows have a large value every 97, which makes 8-bit rows coarse (errors of 1-3 %).
    let (n, k) = (48, 768);
    for (dtype, format) in [(GgmlDType::Q4K, QuantFormat::Q4K), (GgmlDType::Q6K, QuantFormat::Q6K)] {
        let (bytes, values) = weight(dtype, n, k, 0.2);
        let packed = PackedWeight::pack(format, &bytes, n, k).unwrap();
        assert_eq!((packed.rows(), packed.columns()), (n, k));
        for m in [1, 2, 3, 4, 5, 9, 23, 24, 31, 33, 70] {
            let x = rows(m, k);
            let exact = reference(&values, &x, n, k, m);
            let ours = relative_error(&packed.matmul(&x, m).unwrap(), &exact);
            let candle = relative_error(&candle_product(dtype, &values, &x, n, k, m), &exact);
            assert!(ours <= candle * 1.05 + 1e-3, "{format:?}, {m} rows: error {ours}, candle's {candle}");
            if m >= AMX_MIN_ROWS && support().tiles {
                // bfloat16 rows keep more than 8-bit ones.
                assert!(ours < 0.01, "{format:?}, {m} rows through the tiles: error {ours}");
            }
        }
    }
}

#[test]
fn a_weight_that_does_not_fill_tiles_is_refused_with_its_shape() {
    if !support().vectors {
        return;
    }
    let (bytes, _) = weight(GgmlDType::Q4K, 16, 256, 0.0);
    assert_eq!(
        PackedWeight::pack(QuantFormat::Q4K, &bytes, 8, 512).err(),
        Some(PackError::Shape { rows: 8, columns: 512 })
    );
    assert_eq!(
        PackedWeight::pack(QuantFormat::Q4K, &bytes[1..], 16, 256).err(),
        Some(PackError::Size { expected: 16 * 144, got: 16 * 144 - 1 })
    );
    let (bytes, _) = weight(GgmlDType::Q4K, 16, 256, 0.0);
    let packed = PackedWeight::pack(QuantFormat::Q4K, &bytes, 16, 256).unwrap();
    assert_eq!(packed.matmul(&[0.0; 255], 1).err(), Some(PackError::Rows { expected: 256, got: 255 }));
    assert_eq!(packed.matmul(&[], 0).unwrap(), Vec::<f32>::new());
    let message = PackError::Shape { rows: 8, columns: 512 }.to_string();
    assert!(message.contains("8 x 512"), "{message}");
}
