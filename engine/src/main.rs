//! The `cairn` command line.

fn main() -> std::process::ExitCode {
    cairn::cli::run(Vec::new())
}
