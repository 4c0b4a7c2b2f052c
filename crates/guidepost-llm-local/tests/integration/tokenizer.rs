//! Golden token ids of the tokenizer rebuilt from SmolLM2's GGUF metadata.

use super::common::smollm2;

fn pieces(ids: &[u32]) -> Vec<String> {
    let tokens = &smollm2().tokenizer().tokens;
    ids.iter().map(|&id| tokens[id as usize].clone()).collect()
}

#[test]
fn plain_text_golden_ids() {
    let tokenizer = smollm2().tokenizer();
    assert_eq!(tokenizer.encode("Hello world").unwrap(), [19556, 905]);
    assert_eq!(tokenizer.decode(&[19556, 905]).unwrap(), "Hello world");
}

#[test]
fn digits_are_split_one_by_one() {
    // llama.cpp's `smollm` rule: each digit is its own pre-token, before the byte-level split.
    let ids = smollm2().tokenizer().encode("Order 12345 costs $67.89").unwrap();
    assert_eq!(ids, [22977, 216, 33, 34, 35, 36, 37, 3499, 1885, 38, 39, 30, 40, 41]);
    assert_eq!(pieces(&ids), ["Order", "Ġ", "1", "2", "3", "4", "5", "Ġcosts", "Ġ$", "6", "7", ".", "8", "9"]);
}

#[test]
fn chatml_special_tokens_are_single_and_add_no_space() {
    let text = "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n";
    let ids = smollm2().tokenizer().encode(text).unwrap();
    assert_eq!(ids, [1, 9690, 198, 2683, 359, 5356, 30, 2, 198, 1, 4093, 198, 26843, 2, 198]);
    let pieces = pieces(&ids);
    assert_eq!(pieces[0], "<|im_start|>");
    // No `Ġsystem`: text after a special token gets no prefix space (candle's builder adds one).
    assert_eq!(pieces[1], "system");
    assert_eq!(pieces[7], "<|im_end|>");
    assert_eq!(smollm2().tokenizer().token_id("<|im_end|>"), Some(2));
}
