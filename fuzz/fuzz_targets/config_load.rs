//! Configuration loading: YAML text, `${VAR}` / `${VAR:-default}` substitution and
//! `QUEUEBOX_*` environment overrides through `queuebox_config::from_yaml_with_env`, the
//! pure core of `queuebox_config::load` (which only adds reading the file and the process
//! environment).
//!
//! Input: the YAML text, then optionally a line `#--env--` followed by `NAME=value` lines,
//! so the seed corpus (fuzz/corpus/config_load) is readable configuration.
//!
//! Beyond "no panic": every refusal names a key path and says what is wrong with it; a
//! problem blamed on an environment variable names one that was given; an accepted
//! configuration renders (`check-config`) as YAML that parses again.
#![no_main]

use libfuzzer_sys::fuzz_target;

const ENV_MARKER: &str = "\n#--env--\n";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return; // the loader reads the file with read_to_string: UTF-8 only
    };
    let (yaml, env) = text.split_once(ENV_MARKER).unwrap_or((text, ""));
    let vars: Vec<(String, String)> = env
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match queuebox_config::from_yaml_with_env(yaml, &vars) {
        Err(errs) => {
            assert!(!errs.problems.is_empty(), "refused without a problem");
            for p in &errs.problems {
                assert!(!p.path.is_empty(), "a problem without a key path: {p:?}");
                assert!(
                    !p.message.trim().is_empty(),
                    "a problem without a reason: {p:?}"
                );
                if let Some(var) = &p.env {
                    assert!(
                        vars.iter().any(|(k, _)| k == var),
                        "blamed {var}, not given"
                    );
                }
            }
            let _ = errs.to_string();
        }
        Ok(cfg) => {
            let out = cfg.to_redacted_yaml();
            assert!(!out.starts_with("# cannot render"), "{out}");
            if let Err(e) = serde_yaml::from_str::<serde_yaml::Value>(&out) {
                panic!("check-config printed YAML that does not parse ({e}):\n{out}");
            }
            let _ = cfg.secrets();
            let _ = cfg.database_settings();
            for r in &cfg.routes {
                let _ = cfg.route_for(&r.topic_pattern);
            }
        }
    }
});
