//! JSONata transforms and key expressions (relay/transform): compiling any expression text
//! and evaluating it under `Limits` over any JSON input, as the relay does at receipt and
//! before delivery, and key expressions through `key_text`.
//!
//! Input: a first line with the expression, then the JSON input (fuzz/corpus/transform).
//!
//! Beyond "no panic escapes": a result stays within `max_output_bytes` (the bound the relay
//! relies on to keep a transform from exhausting memory); a compile error names its key path.
//! A panic inside the engine is caught by `Expression` (a failed evaluation, as in the
//! relay) and printed; the first one found, a range end beyond i64, is a regression seed.
//! Known limit, not a finding: a single built-in call over a huge value (`$pad("", 2e8)`)
//! finishes before the time check (relay/transform/src/limits.rs).
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use queuebox_transform::{key_text, Expression, Limits};
use serde_json::Value;

const LIMITS: Limits = Limits {
    timeout: Duration::from_millis(50),
    max_depth: 50,
    max_output_bytes: 64 * 1024,
};

fuzz_target!(|data: &[u8]| {
    // libfuzzer-sys's panic hook aborts on every panic, even one caught inside: the engine's
    // panics are caught by `Expression` and become failed evaluations (the relay's behaviour,
    // relay/transform/src/expression.rs), so only a panic that escapes fails the target
    // (libfuzzer-sys aborts when the target itself unwinds).
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            eprintln!("panic (caught by Expression unless the target aborts next): {info}")
        }))
    });
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (source, input) = text.split_once('\n').unwrap_or((text, "{}"));
    let Ok(input) = serde_json::from_str::<Value>(input) else {
        return;
    };
    let expr = match Expression::compile(source, "sources.fuzz.transform.expression") {
        Ok(e) => e,
        Err(e) => {
            assert_eq!(e.key_path, "sources.fuzz.transform.expression");
            return;
        }
    };
    if let Ok(Some(v)) = expr.evaluate_plain(&input, LIMITS) {
        let size = serde_json::to_vec(&v).map_or(0, |b| b.len());
        assert!(size <= LIMITS.max_output_bytes, "a result of {size} bytes");
        if let Some(key) = key_text(&v) {
            assert!(!key.is_empty());
        }
    }
});
