//! The Rust code the docs show is the code `cargo test` compiles: the README's quick start is
//! core/examples/quick_start.rs, and docs/rust.md's "Your transaction, your driver" and "Typed
//! payloads" programs are core/examples/app_tx.rs and core/examples/typed.rs. These tests keep
//! each page's copy equal to its example, so the docs never show Rust that does not compile.

use std::path::Path;

/// The example without its leading `//!` lines and the blank lines after them.
fn program(example: &str) -> String {
    example
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The first ```rust block after `marker` in `page`.
fn block_after<'a>(page: &'a str, marker: &str, name: &str) -> &'a str {
    let after = &page[page
        .find(marker)
        .unwrap_or_else(|| panic!("{name} has no `{marker}` marker"))..];
    let start = after
        .find("```rust\n")
        .expect("a rust block follows the marker")
        + 8;
    &after[start..start + after[start..].find("```\n").expect("closed")]
}

fn check(page: &str, example: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("..").join(page)).unwrap();
    let code = std::fs::read_to_string(root.join(example)).unwrap();
    let marker = format!("<!-- compiled as core/{example}");
    assert_eq!(
        block_after(&text, &marker, page),
        program(&code),
        "{page}'s block differs from core/{example}: copy the example into it"
    );
}

#[test]
fn the_readme_shows_the_compiled_quick_start() {
    check("README.md", "examples/quick_start.rs");
}

#[test]
fn docs_rust_shows_the_compiled_app_tx_example() {
    check("docs/rust.md", "examples/app_tx.rs");
}

#[test]
fn docs_rust_shows_the_compiled_typed_example() {
    check("docs/rust.md", "examples/typed.rs");
}
