//! A JSON value in a binary body (`docs/format.md` §10): one tag byte, then its content.
//!
//! | tag | value | content |
//! |---|---|---|
//! | 0 | `null` | none |
//! | 1 | `false` | none |
//! | 2 | `true` | none |
//! | 3 | an integer >= 0 | varint |
//! | 4 | an integer < 0 | varint of `-1 - n` |
//! | 5 | any other number | its `f64`, 8 bytes little-endian (finite) |
//! | 6 | a string | varint length, UTF-8 |
//! | 7 | an array | varint count, the values |
//! | 8 | an object | varint count, then each entry: key (as a string), value; keys strictly increasing |
//!
//! Arrays and objects nest at most [`DEPTH_MAX`] deep, as serde_json reads them: deeper values
//! are refused when written (no body is written that could not be read) and when read (no
//! stack runs out on untrusted bytes). Numbers read back bit for bit, as the JSON form's
//! `float_roundtrip` does.

use serde_json::{Map, Number, Value};

use super::wire::{Bin, Malformed, Reader, put_str, put_varint};
use crate::error::Error;

/// Nesting of arrays and objects at most (serde_json's own limit when it reads JSON text).
pub(crate) const DEPTH_MAX: u32 = 128;

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const UINT: u8 = 3;
const NEG_INT: u8 = 4;
const FLOAT: u8 = 5;
const STRING: u8 = 6;
const ARRAY: u8 = 7;
const OBJECT: u8 = 8;

impl Bin for Value {
    fn put(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        put_value(self, 0, out)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        get_value(r, 0)
    }
}

fn put_value(v: &Value, depth: u32, out: &mut Vec<u8>) -> Result<(), Error> {
    match v {
        Value::Null => out.push(NULL),
        Value::Bool(b) => out.push(if *b { TRUE } else { FALSE }),
        Value::Number(n) => put_number(n, out),
        Value::String(s) => {
            out.push(STRING);
            put_str(s, out);
        }
        Value::Array(items) => {
            let depth = deeper(depth)?;
            out.push(ARRAY);
            put_varint(items.len() as u64, out);
            for item in items {
                put_value(item, depth, out)?;
            }
        }
        Value::Object(map) => {
            let depth = deeper(depth)?;
            out.push(OBJECT);
            put_varint(map.len() as u64, out);
            for (k, item) in map {
                put_str(k, out);
                put_value(item, depth, out)?;
            }
        }
    }
    Ok(())
}

/// The depth inside one more array or object, refused past [`DEPTH_MAX`].
fn deeper(depth: u32) -> Result<u32, Error> {
    if depth >= DEPTH_MAX {
        return Err(Error::Codec(format!("a JSON value nests deeper than {DEPTH_MAX}")));
    }
    Ok(depth + 1)
}

fn put_number(n: &Number, out: &mut Vec<u8>) {
    if let Some(u) = n.as_u64() {
        out.push(UINT);
        put_varint(u, out);
    } else if let Some(i) = n.as_i64() {
        // Negative: `as_u64` takes every integer >= 0.
        out.push(NEG_INT);
        put_varint(!(i as u64), out);
    } else {
        out.push(FLOAT);
        out.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_le_bytes());
    }
}

fn get_value(r: &mut Reader<'_>, depth: u32) -> Result<Value, Malformed> {
    Ok(match r.byte()? {
        NULL => Value::Null,
        FALSE => Value::Bool(false),
        TRUE => Value::Bool(true),
        UINT => Value::Number(r.varint()?.into()),
        NEG_INT => Value::Number(negative(r.varint()?)?.into()),
        FLOAT => {
            let bytes: [u8; 8] = r.take(8)?.try_into().map_err(|_| Malformed("ends early"))?;
            let f = f64::from_le_bytes(bytes);
            Value::Number(Number::from_f64(f).ok_or(Malformed("a number is not finite"))?)
        }
        STRING => Value::String(r.str()?.to_owned()),
        ARRAY => {
            let depth = nested(depth)?;
            let n = r.count()?;
            let mut items = Vec::with_capacity(n.min(64));
            for _ in 0..n {
                items.push(get_value(r, depth)?);
            }
            Value::Array(items)
        }
        OBJECT => Value::Object(get_object(r, nested(depth)?)?),
        _ => return Err(Malformed("unknown JSON value tag")),
    })
}

