//! Every experiment file in `configs/` parses and expands into a valid grid against the
//! built-in registries.

use std::path::PathBuf;

use contactlab_harness::catalog::Catalog;
use contactlab_harness::config;
use contactlab_harness::sweep::plan;

#[test]
fn every_config_file_parses_and_plans() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let catalog = Catalog::builtin();
    for f in &files {
        let (cfg, text) = config::load(f).unwrap_or_else(|e| panic!("{e}"));
        let p = plan(f, &text, cfg, &catalog).unwrap_or_else(|e| panic!("{e}"));
        assert!(!p.cells.is_empty(), "{}: no cells", f.display());
        eprintln!("{}: {} cells", f.display(), p.cells.len());
    }
}
