//! The `application_name` of the relay's PostgreSQL sessions, so an operator tells replicas
//! apart in `pg_stat_activity`: `queuebox-relay@<host name>/<process id>` (the host name
//! is the pod's name under Kubernetes; the process id tells two relays on one host apart).
//!
//! The operator's choice wins: a database URL that sets `application_name` (or `options`
//! with `-c application_name=…`) is left as it is, and so is every URL while `PGAPPNAME` is
//! set (the driver reads it). SQL Server URLs are left as they are.

use queuebox_core::backend::DatabaseSettings;

/// PostgreSQL keeps the first 63 bytes of an `application_name` (NAMEDATALEN - 1).
const MAX_LEN: usize = 63;

/// `queuebox-relay@<host>/<pid>`, printable ASCII only (PostgreSQL turns anything else
/// into `?`), at most [`MAX_LEN`] bytes: the host name is shortened, never the pid.
pub fn relay_name() -> String {
    let pid = std::process::id();
    let host: String = host_name()
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .collect();
    let fixed = format!("queuebox-relay@/{pid}").len();
    let host = &host[..host.len().min(MAX_LEN.saturating_sub(fixed))];
    if host.is_empty() {
        format!("queuebox-relay/{pid}")
    } else {
        format!("queuebox-relay@{host}/{pid}")
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// `settings` with `application_name=<name>` added to a PostgreSQL URL that sets none.
pub fn apply(mut settings: DatabaseSettings, name: &str) -> DatabaseSettings {
    if std::env::var_os("PGAPPNAME").is_none() {
        settings.url = with_application_name(&settings.url, name);
    }
    settings
}

/// `url` with `application_name=<name>` in its query, unless it is not a PostgreSQL URL or
/// already names one.
pub fn with_application_name(url: &str, name: &str) -> String {
    let lower = url.trim().to_ascii_lowercase();
    let postgres = ["postgres://", "postgresql://", "jdbc:postgresql:"]
        .iter()
        .any(|p| lower.starts_with(p));
    let (body, fragment) = match url.find('#') {
        Some(i) => url.split_at(i),
        None => (url, ""),
    };
    let query = body.split_once('?').map(|(_, q)| q).unwrap_or("");
    let named = url::form_urlencoded::parse(query.as_bytes()).any(|(k, v)| {
        k.eq_ignore_ascii_case("application_name")
            || k.eq_ignore_ascii_case("applicationname")
            || (k == "options" && v.contains("application_name"))
    });
    if !postgres || named {
        return url.to_string();
    }
    let value: String = url::form_urlencoded::byte_serialize(name.as_bytes()).collect();
    let sep = if body.contains('?') {
        if body.ends_with('?') || body.ends_with('&') {
            ""
        } else {
            "&"
        }
    } else {
        "?"
    };
    format!("{body}{sep}application_name={value}{fragment}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_added_unless_the_url_has_one() {
        let n = "queuebox-relay@h/1";
        assert_eq!(
            with_application_name("postgres://u@h:5432/db", n),
            "postgres://u@h:5432/db?application_name=queuebox-relay%40h%2F1"
        );
        assert_eq!(
            with_application_name("postgres://u@h/db?sslmode=require", n),
            "postgres://u@h/db?sslmode=require&application_name=queuebox-relay%40h%2F1"
        );
        for kept in [
            "postgres://u@h/db?application_name=mine",
            "postgresql://u@h/db?sslmode=disable&application_name=mine",
            "jdbc:postgresql://h/db?ApplicationName=mine",
            "postgres://u@h/db?options=-c%20application_name%3Dmine",
            "sqlserver://u:p@h:1433/db",
            "Server=tcp:h,1433;Database=db",
        ] {
            assert_eq!(with_application_name(kept, n), kept);
        }
    }

    #[test]
    fn the_relay_name_fits_postgresql() {
        let n = relay_name();
        assert!(n.starts_with("queuebox-relay"), "{n}");
        assert!(n.ends_with(&format!("/{}", std::process::id())), "{n}");
        assert!(
            n.len() <= MAX_LEN && n.chars().all(|c| c.is_ascii_graphic()),
            "{n}"
        );
    }
}
