//! A tiny command-line parser for the examples' flags (`--threads 4`, `--fixed`, ...).

use std::collections::HashMap;

/// Parsed `--name value` and `--flag` arguments.
#[derive(Debug, Default)]
pub struct Args {
    values: HashMap<String, String>,
    flags: Vec<String>,
}

impl Args {
    /// Parse `args` (without the program name). `flags` lists the options without a value.
    pub fn parse(args: impl IntoIterator<Item = String>, flags: &[&str]) -> Result<Self, String> {
        let mut out = Args::default();
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            let Some(name) = a.strip_prefix("--") else {
                return Err(format!("unexpected argument `{a}`"));
            };
            if let Some((k, v)) = name.split_once('=') {
                out.values.insert(k.to_owned(), v.to_owned());
            } else if flags.contains(&name) {
                out.flags.push(name.to_owned());
            } else {
                let v = it.next().ok_or_else(|| format!("`--{name}` needs a value"))?;
                out.values.insert(name.to_owned(), v);
            }
        }
        Ok(out)
    }

    /// A numeric option with a default.
    pub fn num<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("`--{name} {v}` is not a valid number")),
        }
    }

    /// Whether a flag is present.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// Names of the value options given (to reject unknown ones).
    pub fn check_known(&self, known: &[&str]) -> Result<(), String> {
        match self.values.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(format!("unknown option `--{k}`")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_values_flags_and_errors() {
        let a = Args::parse(
            ["--threads", "3", "--fixed", "--iters=7"].map(String::from),
            &["fixed"],
        )
        .expect("valid");
        assert_eq!(a.num("threads", 1), Ok(3));
        assert_eq!(a.num("iters", 1), Ok(7));
        assert_eq!(a.num("cells", 10), Ok(10));
        assert!(a.flag("fixed"));
        assert!(a.check_known(&["threads"]).is_err());
        assert!(Args::parse(["--threads".to_owned()], &[]).is_err());
        assert!(Args::parse(["oops".to_owned()], &[]).is_err());
        let bad = Args::parse(["--threads", "x"].map(String::from), &[]).expect("parses");
        assert!(bad.num("threads", 1usize).is_err());
    }
}
