//! Replays the `resp_parse` fuzz corpus (and any saved regressions) through
//! the same checks the fuzz target runs, so `cargo test` guards them too.

use std::fs;
use std::path::{Path, PathBuf};

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn resp_parse_corpus_holds_the_parser_invariants() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let corpus = files(&fuzz.join("corpus/resp_parse"));
    assert!(
        corpus.len() >= 10,
        "seed corpus missing under {}",
        fuzz.display()
    );
    for path in corpus
        .iter()
        .chain(&files(&fuzz.join("regressions/resp_parse")))
    {
        let bytes = fs::read(path).unwrap();
        let result = std::panic::catch_unwind(|| kvcore::resp::check_roundtrip(&bytes));
        assert!(
            result.is_ok(),
            "{} breaks the parser invariants",
            path.display()
        );
    }
}
