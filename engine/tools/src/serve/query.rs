//! Decoded query pairs read into a derived struct (`#[derive(Deserialize, IntoParams)]`): a
//! small serde deserializer over the pairs, so that every parameter struct is declared once
//! (its fields are what the OpenAPI document lists) and every refusal names its parameter.
//!
//! What it reads: a key given more than once fills a `Vec` field and is refused by name for any
//! other (`given more than once`); numbers are parsed from the text (`"x" is not a number`); a
//! `bool` is a flag (`1`, `true` or empty for yes, `0` or `false` for no); an unknown key is
//! refused by name with the known ones (structs are `deny_unknown_fields`). Pure: no I/O, no
//! axum, so the fuzz target `serve_params` drives it directly.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use serde::{Deserialize, Deserializer};

use super::params::Reject;

/// Reads `pairs` into `T`, or a 400 naming the parameter at fault.
///
/// # Errors
/// A 400 naming the parameter: unknown, repeated where one is expected, or malformed.
///
/// # Examples
/// ```
/// use cairn_tools::serve::params::ListParams;
/// use cairn_tools::serve::query::from_pairs;
/// let pairs = vec![("offset".to_owned(), "x".to_owned())];
/// let err = from_pairs::<ListParams>(&pairs).unwrap_err();
/// assert_eq!((err.status, err.field.as_deref()), (400, Some("offset")));
/// ```
pub fn from_pairs<T: DeserializeOwned>(pairs: &[(String, String)]) -> Result<T, Reject> {
    let mut grouped: Vec<(&str, Vec<&str>)> = Vec::new();
    for (key, value) in pairs {
        match grouped.iter_mut().find(|(k, _)| *k == key.as_str()) {
            Some((_, values)) => values.push(value),
            None => grouped.push((key, vec![value])),
        }
    }
    let map = Pairs { grouped: grouped.into_iter(), key: None, values: Vec::new() };
    T::deserialize(map).map_err(|e| {
        let field = e.field.unwrap_or_else(|| "query".to_owned());
        Reject::bad(&field.chars().take(64).collect::<String>(), e.message)
    })
}

/// A query's parameters: read with [`from_pairs`], then checked across fields (what each field
/// allows alone but not together); `app::Params` extracts them for a handler.
pub trait Check: DeserializeOwned {
    /// Refuses a combination of fields, naming the one at fault.
    ///
    /// # Errors
    /// A 400 naming the parameter.
    fn check(&self) -> Result<(), Reject> {
        Ok(())
    }
}

/// `pairs` read into `T` and checked: what a handler's `Params<T>` holds.
///
/// # Errors
/// A 400 naming the parameter.
///
/// # Examples
/// ```
/// use cairn_tools::serve::params::StateParams;
/// use cairn_tools::serve::query::parse;
/// let pairs = vec![("at".to_owned(), "1".to_owned()), ("diff".to_owned(), "1,2".to_owned())];
/// assert_eq!(parse::<StateParams>(&pairs).unwrap_err().field.as_deref(), Some("diff"));
/// ```
pub fn parse<T: Check>(pairs: &[(String, String)]) -> Result<T, Reject> {
    let p: T = from_pairs(pairs)?;
    p.check()?;
    Ok(p)
}

/// Parses a field's text with [`FromStr`], as `#[serde(deserialize_with = "query::text")]`:
/// for fields whose type reads itself from text (statuses, kinds, ids) and says what is wrong.
///
/// # Errors
/// The parse error, as the parameter's.
pub fn text<'de, D, T>(de: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    let raw = String::deserialize(de)?;
    raw.parse::<T>().map(Some).map_err(|e| de::Error::custom(format!("{raw:?}: {e}")))
}

/// A refusal while reading: what is wrong and the parameter (once known).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
struct QueryError {
    message: String,
    field: Option<String>,
}

impl de::Error for QueryError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self { message: msg.to_string(), field: None }
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        let message = if expected.is_empty() {
            "this route takes no parameters".to_owned()
        } else {
            format!("unknown parameter (known: {})", expected.join(", "))
        };
        Self { message, field: Some(field.to_owned()) }
    }
}

/// The grouped pairs as a map.
struct Pairs<'a, I: Iterator<Item = (&'a str, Vec<&'a str>)>> {
    grouped: I,
    key: Option<&'a str>,
    values: Vec<&'a str>,
}

impl<'de, 'a, I: Iterator<Item = (&'a str, Vec<&'a str>)>> Deserializer<'de> for Pairs<'a, I> {
    type Error = QueryError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, QueryError> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

impl<'de, 'a, I: Iterator<Item = (&'a str, Vec<&'a str>)>> de::MapAccess<'de> for Pairs<'a, I> {
    type Error = QueryError;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, QueryError> {
        let Some((key, values)) = self.grouped.next() else { return Ok(None) };
        self.key = Some(key);
        self.values = values;
        let key: de::value::StrDeserializer<'_, QueryError> = key.into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, QueryError> {
        let values = std::mem::take(&mut self.values);
        seed.deserialize(Values(values)).map_err(|mut e| {
            e.field = e.field.or_else(|| self.key.map(str::to_owned));
            e
        })
    }
}

/// The values of one key: one for a scalar, any number for a `Vec`.
struct Values<'a>(Vec<&'a str>);

impl<'a> Values<'a> {
    fn one(&self) -> Result<&'a str, QueryError> {
        match self.0.as_slice() {
            [one] => Ok(one),
            _ => Err(de::Error::custom("given more than once")),
        }
    }

    fn number<T: FromStr>(&self) -> Result<T, QueryError> {
        let text = self.one()?;
        text.parse::<T>().map_err(|_| de::Error::custom(format!("{text:?} is not a number")))
    }
}

macro_rules! numbers {
    ($($method:ident $visit:ident $t:ty),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, QueryError> {
            visitor.$visit(self.number::<$t>()?)
        }
    )*};
}

impl<'de> Deserializer<'de> for Values<'_> {
    type Error = QueryError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, QueryError> {
        visitor.visit_string(self.one()?.to_owned())
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, QueryError> {
        match self.one()? {
            "1" | "true" | "" => visitor.visit_bool(true),
            "0" | "false" => visitor.visit_bool(false),
            other => Err(de::Error::custom(format!("{other:?}: expected 1 or 0"))),
        }
    }

    numbers! {
        deserialize_u8 visit_u8 u8, deserialize_u16 visit_u16 u16, deserialize_u32 visit_u32 u32,
        deserialize_u64 visit_u64 u64, deserialize_i32 visit_i32 i32, deserialize_i64 visit_i64 i64
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, QueryError> {
        visitor.visit_some(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, QueryError> {
        let each = self.0.into_iter().map(|v| Values(vec![v]));
        visitor.visit_seq(de::value::SeqDeserializer::new(each))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, QueryError> {
        let text: de::value::StrDeserializer<'_, QueryError> = self.one()?.into_deserializer();
        visitor.visit_enum(text)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, QueryError> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i128 u128 f32 f64 char str string bytes byte_buf unit unit_struct tuple
        tuple_struct map struct identifier ignored_any
    }
}

impl<'de> IntoDeserializer<'de, QueryError> for Values<'_> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

/// Query pairs, as the endpoint decodes them (for the parameter tests).
#[cfg(test)]
pub(super) fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}
