//! The names of the engine's choices (search methods, presets, graph kinds, mechanisms, …) as the
//! command line, JSON and the page spell them. Each enum is declared with [`named_choices!`], which
//! gives serde and strum one spelling: strum's `IntoStaticStr` gives a value's name, `VariantArray`
//! the list of values. These helpers read a name back and list the choices for a message, so no
//! enum writes its own match arms; [`Choice`] adds `parse`/`name` to the run's settings.

use strum::VariantArray;

/// An enum whose values have names: implemented by every enum deriving strum's `VariantArray` and
/// `IntoStaticStr`.
pub trait Named: Copy + PartialEq + VariantArray + Into<&'static str> + 'static {}

impl<T: Copy + PartialEq + VariantArray + Into<&'static str> + 'static> Named for T {}

/// The name of `value`.
pub fn name<T: Named>(value: T) -> &'static str {
    value.into()
}

/// The value called `given`, ignoring case and surrounding spaces.
pub fn parse<T: Named>(given: &str) -> Option<T> {
    let wanted = given.trim();
    T::VARIANTS
        .iter()
        .copied()
        .find(|&v| name(v).eq_ignore_ascii_case(wanted))
}

/// Every name, quoted, as a message lists them: `'a', 'b' or 'c'`.
pub fn choices<T: Named>() -> String {
    let quoted: Vec<String> = T::VARIANTS
        .iter()
        .map(|&v| format!("'{}'", name(v)))
        .collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

/// Every name, comma-separated: `a, b, c`.
pub fn list<T: Named>() -> String {
    let all: Vec<&str> = T::VARIANTS.iter().map(|&v| name(v)).collect();
    all.join(", ")
}

/// A name that is none of its kind's values: what was asked for, what was given and every choice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{given}': choose {choices}")]
pub struct UnknownName {
    pub what: &'static str,
    pub given: String,
    /// Every choice, quoted and joined ([`choices`]).
    pub choices: String,
}

/// The value called `given`, or why not, naming `what` was asked for and every choice, e.g.
/// "unknown method 'x': choose 'cgp', 'exact', 'hybrid' or 'auto'".
pub fn parse_or_explain<T: Named>(what: &'static str, given: &str) -> Result<T, UnknownName> {
    parse(given).ok_or_else(|| UnknownName {
        what,
        given: given.to_string(),
        choices: choices::<T>(),
    })
}

/// Declares an enum of named choices (search methods, presets, graph kinds, mechanisms): unit
/// variants with the traits every such enum needs — compared and copied by value, read and
/// written by serde, named by strum's `IntoStaticStr` and listed by its `VariantArray` (so the
/// helpers above apply, [`Named`]) — and one spelling `case` given to both serde and strum, so
/// that the command line, JSON and the page cannot spell a value two ways. Further derives and
/// attributes are written on the enum as usual.
macro_rules! named_choices {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident in $case:literal {
            $($(#[$variant_meta:meta])* $variant:ident,)*
        }
    ) => {
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            ::serde::Serialize,
            ::serde::Deserialize,
            ::strum::IntoStaticStr,
            ::strum::VariantArray,
        )]
        #[serde(rename_all = $case)]
        #[strum(serialize_all = $case)]
        $(#[$meta])*
        $vis enum $name {
            $($(#[$variant_meta])* $variant,)*
        }
    };
}
pub(crate) use named_choices;

/// A choice of the run's settings (method, preset): [`Named`], with parsing that names what was
/// asked for in its message, so each enum states only what it is called.
pub trait Choice: Named {
    /// What a value of this kind is called in messages, e.g. "method".
    const WHAT: &'static str;

    /// The value called `given`, or why not ([`parse_or_explain`]), e.g. "unknown method 'x':
    /// choose 'cgp', 'exact', 'hybrid' or 'auto'".
    fn parse(given: &str) -> Result<Self, UnknownName> {
        parse_or_explain(Self::WHAT, given)
    }

    /// The value's name, as the command line, JSON and the page spell it.
    fn name(self) -> &'static str {
        name(self)
    }
}
