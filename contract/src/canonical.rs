//! Canonical JSON: object keys sorted by bytes at every depth, no whitespace.
//! A confirmation is bound to it and an idempotency receipt hashes it, so the
//! same request reads the same however its producer ordered the keys.

use serde_json::Value;

/// `value` in canonical form.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write(item, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sorted_at_every_depth_without_whitespace() {
        let value = serde_json::json!({"b": [{"z": 1, "a": "x\"y"}], "a": null, "B": 1.5});
        assert_eq!(
            canonical_json(&value),
            r#"{"B":1.5,"a":null,"b":[{"a":"x\"y","z":1}]}"#
        );
    }
}
