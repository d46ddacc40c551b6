//! The page's Content-Security-Policy is stated twice: in index.html's <meta> (the page, whatever
//! serves it) and in Trunk.toml's served headers (every response, the Web Worker's scripts
//! included, which a <meta> cannot reach). They must be the same policy, and it must forbid every
//! connection but to the app's own origin (issue 12, item 9).

fn meta_policy() -> String {
    let html = std::fs::read_to_string("index.html").unwrap();
    let tag = html
        .lines()
        .find(|l| l.contains("http-equiv=\"Content-Security-Policy\""))
        .expect("index.html has a CSP <meta>");
    let start = tag.find("content=\"").unwrap() + "content=\"".len();
    let end = start + tag[start..].find('"').unwrap();
    tag[start..end].to_string()
}

fn served_policy() -> String {
    let toml = std::fs::read_to_string("Trunk.toml").unwrap();
    let line = toml
        .lines()
        .find(|l| l.starts_with("headers = {"))
        .expect("Trunk.toml's [serve] has headers");
    let key = "\"Content-Security-Policy\" = \"";
    let start = line.find(key).unwrap() + key.len();
    let end = start + line[start..].find('"').unwrap();
    line[start..end].to_string()
}

#[test]
fn the_served_policy_is_the_pages_and_keeps_data_local() {
    let meta = meta_policy();
    assert_eq!(served_policy(), meta);
    for directive in [
        "default-src 'self'",
        "connect-src 'self'",
        "worker-src 'self'",
        "form-action 'none'",
        "object-src 'none'",
    ] {
        assert!(meta.contains(directive), "{directive} missing from {meta}");
    }
    assert!(
        !meta.contains("unsafe-inline") && !meta.contains('*'),
        "{meta}"
    );
}
