//! `contactlab`: the command line of the contactlab harness (see `contactlab --help`).

mod cli;

use clap::Parser;
use contactlab_harness::catalog::Catalog;

fn main() -> std::process::ExitCode {
    contactlab_harness::runner::install_quiet_panic_hook();
    cli::main_with(cli::Cli::parse(), &Catalog::for_cli())
}
