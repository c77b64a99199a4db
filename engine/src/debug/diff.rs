//! A structural diff of two JSON values, reported as JSON pointers.

use serde_json::Value;

use super::Change;

/// The differences between `before` and `after`: objects are compared key by key (in key order),
/// arrays index by index (extra items are additions or removals), anything else by value. Paths
/// are JSON pointers (RFC 6901, `~` and `/` escaped) relative to the values given.
///
/// # Examples
/// ```
/// use serde_json::json;
/// let changes = cairn::debug::diff_values(
///     &json!({"n": 1, "tags": ["a"], "gone": true}),
///     &json!({"n": 2, "tags": ["a", "b"]}),
/// );
/// let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
/// assert_eq!(paths, ["/gone", "/n", "/tags/1"]);
/// assert_eq!(changes[2].before, None);
/// assert_eq!(changes[2].after, Some(json!("b")));
/// ```
pub fn diff_values(before: &Value, after: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk(&mut String::new(), before, after, &mut out);
    out
}

fn walk(path: &mut String, before: &Value, after: &Value, out: &mut Vec<Change>) {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let len = path.len();
                path.push('/');
                path.push_str(&escape(key));
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => walk(path, x, y, out),
                    (x, y) => out.push(Change {
                        path: path.clone(),
                        before: x.cloned(),
                        after: y.cloned(),
                    }),
                }
                path.truncate(len);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                match (a.get(i), b.get(i)) {
                    (Some(x), Some(y)) => walk(path, x, y, out),
                    (x, y) => out.push(Change {
                        path: path.clone(),
                        before: x.cloned(),
                        after: y.cloned(),
                    }),
                }
                path.truncate(len);
            }
        }
        (a, b) if a == b => {}
        (a, b) => {
            out.push(Change { path: path.clone(), before: Some(a.clone()), after: Some(b.clone()) })
        }
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::diff_values;

    #[test]
    fn equal_values_have_no_changes_and_keys_are_escaped() {
        assert!(diff_values(&json!({"a": [1, {"b": 2}]}), &json!({"a": [1, {"b": 2}]})).is_empty());
        let changes = diff_values(&json!({"a/b": 1, "c~d": 1}), &json!({"a/b": 2, "c~d": 1}));
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "/a~1b");
        let whole = diff_values(&json!(1), &json!("x"));
        assert_eq!(whole[0].path, "");
        let removed = diff_values(&json!([1, 2, 3]), &json!([1]));
        let paths: Vec<_> = removed.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["/1", "/2"]);
        assert!(removed.iter().all(|c| c.after.is_none()));
    }
}
