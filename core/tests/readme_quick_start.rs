//! The README's "Your transaction, your driver" Rust quick start is the program
//! core/examples/app_tx.rs, which `cargo test` builds: this test keeps the README's copy
//! equal to it, so the README never shows code that does not compile.

#[test]
fn the_readme_shows_the_compiled_app_tx_example() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/app_tx.rs")).unwrap();
    let program: String = example
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let marker = "<!-- compiled as core/examples/app_tx.rs";
    let after = &readme[readme.find(marker).expect("the README marks the block")..];
    let start = after
        .find("```rust\n")
        .expect("a rust block follows the marker")
        + 8;
    let block = &after[start..start + after[start..].find("```\n").expect("closed")];
    assert_eq!(
        block, program,
        "README.md's block differs from core/examples/app_tx.rs: copy the example into it"
    );
}
