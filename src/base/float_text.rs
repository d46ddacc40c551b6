//! f64 fields that JSON must carry even when they are not finite. serde_json writes NaN and ±∞ as
//! `null` and cannot read them back, yet an error's number is often exactly that (a bound that
//! came out NaN, a learning rate the user typed as `inf`). With `#[serde(with =
//! "crate::base::float_text")]` a finite value stays a JSON number and a non-finite one is written
//! as the text `"NaN"`, `"inf"` or `"-inf"`, so a checkpoint holding the error reads back equal.

use serde::{Deserialize, Deserializer, Serializer};

/// Writes `value` as a number when finite, else as `"NaN"`, `"inf"` or `"-inf"`.
pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    if value.is_finite() {
        serializer.serialize_f64(*value)
    } else if value.is_nan() {
        serializer.serialize_str("NaN")
    } else if *value > 0.0 {
        serializer.serialize_str("inf")
    } else {
        serializer.serialize_str("-inf")
    }
}

/// Reads what [`serialize`] wrote.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Number(f64),
        Text(String),
    }
    match Written::deserialize(deserializer)? {
        Written::Number(v) => Ok(v),
        Written::Text(t) => match t.as_str() {
            "NaN" => Ok(f64::NAN),
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            other => Err(serde::de::Error::custom(format!(
                "expected a number, \"NaN\", \"inf\" or \"-inf\", got \"{other}\""
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize)]
    struct Held(#[serde(with = "super")] f64);

    /// Every kind of f64 goes through JSON and MessagePack and comes back the same bits (NaN as
    /// NaN); a finite value is still a plain JSON number.
    #[test]
    fn finite_and_non_finite_values_read_back() {
        for v in [
            0.0,
            -1.5,
            1e-300,
            f64::MAX,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            let json = serde_json::to_string(&Held(v)).unwrap();
            let back: Held = serde_json::from_str(&json).unwrap();
            assert!(
                back.0 == v || (v.is_nan() && back.0.is_nan()),
                "{v} → {json}"
            );
            let packed = rmp_serde::to_vec(&Held(v)).unwrap();
            let back: Held = rmp_serde::from_slice(&packed).unwrap();
            assert!(
                back.0 == v || (v.is_nan() && back.0.is_nan()),
                "{v} (MessagePack)"
            );
        }
        assert_eq!(serde_json::to_string(&Held(-1.5)).unwrap(), "-1.5");
        assert_eq!(serde_json::to_string(&Held(f64::NAN)).unwrap(), "\"NaN\"");
        assert!(serde_json::from_str::<Held>("\"many\"").is_err());
    }
}
