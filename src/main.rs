//! The `scanledger` binary: parses the command line, runs the command, prints an error once
//! (as a JSON object on stderr with `--json`), and exits with the code of
//! docs/REFERENCE.md: 0 verified or success, 1 internal error, 2 usage or input error,
//! 3 unknown, 4 failed, 5 store busy.
//!
//! It uses only the library's public API; everything it prints is its own (`cli`).

mod cli;

/// The binary's allocator: a page of string IDs is a thousand small strings allocated and
/// freed together, which cost glibc's allocator a quarter of a replay scan (it consolidates
/// its free lists whenever a page's item list is allocated or freed).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // Panics that the store catches and reports as a damaged file stay quiet; any other panic
    // is a bug and prints as usual.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !scanledger::inside_engine_call() {
            default_hook(info);
        }
    }));
    std::process::exit(cli::main());
}
