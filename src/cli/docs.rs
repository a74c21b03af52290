//! The reference inside the binary: `explain KIND` prints a violation kind's entry of
//! docs/REFERENCE.md (embedded at build time, so the text lives in one place), and `man`
//! prints the man page clap_mangen makes from the command line's own definitions.

use clap::CommandFactory;
use scanledger::ViolationKind;

use super::{CliError, Out};

/// The reference, as the repository has it.
const REFERENCE: &str = include_str!("../../docs/REFERENCE.md");

/// Every violation kind, in rule order. The match in `rule_of` is exhaustive, so a kind added
/// to the library fails to compile here until it has its rule (and the test below checks
/// that it has its entry in the reference).
pub(crate) const KINDS: [ViolationKind; 17] = [
    ViolationKind::RepeatedCursor,
    ViolationKind::DuplicateId,
    ViolationKind::SnapshotChanged,
    ViolationKind::QueryChanged,
    ViolationKind::ContradictoryCompletion,
    ViolationKind::MissingCompletionEvidence,
    ViolationKind::TruncatedPage,
    ViolationKind::CountMismatch,
    ViolationKind::PartitionMismatch,
    ViolationKind::LimitReached,
    ViolationKind::PageFailed,
    ViolationKind::AccessDenied,
    ViolationKind::ExpiredCursor,
    ViolationKind::InvalidPage,
    ViolationKind::ShardMissing,
    ViolationKind::ShardConflict,
    ViolationKind::ShardMismatch,
];

/// The rule that raises a kind.
fn rule_of(kind: ViolationKind) -> &'static str {
    use ViolationKind as K;
    match kind {
        K::RepeatedCursor => "R3",
        K::DuplicateId => "R4",
        K::SnapshotChanged => "R5",
        K::QueryChanged => "R6",
        K::ContradictoryCompletion => "R7",
        K::MissingCompletionEvidence => "R8",
        K::TruncatedPage => "R9",
        K::CountMismatch => "R10",
        K::PartitionMismatch => "R11",
        K::LimitReached => "R12",
        K::PageFailed => "R13",
        K::AccessDenied => "R14",
        K::ExpiredCursor => "R15",
        K::InvalidPage => "R16",
        K::ShardMissing | K::ShardConflict | K::ShardMismatch => "merge",
        // A kind this table does not know yet names no rule.
        _ => "-",
    }
}

/// The entry of `kind` in the reference: from its `### `kind`` heading to the next heading.
pub(crate) fn entry(kind: &str) -> Option<&'static str> {
    let heading = format!("### `{kind}`");
    let start = REFERENCE
        .lines()
        .scan(0usize, |offset, line| {
            let at = *offset;
            *offset += line.len() + 1;
            Some((at, line))
        })
        .find(|(_, line)| line.starts_with(&heading))
        .map(|(at, _)| at)?;
    let body = &REFERENCE[start..];
    let after_heading = body.find('\n').map_or(body.len(), |i| i + 1);
    let end = body[after_heading..]
        .find("\n#")
        .map_or(body.len(), |i| after_heading + i);
    Some(body[..end].trim_end())
}

/// `explain [KIND]`.
pub(crate) fn explain(out: &Out, kind: Option<&str>) -> Result<i32, CliError> {
    let Some(kind) = kind else {
        if out.json {
            let kinds: Vec<serde_json::Value> = KINDS
                .iter()
                .map(|k| {
                    serde_json::json!({
                        "kind": k.as_str(),
                        "rule": rule_of(*k),
                        "status": k.status(),
                    })
                })
                .collect();
            out.json_list(&kinds, &serde_json::json!({ "kinds": kinds }))?;
        } else {
            let mut text = String::from("The violation kinds (`scanledger explain KIND` for one):");
            for k in KINDS {
                text.push_str(&format!(
                    "\n  {:<28} {:<4} {}",
                    k.as_str(),
                    rule_of(k),
                    k.status().as_str()
                ));
            }
            out.emit(&text)?;
        }
        return Ok(0);
    };
    let Some(found) = KINDS.iter().find(|k| k.as_str() == kind) else {
        let names: Vec<&str> = KINDS.iter().map(|k| k.as_str()).collect();
        let mut err = CliError::usage(format!("{kind:?} is not a violation kind"))
            .with_kind("unknown_kind")
            .with_field("KIND");
        err.hint = Some(match closest(kind, &names) {
            Some(k) => format!("did you mean `{k}`?"),
            None => "`scanledger explain` lists the kinds".to_owned(),
        });
        return Err(err);
    };
    let text = entry(found.as_str()).ok_or_else(|| {
        CliError::internal(format!(
            "docs/REFERENCE.md has no entry for {kind}; this build is incomplete"
        ))
    })?;
    if out.json {
        out.json_value(&serde_json::json!({
            "kind": found.as_str(),
            "rule": rule_of(*found),
            "status": found.status(),
            "text": text,
        }))?;
    } else {
        // Markdown's bold marks read as noise on a terminal; the backticks stay.
        out.emit(&text.replace("**", ""))?;
    }
    Ok(0)
}

/// The closest name by shared prefix or containment (kinds are long and distinct).
fn closest<'a>(word: &str, names: &[&'a str]) -> Option<&'a str> {
    let word = word.to_ascii_lowercase().replace(['-', ' '], "_");
    names
        .iter()
        .find(|n| n.contains(word.as_str()) || word.contains(**n))
        .or_else(|| {
            names
                .iter()
                .max_by_key(|n| {
                    n.chars()
                        .zip(word.chars())
                        .take_while(|(a, b)| a == b)
                        .count()
                })
                .filter(|n| {
                    n.chars()
                        .zip(word.chars())
                        .take_while(|(a, b)| a == b)
                        .count()
                        >= 3
                })
        })
        .copied()
}

/// `man`: the man page, roff, on stdout.
pub(crate) fn man() -> Result<i32, CliError> {
    let page = clap_mangen::Man::new(super::Cli::command());
    let mut buf = Vec::new();
    page.render(&mut buf)
        .map_err(|e| CliError::internal(format!("cannot render the man page: {e}")))?;
    super::output::write_raw(&buf)?;
    Ok(0)
}

/// `completions SHELL`: the completion script, on stdout. Generated into memory first, so a
/// failed write is an error, not a panic inside the generator.
pub(crate) fn completions(shell: clap_complete::Shell) -> Result<i32, CliError> {
    let mut cmd = super::Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "scanledger", &mut buf);
    super::output::write_raw(&buf)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_violation_kind_has_its_entry_in_the_reference() {
        for k in KINDS {
            let text = entry(k.as_str()).unwrap_or_else(|| panic!("no entry for {}", k.as_str()));
            assert!(
                text.contains(rule_of(k)),
                "the entry of {} names its rule {}",
                k.as_str(),
                rule_of(k)
            );
            assert!(
                text.contains(k.status().as_str()),
                "the entry of {} names its status",
                k.as_str()
            );
            assert!(text.lines().count() >= 3, "{} has a real entry", k.as_str());
        }
    }

    #[test]
    fn unknown_kinds_get_a_suggestion() {
        let names: Vec<&str> = KINDS.iter().map(|k| k.as_str()).collect();
        assert_eq!(closest("duplicate", &names), Some("duplicate_id"));
        assert_eq!(closest("limit-reached", &names), Some("limit_reached"));
        assert_eq!(closest("zzz", &names), None);
    }
}
