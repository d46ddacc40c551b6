use super::*;

/// A valid two-column body with `rows` rows: x = n, y = n² (neither constant nor a copy).
fn body(rows: usize, delimiter: &str) -> String {
    (0..rows)
        .map(|n| format!("{}{delimiter}{}\n", n, n * n))
        .collect()
}

fn parse(text: &str) -> Result<Parsed, DataError> {
    parse_csv(text.as_bytes(), &CsvOptions::default())
}

/// Issue 12: line numbers are the same whatever the line endings, an unterminated quote is
/// named as such, and a line of spaces is a blank line.
#[test]
fn line_endings_unterminated_quotes_and_lines_of_spaces() {
    let rows: String = (0..12).map(|k| format!("{k},{}\n", (k * 7) % 5)).collect();
    // The bad cell sits on line 6 of the LF file (header, blank, 3 rows, then 'x').
    let lf = format!("a,b\n\n1,2\n3,4\n5,6\n7,x\n{rows}");
    for (ending, text) in [
        ("LF", lf.clone()),
        ("CRLF", lf.replace('\n', "\r\n")),
        ("CR", lf.replace('\n', "\r")),
    ] {
        let err = parse(&text).unwrap_err();
        assert_eq!(err.line(), Some(6), "{ending}: {err}");
    }
    // A ragged row and a duplicate header name keep their lines too.
    let ragged = "a,b\r\n1,2\r\n3\r\n".to_string();
    assert_eq!(parse(&ragged).unwrap_err().line(), Some(3));
    assert_eq!(
        parse(&ragged.replace("\r\n", "\r")).unwrap_err().line(),
        Some(3)
    );

    let open = format!("a,b\n1,2\n\"3,4\n{rows}");
    let err = parse(&open).unwrap_err();
    assert_eq!(err.line(), Some(3), "{err}");
    assert!(err.to_string().contains("unterminated quote"), "{err}");
    let err = parse(&format!("\"a,b\n{rows}")).unwrap_err();
    assert!(err.to_string().contains("unterminated quote"), "{err}");

    let spaced = format!("a,b\n1,2\n   \n \t \n{rows}");
    let parsed = parse(&spaced).unwrap();
    assert_eq!(parsed.dataset.rows(), 13);
}

/// The sorted duplicate search finds what comparing every pair finds (issue 12: the pairwise
/// check was quadratic in the number of columns).
#[test]
fn duplicate_columns_match_the_pairwise_reference() {
    let mut state: u64 = 7;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 10_000) as f64 / 100.0
    };
    let rows = 20;
    let base: Vec<Vec<f64>> = (0..40)
        .map(|_| (0..rows).map(|_| next()).collect())
        .collect();
    let pairwise = |cols: &[Vec<f64>]| -> Option<(usize, usize, bool)> {
        let z: Vec<Vec<f64>> = cols.iter().map(|c| standardise(c)).collect();
        for b in 1..z.len() {
            for a in 0..b {
                for (sign, negated) in [(1.0, false), (-1.0, true)] {
                    if z[a]
                        .iter()
                        .zip(&z[b])
                        .all(|(x, y)| (x - sign * y).abs() <= 1e-9)
                    {
                        return Some((a, b, negated));
                    }
                }
            }
        }
        None
    };
    assert_eq!(first_duplicate_column(&base), None);
    for (a, b, scale, shift) in [(3, 17, 2.5, 1.0), (0, 39, -0.5, 3.0), (25, 26, -1.0, 0.0)] {
        let mut cols = base.clone();
        cols[b] = cols[a].iter().map(|v| scale * v + shift).collect();
        let expected = pairwise(&cols);
        assert_eq!(expected, Some((a, b, scale < 0.0)));
        assert_eq!(first_duplicate_column(&cols), expected);
    }
    // Several copies: the first by (b, a), as the pairwise scan reports it.
    let mut cols = base.clone();
    cols[30] = cols[2].clone();
    cols[12] = cols[5].iter().map(|v| -v).collect();
    assert_eq!(first_duplicate_column(&cols), pairwise(&cols));
    assert_eq!(first_duplicate_column(&cols), Some((5, 12, true)));
}

#[test]
fn reads_comma_semicolon_and_tab() {
    for delimiter in [",", ";", "\t"] {
        let text = format!("a{delimiter}b\n{}", body(12, delimiter));
        let parsed = parse(&text).unwrap();
        assert_eq!(parsed.delimiter.to_string(), delimiter);
        assert_eq!(parsed.dataset.names(), ["a", "b"]);
        assert_eq!(parsed.dataset.rows(), 12);
        assert_eq!(parsed.dataset.column(1)[3], 9.0);
    }
}

