//! Every experiment file in `configs/` parses and expands into a valid grid against the
//! built-in registries.

use std::path::PathBuf;

use contactlab_harness::catalog::Catalog;
use contactlab_harness::config;
use contactlab_harness::sweep::plan;

#[test]
fn every_config_file_parses_and_plans() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    // configs/cube_toss.yaml's scene finds its tosses at run time: under `data/` of the
    // working directory (the repository root for the README's commands; here the crate
    // folder), or through CONTACTLAB_DATA. Point that at the repository's data. Safe: this
    // binary's only test, so no other thread reads the environment.
    std::env::set_var(
        contactlab_scenarios::data_dir::DATA_ENV,
        repo.join(contactlab_scenarios::data_dir::DEFAULT_DATA_DIR),
    );
    let dir = repo.join("configs");
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
        let cells = if !cfg.study.is_control_synthesis() {
            plan(f, &text, cfg, &catalog)
                .unwrap_or_else(|e| panic!("{e}"))
                .cells
                .len()
        } else {
            contactlab_harness::study_control::plan(f, &text, cfg, &catalog)
                .unwrap_or_else(|e| panic!("{e}"))
                .cells
                .len()
        };
        assert!(cells > 0, "{}: no cells", f.display());
        eprintln!("{}: {cells} cells", f.display());
    }
}
