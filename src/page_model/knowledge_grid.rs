//! The prior-knowledge grid: each cell (cause, effect) is free, forbidden or required; each
//! variable may get a tier. Reading the grid gives a validated [`Knowledge`] or the reason it
//! contradicts itself, naming the variables.

use crate::discovery::knowledge::Knowledge;

/// What the user said about one directed edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EdgeRule {
    #[default]
    Free,
    Forbidden,
    Required,
}

impl EdgeRule {
    /// The rule a click moves to: free → forbidden → required → free.
    pub fn next(self) -> Self {
        match self {
            EdgeRule::Free => EdgeRule::Forbidden,
            EdgeRule::Forbidden => EdgeRule::Required,
            EdgeRule::Required => EdgeRule::Free,
        }
    }

    /// A stable code (used as a CSS class and a `data-rule` attribute).
    pub fn code(self) -> &'static str {
        match self {
            EdgeRule::Free => "free",
            EdgeRule::Forbidden => "forbidden",
            EdgeRule::Required => "required",
        }
    }

    /// The cell's symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            EdgeRule::Free => "·",
            EdgeRule::Forbidden => "✕",
            EdgeRule::Required => "→",
        }
    }
}

/// The grid with the named edges forbidden and required and every other cell free (what a
/// lesson's knowledge step sets), or which name is not a variable. `rules[i * d + j]` as in
/// [`knowledge_from_grid`].
pub fn grid_from_names(
    names: &[String],
    forbid: &[(String, String)],
    require: &[(String, String)],
) -> Result<Vec<EdgeRule>, String> {
    let d = names.len();
    let mut rules = vec![EdgeRule::Free; d * d];
    let at = |n: &String| {
        names
            .iter()
            .position(|x| x == n)
            .ok_or_else(|| format!("{n} is not one of the variables {}", names.join(", ")))
    };
    for (pairs, rule) in [(forbid, EdgeRule::Forbidden), (require, EdgeRule::Required)] {
        for (a, b) in pairs {
            let (i, j) = (at(a)?, at(b)?);
            if i == j {
                return Err(format!("{a} → {a} is not an edge"));
            }
            rules[i * d + j] = rule;
        }
    }
    Ok(rules)
}

/// Builds the knowledge from the grid: `rules[i * d + j]` is the rule for names[i] → names[j];
/// `tiers[i]` is empty (no tier) or a whole number (smaller tiers come first: no edge may point
/// from a later tier to an earlier one).
pub fn knowledge_from_grid(
    names: &[String],
    rules: &[EdgeRule],
    tiers: &[String],
) -> Result<Knowledge, String> {
    let d = names.len();
    if rules.len() != d * d || tiers.len() != d {
        return Err(format!(
            "the knowledge grid is for {} variables, the data have {d}",
            tiers.len()
        ));
    }
    let mut forbidden = Vec::new();
    let mut required = Vec::new();
    for i in 0..d {
        for j in (0..d).filter(|&j| j != i) {
            match rules[i * d + j] {
                EdgeRule::Free => {}
                EdgeRule::Forbidden => forbidden.push((i, j)),
                EdgeRule::Required => required.push((i, j)),
            }
        }
    }
    let mut any_tier = false;
    let tiers: Vec<Option<usize>> = tiers
        .iter()
        .zip(names)
        .map(|(t, name)| {
            let t = t.trim();
            if t.is_empty() {
                return Ok(None);
            }
            any_tier = true;
            t.parse::<usize>().map(Some).map_err(|_| {
                format!("the tier of '{name}' must be a whole number ≥ 0 or empty, got '{t}'")
            })
        })
        .collect::<Result<_, _>>()?;
    let tiers = any_tier.then_some(tiers);
    Knowledge::from_indices_named(names, forbidden, required, tiers).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        ["a", "b", "c"].map(String::from).to_vec()
    }

    #[test]
    fn clicks_cycle_through_the_three_rules() {
        let r = EdgeRule::default();
        assert_eq!(r, EdgeRule::Free);
        assert_eq!(r.next(), EdgeRule::Forbidden);
        assert_eq!(r.next().next(), EdgeRule::Required);
        assert_eq!(r.next().next().next(), EdgeRule::Free);
    }

    #[test]
    fn the_grid_becomes_forbidden_required_and_tiers() {
        let mut rules = vec![EdgeRule::Free; 9];
        rules[1] = EdgeRule::Forbidden; // a -> b
        rules[2 * 3 + 1] = EdgeRule::Required; // c -> b
        let tiers = vec!["0".to_string(), String::new(), " 1 ".to_string()];
        let k = knowledge_from_grid(&names(), &rules, &tiers).unwrap();
        assert_eq!(k.forbidden(), &[(0, 1)]);
        assert_eq!(k.required(), &[(2, 1)]);
        assert_eq!(k.tier(0), Some(0));
        assert_eq!(k.tier(1), None);
        assert!(!k.allowed(2, 0), "tier 1 may not cause tier 0");
        assert!(
            knowledge_from_grid(&names(), &[EdgeRule::Free; 9], &vec![String::new(); 3])
                .unwrap()
                .is_unconstrained()
        );
    }

    #[test]
    fn contradictions_are_explained_with_names() {
        let mut rules = vec![EdgeRule::Free; 9];
        rules[1] = EdgeRule::Required; // a -> b
        rules[3] = EdgeRule::Required; // b -> a
        let err = knowledge_from_grid(&names(), &rules, &vec![String::new(); 3]).unwrap_err();
        assert!(
            err.contains("cycle") && err.contains('a') && err.contains('b'),
            "{err}"
        );

        let mut rules = vec![EdgeRule::Free; 9];
        rules[1] = EdgeRule::Required; // a -> b, but b is in an earlier tier
        let tiers = vec!["1".to_string(), "0".to_string(), String::new()];
        let err = knowledge_from_grid(&names(), &rules, &tiers).unwrap_err();
        assert!(err.contains("tier"), "{err}");

        let tiers = vec!["x".to_string(), String::new(), String::new()];
        let err = knowledge_from_grid(&names(), &[EdgeRule::Free; 9], &tiers).unwrap_err();
        assert!(err.contains("tier of 'a'"), "{err}");
    }

    #[test]
    fn a_grid_is_set_from_named_edges() {
        let names: Vec<String> = ["A", "B", "C"].map(String::from).to_vec();
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        let rules =
            grid_from_names(&names, &[pair("A", "C"), pair("C", "A")], &[pair("A", "B")]).unwrap();
        assert_eq!(rules[2], EdgeRule::Forbidden);
        assert_eq!(rules[2 * 3], EdgeRule::Forbidden);
        assert_eq!(rules[1], EdgeRule::Required);
        assert_eq!(rules.iter().filter(|&&r| r == EdgeRule::Free).count(), 6);
        let knowledge = knowledge_from_grid(&names, &rules, &vec![String::new(); 3]).unwrap();
        assert!(!knowledge.allowed(0, 2) && !knowledge.allowed(2, 0));
        assert!(knowledge.is_required(0, 1) && knowledge.allowed(1, 2));
        assert!(grid_from_names(&names, &[pair("A", "D")], &[])
            .unwrap_err()
            .contains("D is not one"));
        assert!(grid_from_names(&names, &[], &[pair("B", "B")]).is_err());
    }
}
