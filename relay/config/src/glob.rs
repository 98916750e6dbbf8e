//! Route globs: which route's `topicPattern` a topic matches.

/// Anchored glob over a dotted topic: `*` is one segment without dots, `**` is any text
/// including dots, every other character is literal.
pub fn glob_match(pattern: &str, topic: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match p {
            [] => t.is_empty(),
            [b'*', b'*', rest @ ..] => (0..=t.len()).any(|i| go(rest, &t[i..])),
            [b'*', rest @ ..] => {
                let mut i = 0;
                loop {
                    if go(rest, &t[i..]) {
                        return true;
                    }
                    if i == t.len() || t[i] == b'.' {
                        return false;
                    }
                    i += 1;
                }
            }
            [c, rest @ ..] => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    go(pattern.as_bytes(), topic.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs_are_anchored_and_segment_aware() {
        assert!(glob_match("order.*", "order.created"));
        assert!(!glob_match("order.*", "order"));
        assert!(!glob_match("order.*", "order.item.added"));
        assert!(glob_match("order.**", "order.item.added"));
        assert!(glob_match("**", "anything.at.all"));
    }
}
