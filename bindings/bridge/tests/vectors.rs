//! Runs every pure conformance vector file in proto-docs/vectors/ through
//! `queuebox_bridge::conformance`, the same entry point the language bindings call.

use std::path::Path;

#[test]
fn every_vector_file_passes_through_the_core() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto-docs/vectors");
    let mut total = 0;
    let mut failures = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json")
            || path.file_stem().unwrap() == "transitions"
        {
            continue;
        }
        let (n, f) =
            queuebox_bridge::conformance::check_file(&std::fs::read_to_string(&path).unwrap())
                .unwrap();
        assert!(n > 0, "{} has no cases", path.display());
        total += n;
        failures.extend(f);
    }
    assert!(
        failures.is_empty(),
        "vector mismatches:\n{}",
        failures.join("\n")
    );
    assert!(
        total >= 40,
        "expected at least 40 vector cases, found {total}"
    );
}
