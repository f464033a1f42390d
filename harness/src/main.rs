//! `contactlab`: the command line of the contactlab harness (see `contactlab --help`).

mod cli;

use clap::Parser;
use contactlab_harness::catalog::Catalog;

/// Counts heap bytes per thread, for the gradient study's peak memory
/// ([`contactlab_harness::heap`]).
#[global_allocator]
static ALLOCATOR: contactlab_harness::heap::Counting = contactlab_harness::heap::Counting;

fn main() -> std::process::ExitCode {
    // `contactlab check big.yaml | head` should end quietly when the reader closes the pipe, as
    // other command-line tools do, not panic on a failed print: restore SIGPIPE's default.
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any other thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    contactlab_harness::runner::install_quiet_panic_hook();
    cli::main_with(cli::Cli::parse(), &Catalog::for_cli())
}