/// The integer `-1 - v`, when it fits an `i64`.
fn negative(v: u64) -> Result<i64, Malformed> {
    i64::try_from(v).map(|v| -1 - v).map_err(|_| Malformed("a negative integer overflows"))
}

fn nested(depth: u32) -> Result<u32, Malformed> {
    if depth >= DEPTH_MAX {
        return Err(Malformed("a JSON value nests too deep"));
    }
    Ok(depth + 1)
}

fn get_object(r: &mut Reader<'_>, depth: u32) -> Result<Map<String, Value>, Malformed> {
    let n = r.count()?;
    let mut map = Map::new();
    let mut last: Option<&str> = None;
    for _ in 0..n {
        let key = r.str()?;
        if last.is_some_and(|last| last >= key) {
            return Err(Malformed("object keys are not strictly increasing"));
        }
        last = Some(key);
        let value = get_value(r, depth)?;
        map.insert(key.to_owned(), value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn encoded(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        v.put(&mut out).expect("encodes");
        out
    }

    fn decoded(bytes: &[u8]) -> Result<Value, Malformed> {
        let mut r = Reader::new(bytes);
        let v = <Value as Bin>::get(&mut r)?;
        assert!(r.is_empty(), "trailing bytes");
        Ok(v)
    }

    #[test]
    fn values_round_trip_bit_for_bit() {
        let v = json!({
            "n": null, "t": true, "f": false, "u": u64::MAX, "i": i64::MIN, "m": -1,
            "x": 0.1, "z": -0.0, "big": 1e300, "s": "héllo", "a": [1, [2, {}], []],
        });
        assert_eq!(decoded(&encoded(&v)), Ok(v.clone()));
        let z = decoded(&encoded(&json!(-0.0))).expect("decodes");
        assert!(z.as_f64().expect("f64").is_sign_negative());
    }

    #[test]
    fn the_bytes_are_pinned() {
        assert_eq!(
            encoded(&json!({"a": [1, -2, "x"]})),
            [8, 1, 1, b'a', 7, 3, 3, 1, 4, 1, 6, 1, b'x']
        );
        assert_eq!(encoded(&json!(0.5)), [5, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f]);
    }

    #[test]
    fn nesting_is_bounded_both_ways() {
        let mut deep = json!(1);
        for _ in 0..DEPTH_MAX {
            deep = json!([deep]);
        }
        assert!(decoded(&encoded(&deep)).is_ok(), "the deepest JSON reads");
        let too_deep = json!([deep]);
        assert!(too_deep.put(&mut Vec::new()).is_err(), "one more is refused when written");
        let mut bytes = [ARRAY, 1].repeat(DEPTH_MAX as usize + 1);
        bytes.push(NULL);
        assert!(decoded(&bytes).is_err(), "and when read");
        assert!(decoded(&[ARRAY, 1].repeat(100_000)).is_err(), "no stack runs out");
    }

    #[test]
    fn what_is_not_canonical_is_refused() {
        assert!(decoded(&[OBJECT, 2, 1, b'b', NULL, 1, b'a', NULL]).is_err(), "keys out of order");
        assert!(decoded(&[OBJECT, 2, 1, b'a', NULL, 1, b'a', NULL]).is_err(), "a key twice");
        assert!(decoded(&[FLOAT, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f]).is_err(), "infinity");
        assert!(
            decoded(&[NEG_INT, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1]).is_err()
        );
        assert!(decoded(&[9]).is_err(), "unknown tag");
        assert!(decoded(&[STRING, 1, 0xff]).is_err(), "not UTF-8");
    }
}
