//! Documented limits on input sizes and counts, checked before anything is allocated from
//! them, so that a hostile or mistaken input is an error naming the file, element, line or
//! key, never a panic, an abort, a hang or a multi-gigabyte allocation.
//!
//! | Limit | Value | Applies to | Checked in |
//! |---|---|---|---|
//! | [`MAX_CONFIG_BYTES`] | 16 MiB | experiment YAML file | `harness::config::load` |
//! | [`MAX_MJCF_BYTES`] | 64 MiB | MJCF file | [`crate::mjcf::load_file`] |
//! | [`MAX_MESH_FILE_BYTES`] | 64 MiB | OBJ / STL file (MJCF `<mesh file>`, `mesh_terrain` `mesh_file`) | [`crate::mesh_file::load_mesh_file`] |
//! | [`MAX_TABLE_BYTES`] | 256 MiB | toss CSV, trajectory reference (CSV / Parquet) | [`crate::recorded::read_toss`], `harness::trajectory` |
//! | [`MAX_MESH_VERTICES`] | 1,000,000 | vertices of one mesh (file or inline) | mesh loaders |
//! | [`MAX_MESH_FACES`] | 2,000,000 | triangles of one mesh (file or inline) | mesh loaders |
//! | [`MAX_HFIELD_SAMPLES`] | 4,194,304 (2048²) | `nrow * ncol` of an `<hfield>`, inline or claimed by a file header | MJCF `<hfield>` |
//! | [`MAX_TERRAIN_CELLS`] | 262,144 (512²) | `grid * grid` of `mesh_terrain` | `mesh_terrain` |
//! | [`MAX_TERRAIN_LAYERS`] | 64 | `layers` of `mesh_terrain` | `mesh_terrain` |
//! | [`MAX_XML_DEPTH`] | 256 | element nesting depth of an MJCF file (`<body>`, `<default>`, ...) | [`crate::mjcf::load_str`] |
//! | [`MAX_CELLS`] | 100,000 | cells of one experiment grid, counted before expansion | `harness::sweep::plan` (`run` and `check`) |
//! | [`DEFAULT_MAX_STEPS`] | 10,000,000 | steps of one run (`horizon / timestep`, each cell and its reference run, and `simulate`); the top-level key `max_steps:` (or `simulate --max-steps`) raises it | `harness::sweep::plan`, `contactlab simulate` |
//! | jobs | the machine's cores | worker threads (`jobs:` / `--jobs`); a larger request is clamped with a note on stderr; 0 is an error | `contactlab run` |
//!
//! Every non-finite number (NaN, ±inf) in an MJCF attribute, a mesh vertex or a height-field
//! elevation is an error naming the element (or file) and the line, before any geometry
//! library sees it.
//!
//! Why these values: each limit keeps one input's memory well below 2 GB while staying above
//! every model and experiment in this repository by at least an order of magnitude. A 2048²
//! height field takes 16 bytes per sample in the loader (64 MiB); a 512² terrain grid is
//! 0.5 M triangles (a 1024² grid measured 0.8 GB peak in `contactlab check`); a 110 MiB OBJ
//! of 1.7 M vertices and 3.4 M triangles measured 1.3 GB peak through tobj and parry, hence
//! the 64 MiB, 1 M vertex and 2 M triangle mesh limits.

/// Largest experiment file (bytes).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;
/// Largest MJCF file (bytes).
pub const MAX_MJCF_BYTES: u64 = 64 << 20;
/// Largest OBJ or STL mesh file (bytes).
pub const MAX_MESH_FILE_BYTES: u64 = 64 << 20;
/// Largest recorded table: toss CSV or trajectory reference (bytes).
pub const MAX_TABLE_BYTES: u64 = 256 << 20;
/// Most vertices in one mesh.
pub const MAX_MESH_VERTICES: usize = 1_000_000;
/// Most triangles in one mesh.
pub const MAX_MESH_FACES: usize = 2_000_000;
/// Most samples (`nrow * ncol`) in one height field.
pub const MAX_HFIELD_SAMPLES: usize = 2048 * 2048;
/// Largest height-field file: the 8-byte header and [`MAX_HFIELD_SAMPLES`] `f32` samples.
pub const MAX_HFIELD_FILE_BYTES: u64 = 8 + 4 * MAX_HFIELD_SAMPLES as u64;
/// Most cells (`grid * grid`) in `mesh_terrain`'s procedural terrain.
pub const MAX_TERRAIN_CELLS: usize = 512 * 512;
/// Most sine-product layers in `mesh_terrain`'s procedural terrain.
pub const MAX_TERRAIN_LAYERS: usize = 64;
/// Deepest element nesting in an MJCF file (the root `<mujoco>` is depth 1).
pub const MAX_XML_DEPTH: usize = 256;
/// Most cells in one experiment grid.
pub const MAX_CELLS: usize = 100_000;
/// Most steps in one run unless the experiment raises it (`max_steps:`).
pub const DEFAULT_MAX_STEPS: u64 = 10_000_000;