#[test]
fn quoted_fields_and_delimiters_inside_quotes() {
    let text =
        format!("\"x, the cause\",\"y\"\n{}", body(10, ",")).replace("3,9\n", "\"3\",\"9\"\n");
    let parsed = parse(&text).unwrap();
    assert_eq!(parsed.dataset.names(), ["x, the cause", "y"]);
    assert_eq!(parsed.dataset.column(0)[3], 3.0);
}

#[test]
fn semicolon_file_with_decimal_commas_is_detected_and_explained() {
    let mut text = String::from("a;b\n");
    for n in 0..12 {
        text.push_str(&format!("{n},5;{}\n", n * n));
    }
    let err = parse(&text).unwrap_err();
    match &err {
        DataError::NonNumeric {
            line, column, hint, ..
        } => {
            assert_eq!((*line, column.as_str()), (2, "a"));
            assert!(hint.as_deref().unwrap().contains("decimal comma"));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn byte_order_mark_is_ignored() {
    let text = format!("\u{FEFF}alpha,beta\n{}", body(10, ","));
    let parsed = parse(&text).unwrap();
    assert_eq!(parsed.dataset.names()[0], "alpha");
}

#[test]
fn scientific_notation_signs_and_whitespace() {
    let mut text = String::from("a , b\n");
    for n in 0..10 {
        text.push_str(&format!(" +{n}.5e-1 , -{}E2 \n", n * n));
    }
    let parsed = parse(&text).unwrap();
    assert_eq!(parsed.dataset.names(), ["a", "b"]);
    assert_eq!(parsed.dataset.column(0)[1], 0.15);
    assert_eq!(parsed.dataset.column(1)[2], -400.0);
}

#[test]
fn non_numeric_cell_names_line_and_column() {
    let text = format!("a,b\n{}", body(12, ",")).replace("\n4,16\n", "\n4,sixteen\n");
    let err = parse(&text).unwrap_err();
    assert_eq!(err.kind(), "non_numeric");
    assert_eq!(err.line(), Some(6));
    assert_eq!(err.column(), Some("b"));
    let msg = err.to_string();
    assert!(
        msg.contains("line 6") && msg.contains("'b'") && msg.contains("sixteen"),
        "{msg}"
    );
}

#[test]
fn empty_cell_is_refused_by_default_and_dropped_on_request() {
    let text = format!("a,b\n{}", body(14, ",")).replace("\n4,16\n", "\n4,\n");
    let err = parse(&text).unwrap_err();
    assert_eq!(err.kind(), "empty_cell");
    assert_eq!((err.line(), err.column()), (Some(6), Some("b")));
    assert!(err.to_string().contains("empty"));

    let options = CsvOptions {
        drop_rows_with_missing: true,
        ..CsvOptions::default()
    };
    let text = text.replace("\n7,49\n", "\nNA,49\n");
    let parsed = parse_csv(text.as_bytes(), &options).unwrap();
    assert_eq!(parsed.dataset.rows(), 12);
    assert_eq!(
        parsed.problems[0],
        DataWarning::RowsDropped {
            count: 2,
            first_line: 6
        }
    );
}

#[test]
fn non_finite_values_are_refused() {
    for token in ["nan", "NaN", "inf", "-Infinity"] {
        let text =
            format!("a,b\n{}", body(12, ",")).replace("\n4,16\n", &format!("\n{token},16\n"));
        let err = parse(&text).unwrap_err();
        assert_eq!(err.kind(), "non_finite", "{token}");
        assert_eq!((err.line(), err.column()), (Some(6), Some("a")));
    }
}

#[test]
fn ragged_row_is_refused_with_counts() {
    let text = format!("a,b\n{}", body(12, ",")).replace("\n4,16\n", "\n4,16,3\n");
    assert_eq!(
        parse(&text).unwrap_err(),
        DataError::Ragged {
            line: 6,
            expected: 2,
            found: 3
        }
    );
}

#[test]
fn duplicate_column_names_are_refused() {
    let text = format!("a,a\n{}", body(12, ","));
    let err = parse(&text).unwrap_err();
    assert_eq!(
        err,
        DataError::DuplicateColumnName {
            line: 1,
            name: "a".into(),
            first: 1,
            second: 2
        }
    );
}

#[test]
fn too_few_columns_rows_and_empty_files() {
    let one_column: String = std::iter::once("a\n".to_string())
        .chain((0..20).map(|n| format!("{n}\n")))
        .collect();
    assert_eq!(
        parse(&one_column).unwrap_err(),
        DataError::TooFewColumns { found: 1 }
    );
    let short = format!("a,b\n{}", body(9, ","));
    assert_eq!(
        parse(&short).unwrap_err(),
        DataError::TooFewRows {
            found: 9,
            min: 10,
            dropped: 0
        }
    );
    assert_eq!(parse("").unwrap_err(), DataError::EmptyFile);
    assert_eq!(parse(" \n\n").unwrap_err(), DataError::EmptyFile);
    assert_eq!(parse("\u{FEFF}").unwrap_err(), DataError::EmptyFile);
}

#[test]
fn missing_header_is_detected() {
    let text = body(12, ",");
    let err = parse(&text).unwrap_err();
    assert_eq!(err.kind(), "missing_header");
    assert_eq!(err.line(), Some(1));
}

#[test]
fn empty_column_name_is_refused() {
    let text = format!("a,\n{}", body(12, ","));
    assert_eq!(
        parse(&text).unwrap_err(),
        DataError::EmptyColumnName {
            line: 1,
            position: 2
        }
    );
}

#[test]
fn constant_column_is_refused() {
    let mut text = String::from("a,b,c\n");
    for n in 0..12 {
        text.push_str(&format!("{n},2.5,{}\n", n * n));
    }
    let err = parse(&text).unwrap_err();
    assert_eq!(
        err,
        DataError::ConstantColumn {
            column: "b".into(),
            value: 2.5
        }
    );
}

#[test]
fn affine_copies_of_a_column_are_refused() {
    let mut text = String::from("a,b,c\n");
    for n in 0..12 {
        text.push_str(&format!("{n},{},{}\n", n * n, 7.0 - 2.0 * n as f64));
    }
    let err = parse(&text).unwrap_err();
    assert_eq!(
        err,
        DataError::DuplicateColumnData {
            column: "c".into(),
            copy_of: "a".into(),
            negated: true
        }
    );
}

#[test]
fn oversized_file_is_refused_before_parsing() {
    let options = CsvOptions {
        max_bytes: 100,
        ..CsvOptions::default()
    };
    let text = format!("a,b\n{}", body(40, ","));
    let err = parse_csv(text.as_bytes(), &options).unwrap_err();
    assert_eq!(err.kind(), "too_large");
    assert!(err.to_string().contains("limit is 100 bytes"));
}

#[test]
fn invalid_utf8_is_reported_with_its_line() {
    let mut bytes = format!("a,b\n{}", body(12, ",")).into_bytes();
    bytes.extend_from_slice(b"1,\xFF\xFE\n");
    let err = parse_csv(&bytes, &CsvOptions::default()).unwrap_err();
    assert_eq!(err.kind(), "not_utf8");
    assert_eq!(err.line(), Some(14));
}

#[test]
fn blank_lines_and_crlf_are_tolerated() {
    let text = format!("a,b\r\n\r\n{}", body(12, ",").replace('\n', "\r\n"));
    let parsed = parse(&text).unwrap();
    assert_eq!(parsed.dataset.rows(), 12);
}

#[test]
fn discrete_columns_are_reported_not_refused() {
    let mut text = String::from("a,b\n");
    for n in 0..12 {
        text.push_str(&format!("{},{}\n", n % 2, n * n));
    }
    let parsed = parse(&text).unwrap();
    assert_eq!(
        parsed.problems,
        vec![DataWarning::FewDistinctValues {
            column: "a".into(),
            distinct: 2
        }]
    );
    assert!(parsed.problems[0].action().contains("continuous"));
}

#[test]
fn errors_serialise_with_a_kind_tag() {
    let err = DataError::NonFinite {
        line: 3,
        column: "x".into(),
        value: "inf".into(),
    };
    let json = serde_json::to_value(&err).unwrap();
    assert_eq!(json["kind"], err.kind());
    assert_eq!(json["line"], 3);
}

#[test]
fn progress_is_reported_in_steps_and_reaches_the_end() {
    let mut text = String::from("\u{feff}a,b\n");
    let mut n = 0u64;
    while text.len() < 3 * PROGRESS_STEP_BYTES + 1000 {
        text.push_str(&format!("{n}.25,{}\n", n * 7 % 1000));
        n += 1;
    }
    let mut seen = Vec::new();
    let parsed = parse_csv_with_progress(text.as_bytes(), &CsvOptions::default(), &mut |b| {
        seen.push(b)
    })
    .unwrap();
    assert_eq!(parsed.dataset.rows() as u64, n);
    assert_eq!(seen.last(), Some(&text.len()));
    assert!(seen.len() >= 4 && seen.len() <= 5, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[1] > w[0]), "{seen:?}");
    assert!(seen[0] >= PROGRESS_STEP_BYTES && seen[0] < PROGRESS_STEP_BYTES + 100);
}

#[test]
fn csv_output_reads_back_losslessly() {
    let d = Dataset::new(
        vec!["x, quoted".into(), "y".into()],
        vec![
            (0..12).map(|n| (n as f64).sin() * 1e-7).collect(),
            (0..12).map(|n| 1.0 / (n as f64 + 3.0)).collect(),
        ],
    );
    let parsed = parse_csv(d.to_csv().as_bytes(), &CsvOptions::default()).unwrap();
    assert_eq!(parsed.dataset, d);
}
