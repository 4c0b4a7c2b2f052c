//! all-MiniLM-L6-v2: golden vector, unit norm, similarity ordering.

use guidepost_llm::Embedder;

use super::common::{minilm, runtime};

fn embed(texts: &[&str]) -> Vec<Vec<f32>> {
    let texts: Vec<String> = texts.iter().map(|t| (*t).to_string()).collect();
    minilm().embed_blocking(&texts).unwrap()
}

/// The embedder returns unit vectors: their dot product is their cosine.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn golden_vector_prefix() {
    let vector = &embed(&["How do I reset my password?"])[0];
    assert_eq!(vector.len(), 384);
    let golden = [0.006903, -0.063023, -0.072044, -0.032496, -0.042709, 0.070429];
    for (got, want) in vector.iter().zip(golden) {
        assert!((got - want).abs() < 1e-5, "{:?}", &vector[..6]);
    }
}

#[test]
fn vectors_have_unit_norm_and_batching_changes_nothing() {
    let texts = ["Hi", "A much longer sentence about shipping a parcel to a new address next week."];
    let batch = embed(&texts);
    for (text, vector) in texts.iter().zip(&batch) {
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        // Padding inside a batch must not change a text's vector (mask-aware pooling).
        let single = &embed(&[text])[0];
        assert!(dot(single, vector) > 0.99999);
    }
}

#[test]
fn paraphrases_are_closer_than_unrelated_sentences() {
    let texts = [
        "How do I reset my password?",
        "I forgot my login credentials.",
        "What are your opening hours on Sunday?",
        "Are you open on weekends?",
        "I want to cancel my subscription.",
        "How do I stop my subscription plan?",
        "The weather is nice today.",
        "Where is my package?",
    ];
    let v = embed(&texts);
    for (a, b) in [(0, 1), (2, 3), (4, 5)] {
        let paraphrase = dot(&v[a], &v[b]);
        assert!(paraphrase > 0.45, "{} / {}: {paraphrase}", texts[a], texts[b]);
        for other in (0..texts.len()).filter(|&o| o != a && o != b) {
            let unrelated = dot(&v[a], &v[other]);
            assert!(
                paraphrase > unrelated,
                "{} is closer to {} ({unrelated}) than to {} ({paraphrase})",
                texts[a],
                texts[other],
                texts[b]
            );
        }
    }
}

#[test]
fn the_embedder_port_works() {
    let embedder = minilm().clone();
    assert_eq!(embedder.model_id(), "local:all-minilm-l6-v2");
    assert_eq!(embedder.dimensions(), 384);
    let texts = vec!["one".to_string(), "two".to_string(), "three".to_string()];
    let vectors = runtime().block_on(embedder.embed(&texts)).unwrap();
    assert_eq!(vectors.len(), 3);
    assert!(vectors.iter().all(|v| v.len() == 384));
    assert!(runtime().block_on(embedder.embed(&[])).unwrap().is_empty());
}
