//! Experiment files the parser used to accept wrongly or report misleadingly: duplicate keys at
//! any depth (the last value won silently), a UTF-8 byte-order mark ("missing field
//! `scenes`"), nesting 100,000 deep (minutes of parsing), and scene labels that give one
//! figure file name. Each is an error of the binary with exit status 2 and one message naming
//! the file, the line and the key, with nothing in the results folder touched.

mod common;
use common::{assert_bad, contactlab, stderr, GOOD};

#[test]
fn duplicate_key_in_a_scene_entry_is_an_error_at_its_line() {
    let text = GOOD.replace(
        "  - name: falling_point\nformulations:",
        "  - name: falling_point\n    height: 1.0\n    height: 2.0\nformulations:",
    );
    assert_bad(&text, 5, &["scenes[0].height", "duplicate key 'height'"]);
}

#[test]
fn duplicate_key_in_a_formulation_entry_is_an_error_at_its_line() {
    let text = GOOD.replace(
        "  - name: falling_point\nsweep:",
        "  - name: falling_point\n    stiffness: 1.0e4\n    label: x\n    stiffness: 1.0e5\nsweep:",
    );
    assert_bad(&text, 8, &["formulations[0].stiffness", "duplicate key"]);
}

#[test]
fn duplicate_sweep_axis_is_an_error_at_its_line() {
    let text = GOOD.replace("  seed: [0, 1]\n", "  seed: [0, 1]\n  timestep: [0.05]\n");
    assert_bad(&text, 9, &["sweep.timestep", "duplicate key 'timestep'"]);
}

#[test]
fn duplicate_top_level_key_is_an_error_at_its_own_line_not_line_1() {
    let text = format!("{GOOD}horizon: 0.4\n");
    assert_bad(&text, 11, &["key 'horizon'", "duplicate key"]);
}

#[test]
fn duplicate_key_in_a_flow_mapping_is_an_error() {
    let text = GOOD.replace(
        "{kind: same_formulation, timestep: 0.005}",
        "{kind: same_formulation, timestep: 0.005, timestep: 0.001}",
    );
    assert_bad(&text, 10, &["reference.timestep", "duplicate key"]);
}

#[test]
fn utf8_byte_order_mark_is_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("bom.yaml"), format!("\u{feff}{GOOD}")).unwrap();
    let o = contactlab(&["check", "bom.yaml"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("4 cells"));
    // Lines stay right after the mark, the first one included.
    assert_bad(
        &format!("\u{feff}{}", GOOD.replace("horizon: 0.2", "horizn: 0.2")),
        9,
        &["horizn"],
    );
    assert_bad(
        &format!("\u{feff}{}", GOOD.replace("name: clitest", "name: ../x")),
        1,
        &["key 'name'"],
    );
}

#[test]
fn yaml_nested_100000_deep_is_refused_at_its_line() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let text = GOOD.replace("[0.01, 0.02]", &deep);
    assert_bad(&text, 7, &["nesting deeper than 64 levels"]);
    let dashes = format!("{GOOD}description:\n  {}x\n", "- ".repeat(100_000));
    assert_bad(&dashes, 12, &["nesting deeper than 64 levels"]);
}

#[test]
fn scene_labels_that_give_one_figure_file_name_are_an_error() {
    let text = GOOD.replace(
        "  - name: falling_point\nformulations:",
        "  - name: falling_point\n    label: drop 1\n  - name: falling_point\n    label: drop/1\nformulations:",
    );
    assert_bad(
        &text,
        6,
        &["scenes[1].label", "drop_1", "same figure file name"],
    );
}
