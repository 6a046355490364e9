//! Reorders: which pending messages a debugger's new order names, and where the others go.

use super::error::ReorderError;
use super::hook::Rest;

/// Map each entry of `order` (an id, or `id@op`) to exactly one candidate, each at most
/// once, and return the new order of all candidates: with [`Rest::Named`] `order` must name
/// every one; with [`Rest::After`] / [`Rest::Before`] the unnamed ones follow / precede the
/// named ones in their present order.
pub(crate) fn resolve_order(
    order: &[String],
    names: &[(String, &str)],
    rest: Rest,
) -> Result<Vec<usize>, ReorderError> {
    let mut used = vec![false; names.len()];
    let mut picks = Vec::with_capacity(names.len());
    for entry in order {
        let (id, op) = match entry.split_once('@') {
            Some((id, op)) => (id, Some(op)),
            None => (entry.as_str(), None),
        };
        let matches: Vec<usize> = names
            .iter()
            .enumerate()
            .filter(|(_, (nid, nop))| nid == id && op.is_none_or(|op| op == *nop))
            .map(|(i, _)| i)
            .collect();
        let i = match matches.as_slice() {
            [] => return Err(ReorderError::NotPending { entry: entry.clone() }),
            [i] => *i,
            many => {
                let alternatives = many.iter().map(|&i| format!("{id}@{}", names[i].1)).collect();
                return Err(ReorderError::Ambiguous {
                    entry: entry.clone(),
                    alternatives,
                });
            }
        };
        if std::mem::replace(&mut used[i], true) {
            return Err(ReorderError::Twice { entry: entry.clone() });
        }
        picks.push(i);
    }
    let unnamed = (0..names.len()).filter(|&i| !used[i]);
    match rest {
        Rest::Named => {
            let missing: Vec<String> = unnamed.map(|i| names[i].0.clone()).collect();
            if !missing.is_empty() {
                return Err(ReorderError::Missing { missing });
            }
        }
        Rest::After => picks.extend(unnamed),
        Rest::Before => {
            let mut all: Vec<usize> = unnamed.collect();
            all.append(&mut picks);
            picks = all;
        }
    }
    Ok(picks)
}

#[cfg(test)]
mod tests {
    use super::{resolve_order, ReorderError, Rest};

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Wrapper for the full-order rule (`Rest::Named`).
    fn full(order: &[String], names: &[(String, &str)]) -> Result<Vec<usize>, ReorderError> {
        resolve_order(order, names, Rest::Named)
    }

    #[test]
    fn order_must_be_a_permutation() {
        let names = [
            ("0.1".to_owned(), "A"),
            ("0.2".to_owned(), "A"),
            ("0.2".to_owned(), "B"),
        ];
        assert_eq!(full(&s(&["0.2@B", "0.1", "0.2@A"]), &names), Ok(vec![2, 0, 1]));
        let e = full(&s(&["0.2", "0.1"]), &names).unwrap_err();
        assert_eq!(
            e,
            ReorderError::Ambiguous {
                entry: "0.2".into(),
                alternatives: s(&["0.2@A", "0.2@B"])
            }
        );
        assert!(e.to_string().contains("ambiguous"), "{e}");
        let e = full(&s(&["0.1", "0.2@A"]), &names).unwrap_err();
        assert_eq!(e, ReorderError::Missing { missing: s(&["0.2"]) });
        assert!(e.to_string().contains("missing: 0.2"), "{e}");
        let e = full(&s(&["0.1", "0.1", "0.2@A", "0.2@B"]), &names).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        let e = full(&s(&["0.9"]), &names).unwrap_err();
        assert!(e.to_string().contains("not pending"), "{e}");
    }

    #[test]
    fn a_partial_order_puts_the_unnamed_messages_after_or_before() {
        // Candidates in queue order (the first may be the held start's message); 0.5 and
        // 0.6 stand for messages that arrived after the debugger looked at the queue.
        let names = [
            ("0.1".to_owned(), "A"),
            ("0.2".to_owned(), "A"),
            ("0.3".to_owned(), "A"),
            ("0.3".to_owned(), "B"),
            ("0.5".to_owned(), "A"),
            ("0.6".to_owned(), "A"),
        ];
        // `after`: the named ones first, in the given order; the others keep theirs.
        assert_eq!(
            resolve_order(&s(&["0.3@B", "0.2"]), &names, Rest::After),
            Ok(vec![3, 1, 0, 2, 4, 5])
        );
        // `before`: the named ones last.
        assert_eq!(
            resolve_order(&s(&["0.2", "0.1"]), &names, Rest::Before),
            Ok(vec![2, 3, 4, 5, 1, 0])
        );
        // Naming nothing, or everything, is allowed.
        assert_eq!(
            resolve_order(&[], &names, Rest::After),
            Ok(vec![0, 1, 2, 3, 4, 5])
        );
        assert_eq!(
            resolve_order(
                &s(&["0.6", "0.5", "0.3@B", "0.3@A", "0.2", "0.1"]),
                &names,
                Rest::Before
            ),
            Ok(vec![5, 4, 3, 2, 1, 0])
        );
        // The same refusals as the full rule: not pending, duplicates, ambiguity.
        for rest in [Rest::After, Rest::Before] {
            let e = resolve_order(&s(&["0.2", "0.9"]), &names, rest).unwrap_err();
            assert!(e.to_string().contains("`0.9` is not pending"), "{e}");
            let e = resolve_order(&s(&["0.2", "0.2"]), &names, rest).unwrap_err();
            assert!(e.to_string().contains("twice"), "{e}");
            let e = resolve_order(&s(&["0.3"]), &names, rest).unwrap_err();
            assert!(e.to_string().contains("ambiguous"), "{e}");
        }
        // Without `rest`, the unnamed ones are still refused.
        let e = full(&s(&["0.2"]), &names).unwrap_err();
        assert!(e.to_string().contains("missing: 0.1, 0.3, 0.3, 0.5, 0.6"), "{e}");
    }
}
