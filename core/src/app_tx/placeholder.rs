//! The parameter styles of the drivers applications use, and the one function that turns a
//! statement of `store::postgres::sql` (`$1`, `$2`, …) or `store::sqlserver::sql` (`@P1`, …)
//! into the style a driver expects. Wrappers never edit SQL text: they name their style.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// How a driver marks a parameter in SQL text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placeholder {
    /// `$1`, `$2`: sqlx, pgx, node-postgres, Npgsql.
    Dollar,
    /// `?` in order of appearance: Knex raw, ODBC, JDBC.
    Question,
    /// `%s` in order of appearance: psycopg. A literal `%` in the text is doubled.
    Percent,
    /// `:p1`, `:p2`: SQLAlchemy `text()`.
    Colon,
    /// `@p1`, `@p2`: SQL Server drivers, Dapper.
    At,
}

impl Placeholder {
    /// Every style, with the name it is parsed from.
    pub const ALL: [(Placeholder, &'static str); 5] = [
        (Placeholder::Dollar, "dollar"),
        (Placeholder::Question, "question"),
        (Placeholder::Percent, "percent"),
        (Placeholder::Colon, "colon"),
        (Placeholder::At, "at"),
    ];

    /// The lowercase name (`"dollar"`, …).
    pub fn as_str(self) -> &'static str {
        Placeholder::ALL
            .iter()
            .find(|(p, _)| *p == self)
            .map(|(_, n)| *n)
            .expect("every style is in ALL")
    }

    /// Positional styles bind in order of appearance, so a parameter used twice is sent twice.
    fn positional(self) -> bool {
        matches!(self, Placeholder::Question | Placeholder::Percent)
    }
}

impl fmt::Display for Placeholder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Placeholder {
    type Err = Error;
    fn from_str(s: &str) -> Result<Placeholder> {
        Placeholder::ALL
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(p, _)| *p)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "placeholder: unknown style `{s}` (one of dollar, question, percent, colon, at)"
                ))
            })
    }
}

/// Which marker the source text uses: `$n` (PostgreSQL statements) or `@Pn` (SQL Server).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Marker {
    Dollar,
    AtP,
}

/// Rewrites the markers of `sql` into `style` and lays `params` out for it: numbered styles
/// keep the parameters as they are; positional styles get one parameter per marker, in the
/// order the markers appear. Quoted literals are copied untouched.
pub(crate) fn render(
    sql: &str,
    marker: Marker,
    style: Placeholder,
    params: &[Option<String>],
) -> (String, Vec<Option<String>>) {
    let prefix = match marker {
        Marker::Dollar => "$",
        Marker::AtP => "@P",
    };
    let mut out = String::with_capacity(sql.len() + 16);
    let mut laid_out = Vec::new();
    let mut rest = sql;
    let mut quoted = false;
    while let Some(c) = rest.chars().next() {
        if c == '\'' {
            quoted = !quoted;
        }
        if !quoted && rest.starts_with(prefix) {
            let digits: String = rest[prefix.len()..]
                .chars()
                .take_while(|d| d.is_ascii_digit())
                .collect();
            if let Ok(n) = digits.parse::<usize>() {
                out.push_str(&match style {
                    Placeholder::Dollar => format!("${n}"),
                    Placeholder::Question => "?".into(),
                    Placeholder::Percent => "%s".into(),
                    Placeholder::Colon => format!(":p{n}"),
                    Placeholder::At => format!("@p{n}"),
                });
                if style.positional() {
                    laid_out.push(params.get(n - 1).cloned().flatten());
                }
                rest = &rest[prefix.len() + digits.len()..];
                continue;
            }
        }
        if c == '%' && style == Placeholder::Percent {
            out.push('%');
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    if !style.positional() {
        laid_out = params.to_vec();
    }
    (out, laid_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: &[&str]) -> Vec<Option<String>> {
        v.iter().map(|s| Some(s.to_string())).collect()
    }

    #[test]
    fn every_style_renders_numbered_or_positional_markers() {
        let sql = "SELECT CAST($1 AS uuid), $2, $1 WHERE x LIKE 'a%$1' AND y = 5 % 2";
        let params = p(&["a", "b"]);
        let (s, ps) = render(sql, Marker::Dollar, Placeholder::Dollar, &params);
        assert_eq!(s, sql);
        assert_eq!(ps, params);
        let (s, ps) = render(sql, Marker::Dollar, Placeholder::Question, &params);
        assert_eq!(
            s,
            "SELECT CAST(? AS uuid), ?, ? WHERE x LIKE 'a%$1' AND y = 5 % 2"
        );
        assert_eq!(ps, p(&["a", "b", "a"]));
        let (s, ps) = render(sql, Marker::Dollar, Placeholder::Percent, &params);
        assert_eq!(
            s,
            "SELECT CAST(%s AS uuid), %s, %s WHERE x LIKE 'a%%$1' AND y = 5 %% 2"
        );
        assert_eq!(ps, p(&["a", "b", "a"]));
        let (s, _) = render(sql, Marker::Dollar, Placeholder::Colon, &params);
        assert_eq!(
            s,
            "SELECT CAST(:p1 AS uuid), :p2, :p1 WHERE x LIKE 'a%$1' AND y = 5 % 2"
        );
        let (s, ps) = render(
            "WHERE id = @P1 AND t = @P12",
            Marker::AtP,
            Placeholder::At,
            &params,
        );
        assert_eq!(s, "WHERE id = @p1 AND t = @p12");
        assert_eq!(ps, params);
    }

    #[test]
    fn styles_parse_from_their_names_and_an_unknown_one_is_named() {
        for (p, n) in Placeholder::ALL {
            assert_eq!(n.parse::<Placeholder>().unwrap(), p);
            assert_eq!(p.to_string(), n);
        }
        let e = "qmark".parse::<Placeholder>().unwrap_err().to_string();
        assert!(e.contains("placeholder") && e.contains("`qmark`"), "{e}");
    }
}
