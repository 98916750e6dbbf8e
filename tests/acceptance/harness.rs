//! Runs the rows, prints the per-row table and the closing line, and keeps README.md's copy
//! of the table equal to [`rows::ALL`].
//!
//! Rows run in parallel (`QB_ACCEPTANCE_JOBS`, default 6): each has its own database, ports
//! and relay process, so they are independent. A row that panics or outlives
//! [`ROW_TIMEOUT`] is failed; one that returns `Err(NotRun)` is not run, with its reason.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::rows::{self, Check, Row};

const ROW_TIMEOUT: Duration = Duration::from_secs(180);
const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
const TABLE_START: &str =
    "<!-- rows: generated from rows/mod.rs; check or rewrite with the suite -->";
const TABLE_END: &str = "<!-- end of rows -->";

enum Status {
    Passed,
    Failed(String),
    NotRun(String),
}

pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--write-readme") {
        return write_readme();
    }
    // Row numbers select rows; libtest's flags (cargo passes some) are ignored.
    let wanted: Vec<u32> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let selected: Vec<&'static Row> = rows::ALL
        .iter()
        .filter(|r| wanted.is_empty() || wanted.contains(&r.n))
        .collect();
    let jobs = std::env::var("QB_ACCEPTANCE_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(6);
    quiet_panics();
    let t0 = Instant::now();
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let results = runtime.block_on(run_all(selected, jobs));
    let mut failed = 0;
    let mut passed = 0;
    let mut not_run = 0;
    println!("\n| # | Behaviour | Result |\n|---|---|---|");
    for (row, status, secs) in &results {
        let cell = match status {
            Status::Passed => {
                passed += 1;
                format!("passed ({secs:.1} s)")
            }
            Status::Failed(why) => {
                failed += 1;
                format!("FAILED: {}", one_line(why))
            }
            Status::NotRun(why) => {
                not_run += 1;
                format!("not run: {why}")
            }
        };
        println!("| {} | {} | {cell} |", row.n, row.title);
    }
    let mut readme_ok = true;
    if wanted.is_empty() {
        if let Err(why) = check_readme() {
            readme_ok = false;
            println!("\n{why}");
        }
    }
    println!(
        "\nacceptance: {passed} passed, {failed} failed, {not_run} not run of {} rows in {:.0} s",
        results.len(),
        t0.elapsed().as_secs_f64()
    );
    if failed == 0 && readme_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn run_all(selected: Vec<&'static Row>, jobs: usize) -> Vec<(&'static Row, Status, f64)> {
    let gate = Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let mut running = Vec::new();
    for row in selected {
        let gate = gate.clone();
        running.push(tokio::spawn(async move {
            let _slot = gate.acquire_owned().await.unwrap();
            let t0 = Instant::now();
            let status = run_one(row).await;
            let secs = t0.elapsed().as_secs_f64();
            let word = match &status {
                Status::Passed => "passed".to_string(),
                Status::Failed(why) => format!("FAILED: {why}"),
                Status::NotRun(why) => format!("not run: {why}"),
            };
            eprintln!("row {} {} — {word} ({secs:.1} s)", row.n, row.name);
            (row, status, secs)
        }));
    }
    let mut results = Vec::new();
    for r in running {
        results.push(r.await.expect("the row runner"));
    }
    results
}

async fn run_one(row: &'static Row) -> Status {
    let test = match &row.check {
        Check::NotBuilt(why) => return Status::NotRun(why.to_string()),
        Check::Test(test) => *test,
    };
    // Its own task, so a panic is caught as this row's failure.
    let task = tokio::spawn(test());
    match tokio::time::timeout(ROW_TIMEOUT, task).await {
        Err(_) => Status::Failed(format!("timed out after {} s", ROW_TIMEOUT.as_secs())),
        Ok(Ok(Ok(()))) => Status::Passed,
        Ok(Ok(Err(rows::NotRun(why)))) => Status::NotRun(why),
        Ok(Err(e)) if e.is_panic() => {
            let p = e.into_panic();
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panicked".into());
            Status::Failed(msg)
        }
        Ok(Err(e)) => Status::Failed(e.to_string()),
    }
}

/// Panics are the rows' failures; their messages go to the table, the location to stderr.
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        if let Some(loc) = info.location() {
            eprintln!("panic at {}:{}", loc.file(), loc.line());
        }
    }));
}

fn one_line(s: &str) -> String {
    let s = s.replace(['\n', '|'], " ");
    if s.len() > 300 {
        let cut = (0..=300).rev().find(|i| s.is_char_boundary(*i)).unwrap();
        format!("{}…", &s[..cut])
    } else {
        s
    }
}

/// The table README.md holds: every row, its behaviour and the test that proves it (or why
/// nothing does yet).
fn readme_table() -> String {
    let mut t = format!("{TABLE_START}\n| # | Behaviour | Test |\n|---|---|---|\n");
    for row in rows::ALL {
        let test = match &row.check {
            Check::Test(_) => format!("`rows::{}`", row.name),
            Check::NotBuilt(why) => format!("not run: {why}"),
        };
        t.push_str(&format!("| {} | {} | {test} |\n", row.n, row.title));
    }
    t.push_str(TABLE_END);
    t
}

fn check_readme() -> Result<(), String> {
    let text = std::fs::read_to_string(README).map_err(|e| format!("{README}: {e}"))?;
    if text.contains(&readme_table()) {
        Ok(())
    } else {
        Err(format!(
            "{README} does not hold the current table of rows: rewrite it with \
             `cargo test -p queuebox-acceptance -- --write-readme`"
        ))
    }
}

fn write_readme() -> ExitCode {
    let text = std::fs::read_to_string(README).unwrap_or_default();
    let new = match (text.find(TABLE_START), text.find(TABLE_END)) {
        (Some(a), Some(b)) => format!(
            "{}{}{}",
            &text[..a],
            readme_table(),
            &text[b + TABLE_END.len()..]
        ),
        _ => format!("{text}\n{}\n", readme_table()),
    };
    std::fs::write(README, new).expect("write README.md");
    println!("wrote the table of rows to {README}");
    ExitCode::SUCCESS
}
