//! The three spellings of a SQL Server connection string, and the one recogniser of them.
//! Compiled in every build, not only with the `sqlserver` feature: the backend factory
//! ([`crate::backend`]) must tell a SQL Server URL from a wrong one even where the driver is
//! not built, so that it can name the missing feature; the SQL Server store's parser asks the
//! same recogniser which form it reads.

/// The three spellings of a SQL Server connection string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SqlServerForm {
    /// `sqlserver://` or `mssql://`.
    Url,
    /// `jdbc:sqlserver://host:port;key=value;…`.
    Jdbc,
    /// ADO.NET `Server=…;Database=…;…`.
    Ado,
}

/// Which SQL Server form `url` is written in, if any. The one recogniser of SQL Server URLs:
/// the factory and the SQL Server parser both ask it.
pub(crate) fn sqlserver_form(url: &str) -> Option<SqlServerForm> {
    let lower = url.trim().to_ascii_lowercase();
    if lower.starts_with("sqlserver://") || lower.starts_with("mssql://") {
        return Some(SqlServerForm::Url);
    }
    if lower.starts_with("jdbc:sqlserver://") {
        return Some(SqlServerForm::Jdbc);
    }
    let ado = !lower.contains("://")
        && lower.split(';').any(|pair| {
            let key = pair.split('=').next().unwrap_or("").trim();
            matches!(
                key,
                "server" | "data source" | "address" | "addr" | "network address"
            )
        });
    ado.then_some(SqlServerForm::Ado)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_is_told_apart_from_a_postgres_url() {
        assert_eq!(
            sqlserver_form("jdbc:sqlserver://h;databaseName=a"),
            Some(SqlServerForm::Jdbc)
        );
        assert_eq!(
            sqlserver_form("Server=h;Database=a"),
            Some(SqlServerForm::Ado)
        );
        assert_eq!(sqlserver_form("postgres://h/a"), None);
    }
}
