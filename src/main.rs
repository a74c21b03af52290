//! The `scanledger` binary: parse arguments, run the command, map the result to an exit code
//! (0 verified or success, 3 unknown, 4 failed, 2 usage or input error, 1 internal error).

use clap::Parser;

mod cli;

fn main() {
    // Panics that the store catches and reports as a corrupt file stay quiet; any other panic
    // is a bug and prints as usual.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !scanledger::inside_engine_call() {
            default_hook(info);
        }
    }));
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let code = match cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            let mut msg = format!("error: {e}");
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                msg.push_str(&format!(": {c}"));
                cause = c.source();
            }
            eprintln!("{msg}");
            cli::exit_code_of(&e)
        }
    };
    std::process::exit(code);
}
