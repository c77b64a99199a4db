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
/// let changes = cairn_tools::debug::diff_values(
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
    // The children on either side, by path segment (object keys sorted and merged, array
    // indexes in order).
    let children: Vec<(String, Option<&Value>, Option<&Value>)> = match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().map(|k| (escape(k), a.get(k), b.get(k))).collect()
        }
        (Value::Array(a), Value::Array(b)) => {
            (0..a.len().max(b.len())).map(|i| (i.to_string(), a.get(i), b.get(i))).collect()
        }
        (a, b) if a == b => return,
        (a, b) => {
            out.push(Change {
                path: path.clone(),
                before: Some(a.clone()),
                after: Some(b.clone()),
            });
            return;
        }
    };
    for (segment, x, y) in children {
        let len = path.len();
        path.push('/');
        path.push_str(&segment);
        match (x, y) {
            (Some(x), Some(y)) => walk(path, x, y, out),
            (x, y) => {
                out.push(Change { path: path.clone(), before: x.cloned(), after: y.cloned() })
            }
        }
        path.truncate(len);
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
