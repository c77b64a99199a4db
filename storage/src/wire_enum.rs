//! A macro for the small `#[repr]` enums stored on disk.
//!
//! Each enum gets explicit discriminants (the on-disk value, never reused), a snake_case name for
//! humans (CLI, JSON), and serde that writes the discriminant to binary formats (postcard, our
//! records) and the name to human-readable formats (JSON). Decoding an unknown discriminant is an
//! error, never a default.

/// Declares a wire enum; see the module doc.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident: $repr:ident, $from:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal => $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr($repr)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $value, )+
        }

        impl $name {
            /// Every variant, in discriminant order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The variant stored as `value`, or `None` for a value no version ever wrote.
            pub const fn $from(value: $repr) -> Option<Self> {
                match value {
                    $( $value => Some(Self::$variant), )+
                    _ => None,
                }
            }

            /// The on-disk discriminant.
            pub const fn to_repr(self) -> $repr {
                self as $repr
            }

            /// The snake_case name used by the CLI and JSON.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => $text, )+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = crate::error::Error;

            fn from_str(s: &str) -> Result<Self, crate::error::Error> {
                match s {
                    $( $text => Ok(Self::$variant), )+
                    _ => Err(crate::error::Error::Invalid {
                        detail: format!("unknown {} {s:?}", stringify!($name)),
                    }),
                }
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                if serializer.is_human_readable() {
                    serializer.serialize_str(self.as_str())
                } else {
                    ::serde::Serialize::serialize(&self.to_repr(), serializer)
                }
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                if deserializer.is_human_readable() {
                    let text = <String as ::serde::Deserialize>::deserialize(deserializer)?;
                    text.parse().map_err(::serde::de::Error::custom)
                } else {
                    let value = <$repr as ::serde::Deserialize>::deserialize(deserializer)?;
                    Self::$from(value).ok_or_else(|| {
                        ::serde::de::Error::custom(format!(
                            "unknown {} discriminant {value}",
                            stringify!($name)
                        ))
                    })
                }
            }
        }
    };
}

pub(crate) use wire_enum;
